//! Who owns the desired replicas after a write through `scale`, as kube decides it. kube
//! tracks such a write on the `Scale` (its scale handler): the object's entries that own the
//! replicas field become the `Scale`'s managers of `spec.replicas`; the write is an Update of
//! the `Scale` by the writer; the result goes back onto the object's entries. What comes of
//! it follows from four of kube's rules:
//!
//! - an Update of an object nobody manages is not tracked: with no owner of the replicas,
//!   nothing changes;
//! - an Update that changes a field takes it from its other owners, and a removed field (zero
//!   replicas, which autoscaling/v1 omits) is taken from everyone;
//! - a manager is known by its name, operation, subresource and, for an Update, apiVersion:
//!   back on the object, an Update's ownership of the replicas comes from a manager whose
//!   apiVersion was the `Scale`'s, so it is taken from the original entry and given to a new
//!   one of the same name, without a time (only an applier's entry stays as it was);
//! - entries are in kube's order: operation, time (none first), manager, apiVersion,
//!   subresource.

use serde_json::{Map, Value, json};

/// A write through `scale`.
pub struct ScaleWrite<'a> {
    /// Whether the `Scale`'s replicas changed (zero counts as absent).
    pub changed: bool,
    /// Whether the `Scale` holds replicas after it (not zero).
    pub set: bool,
    pub manager: &'a str,
    /// The object's `apiVersion` the entries are recorded in.
    pub api_version: &'a str,
}

/// How the `Scale` knows a manager: its name, operation and subresource (the apiVersion is
/// the `Scale`'s, or none for an applier).
#[derive(Clone, Debug, PartialEq, Eq)]
struct ScaleManager {
    manager: String,
    operation: String,
    subresource: String,
}

impl ScaleManager {
    fn of(entry: &Value) -> Self {
        let text = |key: &str| entry[key].as_str().unwrap_or_default().to_owned();
        Self {
            manager: text("manager"),
            operation: text("operation"),
            subresource: text("subresource"),
        }
    }

    /// Whether `entry` is this manager as the object knows it: only an applier's identity
    /// leaves the apiVersion out.
    fn is(&self, entry: &Value) -> bool {
        self.operation == "Apply" && *self == Self::of(entry)
    }
}

/// The object's managedFields after `write`, given those before (`entries`) and the replicas
/// field's path (`spec`, `replicas`); `None` where it has none.
pub fn after_scale_write(
    entries: Option<&Value>,
    path: &[&str],
    write: ScaleWrite<'_>,
) -> Option<Value> {
    let mut entries: Vec<Value> = entries.and_then(Value::as_array).cloned()?;
    let owns = |entry: &Value| owned(&entry["fieldsV1"], path);
    let owners: Vec<ScaleManager> = entries
        .iter()
        .filter(|e| owns(e))
        .map(ScaleManager::of)
        .collect();
    if owners.is_empty() {
        return Some(Value::Array(entries));
    }
    let writer = ScaleManager {
        manager: write.manager.to_owned(),
        operation: "Update".to_owned(),
        subresource: "scale".to_owned(),
    };
    let mut managers = match (write.changed, write.set) {
        (false, _) => owners,
        (true, true) => vec![writer],
        (true, false) => Vec::new(),
    };
    for entry in entries.iter_mut().filter(|e| owns(e)) {
        match managers.iter().position(|m| m.is(entry)) {
            Some(kept) => {
                managers.remove(kept);
            }
            None => disown(&mut entry["fieldsV1"], path),
        }
    }
    entries.retain(|e| !is_empty(&e["fieldsV1"]));
    for manager in managers {
        let mut entry = json!({
            "manager": manager.manager,
            "operation": manager.operation,
            "apiVersion": write.api_version,
            "fieldsType": "FieldsV1",
            "fieldsV1": fields(path),
        });
        if !manager.subresource.is_empty() {
            entry["subresource"] = json!(manager.subresource);
        }
        entries.push(entry);
    }
    entries.sort_by_cached_key(|e| {
        ["operation", "time", "manager", "apiVersion", "subresource"]
            .map(|key| e[key].as_str().unwrap_or_default().to_owned())
    });
    Some(Value::Array(entries))
}

