//! Structured-merge-diff's `Updater`: how a write changes who owns what.
//!
//! An update takes every field it changed from the other managers (they
//! lose what was modified or removed) and adds it to its own manager. An
//! apply merges its configuration onto the live object, removes the fields
//! its manager applied last time and no longer applies unless someone else
//! owns them, then checks that no field owned by another manager changes
//! (a conflict) unless forced. Every comparison for a manager is done in
//! that manager's API version.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use serde_json::Value;

use super::conflicts::{Conflict, Conflicts};
use super::error::ApplyError;
use super::fieldpath::{Set, value::equal};
use super::managed::{ManagerId, VersionedSet};
use super::typed::{
    Comparison, Ty, compare, merge_into, remove_items, to_field_set, to_field_set_named,
    with_named_fields,
};
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
    /// The `scale` subresource: the desired replicas only, written into the main resource.
    Scale,
}

impl Subresource {
    /// The name in `managedFields` (empty for the main resource).
    pub fn as_str(self) -> &'static str {
        match self {
            Subresource::Main => "",
            Subresource::Status => "status",
            Subresource::Scale => "scale",
        }
    }
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
    pub fn ty(&self, version: Version) -> Ty<'static> {
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
            Subresource::Main | Subresource::Scale => {}
            Subresource::Status => set.retain_top_level(|e| e.as_field() == Some("status")),
        }
    }

    /// The version `api_version` names, if the kind is served in it: entries of other
    /// versions (gone, or never served for this kind) are not converted to.
    fn served(&self, api_version: &str) -> Option<Version> {
        Version::from_api_version(api_version).filter(|v| self.versions.serves(*v))
    }

    /// `object` (in `from`) in version `to`, borrowed when no conversion is
    /// needed.
    pub fn convert<'v>(
        &self,
        object: &'v Value,
        from: Version,
        to: Version,
    ) -> Result<Cow<'v, Value>, ConversionError> {
        if from == to {
            return Ok(Cow::Borrowed(object));
        }
        Ok(Cow::Owned(self.versions.convert(object, from, to)?))
    }

    fn convert_owned(
        &self,
        object: Value,
        from: Version,
        to: Version,
    ) -> Result<Value, ConversionError> {
        if from == to {
            return Ok(object);
        }
        self.versions.convert(&object, from, to)
    }

    /// What changed between two objects of one version, without the fields
    /// the endpoint ignores.
    fn compare(&self, old: &Value, new: &Value, version: Version) -> Comparison {
        let mut comparison = compare(old, new, self.ty(version));
        comparison.filter(|set| self.ignore(set, version));
        comparison
    }

    /// Takes what changed from `old` to `new` (both in `version`) from
    /// every manager but `writer`: fields it modified or added from their
    /// owners (a conflict unless `force`), fields it removed from everyone.
    /// Managers of versions no longer served are dropped. Returns the
    /// changes in `version`.
    fn take_changed(
        &self,
        old: &Value,
        new: &Value,
        version: Version,
        fields: &mut Fields,
        writer: &ManagerId,
        force: bool,
    ) -> Result<Comparison, ApplyError> {
        let own = self.compare(old, new, version);
        if fields.keys().all(|id| id == writer) {
            // Nobody else owns anything (every create): nothing to take from anyone.
            return Ok(own);
        }
        let mut by_version: BTreeMap<Version, (Comparison, Set)> = BTreeMap::new();
        let taken = own.modified_or_added();
        by_version.insert(version, (own, taken));
        let mut conflicts: Vec<(ManagerId, Set)> = Vec::new();
        let mut removed: Vec<(ManagerId, Version)> = Vec::new();
        let mut unserved: Vec<ManagerId> = Vec::new();
        for (id, owned) in fields.iter() {
            if id == writer {
                continue;
            }
            let Some(theirs) = self.served(&owned.api_version) else {
                unserved.push(id.clone());
                continue;
            };
            let (comparison, taken) = match by_version.entry(theirs) {
                Entry::Occupied(seen) => seen.into_mut(),
                Entry::Vacant(slot) => {
                    let old_there = self.convert(old, version, theirs)?;
                    let new_there = self.convert(new, version, theirs)?;
                    let comparison = self.compare(&old_there, &new_there, theirs);
                    let taken = comparison.modified_or_added();
                    slot.insert((comparison, taken))
                }
            };
            let conflict = owned.set.intersection(taken);
            if !conflict.is_empty() {
                conflicts.push((id.clone(), conflict));
            }
            if !comparison.removed.is_empty() {
                removed.push((id.clone(), theirs));
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
                owned.set.remove_all(&conflict);
            }
        }
        for (id, theirs) in removed {
            if let (Some(owned), Some((comparison, _))) =
                (fields.get_mut(&id), by_version.get(&theirs))
            {
                owned.set.remove_all(&comparison.removed);
            }
        }
        fields.retain(|_, owned| !owned.set.is_empty());
        Ok(by_version
            .remove(&version)
            .map(|(comparison, _)| comparison)
            .unwrap_or_default())
    }

    /// An update from `old` to `new` (both in `version`) by `writer`: it
    /// takes the fields it changed and keeps those it owned and did not
    /// remove.
    pub fn update(
        &self,
        old: &Value,
        new: &Value,
        version: Version,
        fields: &mut Fields,
        writer: &ManagerId,
    ) -> Result<(), ApplyError> {
        let changes = self.take_changed(old, new, version, fields, writer, true)?;
        let mut set = match fields.get(writer) {
            Some(owned) => {
                let mut set = owned.set.difference(&changes.removed);
                set.union_with(&changes.added);
                set
            }
            None => changes.added,
        };
        set.union_with(&changes.modified);
        self.ignore(&mut set, version);
        if set.is_empty() {
            fields.remove(writer);
        } else {
            fields.insert(
                writer.clone(),
                VersionedSet {
                    set,
                    api_version: version.api_version().to_owned(),
                    applied: false,
                },
            );
        }
        Ok(())
    }

    /// Applies `config` onto `live` (both in `version`; the configuration
    /// checked against its schema) for `applier`. Returns the new object, or
    /// `None` when it equals the live one.
    pub fn apply(
        &self,
        live: &Value,
        version: Version,
        config: &Value,
        fields: &mut Fields,
        applier: &ManagerId,
        force: bool,
    ) -> Result<Option<Value>, ApplyError> {
        let ty = self.ty(version);
        let mut merged = live.clone();
        merge_into(&mut merged, config, ty);
        let last = fields.remove(applier);
        let mut set = to_field_set(config, ty);
        self.ignore(&mut set, version);
        let keeps_all = last.as_ref().is_none_or(|l| {
            l.api_version == version.api_version() && l.set.difference(&set).is_empty()
        });
        fields.insert(
            applier.clone(),
            VersionedSet {
                set,
                api_version: version.api_version().to_owned(),
                applied: true,
            },
        );
        // An applier that still applies everything it applied last time
        // has nothing to prune.
        let new = match last {
            Some(last) if !keeps_all => self.prune(merged, version, fields, &last)?,
            _ => merged,
        };
        self.take_changed(live, &new, version, fields, applier, force)?;
        Ok((!equal(live, &new)).then_some(new))
    }

    /// Removes from `merged` (in `version`) the fields the applier applied
    /// last time (`last`) and no longer applies, unless another manager
    /// owns them. Done in the version of the last apply.
    pub fn prune(
        &self,
        merged: Value,
        version: Version,
        fields: &Fields,
        last: &VersionedSet,
    ) -> Result<Value, ApplyError> {
        let Some(last_version) = self.served(&last.api_version) else {
            return Ok(merged);
        };
        if last.set.is_empty() {
            return Ok(merged);
        }
        let at_last = self.convert(&merged, version, last_version)?;
        let ty = self.ty(last_version);
        let last_set = with_named_fields(&last.set, ty);
        let merged_set = to_field_set_named(&at_last, ty);
        let pruned = remove_items(&at_last, &last_set, ty);
        let pruned = self.add_back_owned(&at_last, last_version, &merged_set, pruned, fields)?;
        // Of what pruning removed, only what the applier owned last time
        // goes: unowned fields and updaters' fields come back.
        let gone = merged_set
            .difference(&to_field_set_named(&pruned, ty))
            .intersection(&last_set);
        let result = remove_items(&at_last, &gone, ty);
        Ok(self.convert_owned(result, last_version, version)?)
    }

    /// Puts back into `pruned` (in `version`, like `merged`, whose field set
    /// with named fields is `merged_set`) what any manager owns, the
    /// applier's new configuration included, version by version.
    fn add_back_owned(
        &self,
        merged: &Value,
        version: Version,
        merged_set: &Set,
        pruned: Value,
        fields: &Fields,
    ) -> Result<Value, ApplyError> {
        let mut owned_at: BTreeMap<&str, Set> = BTreeMap::new();
        for owned in fields.values() {
            owned_at
                .entry(owned.api_version.as_str())
                .or_default()
                .union_with(&owned.set);
        }
        // The pruned version first: converting an object that lacks fields
        // a conversion needs is avoided where possible.
        let first = version.api_version();
        let mut order: Vec<(&str, Set)> = owned_at
            .remove(first)
            .map(|s| (first, s))
            .into_iter()
            .collect();
        order.extend(owned_at);
        let (mut pruned, mut pruned_version) = (pruned, version);
        for (api_version, owned) in order {
            let Some(there) = self.served(api_version) else {
                continue;
            };
            let merged_there = self.convert(merged, version, there)?;
            let pruned_there = self.convert_owned(pruned, pruned_version, there)?;
            let ty = self.ty(there);
            let converted_set;
            let merged_set_there = if there == version {
                merged_set
            } else {
                converted_set = to_field_set_named(&merged_there, ty);
                &converted_set
            };
            let mut keep = to_field_set_named(&pruned_there, ty);
            keep.union_with(&with_named_fields(&owned, ty));
            pruned = remove_items(&merged_there, &merged_set_there.difference(&keep), ty);
            pruned_version = there;
        }
        Ok(self.convert_owned(pruned, pruned_version, version)?)
    }
}

#[cfg(test)]
#[path = "updater_tests.rs"]
mod tests;
