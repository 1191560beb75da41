//! The `scale` subresource a CRD may declare (`subresources.scale`), as kube's CRD handler
//! serves it: an `autoscaling/v1` `Scale` read from the object's replica and selector fields,
//! a write of the desired replicas through it, and the checks of those fields that kube's
//! custom resource validator makes on every write of such a kind.

use serde_json::{Map, Value, json};

mod ownership;

use crate::api::field::{Error, Path};

use super::gofmt::format_float;

/// `Scale.spec.replicas` before a write when the object has no desired replicas: kube's
/// signal that an update must set them.
const UNSET_REPLICAS: i64 = i32::MIN as i64;

/// Where a kind keeps what its `Scale` shows (JSON paths as the CRD writes them,
/// `.spec.replicas`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    pub spec_replicas: String,
    pub status_replicas: String,
    pub label_selector: Option<String>,
}

/// Why a field a `Scale` is made of cannot be read: unstructured's accessor error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessorError(pub String);

impl ScalePaths {
    /// The paths a CRD version's `subresources.scale` names.
    pub fn from_crd(scale: &Value) -> Option<Self> {
        let path = |key: &str| scale.get(key).and_then(Value::as_str).map(str::to_owned);
        Some(Self {
            spec_replicas: path("specReplicasPath")?,
            status_replicas: path("statusReplicasPath")?,
            label_selector: path("labelSelectorPath"),
        })
    }

    /// The `Scale` of `object`, and whether it has desired replicas at all.
    pub fn scale_of(&self, object: &Value) -> Result<(Value, bool), AccessorError> {
        let spec = nested_int(object, &self.spec_replicas)?;
        let status = nested_int(object, &self.status_replicas)?.unwrap_or(0);
        let selector = match &self.label_selector {
            Some(path) => nested_string(object, path)?.unwrap_or_default(),
            None => String::new(),
        };
        let meta = |key: &str| object.pointer(&format!("/metadata/{key}")).cloned();
        let mut metadata = Map::new();
        for key in [
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "creationTimestamp",
        ] {
            if let Some(value) = meta(key) {
                metadata.insert(key.to_owned(), value);
            }
        }
        let mut status_json = json!({ "replicas": status as i32 });
        if !selector.is_empty() {
            status_json["selector"] = Value::String(selector);
        }
        // autoscaling/v1 omits zero desired replicas (`omitempty`), not zero current ones.
        let spec_json = match spec.unwrap_or(0) as i32 {
            0 => json!({}),
            replicas => json!({ "replicas": replicas }),
        };
        let scale = json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": metadata,
            "spec": spec_json,
            "status": status_json,
        });
        Ok((scale, spec.is_some()))
    }

    /// The `Scale` an update starts from: without desired replicas in the object, kube's
    /// marker that the update must give them.
    pub fn scale_before_update(&self, object: &Value) -> Result<Value, AccessorError> {
        let (mut scale, found) = self.scale_of(object)?;
        if !found {
            scale["spec"]["replicas"] = UNSET_REPLICAS.into();
        }
        Ok(scale)
    }

    /// `object` with the replicas `scale` asks for, its `resourceVersion` a precondition when
    /// the `Scale` carries one; the `Scale`'s faults as kube words them.
    pub fn apply_scale(&self, object: &mut Value, scale: &Value) -> Result<(), String> {
        let replicas = scale_replicas(scale)?;
        if replicas == UNSET_REPLICAS {
            return Err(format!(
                "the spec replicas field {:?} cannot be empty",
                self.spec_replicas
            ));
        }
        set_nested(object, &self.spec_replicas, replicas.into());
        if let Some(rv) = scale
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .filter(|rv| !rv.is_empty())
            && let Some(Value::Object(meta)) = object.get_mut("metadata")
        {
            meta.insert("resourceVersion".to_owned(), rv.into());
        }
        Ok(())
    }

    /// The managedFields of `new` after a write of its replicas through the subresource by
    /// `manager`, `live` being the object before (both in `api_version`): see [`ownership`].
    pub fn tracked(
        &self,
        live: &Value,
        new: &Value,
        manager: &str,
        api_version: &str,
    ) -> Option<Value> {
        let before = match nested(live, &self.spec_replicas) {
            Ok(Some(replicas)) => replicas.as_i64().filter(|r| *r != 0),
            // What kube's Scale holds before an update of an object without desired replicas.
            _ => Some(UNSET_REPLICAS),
        };
        let after = nested(new, &self.spec_replicas)
            .ok()
            .flatten()
            .and_then(Value::as_i64)
            .filter(|r| *r != 0);
        let path: Vec<&str> = segments(&self.spec_replicas).collect();
        ownership::after_scale_write(
            live.pointer("/metadata/managedFields"),
            &path,
            ownership::ScaleWrite {
                changed: before != after,
                set: after.is_some(),
                manager,
                api_version,
            },
        )
    }

    /// What kube checks of these fields on a write (`ValidateScaleSpec`, and on every write,
    /// status writes included, `ValidateScaleStatus`).
    pub fn validate(&self, object: &Value, with_spec: bool) -> Vec<Error> {
        let mut errors = Vec::new();
        let replicas = |path: &str, errors: &mut Vec<Error>| {
            let field = Path::root().child(path);
            match nested_int(object, path) {
                Err(AccessorError(e)) => errors.push(Error::invalid(field, 0, e)),
                Ok(Some(n)) if n < 0 => {
                    errors.push(Error::invalid(field, n, "should be a non-negative integer"));
                }
                Ok(Some(n)) if n > i64::from(i32::MAX) => errors.push(Error::invalid(
                    field,
                    n,
                    format!("should be less than or equal to {}", i32::MAX),
                )),
                Ok(_) => {}
            }
        };
        if with_spec {
            replicas(&self.spec_replicas, &mut errors);
        }
        replicas(&self.status_replicas, &mut errors);
        if let Some(path) = &self.label_selector
            && let Err(AccessorError(e)) = nested_string(object, path)
        {
            errors.push(Error::invalid(Path::root().child(path), "", e));
        }
        errors
    }
}