/// Whether a `fieldsV1` set holds `path`.
fn owned(set: &Value, path: &[&str]) -> bool {
    path.iter()
        .try_fold(set, |at, segment| at.get(format!("f:{segment}")))
        .is_some()
}

/// Removes `path` from a `fieldsV1` set, and the maps it leaves empty.
fn disown(set: &mut Value, path: &[&str]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let key = format!("f:{first}");
    let Some(Value::Object(map)) = Some(set) else {
        return;
    };
    if rest.is_empty() {
        map.remove(&key);
        return;
    }
    if let Some(child) = map.get_mut(&key) {
        disown(child, rest);
        match child.as_object() {
            Some(left) if left.is_empty() => {
                map.remove(&key);
            }
            // Only the map itself left: written `{}`, as kube writes a leaf.
            Some(left) if left.len() == 1 && left.contains_key(".") => *child = json!({}),
            _ => {}
        }
    }
}

fn is_empty(set: &Value) -> bool {
    set.as_object().is_none_or(Map::is_empty)
}

/// The `fieldsV1` set of `path` alone.
fn fields(path: &[&str]) -> Value {
    path.iter().rev().fold(
        json!({}),
        |inner, segment| json!({ format!("f:{segment}"): inner }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATH: [&str; 2] = ["spec", "replicas"];

    fn entry(manager: &str, subresource: &str, fields: Value) -> Value {
        let mut entry = json!({"manager": manager, "operation": "Update", "apiVersion": "g/v1",
                               "time": "t0", "fieldsType": "FieldsV1", "fieldsV1": fields});
        if !subresource.is_empty() {
            entry["subresource"] = json!(subresource);
        }
        entry
    }

    fn write(changed: bool, set: bool) -> ScaleWrite<'static> {
        ScaleWrite {
            changed,
            set,
            manager: "hpa",
            api_version: "g/v1",
        }
    }

    #[test]
    fn replicas_nobody_owns_stay_untracked() {
        let before = json!([entry(
            "kubectl",
            "",
            json!({"f:spec": {".": {}, "f:image": {}}})
        )]);
        assert_eq!(
            after_scale_write(Some(&before), &PATH, write(true, true)),
            Some(before)
        );
    }

    #[test]
    fn a_write_takes_the_replicas_from_their_owner() {
        let before = json!([entry(
            "kubectl",
            "",
            json!({"f:spec": {".": {}, "f:image": {}, "f:replicas": {}}})
        )]);
        let after = after_scale_write(Some(&before), &PATH, write(true, true)).expect("entries");
        assert_eq!(
            after,
            json!([
                {"manager": "hpa", "operation": "Update", "apiVersion": "g/v1",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}},
                 "subresource": "scale"},
                entry("kubectl", "", json!({"f:spec": {".": {}, "f:image": {}}})),
            ])
        );
        // The same count again changes nothing; zero replicas leave nobody owning them.
        assert_eq!(
            after_scale_write(Some(&after), &PATH, write(false, true)),
            Some(after.clone())
        );
        let zero = after_scale_write(Some(&after), &PATH, write(true, false)).expect("entries");
        assert_eq!(
            zero,
            json!([entry(
                "kubectl",
                "",
                json!({"f:spec": {".": {}, "f:image": {}}})
            )])
        );
    }

    /// What kube-apiserver 1.34 answered on the pair: a Scale written back unchanged by the
    /// manager that owns the replicas splits its entry; an applier's stays whole.
    #[test]
    fn an_update_owner_s_entry_is_split_and_an_applier_s_kept() {
        let before = json!([entry(
            "kubectl",
            "",
            json!({"f:spec": {".": {}, "f:replicas": {}}})
        )]);
        let after = after_scale_write(Some(&before), &PATH, write(false, true));
        assert_eq!(
            after,
            Some(json!([
                {"manager": "kubectl", "operation": "Update", "apiVersion": "g/v1",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}},
                entry("kubectl", "", json!({"f:spec": {}})),
            ]))
        );
        let mut applied = before[0].clone();
        applied["operation"] = json!("Apply");
        let applied = json!([applied]);
        assert_eq!(
            after_scale_write(Some(&applied), &PATH, write(false, true)),
            Some(applied)
        );
    }
}
