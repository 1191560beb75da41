//! `metadata.managedFields`: one entry per manager (its name, operation,
//! subresource and, for updaters, API version), with the fields it owns in
//! the `FieldsV1` form and when they last changed. Reading what a client
//! sent, writing entries back in kube-apiserver's order.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde_json::{Map, Value, json};

use super::fieldpath::value::write_go_json_string;
use super::fieldpath::{FieldsError, Set};
use crate::api::field::go_quote;

/// How an entry's fields were written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    /// Server-side apply.
    Apply,
    /// Any other write (create, update, patch).
    Update,
}

impl Operation {
    /// The name in `managedFields`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// Who owns a set of fields: what makes two entries the same manager.
/// Appliers keep one entry across API versions; updaters have one per
/// version.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ManagerId {
    manager: String,
    operation: Operation,
    api_version: String,
    subresource: String,
    /// The update in progress, before its fields are merged into its
    /// manager's entry; never written out.
    transient: bool,
}

impl ManagerId {
    /// The manager `manager` writing with `operation` through `subresource`
    /// (empty for the main resource) in `api_version`.
    pub fn new(manager: &str, operation: Operation, api_version: &str, subresource: &str) -> Self {
        ManagerId {
            manager: manager.to_owned(),
            operation,
            api_version: match operation {
                Operation::Apply => String::new(),
                Operation::Update => api_version.to_owned(),
            },
            subresource: subresource.to_owned(),
            transient: false,
        }
    }

    /// The update in progress.
    pub(crate) fn current_operation(api_version: &str, subresource: &str) -> Self {
        ManagerId {
            transient: true,
            ..ManagerId::new(
                "current-operation",
                Operation::Update,
                api_version,
                subresource,
            )
        }
    }

    /// The manager's name.
    pub fn manager(&self) -> &str {
        &self.manager
    }

    /// The operation.
    pub fn operation(&self) -> Operation {
        self.operation
    }

    /// The subresource (empty for the main resource).
    pub fn subresource(&self) -> &str {
        &self.subresource
    }

    /// The identifier Kubernetes derives from an entry (its JSON without
    /// time and fields, and without the API version for appliers); entries
    /// and conflicts are ordered by it.
    pub fn identifier(&self) -> String {
        let mut out = String::from("{");
        let mut field = |name: &str, value: &str| {
            if value.is_empty() {
                return;
            }
            if out.len() > 1 {
                out.push(',');
            }
            write_go_json_string(name, &mut out);
            out.push(':');
            write_go_json_string(value, &mut out);
        };
        field("manager", &self.manager);
        field("operation", self.operation.as_str());
        field("apiVersion", &self.api_version);
        field("subresource", &self.subresource);
        out.push('}');
        out
    }

    /// The manager as conflict messages name it:
    /// `"kubectl" with subresource "status" using group/version`.
    pub fn describe(&self) -> String {
        let mut out = go_quote(&self.manager);
        if !self.subresource.is_empty() {
            out.push_str(" with subresource ");
            out.push_str(&go_quote(&self.subresource));
        }
        if self.operation == Operation::Update {
            out.push_str(" using ");
            out.push_str(&self.api_version);
        }
        out
    }
}

/// The fields a manager owns, in the API version its paths are in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionedSet {
    /// The owned fields.
    pub set: Set,
    /// The `group/version` the paths are in.
    pub api_version: String,
    /// Whether the fields were applied.
    pub applied: bool,
}

/// Every manager's fields and the time each last changed them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Managed {
    /// Fields per manager.
    pub fields: BTreeMap<ManagerId, VersionedSet>,
    /// When each manager's fields last changed.
    pub times: BTreeMap<ManagerId, Timestamp>,
}

/// `managedFields` that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManagedError {
    /// Not a list of objects.
    #[error("managedFields must be a list of objects")]
    NotAList,
    /// A field of an entry has the wrong JSON type.
    #[error("managed fields entry {index}: {field} has the wrong type")]
    WrongType {
        /// The entry.
        index: usize,
        /// The field.
        field: &'static str,
    },
    /// The operation is neither Apply nor Update.
    #[error("operation must be `Apply` or `Update`")]
    Operation,
    /// No API version.
    #[error("apiVersion must not be empty")]
    ApiVersion,
    /// No `fieldsType`.
    #[error("missing fieldsType in managed fields entry {0}")]
    MissingFieldsType(usize),
    /// A `fieldsType` other than FieldsV1.
    #[error("invalid fieldsType {1:?} in managed fields entry {0}")]
    FieldsType(usize, String),
    /// A time that is not RFC 3339.
    #[error("managed fields entry {0}: invalid time {1:?}")]
    Time(usize, String),
    /// Unreadable `fieldsV1`.
    #[error("error decoding set of managed fields entry {0}: {1}")]
    Fields(usize, FieldsError),
}

/// One entry as sent, before it is checked.
#[derive(Default)]
struct RawEntry<'a> {
    manager: &'a str,
    operation: &'a str,
    api_version: &'a str,
    time: Option<&'a str>,
    fields_type: &'a str,
    fields_v1: Option<&'a Value>,
    subresource: &'a str,
}

