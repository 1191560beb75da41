//! Making the struct fields on the way to a set's paths members themselves
//! (structured-merge-diff's `EnsureNamedFieldsAreMembers`), so that
//! removing the set removes a struct field entirely, not only what it held.

use super::schema::{Atom, Ty};
use crate::registry::apply::fieldpath::{PathElement, Set};

/// `set` with every declared struct field that has paths below it added as
/// a member.
pub fn with_named_fields(set: &Set, ty: Ty) -> Set {
    below(set, Some(ty))
}

fn below(set: &Set, ty: Option<Ty>) -> Set {
    let mut out = Set {
        members: set.members.clone(),
        children: Default::default(),
    };
    for (element, child) in &set.children {
        let child_ty = match (element, ty.map(|t| (t, t.atom(None)))) {
            (PathElement::Field(name), Some((t, Atom::Map { .. }))) => {
                if t.declares(name) {
                    out.members.insert(element.clone());
                }
                t.field(name)
            }
            (PathElement::Key(_), Some((_, Atom::List { item, .. }))) => Some(item),
            _ => None,
        };
        out.children.insert(element.clone(), below(child, child_ty));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Kind, Version, schema::structural};
    use crate::registry::apply::fieldpath::Path;

    #[test]
    fn struct_fields_on_the_way_become_members_but_map_keys_do_not() {
        let ty = Ty::Object(structural(Version::V1alpha2, Kind::ProxmoxMachine));
        let set = Set::from_paths(&[
            Path::fields(&["spec", "checks", "skipQemuGuestAgent"]),
            Path::fields(&["metadata", "labels", "app"]),
        ]);
        let shown: Vec<String> = with_named_fields(&set, ty)
            .paths()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            shown,
            [
                ".metadata",
                ".spec",
                ".metadata.labels",
                ".metadata.labels.app",
                ".spec.checks",
                ".spec.checks.skipQemuGuestAgent"
            ]
        );
    }
}
