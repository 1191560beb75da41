//! Merging an apply configuration onto the live object (structured merge
//! with "keep the right-hand side"): the configuration's leaves, atomic
//! lists and atomic maps replace the live ones; granular maps merge field by
//! field; set and map lists merge item by item, live-only items keeping
//! their place and configured items following the configuration's order.
//!
//! The merge happens in place on a copy of the live object, so what the
//! configuration does not touch is moved, not rebuilt.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde_json::{Map, Value};

use super::items::{ItemName, item_names};
use super::schema::{Atom, ListKind, Ty};

/// `config` merged onto `live`, both read with schema `ty`; `None` only
/// when both are absent. The configuration must have passed
/// [`super::validate_config`] (no item name repeats in it).
pub fn merge(live: Option<&Value>, config: Option<&Value>, ty: Ty) -> Option<Value> {
    match (live, config) {
        (live, None) => live.cloned(),
        (None, Some(config)) => Some(config.clone()),
        (Some(live), Some(config)) => {
            let mut merged = live.clone();
            merge_into(&mut merged, config, ty);
            Some(merged)
        }
    }
}

/// Merges `config` into `live` in place (see [`merge`]). Where a deduced
/// node changes kind, the configuration's reading decides.
pub fn merge_into(live: &mut Value, config: &Value, ty: Ty) {
    match ty.atom(Some(config)) {
        Atom::Scalar => *live = config.clone(),
        Atom::List { item, kind } => {
            let live_empty = live.as_array().is_none_or(Vec::is_empty);
            let config_items = config.as_array().filter(|c| !c.is_empty());
            match (config_items, live.as_array_mut()) {
                _ if matches!(kind, ListKind::Atomic) => *live = config.clone(),
                (None, _) if live_empty => *live = config.clone(),
                // Nothing configured: the live items stay.
                (None, _) => {}
                (Some(config_items), Some(live_items)) if !live_empty => {
                    merge_list(live_items, config_items, item, kind);
                }
                (Some(_), _) => *live = config.clone(),
            }
        }
        Atom::Map { atomic } => {
            let live_empty = live.as_object().is_none_or(Map::is_empty);
            let config_fields = config.as_object().filter(|c| !c.is_empty());
            match (config_fields, live.as_object_mut()) {
                _ if atomic => *live = config.clone(),
                (None, _) if live_empty => *live = config.clone(),
                // Null or `{}` merges nothing into a map that has fields.
                (None, _) => {}
                (Some(config_fields), Some(live_fields)) if !live_empty => {
                    for (key, child) in config_fields {
                        match live_fields.get_mut(key) {
                            Some(existing) => merge_into(existing, child, ty.field_or_deduced(key)),
                            None => {
                                live_fields.insert(key.clone(), child.clone());
                            }
                        }
                    }
                }
                (Some(_), _) => *live = config.clone(),
            }
        }
    }
}

/// Where a live item of a given name is.
#[derive(Clone, Copy)]
enum LiveItem {
    /// At this position.
    At(usize),
    /// The name occurs more than once: no single item stands for it.
    Repeated,
}

/// One item of the merged list.
enum Step {
    /// A live item the configuration does not name, unchanged.
    Keep(usize),
    /// A configured item, merged with the live item of its name if any.
    Merge(Option<LiveItem>, usize),
}

/// Merges two non-empty lists item by item, moving the live items.
fn merge_list(live: &mut Vec<Value>, config: &[Value], item_ty: Ty, kind: ListKind) {
    let steps = plan(live, config, item_ty, kind);
    let mut old = std::mem::take(live);
    live.reserve(steps.len());
    for step in steps {
        let merged = match step {
            Step::Keep(i) => old.get_mut(i).map(std::mem::take).unwrap_or_default(),
            Step::Merge(from, c) => {
                let Some(config_item) = config.get(c) else {
                    continue;
                };
                match from {
                    Some(LiveItem::At(i)) => {
                        let mut item = old.get_mut(i).map(std::mem::take).unwrap_or_default();
                        merge_into(&mut item, config_item, item_ty);
                        item
                    }
                    Some(LiveItem::Repeated) => {
                        let mut item = Value::Null;
                        merge_into(&mut item, config_item, item_ty);
                        item
                    }
                    None => config_item.clone(),
                }
            }
        };
        live.push(merged);
    }
}

/// The order of the merged list. Items only in the live list stay where
/// they are; items of the configuration come in its order, merged with the
/// live item of the same name; a shared item out of the configuration's
/// order waits for its turn there.
fn plan(live: &[Value], config: &[Value], item_ty: Ty, kind: ListKind) -> Vec<Step> {
    let config_names = item_names(kind, item_ty, config);
    let mut config_items: BTreeMap<&ItemName, usize> = BTreeMap::new();
    for (c, name) in config_names.iter().enumerate() {
        config_items.entry(name).or_insert(c);
    }
    let live_names = item_names(kind, item_ty, live);
    let mut live_items: BTreeMap<&ItemName, LiveItem> = BTreeMap::new();
    for (i, name) in live_names.iter().enumerate() {
        live_items
            .entry(name)
            .and_modify(|seen| *seen = LiveItem::Repeated)
            .or_insert(LiveItem::At(i));
    }
    let configured = |name: &ItemName| {
        Step::Merge(
            live_items.get(name).copied(),
            config_items.get(name).copied().unwrap_or_default(),
        )
    };

    let mut shared: VecDeque<&ItemName> = config_names
        .iter()
        .filter(|n| live_items.contains_key(n))
        .collect();
    let mut next_shared = shared.pop_front();
    let mut merged_config: BTreeSet<&ItemName> = BTreeSet::new();
    let mut steps = Vec::with_capacity(live.len().max(config.len()));
    let (mut li, mut ri) = (0, 0);
    while li < live.len() || ri < config.len() {
        if li < live.len() && ri < config.len() {
            let name = &live_names[li];
            if *name == config_names[ri] {
                merged_config.insert(name);
                steps.push(configured(name));
                li += 1;
                ri += 1;
                next_shared = shared.pop_front();
                continue;
            }
            if config_items.contains_key(name) && next_shared.is_some_and(|n| n != name) {
                li += 1;
                continue;
            }
        }
        if li < live.len() {
            let name = &live_names[li];
            if !config_items.contains_key(name) {
                steps.push(Step::Keep(li));
                li += 1;
                continue;
            }
            if merged_config.contains(name) {
                li += 1;
            }
        }
        if ri < config.len() {
            let name = &config_names[ri];
            merged_config.insert(name);
            steps.push(configured(name));
            ri += 1;
            if next_shared == Some(name) {
                next_shared = shared.pop_front();
            }
        }
    }
    steps
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
