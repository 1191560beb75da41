//! Pruning: dropping the fields a structural schema does not declare, and
//! reporting their paths (kube-apiserver's `pruning.PruneWithOptions`).

use serde_json::Value;

use super::{Structural, object_meta_structural};

/// Removes every field `schema` does not declare from the object `value`
/// (the root of an object of a kind) and returns the removed paths, sorted.
/// `apiVersion`, `kind` and `metadata` are known at the root; unknown fields
/// inside `metadata` are pruned against ObjectMeta.
pub fn prune_object(value: &mut Value, schema: &Structural) -> Vec<String> {
    let mut pruned = Vec::new();
    if let Value::Object(map) = value {
        map.retain(|key, child| match key.as_str() {
            "apiVersion" | "kind" => true,
            "metadata" => {
                prune(child, object_meta_structural(), "metadata", &mut pruned);
                true
            }
            _ => match schema.property(key) {
                Some(sub) => {
                    prune(child, sub, key, &mut pruned);
                    true
                }
                None => {
                    pruned.push(key.clone());
                    false
                }
            },
        });
    }
    pruned.sort();
    pruned
}

fn prune(value: &mut Value, schema: &Structural, path: &str, pruned: &mut Vec<String>) {
    if schema.preserve_unknown_fields {
        return;
    }
    match value {
        Value::Object(map) => {
            if let Some(values) = &schema.additional_properties {
                for (key, child) in map.iter_mut() {
                    // kube-apiserver names a map's entries as fields (`failureDomains.a.x`).
                    prune(child, values, &format!("{path}.{key}"), pruned);
                }
            } else {
                map.retain(|key, child| match schema.property(key) {
                    Some(sub) => {
                        prune(child, sub, &format!("{path}.{key}"), pruned);
                        true
                    }
                    None => {
                        pruned.push(format!("{path}.{key}"));
                        false
                    }
                });
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = &schema.items {
                for (i, child) in items.iter_mut().enumerate() {
                    prune(child, item_schema, &format!("{path}[{i}]"), pruned);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn pruned_fields_are_named_as_kube_names_them() {
        let schema = Structural::from_json(&json!({
            "type": "object",
            "properties": {"status": {"type": "object", "properties": {
                "domains": {"type": "object", "additionalProperties": {"type": "object"}},
                "list": {"type": "array", "items": {"type": "object"}}
            }}}
        }))
        .expect("schema");
        let mut object = json!({"status": {
            "domains": {"a": {"x": 1}},
            "list": [{"y": 1}],
            "z": 1
        }});
        assert_eq!(
            prune_object(&mut object, &schema),
            ["status.domains.a.x", "status.list[0].y", "status.z"]
        );
        assert_eq!(
            object,
            json!({"status": {"domains": {"a": {}}, "list": [{}]}})
        );
    }
}