/// `spec.replicas` of a `Scale` a client sent, an int32 as Go's JSON decoder takes it; its
/// error as that decoder words it.
pub fn scale_replicas(scale: &Value) -> Result<i64, String> {
    let refused = |what: String| {
        format!(
            "json: cannot unmarshal {what} into Go struct field ScaleSpec.spec.replicas of type \
             int32"
        )
    };
    match scale.pointer("/spec/replicas") {
        None | Some(Value::Null) => Ok(0),
        Some(Value::Number(n)) => n
            .as_i64()
            .filter(|n| i32::try_from(*n).is_ok())
            .ok_or_else(|| refused(format!("number {n}"))),
        Some(Value::String(_)) => Err(refused("string".to_owned())),
        Some(Value::Bool(_)) => Err(refused("bool".to_owned())),
        Some(Value::Array(_)) => Err(refused("array".to_owned())),
        Some(Value::Object(_)) => Err(refused("object".to_owned())),
    }
}

/// The segments of a JSON path as kube splits it (the leading `.` ignored).
fn segments(path: &str) -> impl Iterator<Item = &str> {
    path.strip_prefix('.').unwrap_or(path).split('.')
}

/// unstructured's `NestedFieldNoCopy`: the value at `path`, `None` where a field on the way
/// is missing or null, an error (naming the path down to the field looked up) where one on
/// the way is not an object.
fn nested<'a>(object: &'a Value, path: &str) -> Result<Option<&'a Value>, AccessorError> {
    let mut current = object;
    let mut walked = String::new();
    for segment in segments(path) {
        walked.push('.');
        walked.push_str(segment);
        match current {
            Value::Null => return Ok(None),
            Value::Object(map) => match map.get(segment) {
                Some(next) => current = next,
                None => return Ok(None),
            },
            other => return Err(accessor_error(&walked, other, "map[string]interface{}")),
        }
    }
    Ok(Some(current))
}

fn nested_int(object: &Value, path: &str) -> Result<Option<i64>, AccessorError> {
    match nested(object, path)? {
        None => Ok(None),
        Some(value) => value
            .as_i64()
            .map(Some)
            .ok_or_else(|| accessor_error(&dotted(path), value, "int64")),
    }
}

fn nested_string(object: &Value, path: &str) -> Result<Option<String>, AccessorError> {
    match nested(object, path)? {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(value) => Err(accessor_error(&dotted(path), value, "string")),
    }
}

fn dotted(path: &str) -> String {
    segments(path).map(|s| format!(".{s}")).collect()
}

