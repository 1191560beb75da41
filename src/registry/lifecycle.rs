//! Object lifecycle rules on JSON objects, as kube-apiserver applies them to custom resources:
//! system fields on create, what an update may not change, when `generation` moves, deletion
//! with finalizers (`deletionTimestamp`, the garbage-collection finalizers of a propagation
//! policy), and the status/spec split between the main resource and `/status`.

use serde_json::{Map, Value};

use super::object_meta::{FINALIZER_DELETE_DEPENDENTS, FINALIZER_ORPHAN_DEPENDENTS};

/// The current time as kube writes timestamps (RFC 3339, seconds, UTC).
pub fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Sets `metadata.managedFields` of an object, or removes it (`None`).
pub fn set_managed_fields(object: &mut Value, managed: Option<Value>) {
    edit_metadata(object, |meta| match managed {
        Some(managed) => {
            meta.insert("managedFields".to_owned(), managed);
        }
        None => {
            meta.remove("managedFields");
        }
    });
}

/// Edits `metadata` of an object, creating it (and making the object a map) when missing.
pub fn edit_metadata(object: &mut Value, edit: impl FnOnce(&mut Map<String, Value>)) {
    if !object.is_object() {
        *object = Value::Object(Map::new());
    }
    if let Value::Object(map) = object {
        let meta = map
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if !meta.is_object() {
            *meta = Value::Object(Map::new());
        }
        if let Value::Object(meta) = meta {
            edit(meta);
        }
    }
}

/// A string field of `metadata` ("" when absent or not a string).
pub fn meta_str<'a>(object: &'a Value, field: &str) -> &'a str {
    object
        .get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// A field of `metadata`, `None` when absent or null.
pub fn meta_field<'a>(object: &'a Value, field: &str) -> Option<&'a Value> {
    object
        .get("metadata")
        .and_then(|m| m.get(field))
        .filter(|v| !v.is_null())
}

