//! Checking an apply configuration before it is merged: the JSON type of
//! every value, only declared fields, and set and map list items that can
//! be named and are unique. Required fields, bounds and the other schema
//! rules are checked on the merged object, as for any write.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::items::{ItemName, item_name};
use super::schema::{Atom, ListKind, Ty};
use crate::api::field::{Error, ErrorList, Path};
use crate::api::validation::openapi::type_error;
use crate::registry::apply::fieldpath::PathElement;

/// The errors of configuration `value` (the root of an object) against
/// schema `ty`.
pub fn validate_config(value: &Value, ty: Ty) -> ErrorList {
    let mut walker = Walker {
        path: Vec::new(),
        errors: ErrorList::new(),
    };
    walker.walk(value, ty);
    walker.errors
}

/// A step of the path to a value; rendered only when there is an error.
#[derive(Clone, Copy)]
enum Seg<'a> {
    Field(&'a str),
    Key(&'a str),
    Index(usize),
}

struct Walker<'a> {
    path: Vec<Seg<'a>>,
    errors: ErrorList,
}

impl<'a> Walker<'a> {
    fn path(&self) -> Path {
        self.path.iter().fold(Path::root(), |path, seg| match seg {
            Seg::Field(name) => path.child(name),
            Seg::Key(key) => path.key(key),
            Seg::Index(i) => path.index(*i),
        })
    }

    fn walk(&mut self, value: &'a Value, ty: Ty<'a>) {
        match (ty.atom(Some(value)), value) {
            (Atom::List { .. } | Atom::Map { .. }, Value::Null) => {}
            (Atom::Scalar, _) => {
                // The path is rendered only for a value of the wrong type.
                if let (Ty::Node(schema), false) = (ty, value.is_null())
                    && type_error(value, schema, &Path::root()).is_some()
                    && let Some(error) = type_error(value, schema, &self.path())
                {
                    self.errors.push(error);
                }
            }
            (Atom::List { item, kind }, Value::Array(items)) => {
                if !matches!(kind, ListKind::Atomic) {
                    self.check_names(items, item, kind);
                }
                for (i, child) in items.iter().enumerate() {
                    self.path.push(Seg::Index(i));
                    self.walk(child, item);
                    self.path.pop();
                }
            }
            (Atom::Map { .. }, Value::Object(fields)) => {
                for (name, child) in fields {
                    match ty.lookup(name) {
                        Some((child_ty, declared)) => {
                            self.path.push(if declared.is_some() {
                                Seg::Field(name)
                            } else {
                                Seg::Key(name)
                            });
                            self.walk(child, child_ty);
                            self.path.pop();
                        }
                        None => {
                            let path = self.path().child(name);
                            self.errors
                                .push(Error::forbidden(path, "field not declared in schema"));
                        }
                    }
                }
            }
            (Atom::List { .. }, _) => {
                let error = wrong_type(value, ty, &self.path(), "array");
                self.errors.push(error);
            }
            (Atom::Map { .. }, _) => {
                let error = wrong_type(value, ty, &self.path(), "object");
                self.errors.push(error);
            }
        }
    }

    /// Every item must have a name, and no name may repeat.
    fn check_names(&mut self, items: &'a [Value], item_ty: Ty<'a>, kind: ListKind<'a>) {
        let mut seen: BTreeSet<ItemName> = BTreeSet::new();
        for (i, item) in items.iter().enumerate() {
            match item_name(kind, item_ty, item) {
                Err(error) => {
                    let path = self.path().index(i);
                    self.errors
                        .push(Error::invalid(path, item.clone(), error.to_string()));
                    return;
                }
                Ok(name) => {
                    if seen.contains(&name) {
                        let path = self.path().index(i);
                        self.errors
                            .push(Error::duplicate(path, duplicate_value(&name.to_element())));
                    }
                    seen.insert(name);
                }
            }
        }
    }
}

/// The value a duplicate is reported with: the key fields of a map item,
/// the value of a set item.
fn duplicate_value(element: &PathElement) -> Value {
    match element {
        PathElement::Key(fields) => Value::Object(fields.iter().cloned().collect::<Map<_, _>>()),
        PathElement::Value(value) => value.clone(),
        other => Value::String(other.to_string()),
    }
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
