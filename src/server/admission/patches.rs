//! The CEL of MutatingAdmissionPolicy mutations, read as kube reads its two patch types. An
//! `ApplyConfiguration` expression builds an `Object{…}` whose nested values are typed by
//! their field path (`Object.spec{…}`, `Object.spec.network{…}`; list items and map values by
//! the path of their list or map), which kube checks before it merges. A `JSONPatch`
//! expression builds a list of `JSONPatch{op, path, from, value}`. Both can call
//! `jsonpatch.escapeKey`.
//!
//! kube resolves any type name under `Object` as it is spelled; the cel crate constructs only
//! struct types registered by name, so a patch expression gets an environment of its own that
//! registers the names it spells (`types`, used by `expressions::Expression::compile_patch`).

use std::collections::BTreeMap;
use std::sync::Arc;

use cel::common::types::{CelStruct, Type};
use cel::common::value::{CowVal, Val};
use cel::{ExecutionError, StructType};
use serde_json::{Map, Value};

/// The root type of an apply configuration.
const OBJECT: &str = "Object";
/// The type of one JSON patch operation.
const JSON_PATCH: &str = "JSONPatch";
/// The members of a JSON patch operation that are strings.
const JSON_PATCH_STRINGS: [&str; 3] = ["op", "path", "from"];

/// A struct type of patch expressions: `JSONPatch` (string `op`, `path` and `from`, a `value`
/// of any type), or `Object` or a type below it (any fields, any values).
struct PatchType {
    ty: Type,
    json_patch: bool,
}

impl PatchType {
    /// Whether `name` may be a field of this type with `value`; kube's message if not.
    fn check(&self, name: &str, value: &CowVal<'_, '_>) -> Result<(), ExecutionError> {
        if !self.json_patch || name == "value" {
            return Ok(());
        }
        let message = if JSON_PATCH_STRINGS.contains(&name) {
            if matches!(cel::Value::try_from(&**value)?, cel::Value::String(_)) {
                return Ok(());
            }
            format!("unexpected type for JSONPatchType '{name}' field")
        } else {
            format!("unexpected JSONPatchType field: {name}")
        };
        Err(ExecutionError::function_error(JSON_PATCH, message))
    }
}

impl StructType for PatchType {
    fn get_type(&self) -> &Type {
        &self.ty
    }

    fn new_value<'b, 'v>(
        &self,
        fields: BTreeMap<String, CowVal<'b, 'v>>,
    ) -> Result<Box<dyn Val + 'v>, ExecutionError> {
        let mut object = CelStruct::new(self.ty.name().to_owned());
        for (name, value) in fields {
            self.check(&name, &value)?;
            object.add_field_value(name, value);
        }
        Ok(Box::new(object))
    }
}

