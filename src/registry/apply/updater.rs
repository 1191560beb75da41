//! Structured-merge-diff's `Updater`: how a write changes who owns what.
//!
//! An update takes every field it changed from the other managers (they
//! lose what was modified or removed) and adds it to its own manager. An
//! apply merges its configuration onto the live object, removes the fields
//! its manager applied last time and no longer applies unless someone else
//! owns them, then checks that no field owned by another manager changes
//! (a conflict) unless forced. Every comparison for a manager is done in
//! that manager's API version.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use serde_json::{Map, Value};

use super::conflicts::{Conflict, Conflicts};
use super::error::ApplyError;
use super::fieldpath::{Set, value::equal};
use super::managed::{ManagerId, VersionedSet};
use super::typed::{Comparison, Ty, compare, merge, remove_items, to_field_set, with_named_fields};
use super::versions::KindVersions;
use crate::api::Version;
use crate::api::resource::ConversionError;

/// The fields of every manager.
pub type Fields = BTreeMap<ManagerId, VersionedSet>;

/// The endpoint a write goes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subresource {
    /// The main resource.
    Main,
    /// The `status` subresource.
    Status,
}

impl Subresource {
    /// The name in `managedFields` (empty for the main resource).
    pub fn as_str(self) -> &'static str {
        match self {
            Subresource::Main => "",
            Subresource::Status => "status",
        }
    }
}

/// An object in one served version.
#[derive(Clone, Debug, PartialEq)]
pub struct Versioned {
    /// The object's JSON.
    pub value: Value,
    /// Its version.
    pub version: Version,
}

/// Updates ownership for writes of one kind through one endpoint.
pub struct Updater<'a> {
    /// The kind's versions.
    pub versions: &'a dyn KindVersions,
    /// The endpoint.
    pub subresource: Subresource,
}