/// Sets `value` at `path`, making the objects on the way (`SetNestedField`).
fn set_nested(object: &mut Value, path: &str, value: Value) {
    let mut current = object;
    let mut parts = segments(path).peekable();
    while let Some(segment) = parts.next() {
        if !current.is_object() {
            *current = Value::Object(Map::new());
        }
        let Value::Object(map) = current else {
            return;
        };
        if parts.peek().is_none() {
            map.insert(segment.to_owned(), value);
            return;
        }
        current = map
            .entry(segment.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
    }
}

fn accessor_error(path: &str, value: &Value, expected: &str) -> AccessorError {
    AccessorError(format!(
        "{path} accessor error: {} is of the type {}, expected {expected}",
        go_value(value),
        go_type(value)
    ))
}

/// Go's `%T` of a value decoded from JSON into `interface{}`.
fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() || n.is_u64() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// Go's `%v` of such a value (maps with sorted keys, as fmt prints them).
fn go_value(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => format_float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(go_value).collect();
            format!("[{}]", items.join(" "))
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by_key(|(k, _)| *k);
            let entries: Vec<String> = entries
                .iter()
                .map(|(k, v)| format!("{k}:{}", go_value(v)))
                .collect();
            format!("map[{}]", entries.join(" "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths() -> ScalePaths {
        ScalePaths {
            spec_replicas: ".spec.replicas".to_owned(),
            status_replicas: ".status.replicas".to_owned(),
            label_selector: Some(".status.selector".to_owned()),
        }
    }

    #[test]
    fn a_scale_shows_the_replica_fields_and_the_identity() {
        let object = json!({
            "metadata": {"name": "a", "namespace": "n", "uid": "u", "resourceVersion": "7",
                         "labels": {"x": "y"}},
            "spec": {"replicas": 3},
            "status": {"replicas": 2, "selector": "app=a"},
        });
        let (scale, found) = paths().scale_of(&object).expect("scale");
        assert!(found);
        assert_eq!(
            scale,
            json!({
                "kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {"name": "a", "namespace": "n", "uid": "u", "resourceVersion": "7"},
                "spec": {"replicas": 3},
                "status": {"replicas": 2, "selector": "app=a"},
            })
        );
        let (empty, found) = paths().scale_of(&json!({"metadata": {}})).expect("scale");
        assert!(!found);
        assert_eq!(
            empty["spec"],
            json!({}),
            "zero desired replicas are omitted, as Go omits them"
        );
    }

    #[test]
    fn an_update_sets_the_desired_replicas_and_needs_them() {
        let mut object = json!({"metadata": {"resourceVersion": "7"}});
        let before = paths().scale_before_update(&object).expect("scale");
        assert_eq!(
            paths().apply_scale(&mut object.clone(), &before),
            Err("the spec replicas field \".spec.replicas\" cannot be empty".to_owned())
        );
        let scale = json!({"metadata": {"resourceVersion": "6"}, "spec": {"replicas": 4}});
        paths().apply_scale(&mut object, &scale).expect("applied");
        assert_eq!(
            object,
            json!({"metadata": {"resourceVersion": "6"}, "spec": {"replicas": 4}})
        );
    }

    #[test]
    fn writes_are_checked_as_kube_checks_them() {
        let messages = |object: Value, with_spec: bool| -> Vec<String> {
            paths()
                .validate(&object, with_spec)
                .iter()
                .map(Error::to_string)
                .collect()
        };
        assert_eq!(
            messages(
                json!({"spec": {"replicas": -1}, "status": {"replicas": 1.5}}),
                true
            ),
            [
                ".spec.replicas: Invalid value: -1: should be a non-negative integer",
                ".status.replicas: Invalid value: 0: .status.replicas accessor error: 1.5 is of \
                 the type float64, expected int64",
            ]
        );
        assert_eq!(
            messages(json!({"spec": {"replicas": -1}, "status": "x"}), false),
            [
                ".status.replicas: Invalid value: 0: .status.replicas accessor error: x is of \
                 the type string, expected map[string]interface{}",
                ".status.selector: Invalid value: \"\": .status.selector accessor error: x is \
                 of the type string, expected map[string]interface{}",
            ]
        );
        assert!(messages(json!({"spec": {"replicas": 2147483647}}), true).is_empty());
        assert_eq!(
            messages(json!({"spec": {"replicas": 2147483648_i64}}), true),
            [
                ".spec.replicas: Invalid value: 2147483648: should be less than or equal to 2147483647"
            ]
        );
    }
}