/// Registers the struct types `names` (as an expression spells them) with `env`: `JSONPatch`,
/// `Object` and the names below it. Any other name is not a type of patch expressions.
pub fn register_types<'a>(
    env: &mut cel::Env,
    names: impl IntoIterator<Item = &'a str>,
) -> Result<(), String> {
    for name in names {
        let json_patch = name == JSON_PATCH;
        let below_object = name
            .strip_prefix(OBJECT)
            .is_some_and(|r| r.starts_with('.'));
        if !json_patch && name != OBJECT && !below_object {
            return Err(format!("undeclared reference to '{name}'"));
        }
        let ty = Type::new_struct(name.to_owned());
        env.add_type(PatchType { ty, json_patch })
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// `jsonpatch.escapeKey`: a key as a JSON pointer segment (`~` as `~0`, `/` as `~1`).
pub fn register_functions(context: &mut cel::Context) {
    let added = context.add_function("jsonpatch.escapeKey", |key: Arc<String>| -> String {
        key.replace('~', "~0").replace('/', "~1")
    });
    debug_assert!(added.is_ok(), "{added:?}");
}

/// An ApplyConfiguration expression's value as the configuration's JSON: an `Object` whose
/// nested types follow their field paths.
pub fn apply_configuration(value: &cel::Value) -> Result<Value, String> {
    match value {
        cel::Value::Struct(object) if object.name() == OBJECT => {
            let mut mismatches = Vec::new();
            let json = to_json(value, Some(OBJECT), &mut mismatches)?;
            type_names_match(mismatches)?;
            Ok(json)
        }
        other => Err(format!(
            "unsupported return type from ApplyConfiguration expression: {}",
            other.type_of()
        )),
    }
}

/// A JSONPatch expression's value as an RFC 6902 patch document.
pub fn json_patch(value: &cel::Value) -> Result<Value, String> {
    let cel::Value::List(operations) = value else {
        return Err("type mismatch: JSONPatchType.expression should evaluate to array".to_owned());
    };
    let mut patch = Vec::with_capacity(operations.len());
    for operation in operations.iter() {
        let cel::Value::Struct(operation) = operation else {
            return Err(format!(
                "type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch, got element of {}",
                operation.type_of()
            ));
        };
        if operation.name() != JSON_PATCH {
            return Err(format!(
                "type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch, got element of {}",
                operation.name()
            ));
        }
        let mut member = Map::new();
        for (name, field) in operation.field_values() {
            let field = cel::Value::try_from(field.as_ref()).map_err(|e| e.to_string())?;
            let json = match (&field, name.as_str()) {
                (cel::Value::String(s), "from") if s.is_empty() => continue,
                (cel::Value::Struct(object), "value") => {
                    let mut mismatches = Vec::new();
                    let json = to_json(&field, Some(object.name()), &mut mismatches)?;
                    type_names_match(mismatches)?;
                    json
                }
                _ => to_json(&field, None, &mut Vec::new())?,
            };
            member.insert(name, json);
        }
        patch.push(Value::Object(member));
    }
    Ok(Value::Array(patch))
}

/// kube's check that every nested `Object…` type is named by its field path.
fn type_names_match(mismatches: Vec<(String, String)>) -> Result<(), String> {
    if mismatches.is_empty() {
        return Ok(());
    }
    let messages: Vec<String> = mismatches
        .into_iter()
        .map(|(found, expected)| {
            format!(
                "unexpected type name {found:?}, expected {expected:?}, which matches field name path from root Object type"
            )
        })
        .collect();
    Err(format!("type mismatch: {}", messages.join("\n")))
}

/// `value` as JSON. Within an `Object` tree, `path` is the type name a struct there must have;
/// each one that has another is added to `mismatches` (found, expected).
fn to_json(
    value: &cel::Value,
    path: Option<&str>,
    mismatches: &mut Vec<(String, String)>,
) -> Result<Value, String> {
    let unmarshalable = || {
        format!(
            "JSONPath valueExpression evaluated to a type that could not marshal to JSON: {}",
            value.type_of()
        )
    };
    Ok(match value {
        cel::Value::Null => Value::Null,
        cel::Value::Bool(b) => Value::Bool(*b),
        cel::Value::Int(i) => Value::from(*i),
        cel::Value::UInt(u) => Value::from(*u),
        cel::Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .ok_or_else(unmarshalable)?,
        cel::Value::String(s) => Value::String(s.to_string()),
        cel::Value::Bytes(b) => {
            use base64::Engine as _;
            Value::String(base64::engine::general_purpose::STANDARD.encode(b.as_slice()))
        }
        cel::Value::List(items) => Value::Array(
            items
                .iter()
                .map(|item| to_json(item, path, mismatches))
                .collect::<Result<_, _>>()?,
        ),
        cel::Value::Map(map) => {
            let mut object = Map::new();
            for (key, item) in map.map.iter() {
                let cel::objects::Key::String(key) = key else {
                    return Err(format!("map key {key:?} is not a string"));
                };
                object.insert(key.to_string(), to_json(item, path, mismatches)?);
            }
            Value::Object(object)
        }
        cel::Value::Struct(object) if object.name().starts_with(OBJECT) => {
            let expected = path.unwrap_or(object.name()).to_owned();
            if expected != object.name() {
                mismatches.push((object.name().to_owned(), expected.clone()));
            }
            let mut json = Map::new();
            for (name, field) in object.field_values() {
                let field = cel::Value::try_from(field.as_ref()).map_err(|e| e.to_string())?;
                let below = format!("{expected}.{name}");
                json.insert(name, to_json(&field, Some(&below), mismatches)?);
            }
            Value::Object(json)
        }
        _ => return Err(unmarshalable()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(source: &str) -> Result<cel::Value, String> {
        super::super::expressions::Expression::compile_patch(source)?.evaluate(
            &super::super::expressions::Activation::new(
                Some(&serde_json::json!({"metadata": {"labels": {"a/b": "c"}}})),
                None,
                &serde_json::json!({}),
            ),
        )
    }

    #[test]
    fn apply_configurations_are_objects_typed_by_their_field_paths() {
        let value = run(
            "Object{metadata: Object.metadata{labels: {'team': 'a'}}, spec: Object.spec{numCores: 4, network: Object.spec.network{networkDevices: [Object.spec.network.networkDevices{name: 'net0'}]}}}",
        )
        .expect("evaluates");
        assert_eq!(
            apply_configuration(&value),
            Ok(serde_json::json!({"metadata": {"labels": {"team": "a"}},
                "spec": {"numCores": 4, "network": {"networkDevices": [{"name": "net0"}]}}}))
        );
        let misnamed = run("Object{spec: Object.status{numCores: 4}}").expect("evaluates");
        assert_eq!(
            apply_configuration(&misnamed),
            Err("type mismatch: unexpected type name \"Object.status\", expected \"Object.spec\", which matches field name path from root Object type".to_owned())
        );
        let not_object = run("{'spec': 1}").expect("evaluates");
        assert!(
            apply_configuration(&not_object)
                .unwrap_err()
                .starts_with("unsupported return type from ApplyConfiguration expression")
        );
        assert_eq!(
            super::super::expressions::Expression::compile_patch("Spec{a: 1}").err(),
            Some("compilation failed: undeclared reference to 'Spec'".to_owned())
        );
    }

    #[test]
    fn json_patches_are_lists_of_operations() {
        let value = run(
            "[JSONPatch{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey('example.com/a~b'), value: 'x'}, JSONPatch{op: 'remove', path: '/spec/x', from: ''}]",
        )
        .expect("evaluates");
        assert_eq!(
            json_patch(&value),
            Ok(serde_json::json!([
                {"op": "add", "path": "/metadata/labels/example.com~1a~0b", "value": "x"},
                {"op": "remove", "path": "/spec/x"},
            ]))
        );
        assert!(
            run("[JSONPatch{op: 1}]")
                .unwrap_err()
                .contains("'op' field")
        );
        assert!(
            run("[JSONPatch{verb: 'add'}]")
                .unwrap_err()
                .contains("unexpected JSONPatchType field: verb")
        );
        let not_a_list = run("JSONPatch{op: 'add'}").expect("evaluates");
        assert_eq!(
            json_patch(&not_a_list),
            Err("type mismatch: JSONPatchType.expression should evaluate to array".to_owned())
        );
    }
}
