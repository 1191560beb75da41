//! Removing a set of paths from an object (structured-merge-diff's
//! `RemoveItems`): a member path removes the whole value there, a path with
//! paths below it is descended into.

use serde_json::{Map, Value};

use super::items::item_elements;
use super::schema::{Atom, ListKind, Ty};
use crate::registry::apply::fieldpath::{PathElement, Set};

/// `value` (the root of an object read with `ty`) without the paths in
/// `remove`.
pub fn remove_items(value: &Value, remove: &Set, ty: Ty) -> Value {
    remove_below(value, remove, ty).unwrap_or_else(|| Value::Object(Map::new()))
}

/// The value without the paths below it in `remove`; `None` when a map or
/// list lost all its entries, so that its parent drops it. (The Go code
/// leaves `null` there, which no schema accepts.) Scalars, atomic values and
/// values of the wrong type are kept whole: nothing below them can be
/// removed.
fn remove_below(value: &Value, remove: &Set, ty: Ty) -> Option<Value> {
    match (ty.atom(Some(value)), value) {
        (
            Atom::List {
                item,
                kind: kind @ (ListKind::Set | ListKind::Map(_)),
            },
            Value::Array(items),
        ) if !items.is_empty() => {
            let kept: Vec<Value> = item_elements(kind, item, items)
                .iter()
                .zip(items)
                .filter(|(element, _)| !remove.has_member(element))
                .map(|(element, child)| match remove.child(element) {
                    Some(below) => {
                        remove_below(child, below, item).unwrap_or_else(|| empty_like(child))
                    }
                    None => child.clone(),
                })
                .collect();
            (!kept.is_empty()).then_some(Value::Array(kept))
        }
        (Atom::Map { atomic: false }, Value::Object(fields)) if !fields.is_empty() => {
            let mut kept = Map::new();
            for (name, child) in fields {
                let element = PathElement::field(name);
                if remove.has_member(&element) {
                    continue;
                }
                let child = match remove.child(&element) {
                    Some(below) => remove_below(child, below, ty.field_or_deduced(name)),
                    None => Some(child.clone()),
                };
                if let Some(child) = child {
                    kept.insert(name.clone(), child);
                }
            }
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        _ => Some(value.clone()),
    }
}

/// A list item that lost every field stays in the list, empty.
fn empty_like(value: &Value) -> Value {
    match value {
        Value::Array(_) => Value::Array(Vec::new()),
        _ => Value::Object(Map::new()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::{Kind, Version, schema::structural};
    use crate::registry::apply::fieldpath::Path;

    fn removed(value: Value, paths: &[Path]) -> Value {
        let ty = Ty::Object(structural(Version::V1alpha2, Kind::ProxmoxMachine));
        remove_items(&value, &Set::from_paths(paths), ty)
    }

    #[test]
    fn members_go_whole_and_emptied_maps_and_lists_go_with_them() {
        let object = json!({"spec": {"numCores": 2, "checks": {"skipQemuGuestAgent": true},
            "network": {"networkDevices": [{"name": "net0"}, {"name": "net1", "bridge": "b"}]}}});
        let net0 = PathElement::key(vec![("name".into(), json!("net0"))]);
        let net1 = PathElement::key(vec![("name".into(), json!("net1"))]);
        let mut device = Path::fields(&["spec", "network", "networkDevices"]);
        device.0.push(net0);
        let mut bridge = Path::fields(&["spec", "network", "networkDevices"]);
        bridge.0.extend([net1, PathElement::field("bridge")]);
        let after = removed(
            object,
            &[
                Path::fields(&["spec", "numCores"]),
                Path::fields(&["spec", "checks", "skipQemuGuestAgent"]),
                device,
                bridge,
            ],
        );
        assert_eq!(
            after,
            json!({"spec": {"network": {"networkDevices": [{"name": "net1"}]}}})
        );
    }

    #[test]
    fn removing_everything_leaves_an_empty_object() {
        assert_eq!(
            removed(json!({"spec": {"numCores": 2}}), &[Path::fields(&["spec"])]),
            json!({})
        );
    }
}
