//! The set of fields an object sets (structured-merge-diff's `ToFieldSet`):
//! every scalar leaf, every atomic list or map, every item of a set or map
//! list, and fields set to null or `{}` or that are map entries rather
//! than struct fields.

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde_json::Value;

use super::items::item_elements;
use super::schema::{Atom, ListKind, Ty};
use crate::registry::apply::fieldpath::{PathElement, Set};

/// The fields `value` sets, read with schema `ty`.
pub fn to_field_set(value: &Value, ty: Ty<'static>) -> Set {
    below(value, ty, false).0
}

/// [`to_field_set`] followed by [`super::with_named_fields`], in one walk:
/// struct fields holding owned paths are members too.
pub fn to_field_set_named(value: &Value, ty: Ty<'static>) -> Set {
    below(value, ty, true).0
}

/// The paths below a node, and whether the node is itself a leaf.
fn below(value: &Value, ty: Ty<'static>, named: bool) -> (Set, bool) {
    match ty.atom(Some(value)) {
        Atom::Scalar
        | Atom::List {
            kind: ListKind::Atomic,
            ..
        }
        | Atom::Map { atomic: true } => (Set::new(), true),
        Atom::List { item, kind } => match value {
            Value::Array(items) => (list_items(items, item, kind, named), false),
            _ => (Set::new(), false),
        },
        Atom::Map { atomic: false } => match value {
            Value::Object(fields) => {
                let mut set = Set::new();
                for (name, child) in fields {
                    let (child_ty, declared) = ty.lookup(name).unwrap_or((Ty::Deduced, None));
                    let element = PathElement::Field(match declared {
                        Some(name) => Cow::Borrowed(name),
                        None => Cow::Owned(name.clone()),
                    });
                    let declared = declared.is_some();
                    let (child_set, is_leaf) = below(child, child_ty, named);
                    let empty_map = matches!(child, Value::Object(m) if m.is_empty());
                    let named_field = named && declared && !child_set.is_empty();
                    if is_leaf || child.is_null() || empty_map || !declared || named_field {
                        set.members.insert(element.clone());
                    }
                    if !child_set.is_empty() {
                        set.children.insert(element, child_set);
                    }
                }
                (set, false)
            }
            _ => (Set::new(), false),
        },
    }
}

/// Every item is a member; items are descended unless their name occurs
/// more than once, in which case the name alone is recorded.
fn list_items(items: &[Value], item_ty: Ty<'static>, kind: ListKind, named: bool) -> Set {
    let elements = item_elements(kind, item_ty, items);
    let mut seen = BTreeSet::new();
    let mut duplicated = BTreeSet::new();
    for element in &elements {
        if !seen.insert(element) {
            duplicated.insert(element);
        }
    }
    let mut set = Set::new();
    for (element, item) in elements.iter().zip(items) {
        set.members.insert(element.clone());
        if duplicated.contains(element) {
            continue;
        }
        let (child_set, _) = below(item, item_ty, named);
        if !child_set.is_empty() {
            set.children.insert(element.clone(), child_set);
        }
    }
    set
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::{Kind, Version, schema::structural};

    fn machine_set(value: Value) -> Value {
        let ty = Ty::Object(structural(Version::V1alpha2, Kind::ProxmoxMachine));
        to_field_set(&value, ty).to_fields_v1()
    }

    #[test]
    fn leaves_items_and_map_entries() {
        let fields = machine_set(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
            "kind": "ProxmoxMachine",
            "metadata": {"name": "m", "labels": {"app": "x"}, "finalizers": ["a"]},
            "spec": {
                "tags": ["t1", "t2"],
                "network": {"networkDevices": [
                    {"name": "net0", "bridge": "vmbr0", "ipPoolRef": [{"kind": "K", "name": "p"}]}
                ]},
                "checks": {}
            }
        }));
        assert_eq!(
            fields,
            json!({
                "f:apiVersion": {},
                "f:kind": {},
                "f:metadata": {
                    "f:name": {},
                    "f:labels": {"f:app": {}},
                    "f:finalizers": {"v:\"a\"": {}}
                },
                "f:spec": {
                    "f:tags": {"v:\"t1\"": {}, "v:\"t2\"": {}},
                    "f:network": {"f:networkDevices": {"k:{\"name\":\"net0\"}": {
                        ".": {},
                        "f:name": {},
                        "f:bridge": {},
                        "f:ipPoolRef": {}
                    }}},
                    "f:checks": {}
                }
            })
        );
    }

    #[test]
    fn nulls_are_owned_and_empty_granular_lists_are_not() {
        let fields = machine_set(
            json!({"spec": {"description": null, "tags": [], "allowedNodes": ["a", "a"]}}),
        );
        assert_eq!(
            fields,
            json!({"f:spec": {"f:description": {}, "f:allowedNodes": {"v:\"a\"": {}}}})
        );
    }

    #[test]
    fn named_variant_equals_adding_named_fields_afterwards() {
        let ty = Ty::Object(structural(Version::V1alpha2, Kind::ProxmoxMachine));
        let object = json!({
            "metadata": {"name": "m", "labels": {"a": "b"}},
            "spec": {"checks": {"skipQemuGuestAgent": true}, "tags": ["x"],
                "network": {"networkDevices": [{"name": "net0", "routes": [{"to": "default"}]}]}}
        });
        assert_eq!(
            to_field_set_named(&object, ty),
            super::super::with_named_fields(&to_field_set(&object, ty), ty)
        );
    }
}