/// The strings of a JSON array (other items are skipped; validation reports them).
pub fn string_items(value: Option<&Value>) -> impl Iterator<Item = &str> {
    value
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// The object's finalizers.
pub fn finalizers(object: &Value) -> Vec<String> {
    string_items(meta_field(object, "finalizers"))
        .map(str::to_owned)
        .collect()
}

fn set_finalizers(object: &mut Value, finalizers: Vec<String>) {
    edit_metadata(object, |meta| {
        if finalizers.is_empty() {
            meta.remove("finalizers");
        } else {
            meta.insert(
                "finalizers".to_owned(),
                Value::Array(finalizers.into_iter().map(Value::String).collect()),
            );
        }
    });
}

/// Whether the object has a `deletionTimestamp`.
pub fn is_terminating(object: &Value) -> bool {
    meta_field(object, "deletionTimestamp").is_some()
}

fn generation(object: &Value) -> i64 {
    meta_field(object, "generation")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// Fields clients may not set on create or change on update.
const SYSTEM_FIELDS: [&str; 5] = [
    "uid",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// `BeforeCreate` + the CRD strategy's `PrepareForCreate`: fresh system fields, generation 1.
pub fn prepare_for_create(object: &mut Value, uid: &str, now: &str) {
    edit_metadata(object, |meta| {
        for field in SYSTEM_FIELDS {
            meta.remove(field);
        }
        meta.remove("resourceVersion");
        meta.remove("selfLink");
        meta.insert("uid".to_owned(), Value::String(uid.to_owned()));
        meta.insert(
            "creationTimestamp".to_owned(),
            Value::String(now.to_owned()),
        );
        meta.insert("generation".to_owned(), Value::from(1));
    });
}

/// `rest.BeforeUpdate`'s defaults, before the update is validated: a request that leaves out
/// `uid` keeps the stored one, `creationTimestamp` is always the stored one, and an omitted
/// `deletionGracePeriodSeconds` stays. So a manifest without them (`kubectl replace -f`)
/// updates the object instead of failing "field is immutable".
pub fn keep_identity_fields(new: &mut Value, old: &Value) {
    let old_field = |field: &str| meta_field(old, field).filter(|v| !v.is_null()).cloned();
    let (uid, created, grace) = (
        old_field("uid"),
        old_field("creationTimestamp"),
        old_field("deletionGracePeriodSeconds"),
    );
    edit_metadata(new, |meta| {
        let unset = |meta: &Map<String, Value>, field: &str| {
            meta.get(field)
                .is_none_or(|v| v.is_null() || v.as_str() == Some(""))
        };
        if let Some(uid) = uid
            && unset(meta, "uid")
        {
            meta.insert("uid".to_owned(), uid);
        }
        if let Some(created) = created {
            meta.insert("creationTimestamp".to_owned(), created);
        }
        if let Some(grace) = grace
            && unset(meta, "deletionGracePeriodSeconds")
        {
            meta.insert("deletionGracePeriodSeconds".to_owned(), grace);
        }
    });
}

/// Everything but `metadata` (and `status` when it is a subresource): what a generation
/// change is about.
fn spec_like(object: &Value, status_subresource: bool) -> Map<String, Value> {
    let mut map = object.as_object().cloned().unwrap_or_default();
    map.remove("metadata");
    if status_subresource {
        map.remove("status");
    }
    map
}

/// `BeforeUpdate` + the CRD strategy's `PrepareForUpdate`: the system fields stay as stored,
/// and `generation` moves by one when anything outside metadata (and status, when it is a
/// subresource) changed. `managedFields` a request leaves out (or empty) stay as stored, as
/// kube's field manager keeps them; until server-side apply records them, they only ever
/// change when a client writes them.
pub fn prepare_for_update(new: &mut Value, old: &Value, status_subresource: bool) {
    let changed = spec_like(new, status_subresource) != spec_like(old, status_subresource);
    let old_generation = generation(old);
    let keep_managed = meta_field(new, "managedFields")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    let old_managed = meta_field(old, "managedFields").cloned();
    edit_metadata(new, |meta| {
        meta.remove("selfLink");
        if keep_managed {
            match old_managed {
                Some(managed) => meta.insert("managedFields".to_owned(), managed),
                None => meta.remove("managedFields"),
            };
        }
        for field in SYSTEM_FIELDS {
            match meta_field(old, field) {
                Some(value) => meta.insert(field.to_owned(), value.clone()),
                None => meta.remove(field),
            };
        }
        if changed {
            meta.insert("generation".to_owned(), Value::from(old_generation + 1));
        }
    });
}

/// Replaces `status` of `target` by that of `source` (removing it when `source` has none).
pub fn copy_status(target: &mut Value, source: &Value) {
    let status = source.get("status").cloned();
    if let Value::Object(map) = target {
        match status {
            Some(status) => map.insert("status".to_owned(), status),
            None => map.remove("status"),
        };
    }
}

/// The CRD status strategy: the stored object with only `status` (and `managedFields`)
/// taken from the request.
pub fn status_update(stored: &Value, request: &Value) -> Value {
    let mut object = stored.clone();
    copy_status(&mut object, request);
    let managed = meta_field(request, "managedFields").cloned();
    edit_metadata(&mut object, |meta| {
        match managed {
            Some(managed) => meta.insert("managedFields".to_owned(), managed),
            None => meta.remove("managedFields"),
        };
    });
    object
}

/// A `propagationPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    Orphan,
    Background,
    Foreground,
}

impl Propagation {
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "Orphan" => Some(Self::Orphan),
            "Background" => Some(Self::Background),
            "Foreground" => Some(Self::Foreground),
            _ => None,
        }
    }
}

/// How a delete wants dependents handled (`orphanDependents`, `propagationPolicy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GcPolicy {
    pub orphan_dependents: Option<bool>,
    pub propagation: Option<Propagation>,
}

impl GcPolicy {
    /// `shouldOrphanDependents` (custom resources default to deleting dependents).
    fn orphan(&self, finalizers: &[String]) -> bool {
        if let Some(orphan) = self.orphan_dependents {
            return orphan;
        }
        if let Some(policy) = self.propagation {
            return policy == Propagation::Orphan;
        }
        finalizers
            .iter()
            .find_map(|f| match f.as_str() {
                FINALIZER_ORPHAN_DEPENDENTS => Some(true),
                FINALIZER_DELETE_DEPENDENTS => Some(false),
                _ => None,
            })
            .unwrap_or(false)
    }

