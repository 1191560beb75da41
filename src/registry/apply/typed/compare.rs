//! What changed between two objects of one schema (structured-merge-diff's
//! `Compare`): the paths removed, modified and added. A node that appears
//! or disappears is listed itself as well as everything below it; scalars,
//! atomic lists and maps, and empty ones are compared as whole values.

use std::collections::BTreeMap;
use std::mem::discriminant;

use serde_json::{Map, Value};

use super::items::{ItemName, item_names};
use super::schema::{Atom, ListKind, Ty};
use crate::registry::apply::fieldpath::{PathElement, Set, value::equal};

/// The difference between an old and a new object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Comparison {
    /// Paths in the old object only.
    pub removed: Set,
    /// Leaves whose value changed.
    pub modified: Set,
    /// Paths in the new object only.
    pub added: Set,
}

impl Comparison {
    /// Whether nothing changed.
    pub fn is_same(&self) -> bool {
        self.removed.is_empty() && self.modified.is_empty() && self.added.is_empty()
    }

    /// Applies `filter` to each of the three sets.
    pub fn filter(&mut self, filter: impl Fn(&mut Set)) {
        filter(&mut self.removed);
        filter(&mut self.modified);
        filter(&mut self.added);
    }

    /// The paths modified or added.
    pub fn modified_or_added(&self) -> Set {
        self.modified.union(&self.added)
    }
}

/// Compares `old` with `new`, both read with schema `ty`.
pub fn compare(old: &Value, new: &Value, ty: Ty) -> Comparison {
    let mut walker = Walker {
        path: Vec::new(),
        out: Comparison::default(),
    };
    walker.node(Some(old), Some(new), ty);
    walker.out
}

/// A step of the walker's path, borrowed from the objects; made into an
/// owned path only where something changed.
#[derive(Clone)]
enum Step<'a> {
    Field(&'a str),
    Item(ItemName<'a>),
}

struct Walker<'a> {
    path: Vec<Step<'a>>,
    out: Comparison,
}

/// A value as a map or list, if it is one (null and values of the wrong
/// type count as absent).
fn as_map(value: Option<&Value>) -> Option<&Map<String, Value>> {
    value.and_then(Value::as_object)
}

fn as_list(value: Option<&Value>) -> Option<&Vec<Value>> {
    value.and_then(Value::as_array)
}

#[derive(Clone, Copy)]
enum Mark {
    Removed,
    Modified,
    Added,
}

impl<'a> Walker<'a> {
    fn mark(&mut self, mark: Mark) {
        let path: Vec<PathElement> = self
            .path
            .iter()
            .map(|step| match step {
                Step::Field(name) => PathElement::field(name),
                Step::Item(name) => name.to_element(),
            })
            .collect();
        let set = match mark {
            Mark::Removed => &mut self.out.removed,
            Mark::Modified => &mut self.out.modified,
            Mark::Added => &mut self.out.added,
        };
        set.insert(&path);
    }

    fn node(&mut self, old: Option<&'a Value>, new: Option<&'a Value>, ty: Ty<'a>) {
        let old_atom = ty.atom(old);
        let new_atom = ty.atom(new);
        let leaf = if new.is_none() {
            self.atom(old_atom, ty, old, new)
        } else if old.is_none() || discriminant(&old_atom) == discriminant(&new_atom) {
            self.atom(new_atom, ty, old, new)
        } else {
            // A deduced node whose value changed kind: both readings count.
            self.atom(old_atom, ty, old, new);
            self.atom(new_atom, ty, old, new)
        };
        if !leaf {
            if old.is_none() {
                self.mark(Mark::Added);
            } else if new.is_none() {
                self.mark(Mark::Removed);
            }
        }
    }

    /// Compares under one reading; returns whether the node was a leaf.
    fn atom(
        &mut self,
        atom: Atom<'a>,
        ty: Ty<'a>,
        old: Option<&'a Value>,
        new: Option<&'a Value>,
    ) -> bool {
        match atom {
            Atom::Scalar => self.leaf(old, new),
            Atom::List { item, kind } => {
                let (l, r) = (as_list(old), as_list(new));
                let empty = l.is_none_or(Vec::is_empty) && r.is_none_or(Vec::is_empty);
                if matches!(kind, ListKind::Atomic) || empty {
                    return self.leaf(old, new);
                }
                self.list(
                    l.map_or(&[][..], Vec::as_slice),
                    r.map_or(&[][..], Vec::as_slice),
                    item,
                    kind,
                );
                false
            }
            Atom::Map { atomic } => {
                let (l, r) = (as_map(old), as_map(new));
                let empty = l.is_none_or(Map::is_empty) && r.is_none_or(Map::is_empty);
                if atomic || empty {
                    return self.leaf(old, new);
                }
                self.map(l, r, ty);
                false
            }
        }
    }

