//! Validation ratcheting (KEP-4008, as kube-apiserver applies it to custom
//! resources since 1.30, GA in 1.33): on an update, what the schema
//! validation finds at a value that is unchanged from the stored object is not
//! held against the request, so an object stored before a rule tightened — or
//! written through the other version — can still be updated elsewhere.
//!
//! The validators walk the new object together with the stored one. A node
//! of the new object correlates with an old value as kube correlates them:
//! object properties and map entries by name, items of `map` lists by their
//! key fields. Items of `set` and atomic lists (a list without a list type is
//! atomic) do not correlate: only their list does, as a whole. A node without
//! an old value is judged by the nearest node above it that has one, so an
//! error inside an unchanged atomic list ratchets while one inside a changed
//! list does not.

use serde_json::Value;

use crate::api::schema::{ListType, Structural};

/// Where one node of the new object stands against the stored object during
/// a validation walk. `Correlation::default()` has no stored object (a
/// create): nothing ratchets and transition rules have no old value.
#[derive(Clone, Copy, Debug, Default)]
pub struct Correlation<'a> {
    /// The node's own old value, when it correlates with one.
    old: Option<&'a Value>,
    /// The nearest node at or above this one that has an old value.
    anchor: Option<Anchor<'a>>,
}

/// A correlated pair: a new value, its old value and their schema.
#[derive(Clone, Copy, Debug)]
struct Anchor<'a> {
    new: &'a Value,
    old: &'a Value,
    schema: &'a Structural,
}

impl<'a> Correlation<'a> {
    /// The root of an object: `new` against the stored `old` (none on create).
    pub fn root(new: &'a Value, old: Option<&'a Value>, schema: &'a Structural) -> Self {
        Self::node(new, old, schema, None)
    }

    fn node(
        new: &'a Value,
        old: Option<&'a Value>,
        schema: &'a Structural,
        above: Option<Anchor<'a>>,
    ) -> Self {
        match old {
            Some(old) => Correlation {
                old: Some(old),
                anchor: Some(Anchor { new, old, schema }),
            },
            None => Correlation {
                old: None,
                anchor: above,
            },
        }
    }

    /// The node's old value (`oldSelf` of transition rules), if it has one.
    pub fn old(&self) -> Option<&'a Value> {
        self.old
    }

    /// The property or map entry `key` of this object node, whose new value
    /// is `new` with schema `schema`.
    pub fn child(&self, key: &str, new: &'a Value, schema: &'a Structural) -> Self {
        let old = self.old.and_then(|old| old.as_object()?.get(key));
        Self::node(new, old, schema, self.anchor)
    }

    /// The item `new` of this list node, whose schema is `list`.
    pub fn item(&self, list: &'a Structural, new: &'a Value) -> Self {
        let Some(item_schema) = list.items.as_deref() else {
            return Correlation {
                old: None,
                anchor: self.anchor,
            };
        };
        let old = self.old.and_then(|old| correlated_item(list, new, old));
        Self::node(new, old, item_schema, self.anchor)
    }

    /// Whether an error found at this node is ratcheted: the nearest
    /// correlated node at or above it is unchanged.
    pub fn unchanged(&self) -> bool {
        self.anchor
            .is_some_and(|a| unchanged(a.new, a.old, a.schema))
    }
}

/// The item of the old list `old` that `item` correlates with: only items of
/// `map` lists correlate, by all their key fields.
fn correlated_item<'a>(list: &Structural, item: &Value, old: &'a Value) -> Option<&'a Value> {
    if list.list_type != Some(ListType::Map) {
        return None;
    }
    let same_keys = |candidate: &Value| {
        list.list_map_keys
            .iter()
            .all(|key| match (item.get(key), candidate.get(key)) {
                (Some(new), Some(old)) => new == old,
                _ => false,
            })
    };
    old.as_array()?
        .iter()
        .find(|candidate| same_keys(candidate))
}

