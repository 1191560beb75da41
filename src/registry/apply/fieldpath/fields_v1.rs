//! The `FieldsV1` JSON form of a set, as stored in `managedFields`: one
//! object key per path element (`f:`, `k:`, `v:`, `i:`), `{}` for a member
//! without paths below it, and `"."` marking a member that also has paths
//! below it.

use serde_json::{Map, Value};

use super::element::{ElementError, PathElement};
use super::set::Set;

/// `fieldsV1` that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldsError {
    /// A node is not a JSON object.
    #[error("fieldsV1 {at}: expected an object, found {found}")]
    NotAnObject {
        /// Where (FieldsV1 keys from the root, joined by spaces).
        at: String,
        /// The JSON type found.
        found: &'static str,
    },
    /// A key is not a path element.
    #[error("fieldsV1 {at}: {error}")]
    BadKey {
        /// Where.
        at: String,
        /// Why.
        error: ElementError,
    },
}

impl Set {
    /// The set as `fieldsV1` JSON.
    pub fn to_fields_v1(&self) -> Value {
        Value::Object(self.fields_v1_node(false))
    }

    fn fields_v1_node(&self, is_member: bool) -> Map<String, Value> {
        let mut node = Map::new();
        if is_member && !self.is_empty() {
            node.insert(".".into(), Value::Object(Map::new()));
        }
        for member in &self.members {
            if !self.children.contains_key(member) {
                node.insert(member.to_fields_key(), Value::Object(Map::new()));
            }
        }
        for (element, child) in &self.children {
            let child_is_member = self.members.contains(element);
            node.insert(
                element.to_fields_key(),
                Value::Object(child.fields_v1_node(child_is_member)),
            );
        }
        node
    }

    /// Reads `fieldsV1` JSON. Keys of unknown element types are skipped, as
    /// the Go reader does; `null` reads as `{}`.
    pub fn from_fields_v1(value: &Value) -> Result<Set, FieldsError> {
        let mut trail = Vec::new();
        let (set, _) = read_node(value, &mut trail)?;
        Ok(set)
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Reads one node: the set below it and whether the node itself is a
/// member (an empty node, or one holding `"."`).
fn read_node<'a>(value: &'a Value, trail: &mut Vec<&'a str>) -> Result<(Set, bool), FieldsError> {
    let map = match value {
        Value::Object(map) => map,
        Value::Null => return Ok((Set::new(), true)),
        other => {
            return Err(FieldsError::NotAnObject {
                at: trail.join(" "),
                found: json_type(other),
            });
        }
    };
    let mut set = Set::new();
    let mut is_member = false;
    for (key, child) in map {
        if key == "." {
            is_member = true;
            continue;
        }
        trail.push(key);
        let element = PathElement::from_fields_key(key).map_err(|error| FieldsError::BadKey {
            at: trail.join(" "),
            error,
        })?;
        if let Some(element) = element {
            let (below, child_is_member) = read_node(child, trail)?;
            if child_is_member {
                set.members.insert(element.clone());
            }
            if !below.is_empty() {
                set.children.insert(element, below);
            }
        }
        trail.pop();
    }
    let has_paths = !set.members.is_empty() || !set.children.is_empty();
    Ok((set, is_member || !has_paths))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn members_with_children_carry_a_dot() {
        let fields = json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:replicas": {}}
        });
        let set = Set::from_fields_v1(&fields).unwrap();
        let shown: Vec<String> = set.paths().iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [".metadata.labels", ".metadata.labels.app", ".spec.replicas"]
        );
        assert_eq!(set.to_fields_v1(), fields);
    }

    #[test]
    fn empty_and_null_read_as_the_empty_set() {
        assert_eq!(Set::from_fields_v1(&json!({})).unwrap(), Set::new());
        assert_eq!(Set::from_fields_v1(&Value::Null).unwrap(), Set::new());
        assert_eq!(Set::new().to_fields_v1(), json!({}));
    }

    #[test]
    fn unknown_element_types_are_skipped_and_bad_keys_rejected() {
        let set = Set::from_fields_v1(&json!({"f:a": {"z:future": {}}})).unwrap();
        assert_eq!(set.to_fields_v1(), json!({"f:a": {}}));
        let error = Set::from_fields_v1(&json!({"f:a": {"k:[": {}}})).unwrap_err();
        assert!(error.to_string().starts_with("fieldsV1 f:a k:["), "{error}");
        assert!(Set::from_fields_v1(&json!({"f:a": 1})).is_err());
        assert!(Set::from_fields_v1(&json!([])).is_err());
    }
}
