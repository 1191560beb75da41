//! Checking an apply configuration before it is merged: the JSON type of
//! every value, only declared fields, and set and map list items that can
//! be named and are unique. Required fields, bounds and the other schema
//! rules are checked on the merged object, as for any write.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::items::item_element;
use super::schema::{Atom, ListKind, Ty};
use crate::api::field::{Error, ErrorList, Path};
use crate::api::validation::openapi::type_error;
use crate::registry::apply::fieldpath::PathElement;

/// The errors of configuration `value` (the root of an object) against
/// schema `ty`.
pub fn validate_config(value: &Value, ty: Ty) -> ErrorList {
    let mut errors = ErrorList::new();
    walk(value, ty, &Path::root(), &mut errors);
    errors
}

fn walk(value: &Value, ty: Ty, path: &Path, errors: &mut ErrorList) {
    match (ty.atom(Some(value)), value) {
        (Atom::List { .. } | Atom::Map { .. }, Value::Null) => {}
        (Atom::Scalar, _) => {
            if let (Ty::Node(schema), false) = (ty, value.is_null())
                && let Some(error) = type_error(value, schema, path)
            {
                errors.push(error);
            }
        }
        (Atom::List { item, kind }, Value::Array(items)) => {
            if !matches!(kind, ListKind::Atomic) {
                check_names(items, item, kind, path, errors);
            }
            for (i, child) in items.iter().enumerate() {
                walk(child, item, &path.index(i), errors);
            }
        }
        (Atom::Map { .. }, Value::Object(fields)) => {
            for (name, child) in fields {
                let child_path = if ty.declares(name) {
                    path.child(name)
                } else {
                    path.key(name)
                };
                match ty.field(name) {
                    Some(child_ty) => walk(child, child_ty, &child_path, errors),
                    None => errors.push(Error::forbidden(
                        path.child(name),
                        "field not declared in schema",
                    )),
                }
            }
        }
        (Atom::List { .. }, _) => errors.push(wrong_type(value, ty, path, "array")),
        (Atom::Map { .. }, _) => errors.push(wrong_type(value, ty, path, "object")),
    }
}

/// Every item must have a name, and no name may repeat.
fn check_names(items: &[Value], item_ty: Ty, kind: ListKind, path: &Path, errors: &mut ErrorList) {
    let mut seen: BTreeSet<PathElement> = BTreeSet::new();
    for (i, item) in items.iter().enumerate() {
        match item_element(kind, item_ty, item) {
            Err(error) => {
                errors.push(Error::invalid(
                    path.index(i),
                    item.clone(),
                    error.to_string(),
                ));
                return;
            }
            Ok(element) => {
                if let Some(shown) = duplicate_value(&seen, &element) {
                    errors.push(Error::duplicate(path.index(i), shown));
                }
                seen.insert(element);
            }
        }
    }
}

/// The value a duplicate is reported with: the key fields of a map item,
/// the value of a set item.
fn duplicate_value(seen: &BTreeSet<PathElement>, element: &PathElement) -> Option<Value> {
    if !seen.contains(element) {
        return None;
    }
    Some(match element {
        PathElement::Key(fields) => Value::Object(fields.iter().cloned().collect::<Map<_, _>>()),
        PathElement::Value(value) => value.clone(),
        other => Value::String(other.to_string()),
    })
}

/// The schema's own type error where it names a type; a plain one where
/// the node is structured without one.
fn wrong_type(value: &Value, ty: Ty, path: &Path, expected: &str) -> Error {
    let schema_error = match ty {
        Ty::Object(s) | Ty::Node(s) => type_error(value, s, path),
        Ty::Deduced => None,
    };
    schema_error.unwrap_or_else(|| {
        Error::invalid(
            path.clone(),
            value.clone(),
            format!("must be of type {expected}"),
        )
    })
}
