//! A revisioned table of JSON objects with the API server's write rules that matter to a
//! controller: resourceVersion preconditions, uid and generation, the spec/status split,
//! finalizers and deletion timestamps. Shared by the in-memory store and management
//! cluster.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// Which part of the object a write replaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// `metadata` and everything except `status`.
    Main,
    /// `status` only.
    Status,
}

/// Why a table write failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TableError {
    /// No such object.
    NotFound,
    /// resourceVersion mismatch.
    Conflict,
    /// Name taken on create.
    AlreadyExists,
    /// Refused (e.g. a new finalizer on an object being deleted).
    Invalid(String),
}

type Key = (String, String, String);

// Indexing `value["metadata"][...]` below cannot panic: an object is only found (or
// created) when its `metadata` is an object with a name.

/// Objects by (kind, namespace, name).
#[derive(Debug, Default)]
pub struct ObjectTable {
    objects: BTreeMap<Key, Value>,
    revision: u64,
    uids: u64,
}

fn meta_str<'v>(value: &'v Value, field: &str) -> Option<&'v str> {
    value.get("metadata")?.get(field)?.as_str()
}

fn key(kind: &str, value: &Value) -> Key {
    (
        kind.to_string(),
        meta_str(value, "namespace").unwrap_or_default().to_string(),
        meta_str(value, "name").unwrap_or_default().to_string(),
    )
}

fn labels_match(value: &Value, selector: &BTreeMap<String, String>) -> bool {
    let labels = value.pointer("/metadata/labels");
    selector
        .iter()
        .all(|(k, v)| labels.and_then(|l| l.get(k)).and_then(Value::as_str) == Some(v))
}