impl RawEntry<'_> {
    /// Whether every field is unset (`{}`): a request to reset.
    fn is_zero(&self) -> bool {
        self.manager.is_empty()
            && self.operation.is_empty()
            && self.api_version.is_empty()
            && self.time.is_none()
            && self.fields_type.is_empty()
            && self.fields_v1.is_none()
            && self.subresource.is_empty()
    }
}

fn raw_entry(value: &Value, index: usize) -> Result<RawEntry<'_>, ManagedError> {
    let Value::Object(map) = value else {
        return Err(ManagedError::NotAList);
    };
    let text = |field: &'static str| -> Result<Option<&str>, ManagedError> {
        match map.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(ManagedError::WrongType { index, field }),
        }
    };
    Ok(RawEntry {
        manager: text("manager")?.unwrap_or_default(),
        operation: text("operation")?.unwrap_or_default(),
        api_version: text("apiVersion")?.unwrap_or_default(),
        time: text("time")?,
        fields_type: text("fieldsType")?.unwrap_or_default(),
        fields_v1: map.get("fieldsV1").filter(|v| !v.is_null()),
        subresource: text("subresource")?.unwrap_or_default(),
    })
}

/// What an object's `metadata.managedFields` asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sent<'a> {
    /// Nothing usable: keep what is stored.
    Absent,
    /// `[]` or `[{}]`: forget every entry.
    Reset,
    /// These entries.
    Entries(&'a Value),
}

/// What `object` says about its managed fields.
pub fn sent(object: &Value) -> Sent<'_> {
    let Some(list @ Value::Array(entries)) = object.pointer("/metadata/managedFields") else {
        return Sent::Absent;
    };
    let reset = match entries.as_slice() {
        [] => true,
        [only] => raw_entry(only, 0).is_ok_and(|e| e.is_zero()),
        _ => false,
    };
    if reset {
        Sent::Reset
    } else {
        Sent::Entries(list)
    }
}

/// Removes `metadata.managedFields` from an object.
pub fn remove_from(object: &mut Value) {
    take_from(object);
}

/// Takes `metadata.managedFields` out of an object.
pub fn take_from(object: &mut Value) -> Option<Value> {
    match object.get_mut("metadata") {
        Some(Value::Object(meta)) => meta.remove("managedFields"),
        _ => None,
    }
}

/// Sets `metadata.managedFields` (removing it when there are no entries).
pub fn set_on(object: &mut Value, managed: &Managed) {
    let encoded = managed.encode();
    let Value::Object(root) = object else {
        return;
    };
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    if let Value::Object(meta) = meta {
        match encoded {
            Some(list) => meta.insert("managedFields".into(), list),
            None => meta.remove("managedFields"),
        };
    }
}

