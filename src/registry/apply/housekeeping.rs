//! Keeping `managedFields` small and meaningful: fields the server sets are
//! never owned, and old updaters are folded into `ancient-changes`.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use super::fieldpath::{Path, Set};
use super::managed::{Managed, ManagerId, Operation, VersionedSet};
use super::updater::Fields;

/// At most this many updaters keep entries of their own.
pub const MAX_UPDATE_MANAGERS: usize = 10;

/// The entry the oldest updaters are merged into (one per API version).
pub const ANCIENT_CHANGES: &str = "ancient-changes";

/// Type and identity fields nobody owns.
static STRIPPED: LazyLock<Set> = LazyLock::new(|| {
    let paths: Vec<Path> = [
        &["apiVersion"][..],
        &["kind"],
        &["metadata"],
        &["metadata", "name"],
        &["metadata", "namespace"],
        &["metadata", "creationTimestamp"],
        &["metadata", "selfLink"],
        &["metadata", "uid"],
        &["metadata", "clusterName"],
        &["metadata", "generation"],
        &["metadata", "managedFields"],
        &["metadata", "resourceVersion"],
    ]
    .iter()
    .map(|p| Path::fields(p))
    .collect();
    Set::from_paths(&paths)
});

/// Removes the type and identity fields from `manager`'s set (dropping the
/// entry if nothing is left).
pub fn strip_meta(fields: &mut Fields, manager: &ManagerId) {
    if let Some(owned) = fields.get_mut(manager) {
        owned.set.remove_all(&STRIPPED);
        if owned.set.is_empty() {
            fields.remove(manager);
        }
    }
}

/// Folds the oldest updaters into an `ancient-changes` entry of their API
/// version until at most `max` updaters are left. The first of a version
/// seen becomes the bucket when another of that version follows; an
/// existing bucket is never merged into itself (the Go code drops it then).
pub fn cap_update_managers(managed: &mut Managed, max: usize) {
    let mut updaters: Vec<(i64, String, ManagerId)> = managed
        .fields
        .iter()
        .filter(|(_, owned)| !owned.applied)
        .map(|(id, _)| {
            let seconds = managed.times.get(id).map_or(0, |t| t.as_second());
            (seconds, id.identifier(), id.clone())
        })
        .collect();
    if updaters.len() <= max {
        return;
    }
    updaters.sort();
    let mut remaining = updaters.len();
    let mut first_of_version: BTreeMap<String, ManagerId> = BTreeMap::new();
    for (_, _, id) in updaters {
        if remaining <= max {
            break;
        }
        let Some(owned) = managed.fields.get(&id).cloned() else {
            continue;
        };
        let bucket = ManagerId::new(ANCIENT_CHANGES, Operation::Update, &owned.api_version, "");
        let Some(first) = first_of_version.get(&owned.api_version).cloned() else {
            first_of_version.insert(owned.api_version.clone(), id);
            continue;
        };
        if id == bucket {
            continue;
        }
        if !managed.fields.contains_key(&bucket)
            && let Some(first_fields) = managed.fields.remove(&first)
        {
            managed.times.remove(&first);
            managed.fields.insert(bucket.clone(), first_fields);
        }
        let mut set = owned.set;
        if let Some(existing) = managed.fields.get(&bucket) {
            set.union_with(&existing.set);
        }
        managed.fields.insert(
            bucket.clone(),
            VersionedSet {
                set,
                api_version: owned.api_version,
                applied: false,
            },
        );
        // The bucket takes the time of the newer update merged into it.
        match managed.times.remove(&id) {
            Some(time) => managed.times.insert(bucket, time),
            None => managed.times.remove(&bucket),
        };
        managed.fields.remove(&id);
        remaining -= 1;
    }
}
