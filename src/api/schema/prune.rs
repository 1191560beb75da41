//! Pruning: dropping the fields a structural schema does not declare, and
//! reporting their paths (kube-apiserver's `pruning.PruneWithOptions`, then the
//! `metadata` coercion of embedded resources, `objectmeta.CoerceWithOptions`).

use serde_json::{Map, Value};

use super::{Structural, object_meta_structural};

/// Removes every field `schema` does not declare from the object `value`
/// (the root of an object of a kind) and returns the removed paths: sorted, then
/// those of embedded resources' `metadata`, sorted, as kube lists them.
/// `apiVersion`, `kind` and `metadata` are known at the root; unknown fields
/// inside `metadata` are pruned against ObjectMeta.
pub fn prune_object(value: &mut Value, schema: &Structural) -> Vec<String> {
    let mut found = Found::default();
    if let Value::Object(map) = value {
        map.retain(|key, child| match key.as_str() {
            "apiVersion" | "kind" => true,
            "metadata" => {
                prune(
                    child,
                    object_meta_structural(),
                    "metadata",
                    &mut found.pruned,
                );
                true
            }
            _ => match schema.property(key) {
                Some(sub) => {
                    prune_node(child, sub, key, &mut found);
                    true
                }
                None => {
                    found.pruned.push(key.clone());
                    false
                }
            },
        });
    }
    found.pruned.sort();
    found.embedded_metadata.sort();
    found.pruned.extend(found.embedded_metadata);
    found.pruned
}

/// The paths of pruned fields, kept apart for embedded resources' `metadata`.
#[derive(Default)]
struct Found {
    pruned: Vec<String>,
    embedded_metadata: Vec<String>,
}

/// [`prune_node`] where only the paths of pruned fields are wanted (ObjectMeta holds no
/// embedded resource).
fn prune(value: &mut Value, schema: &Structural, path: &str, pruned: &mut Vec<String>) {
    let mut found = Found::default();
    prune_node(value, schema, path, &mut found);
    pruned.append(&mut found.pruned);
}

fn prune_node(value: &mut Value, schema: &Structural, path: &str, found: &mut Found) {
    walk(value, schema, path, found, schema.preserve_unknown_fields);
}

/// Prunes below `value`; with `keep_unknown` (kube's `skipPrune` below
/// `x-kubernetes-preserve-unknown-fields`) undeclared fields stay, but declared ones are
/// still pruned by their own schemas, and so are the items of a list.
fn walk(value: &mut Value, schema: &Structural, path: &str, found: &mut Found, keep_unknown: bool) {
    match value {
        Value::Object(map) => {
            if schema.embedded_resource {
                embedded_metadata(map, path, found);
            }
            map.retain(|key, child| {
                if schema.embedded_resource
                    && matches!(key.as_str(), "apiVersion" | "kind" | "metadata")
                {
                    return true;
                }
                // kube-apiserver names a map's entries as fields (`failureDomains.a.x`).
                let child_path = format!("{path}.{key}");
                match schema
                    .property(key)
                    .or(schema.additional_properties.as_deref())
                {
                    Some(sub) => {
                        prune_node(child, sub, &child_path, found);
                        true
                    }
                    None if keep_unknown => true,
                    None => {
                        found.pruned.push(child_path);
                        false
                    }
                }
            });
        }
        Value::Array(items) => {
            if let Some(item_schema) = &schema.items {
                for (i, child) in items.iter_mut().enumerate() {
                    let child_path = format!("{path}[{i}]");
                    walk(
                        child,
                        item_schema,
                        &child_path,
                        found,
                        keep_unknown || item_schema.preserve_unknown_fields,
                    );
                }
            }
        }
        _ => {}
    }
}

/// An embedded resource's `metadata` keeps only ObjectMeta's fields, as kube's coercion
/// through the typed ObjectMeta keeps them.
fn embedded_metadata(map: &mut Map<String, Value>, path: &str, found: &mut Found) {
    if let Some(metadata) = map.get_mut("metadata") {
        let metadata_path = format!("{path}.metadata");
        prune(
            metadata,
            object_meta_structural(),
            &metadata_path,
            &mut found.embedded_metadata,
        );
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

    #[test]
    fn embedded_resources_keep_their_type_and_object_meta() {
        let schema = Structural::from_json(&json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "template": {
                    "type": "object",
                    "x-kubernetes-embedded-resource": true,
                    "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}}
                },
                "free": {
                    "type": "object",
                    "x-kubernetes-embedded-resource": true,
                    "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}}
                }
            }}}
        }))
        .expect("schema");
        let template = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "labels": {"a": "b"}, "color": "red"},
            "spec": {"a": "1", "b": 2},
            "extra": true
        });
        let mut object = json!({"spec": {"template": template.clone(), "free": template}});
        assert_eq!(
            prune_object(&mut object, &schema),
            [
                "spec.free.spec.b",
                "spec.template.extra",
                "spec.template.spec.b",
                "spec.free.metadata.color",
                "spec.template.metadata.color",
            ]
        );
        let kept = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "labels": {"a": "b"}},
            "spec": {"a": "1"}
        });
        let mut free = kept.clone();
        free["extra"] = json!(true);
        assert_eq!(object, json!({"spec": {"template": kept, "free": free}}));
    }
}