/// An RFC 3339 time in seconds, as `metav1.Time` writes it.
pub fn format_time(time: Timestamp) -> String {
    let seconds = Timestamp::from_second(time.as_second()).unwrap_or(time);
    seconds.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

impl Managed {
    /// Whether no manager owns anything.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Reads `managedFields` entries; a later entry of the same manager
    /// replaces an earlier one.
    pub fn decode(entries: &Value) -> Result<Managed, ManagedError> {
        let Value::Array(entries) = entries else {
            return Err(ManagedError::NotAList);
        };
        let mut managed = Managed::default();
        for (index, value) in entries.iter().enumerate() {
            let entry = raw_entry(value, index)?;
            let operation = match entry.operation {
                "Apply" => Operation::Apply,
                "Update" => Operation::Update,
                _ => return Err(ManagedError::Operation),
            };
            if entry.api_version.is_empty() {
                return Err(ManagedError::ApiVersion);
            }
            match entry.fields_type {
                "FieldsV1" => {}
                "" => return Err(ManagedError::MissingFieldsType(index)),
                other => return Err(ManagedError::FieldsType(index, other.to_owned())),
            }
            let set = match entry.fields_v1 {
                Some(fields) => {
                    Set::from_fields_v1(fields).map_err(|e| ManagedError::Fields(index, e))?
                }
                None => Set::new(),
            };
            let time = entry
                .time
                .map(|t| {
                    t.parse::<Timestamp>()
                        .map_err(|_| ManagedError::Time(index, t.to_owned()))
                })
                .transpose()?;
            let id = ManagerId::new(
                entry.manager,
                operation,
                entry.api_version,
                entry.subresource,
            );
            managed.fields.insert(
                id.clone(),
                VersionedSet {
                    set,
                    api_version: entry.api_version.to_owned(),
                    applied: operation == Operation::Apply,
                },
            );
            match time {
                Some(time) => managed.times.insert(id, time),
                None => managed.times.remove(&id),
            };
        }
        Ok(managed)
    }

    /// The entries as `managedFields` JSON, ordered as kube-apiserver orders
    /// them (operation, time, manager, API version, subresource); `None`
    /// when there are none.
    pub fn encode(&self) -> Option<Value> {
        let mut entries: Vec<(&ManagerId, &VersionedSet, Option<Timestamp>)> = self
            .fields
            .iter()
            .filter(|(id, _)| !id.transient)
            .map(|(id, vs)| (id, vs, self.times.get(id).copied()))
            .collect();
        if entries.is_empty() {
            return None;
        }
        let operation = |id: &ManagerId, vs: &VersionedSet| {
            if vs.applied {
                Operation::Apply
            } else {
                id.operation
            }
        };
        entries.sort_by(|(a, av, at), (b, bv, bt)| {
            operation(a, av)
                .as_str()
                .cmp(operation(b, bv).as_str())
                .then_with(|| {
                    let seconds = |t: &Option<Timestamp>| t.map_or(0, |t| t.as_second());
                    seconds(at).cmp(&seconds(bt))
                })
                .then_with(|| a.manager.cmp(&b.manager))
                .then_with(|| av.api_version.cmp(&bv.api_version))
                .then_with(|| a.subresource.cmp(&b.subresource))
        });
        let list = entries
            .into_iter()
            .map(|(id, vs, time)| {
                let mut entry = Map::new();
                if !id.manager.is_empty() {
                    entry.insert("manager".into(), json!(id.manager));
                }
                entry.insert("operation".into(), json!(operation(id, vs).as_str()));
                if !vs.api_version.is_empty() {
                    entry.insert("apiVersion".into(), json!(vs.api_version));
                }
                if let Some(time) = time {
                    entry.insert("time".into(), json!(format_time(time)));
                }
                entry.insert("fieldsType".into(), json!("FieldsV1"));
                entry.insert("fieldsV1".into(), vs.set.to_fields_v1());
                if !id.subresource.is_empty() {
                    entry.insert("subresource".into(), json!(id.subresource));
                }
                Value::Object(entry)
            })
            .collect();
        Some(Value::Array(list))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V2: &str = "infrastructure.cluster.x-k8s.io/v1alpha2";

    #[test]
    fn identifiers_and_descriptions_follow_kube() {
        let update = ManagerId::new("capi", Operation::Update, V2, "status");
        assert_eq!(
            update.identifier(),
            format!(
                r#"{{"manager":"capi","operation":"Update","apiVersion":"{V2}","subresource":"status"}}"#
            )
        );
        assert_eq!(
            update.describe(),
            format!(r#""capi" with subresource "status" using {V2}"#)
        );
        let apply = ManagerId::new("kubectl", Operation::Apply, V2, "");
        assert_eq!(
            apply.identifier(),
            r#"{"manager":"kubectl","operation":"Apply"}"#
        );
        assert_eq!(apply.describe(), r#""kubectl""#);
    }

    #[test]
    fn decode_encode_round_trip_in_kube_order() {
        let entries = json!([
            {"manager": "b", "operation": "Update", "apiVersion": V2, "time": "2026-01-02T00:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:a": {}}}},
            {"manager": "z", "operation": "Apply", "apiVersion": V2, "time": "2026-01-03T00:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:b": {}}}},
            {"manager": "a", "operation": "Update", "apiVersion": V2, "time": "2026-01-02T00:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:c": {}}}, "subresource": "status"}
        ]);
        let managed = Managed::decode(&entries).unwrap();
        let encoded = managed.encode().unwrap();
        let names: Vec<&str> = encoded
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["z", "a", "b"]);
        assert_eq!(Managed::decode(&encoded).unwrap(), managed);
    }

    #[test]
    fn invalid_entries_are_errors() {
        let entry = |e: Value| Managed::decode(&json!([e]));
        assert_eq!(
            entry(
                json!({"manager": "m", "operation": "Patch", "apiVersion": V2, "fieldsType": "FieldsV1"})
            ),
            Err(ManagedError::Operation)
        );
        assert_eq!(
            entry(json!({"manager": "m", "operation": "Apply", "fieldsType": "FieldsV1"})),
            Err(ManagedError::ApiVersion)
        );
        assert_eq!(
            entry(json!({"manager": "m", "operation": "Apply", "apiVersion": V2})),
            Err(ManagedError::MissingFieldsType(0))
        );
        assert!(entry(json!({"manager": 1})).is_err());
        assert!(
            entry(json!({"operation": "Apply", "apiVersion": V2, "fieldsType": "FieldsV1", "fieldsV1": {"x": {}}}))
                .is_err()
        );
    }

    #[test]
    fn reset_requests() {
        let with = |m: Value| json!({"metadata": {"managedFields": m}});
        assert_eq!(sent(&with(json!([]))), Sent::Reset);
        assert_eq!(sent(&with(json!([{}]))), Sent::Reset);
        assert_eq!(sent(&with(json!([{"manager": ""}]))), Sent::Reset);
        assert_eq!(sent(&with(Value::Null)), Sent::Absent);
        assert_eq!(sent(&json!({"metadata": {}})), Sent::Absent);
        assert!(matches!(sent(&with(json!([{}, {}]))), Sent::Entries(_)));
    }
}