/// Whether `new` is unchanged from `old`: equal, except that a `map` list is
/// compared item by item through its keys, so reordering its items is no
/// change (kube's correlated DeepEqual).
fn unchanged(new: &Value, old: &Value, schema: &Structural) -> bool {
    match (new, old) {
        (Value::Object(new_map), Value::Object(old_map)) => {
            new_map.len() == old_map.len()
                && new_map.iter().all(|(key, new_child)| {
                    let Some(old_child) = old_map.get(key) else {
                        return false;
                    };
                    match schema
                        .property(key)
                        .or(schema.additional_properties.as_deref())
                    {
                        Some(sub) => unchanged(new_child, old_child, sub),
                        None => new_child == old_child,
                    }
                })
        }
        (Value::Array(new_items), Value::Array(old_items))
            if schema.list_type == Some(ListType::Map) =>
        {
            let Some(item_schema) = schema.items.as_deref() else {
                return new == old;
            };
            new_items.len() == old_items.len()
                && new_items.iter().all(|item| {
                    correlated_item(schema, item, old)
                        .is_some_and(|old_item| unchanged(item, old_item, item_schema))
                })
        }
        _ => new == old,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::Correlation;
    use crate::api::schema::Structural;

    /// A schema with a map list, a set, an atomic list, a map and a scalar.
    fn schema() -> Structural {
        Structural::from_json(&json!({
            "type": "object",
            "properties": {
                "devices": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": { "type": "string" },
                            "mtu": { "type": "integer" }
                        }
                    }
                },
                "tags": {
                    "type": "array",
                    "x-kubernetes-list-type": "set",
                    "items": { "type": "string" }
                },
                "routes": {
                    "type": "array",
                    "items": { "type": "object", "properties": { "to": { "type": "string" } } }
                },
                "labels": {
                    "type": "object",
                    "additionalProperties": { "type": "string" }
                },
                "cores": { "type": "integer" }
            }
        }))
        .expect("schema")
    }

    fn old() -> Value {
        json!({
            "devices": [{ "name": "net0", "mtu": 100 }, { "name": "net1", "mtu": 1500 }],
            "tags": ["a", "b"],
            "routes": [{ "to": "x" }, { "to": "y" }],
            "labels": { "team": "a" },
            "cores": 4
        })
    }

    /// Whether an error at `pointer` (a JSON pointer into `new`) ratchets,
    /// walking down from the root as the validators do.
    fn ratchets(new: &Value, old: Option<&Value>, pointer: &str) -> bool {
        let schema = schema();
        let mut at = Correlation::root(new, old, &schema);
        let mut value = new;
        let mut node = &schema;
        for token in pointer.split('/').skip(1) {
            if let Some(items) = value.as_array() {
                let item = &items[token.parse::<usize>().expect("an index")];
                at = at.item(node, item);
                node = node.items.as_deref().expect("items");
                value = item;
            } else {
                let child = &value[token];
                node = node
                    .property(token)
                    .or(node.additional_properties.as_deref())
                    .expect("a known field");
                at = at.child(token, child, node);
                value = child;
            }
        }
        at.unchanged()
    }

    #[test]
    fn nothing_ratchets_on_create() {
        assert!(!ratchets(&old(), None, "/cores"));
        assert!(!ratchets(&old(), None, "/devices/0/mtu"));
    }

    #[test]
    fn an_unchanged_property_ratchets_beside_a_changed_one() {
        let mut new = old();
        new["cores"] = json!(6);
        assert!(!ratchets(&new, Some(&old()), "/cores"));
        assert!(ratchets(&new, Some(&old()), "/devices/0/mtu"));
        assert!(ratchets(&new, Some(&old()), "/labels/team"));
        assert!(!ratchets(&new, Some(&old()), ""), "the root changed");
    }

    #[test]
    fn map_list_items_correlate_by_key_not_position() {
        let mut new = old();
        new["devices"] = json!([
            { "name": "net2", "mtu": 9000 },
            { "name": "net1", "mtu": 1400 },
            { "name": "net0", "mtu": 100 }
        ]);
        assert!(!ratchets(&new, Some(&old()), "/devices/0"), "a new device");
        assert!(!ratchets(&new, Some(&old()), "/devices/1/mtu"), "changed");
        assert!(ratchets(&new, Some(&old()), "/devices/2/mtu"), "moved only");
    }

    #[test]
    fn a_reordered_map_list_is_unchanged() {
        let mut new = old();
        new["devices"] = json!([{ "name": "net1", "mtu": 1500 }, { "name": "net0", "mtu": 100 }]);
        assert!(ratchets(&new, Some(&old()), "/devices"));
    }

    #[test]
    fn set_items_ratchet_only_with_their_whole_set() {
        let mut new = old();
        new["tags"] = json!(["b", "a"]);
        assert!(
            !ratchets(&new, Some(&old()), "/tags/1"),
            "a reordered set changed"
        );
        new["tags"] = json!(["a", "b", "c"]);
        assert!(
            !ratchets(&new, Some(&old()), "/tags/0"),
            "an item was added"
        );
        assert!(ratchets(&old(), Some(&old()), "/tags/0"));
    }

    #[test]
    fn atomic_lists_are_not_descended() {
        let mut new = old();
        new["routes"][1]["to"] = json!("z");
        assert!(
            !ratchets(&new, Some(&old()), "/routes/0/to"),
            "the list changed as a whole"
        );
        assert!(ratchets(&old(), Some(&old()), "/routes/0/to"));
    }

    #[test]
    fn map_entries_correlate_by_key() {
        let mut new = old();
        new["labels"] = json!({ "team": "a", "tier": "x" });
        assert!(ratchets(&new, Some(&old()), "/labels/team"));
        assert!(!ratchets(&new, Some(&old()), "/labels/tier"));
        assert!(!ratchets(&new, Some(&old()), "/labels"));
    }
}
