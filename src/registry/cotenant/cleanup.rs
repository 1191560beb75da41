//! What kube's `customresourcecleanup` finalizer does for a deleted CRD, done for the
//! co-tenant kinds this server stores: every object of a terminating kind is deleted (past
//! admission, as kube's finalizer controller deletes them straight from storage), an object
//! with finalizers pending stays until its controller removes them, and a retired kind is
//! forgotten, its record dropped, once none is left. The served kinds' CRDs are recorded as
//! they come ([`super::records`]), and on the first pass the recorded ones no longer listed
//! are retired: their CRDs went while no replica watched.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use crate::registry::delete_options::DeleteOptions;
use crate::registry::list_options::ListOptions;
use crate::registry::rest::{Failure, ResourceRest};

use super::records::CrdRecords;
use super::{CoTenantKind, CoTenants};

/// The cleanup of one server's co-tenant kinds; [`Self::pass`] does one round.
pub struct Cleanup {
    cotenants: Arc<CoTenants>,
    /// The CRD specs recorded by this process, so that an unchanged one is not read again.
    recorded: HashMap<String, Arc<Value>>,
    /// Whether the records were loaded and the absent CRDs' kinds retired.
    loaded: bool,
}

/// What a pass leaves to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pending {
    /// Nothing until the co-tenant set changes.
    Nothing,
    /// Objects wait for their finalizers, or a step failed: pass again soon.
    Again,
}

impl Cleanup {
    pub fn new(cotenants: Arc<CoTenants>) -> Self {
        Self {
            cotenants,
            recorded: HashMap::new(),
            loaded: false,
        }
    }

    /// One round over the current co-tenant set, its CRDs recorded in `records`. Every step
    /// is idempotent: replicas may run it at once, and a pass cut anywhere is finished by the
    /// next.
    pub async fn pass(&mut self, records: &CrdRecords) -> Pending {
        if !self.cotenants.current().listed {
            return Pending::Nothing;
        }
        if !self.loaded {
            match self.retire_recorded(records).await {
                Ok(()) => self.loaded = true,
                Err(e) => {
                    tracing::warn!(error = %e, "reading the records of co-tenant CRDs");
                    return Pending::Again;
                }
            }
        }
        let mut pending = Pending::Nothing;
        for kind in &self.cotenants.current().kinds {
            let Some(rest) = kind.served() else { continue };
            let done = if kind.terminating {
                self.drain(kind, rest, records).await
            } else {
                self.record(kind, records).await
            };
            if !done {
                pending = Pending::Again;
            }
        }
        pending
    }

    async fn retire_recorded(&mut self, records: &CrdRecords) -> Result<(), capmox_storage::Error> {
        let recorded = records.load().await?;
        for obsolete in self.cotenants.retire_absent(recorded.iter()) {
            records.drop(&obsolete).await?;
        }
        Ok(())
    }

    /// Records a served kind's CRD; whether that is done.
    async fn record(&mut self, kind: &CoTenantKind, records: &CrdRecords) -> bool {
        if self.recorded.get(&kind.crd) == Some(&kind.spec) {
            return true;
        }
        match records.keep(kind).await {
            Ok(()) => {
                self.recorded
                    .insert(kind.crd.clone(), Arc::clone(&kind.spec));
                true
            }
            Err(e) => {
                tracing::warn!(crd = %kind.crd, error = %e, "recording a co-tenant CRD");
                false
            }
        }
    }

    /// Deletes a terminating kind's objects, and forgets it when it is retired and none is
    /// left; whether nothing is left to wait for.
    async fn drain(
        &mut self,
        kind: &CoTenantKind,
        rest: &ResourceRest,
        records: &CrdRecords,
    ) -> bool {
        match delete_all(rest).await {
            Ok(0) if kind.retired => {
                if let Err(e) = records.drop(&kind.crd).await {
                    tracing::warn!(crd = %kind.crd, error = %e, "dropping a co-tenant CRD's record");
                    return false;
                }
                self.recorded.remove(&kind.crd);
                self.cotenants.forget(&kind.crd);
                tracing::info!(crd = %kind.crd, "the objects of a deleted CRD are gone");
                true
            }
            // Its CRD goes once kube's finalizer is done; the set changes then.
            Ok(0) => true,
            Ok(left) => {
                tracing::debug!(crd = %kind.crd, left, "objects of a deleted CRD wait for their finalizers");
                false
            }
            Err(failure) => {
                tracing::warn!(crd = %kind.crd, error = %failure.error, "deleting the objects of a deleted CRD");
                false
            }
        }
    }
}

/// Deletes every object of `rest`'s kind; answers how many are left (waiting for finalizers,
/// or created meanwhile).
async fn delete_all(rest: &ResourceRest) -> Result<usize, Failure> {
    let version = rest.descriptor().storage_version();
    let options = DeleteOptions {
        past_admission: true,
        ..DeleteOptions::default()
    };
    let everything = ListOptions::default();
    rest.delete_collection(version, None, &everything, &options)
        .await?;
    let left = rest.list(version, None, &everything).await?;
    Ok(left.items.len())
}
