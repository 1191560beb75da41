//! The object being reconciled: the last stored version plus the status the pass wants
//! to write. Spec/metadata and status are separate writes (as with a status subresource);
//! the desired status survives a spec write, and an unchanged status is not written.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::conditions::{self, Status};
use super::machine::phase::Phase;
use super::names::{PAUSED, VM_PROVISIONED};
use super::seams::{InfraStore, StoreError};
use crate::api::object::ApiObject;
use crate::api::v1alpha2::{
    ProxmoxCluster, ProxmoxClusterStatus, ProxmoxMachine, ProxmoxMachineStatus,
};

/// Objects with a status block the controller owns.
pub trait WithStatus: ApiObject {
    /// The status type.
    type Status: Clone + PartialEq + Send + Sync;
    /// The status.
    fn status(&self) -> &Self::Status;
    /// The status, mutably.
    fn status_mut(&mut self) -> &mut Self::Status;
    /// The conditions inside the status.
    fn conditions(status: &mut Self::Status) -> &mut Vec<Condition>;
}

macro_rules! with_status {
    ($ty:ty, $status:ty) => {
        impl WithStatus for $ty {
            type Status = $status;
            fn status(&self) -> &$status {
                &self.status
            }
            fn status_mut(&mut self) -> &mut $status {
                &mut self.status
            }
            fn conditions(status: &mut $status) -> &mut Vec<Condition> {
                &mut status.conditions
            }
        }
    };
}

with_status!(ProxmoxMachine, ProxmoxMachineStatus);
with_status!(ProxmoxCluster, ProxmoxClusterStatus);

/// A stored object and the status to write.
pub struct Handle<T: WithStatus> {
    /// As last read from or written to the store.
    pub obj: T,
    /// The status this pass will write.
    pub status: T::Status,
}

impl<T: WithStatus> Handle<T> {
    /// Wraps a stored object.
    pub fn new(obj: T) -> Self {
        Self {
            status: obj.status().clone(),
            obj,
        }
    }

    /// `metadata.namespace`.
    pub fn namespace(&self) -> &str {
        self.obj.metadata().namespace.as_deref().unwrap_or_default()
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.obj.metadata().name.as_deref().unwrap_or_default()
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> &str {
        self.obj.metadata().uid.as_deref().unwrap_or_default()
    }

    /// Upserts a condition, recording the object's generation.
    pub fn set_condition(
        &mut self,
        type_: &str,
        status: Status,
        reason: &str,
        message: &str,
        now: Timestamp,
    ) {
        let generation = self.obj.metadata().generation;
        conditions::set(
            T::conditions(&mut self.status),
            type_,
            status,
            reason,
            message,
            generation,
            now,
        );
    }

    /// Recomputes `Ready` from the given condition types.
    pub fn summarize(&mut self, of: &[&str], now: Timestamp) {
        let generation = self.obj.metadata().generation;
        conditions::set_summary(T::conditions(&mut self.status), of, generation, now);
    }

    /// Surfaces (or clears) a pause as the `Paused` condition.
    pub fn set_paused(&mut self, paused: bool, now: Timestamp) {
        let present = conditions::get(T::conditions(&mut self.status), PAUSED).is_some();
        if !paused && !present {
            return;
        }
        let (status, reason) = if paused {
            (Status::True, super::names::PAUSED_REASON)
        } else {
            (Status::False, super::names::NOT_PAUSED_REASON)
        };
        self.set_condition(PAUSED, status, reason, "", now);
    }

    /// Writes metadata/spec changes made by `change`. Returns false when the object is
    /// gone (the last finalizer was removed from an object being deleted).
    pub async fn write_spec<S: InfraStore>(
        &mut self,
        store: &S,
        change: impl FnOnce(&mut T),
    ) -> Result<bool, StoreError> {
        let mut wanted = self.obj.clone();
        change(&mut wanted);
        if wanted == self.obj {
            return Ok(true);
        }
        match store.update(&wanted).await? {
            Some(stored) => {
                self.obj = stored;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Writes the desired status if it differs from the stored one.
    pub async fn save_status<S: InfraStore>(&mut self, store: &S) -> Result<(), StoreError> {
        if self.status == *self.obj.status() {
            return Ok(());
        }
        let mut wanted = self.obj.clone();
        *wanted.status_mut() = self.status.clone();
        self.obj = store.update_status(&wanted).await?;
        Ok(())
    }
}

/// Adds a finalizer to object metadata (no duplicate).
pub fn add_finalizer(
    meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    finalizer: &str,
) {
    let finalizers = meta.finalizers.get_or_insert_with(Vec::new);
    if !finalizers.iter().any(|f| f == finalizer) {
        finalizers.push(finalizer.to_string());
    }
}

/// Removes a finalizer from object metadata.
pub fn remove_finalizer(
    meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    finalizer: &str,
) {
    if let Some(f) = meta.finalizers.as_mut() {
        f.retain(|x| x != finalizer);
    }
}

fn phase_in(status: &ProxmoxMachineStatus) -> Phase {
    conditions::get(&status.conditions, VM_PROVISIONED)
        .map(|c| Phase::from_reason(&c.reason))
        .unwrap_or(Phase::New)
}

impl Handle<ProxmoxMachine> {
    /// The phase this pass will persist (the reason of `VirtualMachineProvisioned`).
    pub fn phase(&self) -> Phase {
        phase_in(&self.status)
    }

    /// The phase as last stored.
    pub fn stored_phase(&self) -> Phase {
        phase_in(&self.obj.status)
    }

    /// The generation the `Failed` phase was recorded for.
    pub fn failed_generation(&self) -> Option<i64> {
        conditions::get(&self.status.conditions, VM_PROVISIONED)
            .filter(|c| Phase::from_reason(&c.reason) == Phase::Failed)
            .and_then(|c| c.observed_generation)
    }

    /// Whether the phase was recorded for the current generation of the spec without a
    /// message (nothing went wrong since).
    pub fn phase_settled(&self) -> bool {
        conditions::get(&self.status.conditions, VM_PROVISIONED).is_some_and(|c| {
            c.observed_generation == self.obj.metadata.generation && c.message.is_empty()
        })
    }

    /// Records a phase (and message) and the `Ready` summary.
    pub fn set_phase(&mut self, phase: Phase, message: &str, now: Timestamp) {
        self.set_condition(VM_PROVISIONED, phase.status(), phase.reason(), message, now);
        self.summarize(&[VM_PROVISIONED], now);
    }

    /// Changes only the message of the current phase.
    pub fn set_message(&mut self, message: &str, now: Timestamp) {
        let phase = self.phase();
        self.set_phase(phase, message, now);
    }
}