    /// `shouldDeleteDependents`.
    fn foreground(&self, finalizers: &[String]) -> bool {
        if self.orphan_dependents.is_some() {
            return false;
        }
        if let Some(policy) = self.propagation {
            return policy == Propagation::Foreground;
        }
        finalizers
            .iter()
            .find_map(|f| match f.as_str() {
                FINALIZER_DELETE_DEPENDENTS => Some(true),
                FINALIZER_ORPHAN_DEPENDENTS => Some(false),
                _ => None,
            })
            .unwrap_or(false)
    }

    /// `deletionFinalizersForGarbageCollection`: the finalizers the object must carry for
    /// this delete, `None` when they are already right.
    pub fn finalizers(&self, current: &[String]) -> Option<Vec<String>> {
        let mut next: Vec<String> = current
            .iter()
            .filter(|f| {
                f.as_str() != FINALIZER_ORPHAN_DEPENDENTS
                    && f.as_str() != FINALIZER_DELETE_DEPENDENTS
            })
            .cloned()
            .collect();
        if self.orphan(current) {
            next.push(FINALIZER_ORPHAN_DEPENDENTS.to_owned());
        }
        if self.foreground(current) {
            next.push(FINALIZER_DELETE_DEPENDENTS.to_owned());
        }
        let as_set = |v: &[String]| v.iter().cloned().collect::<std::collections::BTreeSet<_>>();
        (as_set(&next) != as_set(current)).then_some(next)
    }
}

/// What a delete does to the stored object.
#[derive(Debug, Clone, PartialEq)]
pub enum DeletePlan {
    /// No finalizers: remove it now.
    RemoveNow,
    /// Finalizers pending: store this object (finalizers set, `deletionTimestamp` set).
    MarkDeleting(Value),
}

/// `updateForGracefulDeletionAndFinalizers` for kinds without graceful deletion.
pub fn plan_delete(object: &Value, policy: &GcPolicy, now: &str) -> DeletePlan {
    let mut object = object.clone();
    if let Some(finalizers) = policy.finalizers(&finalizers(&object)) {
        set_finalizers(&mut object, finalizers);
    }
    if finalizers(&object).is_empty() {
        return DeletePlan::RemoveNow;
    }
    mark_deleting(&mut object, now);
    DeletePlan::MarkDeleting(object)
}

/// `markAsDeleting`: the first deletion bumps `generation`; `deletionTimestamp` is set once
/// (kept when earlier); the grace period is 0.
pub fn mark_deleting(object: &mut Value, now: &str) {
    let first = !is_terminating(object);
    let generation = generation(object);
    edit_metadata(object, |meta| {
        if first {
            if generation > 0 {
                meta.insert("generation".to_owned(), Value::from(generation + 1));
            }
            meta.insert(
                "deletionTimestamp".to_owned(),
                Value::String(now.to_owned()),
            );
        }
        meta.insert("deletionGracePeriodSeconds".to_owned(), Value::from(0));
    });
}

