//! Merging an apply configuration onto the live object (structured merge
//! with "keep the right-hand side"): the configuration's leaves, atomic
//! lists and atomic maps replace the live ones; granular maps merge field by
//! field; set and map lists merge item by item, live-only items keeping
//! their place and configured items following the configuration's order.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde_json::{Map, Value};

use super::items::item_elements;
use super::schema::{Atom, ListKind, Ty};
use crate::registry::apply::fieldpath::PathElement;

/// Stands in for a live item whose name occurs more than once.
static NULL: Value = Value::Null;

/// `config` merged onto `live`, both read with schema `ty`. `None` only when
/// both sides are absent.
pub fn merge(live: Option<&Value>, config: Option<&Value>, ty: Ty) -> Option<Value> {
    // Where a deduced node changes kind, the configuration's reading decides.
    let reading = match config {
        None => ty.atom(live),
        Some(_) => ty.atom(config),
    };
    atom(reading, ty, live, config)
}

fn leaf(live: Option<&Value>, config: Option<&Value>) -> Option<Value> {
    config.or(live).cloned()
}

fn atom(atom: Atom, ty: Ty, live: Option<&Value>, config: Option<&Value>) -> Option<Value> {
    match atom {
        Atom::Scalar => leaf(live, config),
        Atom::List { item, kind } => {
            let (l, r) = (
                live.and_then(Value::as_array),
                config.and_then(Value::as_array),
            );
            let empty = l.is_none_or(Vec::is_empty) && r.is_none_or(Vec::is_empty);
            if matches!(kind, ListKind::Atomic) || empty {
                return leaf(live, config);
            }
            let items = list(
                l.map_or(&[][..], Vec::as_slice),
                r.map_or(&[][..], Vec::as_slice),
                item,
                kind,
            );
            (!items.is_empty()).then_some(Value::Array(items))
        }
        Atom::Map { atomic } => {
            let (l, r) = (
                live.and_then(Value::as_object),
                config.and_then(Value::as_object),
            );
            let empty = l.is_none_or(Map::is_empty) && r.is_none_or(Map::is_empty);
            if atomic || empty {
                return leaf(live, config);
            }
            let keys: BTreeSet<&String> = l
                .into_iter()
                .flat_map(Map::keys)
                .chain(r.into_iter().flat_map(Map::keys))
                .collect();
            let mut out = Map::new();
            for key in keys {
                let merged = merge(
                    l.and_then(|m| m.get(key)),
                    r.and_then(|m| m.get(key)),
                    ty.field_or_deduced(key),
                );
                if let Some(value) = merged {
                    out.insert(key.clone(), value);
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
    }
}

/// Merges two lists item by item. Items only in the live list stay where
/// they are; items of the configuration come in its order, merged with the
/// live item of the same name.
fn list(live: &[Value], config: &[Value], item_ty: Ty, kind: ListKind) -> Vec<Value> {
    let config_elements = item_elements(kind, item_ty, config);
    let mut config_items: BTreeMap<&PathElement, &Value> = BTreeMap::new();
    for (element, item) in config_elements.iter().zip(config) {
        config_items.entry(element).or_insert(item);
    }
    let live_elements = item_elements(kind, item_ty, live);
    let mut live_items: BTreeMap<&PathElement, &Value> = BTreeMap::new();
    for (element, item) in live_elements.iter().zip(live) {
        live_items
            .entry(element)
            .and_modify(|seen| *seen = &NULL)
            .or_insert(item);
    }

    let mut shared: VecDeque<&PathElement> = config_elements
        .iter()
        .filter(|e| live_items.contains_key(e))
        .collect();
    let mut next_shared = shared.pop_front();
    let mut merged_config: BTreeSet<&PathElement> = BTreeSet::new();
    let mut out = Vec::with_capacity(live.len().max(config.len()));
    let (mut li, mut ri) = (0, 0);
    while li < live.len() || ri < config.len() {
        if li < live.len() && ri < config.len() {
            let element = &live_elements[li];
            if *element == config_elements[ri] {
                merged_config.insert(element);
                out.extend(merge(
                    live_items.get(element).copied(),
                    config_items.get(element).copied(),
                    item_ty,
                ));
                li += 1;
                ri += 1;
                next_shared = shared.pop_front();
                continue;
            }
            // A shared item out of the configuration's order waits for its
            // turn there.
            if config_items.contains_key(element) && next_shared.is_some_and(|n| n != element) {
                li += 1;
                continue;
            }
        }
        if li < live.len() {
            let element = &live_elements[li];
            if !config_items.contains_key(element) {
                out.extend(merge(Some(&live[li]), None, item_ty));
                li += 1;
                continue;
            }
            if merged_config.contains(element) {
                li += 1;
            }
        }
        if ri < config.len() {
            let element = &config_elements[ri];
            merged_config.insert(element);
            out.extend(merge(
                live_items.get(element).copied(),
                config_items.get(element).copied(),
                item_ty,
            ));
            ri += 1;
            if next_shared == Some(element) {
                next_shared = shared.pop_front();
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::{Kind, Version, schema::structural};

    fn merged(live: Value, config: Value) -> Option<Value> {
        let ty = Ty::Object(structural(Version::V1alpha2, Kind::ProxmoxMachine));
        merge(Some(&live), Some(&config), ty)
    }

    fn devices(names: &[&str]) -> Value {
        let list: Vec<Value> = names.iter().map(|n| json!({"name": n})).collect();
        json!({"spec": {"network": {"networkDevices": list}}})
    }

    #[test]
    fn live_only_items_keep_their_place_and_configured_items_their_order() {
        assert_eq!(
            merged(
                devices(&["net0", "net1", "net2"]),
                devices(&["net2", "net0"])
            ),
            Some(devices(&["net1", "net2", "net0"]))
        );
        assert_eq!(
            merged(devices(&["net0"]), devices(&["net3", "net0"])),
            Some(devices(&["net3", "net0"]))
        );
    }

    #[test]
    fn configured_leaves_and_atomic_lists_replace_and_maps_merge() {
        let live = json!({"spec": {"numCores": 1, "memoryMiB": 1024,
            "network": {"networkDevices": [{"name": "net0", "bridge": "a", "ipPoolRef": [{"kind": "K", "name": "p1"}, {"kind": "K", "name": "p2"}]}]}}});
        let config = json!({"spec": {"numCores": 2,
            "network": {"networkDevices": [{"name": "net0", "ipPoolRef": [{"kind": "K", "name": "p3"}]}]}}});
        assert_eq!(
            merged(live, config),
            Some(json!({"spec": {"numCores": 2, "memoryMiB": 1024,
                "network": {"networkDevices": [{"name": "net0", "bridge": "a", "ipPoolRef": [{"kind": "K", "name": "p3"}]}]}}}))
        );
    }

    #[test]
    fn null_replaces_a_scalar_but_merges_nothing_into_a_struct() {
        let live = json!({"spec": {"description": "x", "checks": {"skipQemuGuestAgent": true}}});
        let config = json!({"spec": {"description": null, "checks": null}});
        assert_eq!(
            merged(live, config),
            Some(json!({"spec": {"description": null, "checks": {"skipQemuGuestAgent": true}}}))
        );
    }
}
