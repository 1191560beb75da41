//! `x-kubernetes-embedded-resource`: objects a custom resource holds that are Kubernetes
//! objects of their own (a template), checked as apiextensions checks them
//! (`schema/objectmeta`): their `apiVersion` and `kind` are required strings of a group-version
//! and a kind name, and their `metadata` is ObjectMeta, validated as such with names that need
//! only be URL path segments. (Pruning keeps these three fields: `api::schema::prune`.)

use serde_json::{Map, Value};

use crate::api::field::{Error, ErrorList};
use crate::api::schema::Structural;

use super::super::field_error::{BadValue, FieldError, FieldPath};
use super::super::object_meta;
use super::super::validation::is_dns1035_label;

/// The errors of the embedded resources in `object` (the resource itself excluded).
pub fn validate(object: &Value, schema: &Structural) -> ErrorList {
    let mut errors = Vec::new();
    walk(object, schema, &FieldPath::nil(), &mut errors);
    errors.iter().map(Error::from).collect()
}

/// The first embedded `apiVersion` or `kind` that is not a string: kube refuses such a body
/// while decoding it, before any validation (`objectmeta.Coerce`), with this error.
pub fn type_field_error(object: &Value, schema: &Structural) -> Option<FieldError> {
    let mut found = None;
    visit(object, schema, &FieldPath::nil(), &mut |map, path| {
        for field in ["apiVersion", "kind"] {
            if let Some(value) = map.get(field).filter(|v| !v.is_string()) {
                found.get_or_insert_with(|| {
                    FieldError::invalid(&path.child(field), value.clone(), "must be a string")
                });
            }
        }
    });
    found
}

/// Calls `check` on every embedded resource below `value`.
fn visit(
    value: &Value,
    schema: &Structural,
    path: &FieldPath,
    check: &mut dyn FnMut(&Map<String, Value>, &FieldPath),
) {
    match value {
        Value::Object(map) => {
            if schema.embedded_resource {
                check(map, path);
            }
            for (key, child) in map {
                if let Some(sub) = schema.property(key) {
                    visit(child, sub, &path.child(key), check);
                } else if let Some(values) = &schema.additional_properties {
                    visit(child, values, &path.key(key), check);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = &schema.items {
                for (i, item) in items.iter().enumerate() {
                    visit(item, item_schema, &path.index(i), check);
                }
            }
        }
        _ => {}
    }
}

fn walk(value: &Value, schema: &Structural, path: &FieldPath, errors: &mut Vec<FieldError>) {
    visit(value, schema, path, &mut |map, path| {
        embedded(map, path, errors)
    });
}

fn embedded(map: &Map<String, Value>, path: &FieldPath, errors: &mut Vec<FieldError>) {
    for field in ["apiVersion", "kind"] {
        if !map.contains_key(field) {
            errors.push(FieldError::required(&path.child(field), ""));
        }
    }
    if let Some(api_version) = map.get("apiVersion") {
        let path = path.child("apiVersion");
        match api_version.as_str() {
            None => errors.push(invalid_type(&path, api_version)),
            Some("") => errors.push(FieldError::invalid(&path, "", "must not be empty")),
            // `schema.ParseGroupVersion`: `version` or `group/version`.
            Some(gv) if gv != "/" && gv.matches('/').count() > 1 => errors.push(
                FieldError::invalid(&path, gv, format!("unexpected GroupVersion string: {gv}")),
            ),
            Some(_) => {}
        }
    }
    if let Some(kind) = map.get("kind") {
        let path = path.child("kind");
        match kind.as_str() {
            None => errors.push(invalid_type(&path, kind)),
            Some("") => errors.push(FieldError::invalid(&path, "", "must not be empty")),
            Some(name) => {
                let problems = is_dns1035_label(&name.to_lowercase());
                if !problems.is_empty() {
                    let detail = format!(
                        "may have mixed case, but should otherwise match: {}",
                        problems.join(",")
                    );
                    errors.push(FieldError::invalid(&path, name, detail));
                }
            }
        }
    }
    if let Some(metadata) = map.get("metadata") {
        errors.extend(object_meta::validate_embedded(
            metadata,
            &path.child("metadata"),
        ));
    }
}

fn invalid_type(path: &FieldPath, value: &Value) -> FieldError {
    FieldError::invalid(path, BadValue::from_json(value), "must be a string")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Structural {
        Structural::from_json(&json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "templates": {"type": "array", "items": {
                    "type": "object",
                    "x-kubernetes-embedded-resource": true,
                    "x-kubernetes-preserve-unknown-fields": true
                }}
            }}
        }}))
        .expect("schema")
    }

    fn errors(template: Value) -> Vec<String> {
        let object = json!({"spec": {"templates": [template]}});
        validate(&object, &schema())
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn embedded_objects_need_a_type() {
        assert!(errors(json!({"apiVersion": "v1", "kind": "ConfigMap"})).is_empty());
        assert_eq!(
            errors(json!({"data": {}})),
            [
                "spec.templates[0].apiVersion: Required value",
                "spec.templates[0].kind: Required value",
            ]
        );
        assert_eq!(
            errors(json!({"apiVersion": "a/b/c", "kind": "Config_Map"})),
            [
                r#"spec.templates[0].apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c"#,
                r#"spec.templates[0].kind: Invalid value: "Config_Map": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"#,
            ]
        );
        assert_eq!(
            errors(json!({"apiVersion": "", "kind": ""})),
            [
                r#"spec.templates[0].apiVersion: Invalid value: "": must not be empty"#,
                r#"spec.templates[0].kind: Invalid value: "": must not be empty"#,
            ]
        );
    }

    #[test]
    fn embedded_metadata_is_object_meta_with_path_segment_names() {
        let template = |metadata: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata});
        assert!(errors(template(json!({"name": "Not_A_DNS.Name"}))).is_empty());
        assert!(errors(template(json!({}))).is_empty());
        assert_eq!(
            errors(template(
                json!({"name": "a/b", "namespace": "Bad", "labels": {"k": "-"}})
            )),
            [
                r#"spec.templates[0].metadata.name: Invalid value: "a/b": may not contain '/'"#,
                r#"spec.templates[0].metadata.namespace: Invalid value: "Bad": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"#,
                r#"spec.templates[0].metadata.labels: Invalid value: "-": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"#,
            ]
        );
    }

    #[test]
    fn a_type_field_of_another_type_fails_the_decoding() {
        let object = json!({"spec": {"templates": [{"apiVersion": 5, "kind": "ConfigMap"}]}});
        assert_eq!(
            type_field_error(&object, &schema()).map(|e| e.to_string()),
            Some("spec.templates[0].apiVersion: Invalid value: 5: must be a string".to_owned())
        );
    }
}