/// `ShouldDeleteDuringUpdate`: a terminating object whose last finalizer is gone.
pub fn should_delete_during_update(object: &Value) -> bool {
    is_terminating(object) && finalizers(object).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn create_sets_system_fields() {
        let mut object = json!({"metadata": {"name": "a", "uid": "x", "generation": 7,
            "resourceVersion": "3", "deletionTimestamp": "2020-01-01T00:00:00Z"}, "spec": {}});
        prepare_for_create(&mut object, "u-1", "2026-01-01T00:00:00Z");
        assert_eq!(
            object["metadata"],
            json!({"name": "a", "uid": "u-1", "creationTimestamp": "2026-01-01T00:00:00Z", "generation": 1})
        );
    }

    #[test]
    fn generation_moves_on_spec_changes_only() {
        let old = json!({"metadata": {"name": "a", "uid": "u", "generation": 2, "labels": {"a": "1"}},
            "spec": {"x": 1}, "status": {"ready": false}});
        let mut labels = json!({"metadata": {"name": "a", "labels": {"a": "2"}, "generation": 9},
            "spec": {"x": 1}, "status": {"ready": true}});
        prepare_for_update(&mut labels, &old, true);
        assert_eq!(labels["metadata"]["generation"], 2);
        assert_eq!(labels["metadata"]["uid"], "u");
        let mut spec = json!({"metadata": {"name": "a"}, "spec": {"x": 2}});
        prepare_for_update(&mut spec, &old, true);
        assert_eq!(spec["metadata"]["generation"], 3);
        // Without a status subresource, status is part of what generation tracks.
        let mut status =
            json!({"metadata": {"name": "a"}, "spec": {"x": 1}, "status": {"ready": true}});
        prepare_for_update(&mut status, &old, false);
        assert_eq!(status["metadata"]["generation"], 3);
    }

    #[test]
    fn managed_fields_survive_updates_that_leave_them_out() {
        let managed = json!([{"manager": "kubectl", "operation": "Update"}]);
        let old = json!({"metadata": {"name": "a", "managedFields": managed}, "spec": {}});
        let mut omitted = json!({"metadata": {"name": "a"}, "spec": {}});
        prepare_for_update(&mut omitted, &old, true);
        assert_eq!(omitted["metadata"]["managedFields"], managed);
        let replaced = json!([{"manager": "other", "operation": "Update"}]);
        let mut written = json!({"metadata": {"name": "a", "managedFields": replaced}, "spec": {}});
        prepare_for_update(&mut written, &old, true);
        assert_eq!(written["metadata"]["managedFields"], replaced);
    }

    #[test]
    fn status_updates_take_only_status_and_managed_fields() {
        let stored = json!({"metadata": {"name": "a", "labels": {"a": "1"}}, "spec": {"x": 1}});
        let request = json!({"metadata": {"name": "a", "labels": {"a": "2"},
            "managedFields": [{"manager": "m"}]}, "spec": {"x": 2}, "status": {"ready": true}});
        assert_eq!(
            status_update(&stored, &request),
            json!({"metadata": {"name": "a", "labels": {"a": "1"}, "managedFields": [{"manager": "m"}]},
                   "spec": {"x": 1}, "status": {"ready": true}})
        );
    }

    #[test]
    fn propagation_finalizers() {
        let policy = |p: Option<Propagation>, orphan: Option<bool>| GcPolicy {
            orphan_dependents: orphan,
            propagation: p,
        };
        let none: [String; 0] = [];
        assert_eq!(policy(None, None).finalizers(&none), None);
        assert_eq!(
            policy(Some(Propagation::Background), None).finalizers(&none),
            None
        );
        assert_eq!(
            policy(Some(Propagation::Foreground), None).finalizers(&none),
            Some(vec!["foregroundDeletion".to_owned()])
        );
        assert_eq!(
            policy(Some(Propagation::Orphan), None).finalizers(&["a".to_owned()]),
            Some(vec!["a".to_owned(), "orphan".to_owned()])
        );
        assert_eq!(
            policy(None, Some(true)).finalizers(&none),
            Some(vec!["orphan".to_owned()])
        );
        // Foreground replaces a pending orphan finalizer.
        assert_eq!(
            policy(Some(Propagation::Foreground), None).finalizers(&["orphan".to_owned()]),
            Some(vec!["foregroundDeletion".to_owned()])
        );
        // Without an explicit policy, the object's own GC finalizer stays.
        assert_eq!(policy(None, None).finalizers(&["orphan".to_owned()]), None);
    }

    #[test]
    fn deletes_with_and_without_finalizers() {
        let plain = json!({"metadata": {"name": "a", "generation": 1}});
        assert_eq!(
            plan_delete(&plain, &GcPolicy::default(), "t"),
            DeletePlan::RemoveNow
        );
        let held = json!({"metadata": {"name": "a", "generation": 1, "finalizers": ["x"]}});
        let DeletePlan::MarkDeleting(marked) = plan_delete(&held, &GcPolicy::default(), "t1")
        else {
            panic!("finalizers keep the object");
        };
        assert_eq!(
            marked["metadata"],
            json!({"name": "a", "generation": 2, "finalizers": ["x"],
                   "deletionTimestamp": "t1", "deletionGracePeriodSeconds": 0})
        );
        // A second delete keeps the first timestamp and generation.
        let DeletePlan::MarkDeleting(again) = plan_delete(&marked, &GcPolicy::default(), "t2")
        else {
            panic!("still held");
        };
        assert_eq!(again, marked);
        let mut released = marked.clone();
        set_finalizers(&mut released, Vec::new());
        assert!(should_delete_during_update(&released));
        assert!(!should_delete_during_update(&marked));
    }
}