fn finalizers(value: &Value) -> Vec<String> {
    value
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|f| {
            f.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

impl ObjectTable {
    /// The revision of the last write (any object).
    pub fn revision(&self) -> u64 {
        self.revision
    }

    fn stamp(&mut self, value: &mut Value) {
        self.revision += 1;
        value["metadata"]["resourceVersion"] = json!(self.revision.to_string());
    }

    /// Creates an object: uid, resourceVersion, generation 1, creation time.
    pub fn create(&mut self, kind: &str, mut value: Value) -> Result<Value, TableError> {
        if !value.get("metadata").is_some_and(Value::is_object) {
            value["metadata"] = json!({});
        }
        let k = key(kind, &value);
        if k.2.is_empty() {
            return Err(TableError::Invalid("metadata.name is required".into()));
        }
        if self.objects.contains_key(&k) {
            return Err(TableError::AlreadyExists);
        }
        self.uids += 1;
        let meta = &mut value["metadata"];
        if meta.get("uid").and_then(Value::as_str).is_none() {
            meta["uid"] = json!(format!("00000000-0000-4000-8000-{:012x}", self.uids));
        }
        meta["generation"] = json!(1);
        meta["creationTimestamp"] = json!(jiff::Timestamp::now().to_string());
        if let Some(m) = meta.as_object_mut() {
            m.remove("deletionTimestamp");
        }
        self.stamp(&mut value);
        self.objects.insert(k, value.clone());
        Ok(value)
    }

    /// One object.
    pub fn get(&self, kind: &str, namespace: &str, name: &str) -> Option<&Value> {
        self.objects
            .get(&(kind.to_string(), namespace.to_string(), name.to_string()))
    }

    /// Objects of a kind in a namespace (`None`: all namespaces) with all `labels`.
    pub fn list(
        &self,
        kind: &str,
        namespace: Option<&str>,
        labels: &BTreeMap<String, String>,
    ) -> Vec<Value> {
        self.objects
            .iter()
            .filter(|((k, ns, _), v)| {
                k == kind && namespace.is_none_or(|n| n == ns) && labels_match(v, labels)
            })
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Replaces the main part or the status, checking resourceVersion. Returns `None` when
    /// the write removed the last finalizer of an object being deleted (it is gone).
    pub fn update(
        &mut self,
        kind: &str,
        value: &Value,
        part: Part,
    ) -> Result<Option<Value>, TableError> {
        let k = key(kind, value);
        let old = self.objects.get(&k).ok_or(TableError::NotFound)?;
        let expected = meta_str(value, "resourceVersion");
        if expected.is_none_or(|rv| Some(rv) != meta_str(old, "resourceVersion")) {
            return Err(TableError::Conflict);
        }
        let mut new = match part {
            Part::Status => {
                let mut new = old.clone();
                match value.get("status") {
                    Some(s) => new["status"] = s.clone(),
                    None => {
                        if let Some(o) = new.as_object_mut() {
                            o.remove("status");
                        }
                    }
                }
                new
            }
            Part::Main => {
                let mut new = value.clone();
                match old.get("status") {
                    Some(s) => new["status"] = s.clone(),
                    None => {
                        if let Some(o) = new.as_object_mut() {
                            o.remove("status");
                        }
                    }
                }
                // Server-owned metadata cannot be changed by a client.
                for field in [
                    "uid",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "generation",
                ] {
                    match old["metadata"].get(field) {
                        Some(v) => new["metadata"][field] = v.clone(),
                        None => {
                            if let Some(m) = new["metadata"].as_object_mut() {
                                m.remove(field);
                            }
                        }
                    }
                }
                if old.get("spec") != new.get("spec") {
                    let generation = old["metadata"]["generation"].as_i64().unwrap_or(1);
                    new["metadata"]["generation"] = json!(generation + 1);
                }
                new
            }
        };
        let deleting = old["metadata"].get("deletionTimestamp").is_some();
        if deleting {
            let before = finalizers(old);
            if finalizers(&new).iter().any(|f| !before.contains(f)) {
                return Err(TableError::Invalid(
                    "no new finalizers can be added if the object is being deleted".into(),
                ));
            }
            if finalizers(&new).is_empty() {
                self.revision += 1;
                self.objects.remove(&k);
                return Ok(None);
            }
        }
        if new == *old {
            return Ok(Some(new));
        }
        self.stamp(&mut new);
        self.objects.insert(k, new.clone());
        Ok(Some(new))
    }

    /// Deletes: with finalizers the object gets a deletion timestamp, without it is
    /// removed. Returns whether the object existed.
    pub fn delete(&mut self, kind: &str, namespace: &str, name: &str) -> bool {
        let k = (kind.to_string(), namespace.to_string(), name.to_string());
        let Some(old) = self.objects.get(&k) else {
            return false;
        };
        if finalizers(old).is_empty() {
            self.revision += 1;
            self.objects.remove(&k);
            return true;
        }
        if old["metadata"].get("deletionTimestamp").is_some() {
            return true;
        }
        let mut new = old.clone();
        new["metadata"]["deletionTimestamp"] = json!(jiff::Timestamp::now().to_string());
        self.stamp(&mut new);
        self.objects.insert(k, new);
        true
    }

    /// Replaces an object without checks (test set-up of objects other controllers own).
    pub fn put(&mut self, kind: &str, mut value: Value) -> Value {
        let k = key(kind, &value);
        if !self.objects.contains_key(&k) {
            return self.create(kind, value.clone()).unwrap_or(value);
        }
        if let Some(old) = self.objects.get(&k) {
            for field in ["uid", "creationTimestamp", "generation"] {
                if let Some(v) = old["metadata"].get(field) {
                    value["metadata"][field] = v.clone();
                }
            }
        }
        self.stamp(&mut value);
        self.objects.insert(k, value.clone());
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(name: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "ns", "labels": {"a": "1"}},
               "spec": {"x": 1}, "status": {"s": 1}})
    }

    #[test]
    fn updates_check_resource_version_and_split_status() {
        let mut t = ObjectTable::default();
        let created = t.create("K", obj("a")).expect("created");
        assert_eq!(t.create("K", obj("a")), Err(TableError::AlreadyExists));
        let mut main = created.clone();
        main["spec"]["x"] = json!(2);
        main["status"]["s"] = json!(99);
        let updated = t.update("K", &main, Part::Main).expect("ok").expect("kept");
        assert_eq!(
            updated["status"]["s"],
            json!(1),
            "status is not written by update"
        );
        assert_eq!(updated["metadata"]["generation"], json!(2));
        assert_eq!(t.update("K", &main, Part::Main), Err(TableError::Conflict));
        let mut status = updated.clone();
        status["status"]["s"] = json!(5);
        status["spec"]["x"] = json!(7);
        let updated = t
            .update("K", &status, Part::Status)
            .expect("ok")
            .expect("kept");
        assert_eq!(
            (updated["spec"]["x"].clone(), updated["status"]["s"].clone()),
            (json!(2), json!(5))
        );
        assert_eq!(
            t.list("K", Some("ns"), &[("a".into(), "1".into())].into())
                .len(),
            1
        );
        assert!(
            t.list("K", None, &[("a".into(), "2".into())].into())
                .is_empty()
        );
    }

    #[test]
    fn finalizers_hold_deletion_until_removed() {
        let mut t = ObjectTable::default();
        let mut o = obj("a");
        o["metadata"]["finalizers"] = json!(["f"]);
        t.create("K", o).expect("created");
        assert!(t.delete("K", "ns", "a"));
        let current = t.get("K", "ns", "a").cloned().expect("still there");
        let mut more = current.clone();
        more["metadata"]["finalizers"] = json!(["f", "g"]);
        assert!(matches!(
            t.update("K", &more, Part::Main),
            Err(TableError::Invalid(_))
        ));
        let mut none = current;
        none["metadata"]["finalizers"] = json!([]);
        assert_eq!(t.update("K", &none, Part::Main), Ok(None));
        assert!(t.get("K", "ns", "a").is_none());
        assert!(!t.delete("K", "ns", "a"));
    }
}