    fn leaf(&mut self, old: Option<&Value>, new: Option<&Value>) -> bool {
        match (old, new) {
            (None, _) => self.mark(Mark::Added),
            (_, None) => self.mark(Mark::Removed),
            (Some(l), Some(r)) if !equal(l, r) => self.mark(Mark::Modified),
            _ => {}
        }
        true
    }

    fn field(&mut self, key: &'a str, old: Option<&'a Value>, new: Option<&'a Value>, ty: Ty<'a>) {
        self.path.push(Step::Field(key));
        self.node(old, new, ty.field_or_deduced(key));
        self.path.pop();
    }

    fn map(
        &mut self,
        old: Option<&'a Map<String, Value>>,
        new: Option<&'a Map<String, Value>>,
        ty: Ty<'a>,
    ) {
        for (key, child) in old.into_iter().flatten() {
            self.field(key, Some(child), new.and_then(|m| m.get(key)), ty);
        }
        for (key, child) in new.into_iter().flatten() {
            if !old.is_some_and(|m| m.contains_key(key)) {
                self.field(key, None, Some(child), ty);
            }
        }
    }

    /// Items are matched by name. A name that occurs more than once on a
    /// side is compared as a whole: equal repeats are unchanged, otherwise
    /// the item is modified, removed or added as a unit.
    fn list(&mut self, old: &'a [Value], new: &'a [Value], item_ty: Ty<'a>, kind: ListKind<'a>) {
        let mut order: Vec<ItemName<'a>> = Vec::new();
        let mut olds: BTreeMap<ItemName<'a>, Vec<&'a Value>> = BTreeMap::new();
        for (name, item) in item_names(kind, item_ty, old).into_iter().zip(old) {
            let entry = olds.entry(name.clone()).or_default();
            if entry.is_empty() {
                order.push(name);
            }
            entry.push(item);
        }
        let mut news: BTreeMap<ItemName<'a>, Vec<&'a Value>> = BTreeMap::new();
        for (name, item) in item_names(kind, item_ty, new).into_iter().zip(new) {
            let first_here = !news.contains_key(&name);
            if first_here && !olds.contains_key(&name) {
                order.push(name.clone());
            }
            news.entry(name).or_default().push(item);
        }
        for name in order {
            let l = olds.get(&name).map_or(&[][..], Vec::as_slice);
            let r = news.get(&name).map_or(&[][..], Vec::as_slice);
            self.path.push(Step::Item(name));
            match (l.len(), r.len()) {
                (0..=1, 0..=1) => self.node(l.first().copied(), r.first().copied(), item_ty),
                (2.., 2..) => {
                    let same = l.len() == r.len() && l.iter().zip(r).all(|(a, b)| equal(a, b));
                    if !same {
                        self.mark(Mark::Modified);
                    }
                }
                (2.., _) => {
                    if let Some(single) = r.first() {
                        self.node(None, Some(single), item_ty);
                    }
                    self.mark(Mark::Removed);
                }
                (_, _) => {
                    if let Some(single) = l.first() {
                        self.node(Some(single), None, item_ty);
                    }
                    self.mark(Mark::Added);
                }
            }
            self.path.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::{Kind, Version, schema::structural};

    fn shown(set: &Set) -> Vec<String> {
        set.paths().iter().map(ToString::to_string).collect()
    }

    fn machine() -> Ty<'static> {
        Ty::Object(structural(Version::V1alpha2, Kind::ProxmoxMachine))
    }

    #[test]
    fn leaves_change_and_new_nodes_are_added_with_what_they_hold() {
        let old = json!({"spec": {"numCores": 1, "memoryMiB": 1024}});
        let new = json!({"spec": {"numCores": 2, "memoryMiB": 1024.0, "checks": {"skipQemuGuestAgent": true}}});
        let c = compare(&old, &new, machine());
        assert_eq!(shown(&c.modified), [".spec.numCores"]);
        assert_eq!(
            shown(&c.added),
            [".spec.checks", ".spec.checks.skipQemuGuestAgent"]
        );
        assert!(c.removed.is_empty());
        assert!(compare(&new, &new, machine()).is_same());
    }

    #[test]
    fn list_map_items_are_matched_by_key() {
        let devices = |list: Value| json!({"spec": {"network": {"networkDevices": list}}});
        let old =
            devices(json!([{"name": "net0", "bridge": "a"}, {"name": "net1", "bridge": "b"}]));
        let new =
            devices(json!([{"name": "net1", "bridge": "b"}, {"name": "net0", "bridge": "c"}]));
        let c = compare(&old, &new, machine());
        assert_eq!(
            shown(&c.modified),
            [r#".spec.network.networkDevices[name="net0"].bridge"#]
        );
        let gone = compare(
            &old,
            &devices(json!([{"name": "net0", "bridge": "a"}])),
            machine(),
        );
        assert_eq!(
            shown(&gone.removed),
            [
                r#".spec.network.networkDevices[name="net1"]"#,
                r#".spec.network.networkDevices[name="net1"].bridge"#,
                r#".spec.network.networkDevices[name="net1"].name"#
            ]
        );
    }
}
