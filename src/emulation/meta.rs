//! Small edits of objects held as JSON: finalizers, labels, owner references, conditions.
//! Each returns whether it changed anything, so a loop writes only real changes. None of
//! them panics on odd input: a field of the wrong shape is replaced (schemaless stand-ins
//! accept anything).

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference};
use serde_json::{Map, Value};

use crate::controller::conditions::{self, Status};

/// The object at `path` below `value`, made an object where it was anything else.
pub fn object_at<'v>(value: &'v mut Value, path: &[&str]) -> &'v mut Map<String, Value> {
    let mut current = value;
    for key in path {
        current = ensure_object(current)
            .entry(key.to_string())
            .or_insert(Value::Null);
    }
    ensure_object(current)
}

fn ensure_object(value: &mut Value) -> &mut Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => {
            *other = Value::Object(Map::new());
            ensure_object(other)
        }
    }
}

/// The non-empty string at a JSON pointer.
pub fn str_at<'v>(value: &'v Value, pointer: &str) -> Option<&'v str> {
    value.pointer(pointer)?.as_str().filter(|s| !s.is_empty())
}

/// `metadata.name`, `metadata.uid`, ... of an object ("" when absent).
pub fn meta_str<'v>(value: &'v Value, field: &str) -> &'v str {
    value["metadata"][field].as_str().unwrap_or_default()
}

/// Whether the object has a deletion timestamp.
pub fn is_deleting(value: &Value) -> bool {
    !value["metadata"]["deletionTimestamp"].is_null()
}

fn finalizers(value: &Value) -> Vec<String> {
    serde_json::from_value(value["metadata"]["finalizers"].clone()).unwrap_or_default()
}

/// Whether `finalizer` is present.
pub fn has_finalizer(value: &Value, finalizer: &str) -> bool {
    finalizers(value).iter().any(|f| f == finalizer)
}

/// Adds `finalizer` if absent.
pub fn add_finalizer(value: &mut Value, finalizer: &str) -> bool {
    let mut list = finalizers(value);
    if list.iter().any(|f| f == finalizer) {
        return false;
    }
    list.push(finalizer.to_string());
    object_at(value, &["metadata"]).insert("finalizers".into(), list.into());
    true
}

/// Removes `finalizer` if present.
pub fn remove_finalizer(value: &mut Value, finalizer: &str) -> bool {
    let mut list = finalizers(value);
    let before = list.len();
    list.retain(|f| f != finalizer);
    if list.len() == before {
        return false;
    }
    object_at(value, &["metadata"]).insert("finalizers".into(), list.into());
    true
}

/// Sets a label.
pub fn set_label(value: &mut Value, key: &str, label: &str) -> bool {
    let labels = object_at(value, &["metadata", "labels"]);
    if labels.get(key).and_then(Value::as_str) == Some(label) {
        return false;
    }
    labels.insert(key.into(), label.into());
    true
}

fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

/// Makes `owner` an owner of the object: an entry for the same group, kind and name is
/// replaced, otherwise it is added. When another owner is already the controller, `owner`
/// is added as a plain owner (an object has at most one controller).
pub fn ensure_owner(value: &mut Value, owner: &OwnerReference) -> bool {
    let mut owners: Vec<OwnerReference> =
        serde_json::from_value(value["metadata"]["ownerReferences"].clone()).unwrap_or_default();
    let same = |o: &OwnerReference| {
        o.kind == owner.kind
            && o.name == owner.name
            && group_of(&o.api_version) == group_of(&owner.api_version)
    };
    let mut wanted = owner.clone();
    if owners
        .iter()
        .any(|o| !same(o) && o.controller == Some(true))
    {
        wanted.controller = Some(false);
    }
    match owners.iter_mut().find(|o| same(o)) {
        Some(existing) if *existing == wanted => return false,
        Some(existing) => *existing = wanted,
        None => owners.push(wanted),
    }
    let encoded = serde_json::to_value(owners).unwrap_or(Value::Array(Vec::new()));
    object_at(value, &["metadata"]).insert("ownerReferences".into(), encoded);
    true
}

/// The names of the owners of `kind` from API group `group`.
pub fn owner_names(value: &Value, kind: &str, group: &str) -> Vec<String> {
    let owners: Vec<OwnerReference> =
        serde_json::from_value(value["metadata"]["ownerReferences"].clone()).unwrap_or_default();
    owners
        .into_iter()
        .filter(|o| o.kind == kind && group_of(&o.api_version) == group)
        .map(|o| o.name)
        .collect()
}

