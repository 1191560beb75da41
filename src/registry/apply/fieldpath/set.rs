//! Sets of field paths: what a manager owns, what changed between two
//! objects. A set is a tree: the elements that are members at this level
//! and, per element, the set below it.

use std::collections::{BTreeMap, BTreeSet};

use super::element::{Path, PathElement};

/// A set of field paths. Never holds an empty child set, so equal sets are
/// equal structurally.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Set {
    pub(crate) members: BTreeSet<PathElement>,
    pub(crate) children: BTreeMap<PathElement, Set>,
}

impl Set {
    /// The empty set.
    pub fn new() -> Set {
        Set::default()
    }

    /// A set of the given paths.
    pub fn from_paths<'a>(paths: impl IntoIterator<Item = &'a Path>) -> Set {
        let mut set = Set::new();
        for path in paths {
            set.insert(&path.0);
        }
        set
    }

    /// Adds a path; the empty path is not a member of any set.
    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            // Most paths go through an existing child: clone the element only for a new one.
            [first, rest @ ..] => match self.children.get_mut(first) {
                Some(child) => child.insert(rest),
                None => self.children.entry(first.clone()).or_default().insert(rest),
            },
        }
    }

    /// Whether the path is a member.
    pub fn has(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    /// Whether the set has no member at any depth.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.values().all(Set::is_empty)
    }

    /// The number of member paths.
    pub fn len(&self) -> usize {
        self.members.len() + self.children.values().map(Set::len).sum::<usize>()
    }

    /// The members directly at this level.
    pub fn members(&self) -> impl Iterator<Item = &PathElement> {
        self.members.iter()
    }

    /// Whether `element` is a member at this level.
    pub fn has_member(&self, element: &PathElement) -> bool {
        self.members.contains(element)
    }

    /// The set below `element`, if any path goes through it.
    pub fn child(&self, element: &PathElement) -> Option<&Set> {
        self.children.get(element)
    }

    /// The elements that have paths below them, with their sets.
    pub fn children(&self) -> impl Iterator<Item = (&PathElement, &Set)> {
        self.children.iter()
    }

    /// Adds every path of `other`.
    pub fn union_with(&mut self, other: &Set) {
        self.members.extend(other.members.iter().cloned());
        for (element, set) in &other.children {
            self.children
                .entry(element.clone())
                .or_default()
                .union_with(set);
        }
    }

    /// The paths in either set.
    pub fn union(&self, other: &Set) -> Set {
        let mut out = self.clone();
        out.union_with(other);
        out
    }

    /// The paths in both sets.
    pub fn intersection(&self, other: &Set) -> Set {
        let members = self.members.intersection(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(element, set)| {
                let common = set.intersection(other.children.get(element)?);
                (!common.is_empty()).then(|| (element.clone(), common))
            })
            .collect();
        Set { members, children }
    }

    /// The paths in `self` but not in `other` (a member of `other` does not
    /// remove the paths below it).
    pub fn difference(&self, other: &Set) -> Set {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(element, set)| match other.children.get(element) {
                None => Some((element.clone(), set.clone())),
                Some(theirs) => {
                    let rest = set.difference(theirs);
                    (!rest.is_empty()).then(|| (element.clone(), rest))
                }
            })
            .collect();
        Set { members, children }
    }

    /// Removes the paths of `other` (as [`Set::difference`]), in place: the
    /// work is proportional to `other`.
    pub fn remove_all(&mut self, other: &Set) {
        for member in &other.members {
            self.members.remove(member);
        }
        for (element, theirs) in &other.children {
            if let Some(mine) = self.children.get_mut(element) {
                mine.remove_all(theirs);
                if mine.is_empty() {
                    self.children.remove(element);
                }
            }
        }
    }

    /// Like [`Set::difference`], but a member of `other` also removes every
    /// path below it.
    pub fn recursive_difference(&self, other: &Set) -> Set {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter(|(element, _)| !other.members.contains(element))
            .filter_map(|(element, set)| match other.children.get(element) {
                None => Some((element.clone(), set.clone())),
                Some(theirs) => {
                    let rest = set.recursive_difference(theirs);
                    (!rest.is_empty()).then(|| (element.clone(), rest))
                }
            })
            .collect();
        Set { members, children }
    }

    /// Keeps only the top-level members and subtrees whose element passes
    /// `keep`.
    pub fn retain_top_level(&mut self, mut keep: impl FnMut(&PathElement) -> bool) {
        self.members.retain(&mut keep);
        self.children.retain(|element, _| keep(element));
    }

    /// Every member path, in order.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect_paths(&mut Vec::new(), &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<Path>) {
        for member in &self.members {
            let mut path = prefix.clone();
            path.push(member.clone());
            out.push(Path(path));
        }
        for (element, set) in &self.children {
            prefix.push(element.clone());
            set.collect_paths(prefix, out);
            prefix.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(paths: &[&[&str]]) -> Set {
        let paths: Vec<Path> = paths.iter().map(|p| Path::fields(p)).collect();
        Set::from_paths(&paths)
    }

    #[test]
    fn union_intersection_difference() {
        let a = set(&[&["spec", "a"], &["spec", "b"], &["spec"]]);
        let b = set(&[&["spec", "b"], &["spec", "c"]]);
        assert_eq!(
            a.union(&b),
            set(&[&["spec"], &["spec", "a"], &["spec", "b"], &["spec", "c"]])
        );
        assert_eq!(a.intersection(&b), set(&[&["spec", "b"]]));
        let mut in_place = a.clone();
        in_place.remove_all(&b);
        assert_eq!(in_place, a.difference(&b));
        assert_eq!(a.difference(&b), set(&[&["spec"], &["spec", "a"]]));
        assert!(a.difference(&a).is_empty());
        assert_eq!(a.difference(&a), Set::new());
    }

    #[test]
    fn recursive_difference_removes_subtrees_of_members() {
        let a = set(&[&["status", "x"], &["spec", "a"]]);
        let ignore = set(&[&["status"]]);
        assert_eq!(a.difference(&ignore), a);
        assert_eq!(a.recursive_difference(&ignore), set(&[&["spec", "a"]]));
    }

    #[test]
    fn has_and_paths() {
        let a = set(&[&["spec", "a"], &["metadata"]]);
        assert!(a.has(&Path::fields(&["spec", "a"]).0));
        assert!(!a.has(&Path::fields(&["spec"]).0));
        assert_eq!(a.len(), 2);
        let shown: Vec<String> = a.paths().iter().map(Path::to_string).collect();
        assert_eq!(shown, [".metadata", ".spec.a"]);
    }
}
