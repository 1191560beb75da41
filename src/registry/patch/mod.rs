//! JSON patch (RFC 6902, [`json`]) and JSON merge patch (RFC 7386) on an object in the
//! request's version, with kube's error classes: a patch that does not parse is a 400, one
//! with too many operations a 413, one that cannot be applied (a failed `test`, a missing
//! path, a bound reached) a 422.

pub mod json;
mod shape;

use serde_json::Value;

use super::error::RegistryError;
use json::{JsonPatch, JsonPatchError};

/// A parsed patch, ready to be applied to each attempt's current object.
#[derive(Debug, Clone)]
pub enum Patch {
    Json(JsonPatch),
    /// A merge patch, decoded by the caller (which also tracks its duplicate fields).
    Merge(Value),
}

impl Patch {
    /// Parses a JSON patch body.
    pub fn json(body: &[u8]) -> Result<Self, RegistryError> {
        JsonPatch::parse(body).map(Patch::Json).map_err(Into::into)
    }

    /// A decoded merge patch: an object (evanphx refuses `null` and scalars as a patch).
    pub fn merge(patch: Value) -> Result<Self, RegistryError> {
        match patch {
            Value::Object(_) | Value::Array(_) => Ok(Patch::Merge(patch)),
            _ => Err(RegistryError::BadRequest("Invalid JSON Patch".to_owned())),
        }
    }

    /// The patched object.
    pub fn apply(&self, current: &Value) -> Result<Value, RegistryError> {
        let mut doc = current.clone();
        match self {
            Patch::Json(patch) => patch.apply(&mut doc)?,
            Patch::Merge(patch) => merge(&mut doc, patch),
        }
        Ok(doc)
    }
}

impl From<JsonPatchError> for RegistryError {
    fn from(error: JsonPatchError) -> Self {
        match error {
            JsonPatchError::Malformed(message) => RegistryError::BadRequest(message),
            JsonPatchError::TooManyOperations(_) => RegistryError::TooLarge(error.to_string()),
            JsonPatchError::Unapplicable(message) | JsonPatchError::TestFailed(message) => {
                RegistryError::Unprocessable(message)
            }
        }
    }
}

/// RFC 7386: objects merge key by key, `null` removes, anything else replaces. Recurses only
/// as deep as the patch, whose depth the body decoder bounds.
pub fn merge(doc: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *doc = patch.clone();
        return;
    };
    if !doc.is_object() {
        *doc = Value::Object(serde_json::Map::new());
    }
    let Value::Object(target) = doc else {
        unreachable!("made an object above")
    };
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
        } else {
            merge(target.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_and_merge_patches() {
        let current = json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"n": 1}});
        let json_patch = Patch::json(
            br#"[{"op":"test","path":"/spec/n","value":1},{"op":"replace","path":"/spec/n","value":2}]"#,
        )
        .expect("parse");
        assert_eq!(json_patch.apply(&current).expect("apply")["spec"]["n"], 2);
        let merge = Patch::merge(
            json!({"metadata": {"labels": {"x": null, "y": "2"}}, "spec": {"m": {"k": null}}}),
        )
        .expect("an object");
        assert_eq!(
            merge.apply(&current).expect("apply"),
            json!({"metadata": {"name": "a", "labels": {"y": "2"}}, "spec": {"n": 1, "m": {}}})
        );
    }

    #[test]
    fn errors_are_400_413_or_422() {
        for body in [&b"{}"[..], b"[1]", b"{"] {
            assert!(matches!(
                Patch::json(body),
                Err(RegistryError::BadRequest(_))
            ));
        }
        for patch in [json!(null), json!("x"), json!(1)] {
            assert!(matches!(
                Patch::merge(patch),
                Err(RegistryError::BadRequest(_))
            ));
        }
        let ops = Value::Array(vec![
            json!({"op": "test", "path": "/a", "value": 1});
            10_001
        ]);
        assert!(matches!(
            Patch::json(ops.to_string().as_bytes()),
            Err(RegistryError::TooLarge(_))
        ));
        let failing = Patch::json(br#"[{"op":"test","path":"/spec/n","value":5}]"#).expect("parse");
        assert!(matches!(
            failing.apply(&json!({"spec": {"n": 1}})),
            Err(RegistryError::Unprocessable(_))
        ));
    }
}