/// An owner reference to `owner` (an object as JSON) as controller.
pub fn controller_reference(owner: &Value) -> OwnerReference {
    OwnerReference {
        api_version: owner["apiVersion"].as_str().unwrap_or_default().to_string(),
        kind: owner["kind"].as_str().unwrap_or_default().to_string(),
        name: meta_str(owner, "name").to_string(),
        uid: meta_str(owner, "uid").to_string(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Upserts a `metav1.Condition` in `status.conditions` (the transition time moves only
/// when the status changes).
pub fn set_condition(
    value: &mut Value,
    type_: &str,
    status: Status,
    reason: &str,
    message: &str,
) -> bool {
    let before = value["status"]["conditions"].clone();
    let mut list: Vec<Condition> = serde_json::from_value(before.clone()).unwrap_or_default();
    let generation = value["metadata"]["generation"].as_i64();
    conditions::set(
        &mut list,
        type_,
        status,
        reason,
        message,
        generation,
        Timestamp::now(),
    );
    let after = serde_json::to_value(list).unwrap_or(Value::Array(Vec::new()));
    if after == before {
        return false;
    }
    object_at(value, &["status"]).insert("conditions".into(), after);
    true
}

/// Sets the value at `path` (creating objects on the way).
pub fn set_at(value: &mut Value, path: &[&str], field: Value) -> bool {
    let Some((last, parents)) = path.split_last() else {
        return false;
    };
    let parent = object_at(value, parents);
    if parent.get(*last) == Some(&field) {
        return false;
    }
    parent.insert(last.to_string(), field);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finalizers_and_labels_change_once() {
        let mut o = json!({"metadata": {"name": "a", "labels": "garbage"}});
        assert!(add_finalizer(&mut o, "f"));
        assert!(!add_finalizer(&mut o, "f"));
        assert!(has_finalizer(&o, "f"));
        assert!(set_label(&mut o, "k", "v"));
        assert!(!set_label(&mut o, "k", "v"));
        assert_eq!(o["metadata"]["labels"], json!({"k": "v"}));
        assert!(remove_finalizer(&mut o, "f"));
        assert!(!remove_finalizer(&mut o, "f"));
        assert_eq!(o["metadata"]["finalizers"], json!([]));
        let mut odd = json!("not an object");
        assert!(set_at(&mut odd, &["spec", "x"], json!(1)));
        assert_eq!(odd, json!({"spec": {"x": 1}}));
        assert!(!set_at(&mut odd, &["spec", "x"], json!(1)));
    }

    #[test]
    fn owners_are_replaced_by_identity_and_one_controller_stays() {
        let cluster = json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": "c", "uid": "u1"}});
        let mut pc = json!({"metadata": {"ownerReferences": [
            {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "name": "c", "uid": "old"}
        ]}});
        assert!(ensure_owner(&mut pc, &controller_reference(&cluster)));
        assert!(!ensure_owner(&mut pc, &controller_reference(&cluster)));
        let owners = &pc["metadata"]["ownerReferences"];
        assert_eq!(owners.as_array().map(Vec::len), Some(1));
        assert_eq!(owners[0]["uid"], "u1");
        assert_eq!(owners[0]["controller"], true);
        assert_eq!(owner_names(&pc, "Cluster", "cluster.x-k8s.io"), ["c"]);

        let mut owned = json!({"metadata": {"ownerReferences": [
            {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet", "name": "ms",
             "uid": "u", "controller": true}
        ]}});
        assert!(ensure_owner(&mut owned, &controller_reference(&cluster)));
        assert_eq!(owned["metadata"]["ownerReferences"][1]["controller"], false);
    }

    #[test]
    fn conditions_move_their_time_only_on_a_status_change() {
        let mut o = json!({"metadata": {"generation": 3}, "status": {}});
        assert!(set_condition(
            &mut o,
            "Ready",
            Status::False,
            "PoolExhausted",
            "full"
        ));
        assert!(!set_condition(
            &mut o,
            "Ready",
            Status::False,
            "PoolExhausted",
            "full"
        ));
        let first = o["status"]["conditions"][0]["lastTransitionTime"].clone();
        assert!(set_condition(
            &mut o,
            "Ready",
            Status::False,
            "PoolExhausted",
            "still full"
        ));
        assert_eq!(o["status"]["conditions"][0]["lastTransitionTime"], first);
        assert_eq!(o["status"]["conditions"][0]["observedGeneration"], 3);
        assert!(set_condition(&mut o, "Ready", Status::True, "Ready", ""));
        assert_eq!(o["status"]["conditions"][0]["status"], "True");
    }
}
