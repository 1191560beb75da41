//! The workers: take a key from the queue, run the matching reconciler, hand the outcome
//! back. A pass is a plain future, so stopping a worker drops the pass wherever it is
//! (every step of the reconcilers is idempotent; see docs/controller.md).

use std::sync::Arc;
use std::time::Instant;

use super::key::{ObjectKey, ReconcileKind};
use super::queue::{Outcome, WorkQueue};
use super::store::RegistryInfraStore;
use crate::controller::action::Action;
use crate::controller::cluster::ClusterReconciler;
use crate::controller::error::ReconcileError;
use crate::controller::machine::MachineReconciler;
use crate::controller::observe::ControllerObserver;
use crate::controller::seams::Management;

/// Both reconcilers of one leadership term (fresh caches, like a new process).
pub struct Reconcilers<M> {
    pub machines: MachineReconciler<RegistryInfraStore, M>,
    pub clusters: ClusterReconciler<RegistryInfraStore, M>,
}

impl<M: Management> Reconcilers<M> {
    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, ReconcileError> {
        match key.kind {
            ReconcileKind::ProxmoxMachine => {
                self.machines.reconcile(&key.namespace, &key.name).await
            }
            ReconcileKind::ProxmoxCluster => {
                self.clusters.reconcile(&key.namespace, &key.name).await
            }
        }
    }
}

/// One worker: passes until the queue shuts down.
pub async fn work<M: Management>(
    queue: Arc<WorkQueue<ObjectKey>>,
    reconcilers: Arc<Reconcilers<M>>,
    observer: Arc<dyn ControllerObserver>,
) {
    while let Some(key) = queue.next().await {
        let started = Instant::now();
        let result = reconcilers.reconcile(&key).await;
        let elapsed = started.elapsed();
        let (outcome, label) = match &result {
            Ok(action @ Action::Requeue(after)) => {
                tracing::debug!(%key, ?after, ?elapsed, "reconciled, requeue");
                (Outcome::Done(*action), "requeue")
            }
            Ok(action @ Action::AwaitChange) => {
                tracing::debug!(%key, ?elapsed, "reconciled");
                (Outcome::Done(*action), "success")
            }
            Err(error) if error.is_conflict() => {
                tracing::debug!(%key, %error, "conflict, retrying soon");
                (Outcome::Failed { conflict: true }, "conflict")
            }
            Err(error) => {
                tracing::warn!(%key, %error, failures = queue.failures(&key) + 1, "reconcile failed");
                (Outcome::Failed { conflict: false }, "error")
            }
        };
        observer.reconciled(key.kind.as_str(), label, elapsed);
        queue.done(key, outcome);
    }
}