impl<'a> Updater<'a> {
    /// The schema of an object's root in `version`.
    pub fn ty(&self, version: Version) -> Ty<'a> {
        Ty::Object(self.versions.schema(version))
    }

    /// Drops the fields an endpoint does not write: `status` through the
    /// main resource (when the version has a status subresource), all but
    /// `status` through the status subresource. The same for every
    /// version, so a manager of another version is not charged with
    /// changes the endpoint discards.
    pub fn ignore(&self, set: &mut Set, version: Version) {
        match self.subresource {
            Subresource::Main if self.versions.has_status(version) => {
                set.retain_top_level(|e| e.as_field() != Some("status"));
            }
            Subresource::Main => {}
            Subresource::Status => set.retain_top_level(|e| e.as_field() == Some("status")),
        }
    }

    fn convert(&self, object: Versioned, to: Version) -> Result<Versioned, ConversionError> {
        if object.version == to {
            return Ok(object);
        }
        Ok(Versioned {
            value: self.versions.convert(&object.value, object.version, to)?,
            version: to,
        })
    }

    fn convert_ref(&self, object: &Versioned, to: Version) -> Result<Value, ConversionError> {
        if object.version == to {
            return Ok(object.value.clone());
        }
        self.versions.convert(&object.value, object.version, to)
    }

    /// What changed between two objects of one version, without the fields
    /// the endpoint ignores.
    fn compare(&self, old: &Value, new: &Value, version: Version) -> Comparison {
        let mut comparison = compare(old, new, self.ty(version));
        comparison.filter(|set| self.ignore(set, version));
        comparison
    }

    /// Takes what changed from every manager but `writer`: fields it
    /// modified or added from their owners (a conflict unless `force`),
    /// fields it removed from everyone. Managers of versions no longer
    /// served are dropped. Returns the changes in the writer's version.
    fn take_changed(
        &self,
        old: &Versioned,
        new: &Versioned,
        fields: &mut Fields,
        writer: &ManagerId,
        force: bool,
    ) -> Result<Comparison, ApplyError> {
        let own = self.compare(&old.value, &new.value, new.version);
        let mut by_version: BTreeMap<Version, (Comparison, Set)> = BTreeMap::new();
        let taken = own.modified_or_added();
        by_version.insert(new.version, (own, taken));
        let mut conflicts: Vec<(ManagerId, Set)> = Vec::new();
        let mut removed: Vec<(ManagerId, Version)> = Vec::new();
        let mut unserved: Vec<ManagerId> = Vec::new();
        for (id, owned) in fields.iter() {
            if id == writer {
                continue;
            }
            let Some(version) = Version::from_api_version(&owned.api_version) else {
                unserved.push(id.clone());
                continue;
            };
            let (comparison, taken) = match by_version.entry(version) {
                Entry::Occupied(seen) => seen.into_mut(),
                Entry::Vacant(slot) => {
                    let old_there = self.convert_ref(old, version)?;
                    let new_there = self.convert_ref(new, version)?;
                    let comparison = self.compare(&old_there, &new_there, version);
                    let taken = comparison.modified_or_added();
                    slot.insert((comparison, taken))
                }
            };
            let conflict = owned.set.intersection(taken);
            if !conflict.is_empty() {
                conflicts.push((id.clone(), conflict));
            }
            if !comparison.removed.is_empty() {
                removed.push((id.clone(), version));
            }
        }
        for id in unserved {
            fields.remove(&id);
        }
        if !force && !conflicts.is_empty() {
            let list = conflicts
                .into_iter()
                .flat_map(|(manager, set)| {
                    set.paths().into_iter().map(move |path| Conflict {
                        manager: manager.clone(),
                        path,
                    })
                })
                .collect();
            return Err(ApplyError::Conflicts(Conflicts::new(list)));
        }
        for (id, conflict) in conflicts {
            if let Some(owned) = fields.get_mut(&id) {
                owned.set = owned.set.difference(&conflict);
            }
        }
        for (id, version) in removed {
            if let (Some(owned), Some((comparison, _))) =
                (fields.get_mut(&id), by_version.get(&version))
            {
                owned.set = owned.set.difference(&comparison.removed);
            }
        }
        fields.retain(|_, owned| !owned.set.is_empty());
        Ok(by_version
            .remove(&new.version)
            .map(|(comparison, _)| comparison)
            .unwrap_or_default())
    }

    /// An update from `old` to `new` by `writer`: it takes the fields it
    /// changed and keeps those it owned and did not remove.
    pub fn update(
        &self,
        old: &Versioned,
        new: &Versioned,
        fields: &mut Fields,
        writer: &ManagerId,
    ) -> Result<(), ApplyError> {
        let changes = self.take_changed(old, new, fields, writer, true)?;
        let mut set = fields
            .get(writer)
            .map(|owned| owned.set.difference(&changes.removed))
            .unwrap_or_default();
        set.union_with(&changes.modified);
        set.union_with(&changes.added);
        self.ignore(&mut set, new.version);
        if set.is_empty() {
            fields.remove(writer);
        } else {
            fields.insert(
                writer.clone(),
                VersionedSet {
                    set,
                    api_version: new.version.api_version().to_owned(),
                    applied: false,
                },
            );
        }
        Ok(())
    }

    /// Applies `config` (in `live`'s version, checked against its schema)
    /// for `applier`. Returns the new object, or `None` when it equals the
    /// live one.
    pub fn apply(
        &self,
        live: &Versioned,
        config: &Value,
        fields: &mut Fields,
        applier: &ManagerId,
        force: bool,
    ) -> Result<Option<Value>, ApplyError> {
        let ty = self.ty(live.version);
        let merged =
            merge(Some(&live.value), Some(config), ty).unwrap_or_else(|| Value::Object(Map::new()));
        let last = fields.get(applier).cloned();
        let mut set = to_field_set(config, ty);
        self.ignore(&mut set, live.version);
        fields.insert(
            applier.clone(),
            VersionedSet {
                set,
                api_version: live.version.api_version().to_owned(),
                applied: true,
            },
        );
        let merged = Versioned {
            value: merged,
            version: live.version,
        };
        let new = self.prune(merged, fields, last.as_ref())?;
        self.take_changed(live, &new, fields, applier, force)?;
        Ok((!equal(&live.value, &new.value)).then_some(new.value))
    }

    /// Removes from `merged` the fields the applier applied last time
    /// (`last`) and no longer applies, unless another manager owns them.
    /// Done in the version of the last apply; the result is in `merged`'s.
    fn prune(
        &self,
        merged: Versioned,
        fields: &Fields,
        last: Option<&VersionedSet>,
    ) -> Result<Versioned, ApplyError> {
        let Some(last) = last.filter(|l| !l.set.is_empty()) else {
            return Ok(merged);
        };
        let Some(last_version) = Version::from_api_version(&last.api_version) else {
            return Ok(merged);
        };
        let target = merged.version;
        let merged = self.convert(merged, last_version)?;
        let ty = self.ty(last_version);
        let last_set = with_named_fields(&last.set, ty);
        let pruned = Versioned {
            value: remove_items(&merged.value, &last_set, ty),
            version: last_version,
        };
        let pruned = self.add_back_owned(merged.clone(), pruned, fields)?;
        let pruned = self.add_back_dangling(&merged, pruned, &last_set)?;
        Ok(self.convert(pruned, target)?)
    }

    /// Puts back into `pruned` what any manager (the applier's new
    /// configuration included) owns, version by version.
    fn add_back_owned(
        &self,
        mut merged: Versioned,
        mut pruned: Versioned,
        fields: &Fields,
    ) -> Result<Versioned, ApplyError> {
        let mut owned_at: BTreeMap<&str, Set> = BTreeMap::new();
        for owned in fields.values() {
            owned_at
                .entry(owned.api_version.as_str())
                .or_default()
                .union_with(&owned.set);
        }
        // The pruned version first: converting an object that lacks fields
        // a conversion needs is avoided where possible.
        let first = pruned.version.api_version();
        let mut order: Vec<(&str, Set)> = owned_at
            .remove(first)
            .map(|s| (first, s))
            .into_iter()
            .collect();
        order.extend(owned_at);
        for (api_version, owned) in order {
            let Some(version) = Version::from_api_version(api_version) else {
                continue;
            };
            merged = self.convert(merged, version)?;
            pruned = self.convert(pruned, version)?;
            let ty = self.ty(version);
            let merged_set = with_named_fields(&to_field_set(&merged.value, ty), ty);
            let mut keep = with_named_fields(&to_field_set(&pruned.value, ty), ty);
            keep.union_with(&with_named_fields(&owned, ty));
            pruned = Versioned {
                value: remove_items(&merged.value, &merged_set.difference(&keep), ty),
                version,
            };
        }
        Ok(pruned)
    }

    /// Of what pruning removed, puts back everything the applier did not
    /// own last time (unowned fields, or fields of updaters), so only its
    /// own abandoned fields go.
    fn add_back_dangling(
        &self,
        merged: &Versioned,
        pruned: Versioned,
        last: &Set,
    ) -> Result<Versioned, ApplyError> {
        let version = merged.version;
        let pruned = self.convert(pruned, version)?;
        let ty = self.ty(version);
        let pruned_set = with_named_fields(&to_field_set(&pruned.value, ty), ty);
        let merged_set = with_named_fields(&to_field_set(&merged.value, ty), ty);
        let gone = merged_set.difference(&pruned_set).intersection(last);
        Ok(Versioned {
            value: remove_items(&merged.value, &gone, ty),
            version,
        })
    }
}

#[cfg(test)]
#[path = "updater_tests.rs"]
mod tests;
