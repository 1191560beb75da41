//! Who owns the desired replicas after a write through `scale`, as kube decides it. kube
//! tracks such a write on the `Scale` (its scale handler): the object's managers that own the
//! replicas field become the `Scale`'s managers of `spec.replicas`; the write is an Update of
//! the `Scale` by the writer; the result goes back onto the object's entries. Three of kube's
//! rules make the outcome:
//!
//! - an Update of an object nobody manages is not tracked, and a `Scale` whose replicas nobody
//!   owns has no managers: then nothing changes;
//! - an Update that changes a field takes it from its other owners, and a removed field (zero
//!   replicas, which autoscaling/v1 omits) is taken from everyone;
//! - the writer's entry on the object holds only the replicas, with subresource `scale`, and
//!   when new, no time (the handler takes times from the object's entries, where it has none);
//!   entries are in kube's order (operation, time, manager, apiVersion, subresource).

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

/// The object's managedFields after `write`, given those before (`entries`) and the replicas
/// field's path (`spec`, `replicas`); `None` where it has none.
pub fn after_scale_write(
    entries: Option<&Value>,
    path: &[&str],
    write: ScaleWrite<'_>,
) -> Option<Value> {
    let mut entries: Vec<Value> = entries.and_then(Value::as_array).cloned()?;
    let owns = |entry: &Value| owned(&entry["fieldsV1"], path);
    if !entries.iter().any(owns) || !write.changed {
        return Some(Value::Array(entries));
    }
    let writer = |entry: &Value| {
        entry["manager"] == write.manager
            && entry["operation"] == "Update"
            && entry["subresource"] == "scale"
    };
    let kept = write.set && entries.iter().any(|e| writer(e) && owns(e));
    // The changed field leaves its other owners; a removed one leaves everyone.
    for entry in entries
        .iter_mut()
        .filter(|e| owns(e) && !(kept && writer(e)))
    {
        disown(&mut entry["fieldsV1"], path);
    }
    entries.retain(|e| !is_empty(&e["fieldsV1"]));
    if write.set && !kept {
        entries.push(json!({
            "manager": write.manager,
            "operation": "Update",
            "apiVersion": write.api_version,
            "fieldsType": "FieldsV1",
            "fieldsV1": fields(path),
            "subresource": "scale",
        }));
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
        if child.as_object().is_some_and(Map::is_empty) {
            map.remove(&key);
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
}
