//! What the runtime and the reconcilers report for metrics, without depending on the
//! server: the server's `Metrics` implements [`ControllerObserver`] (like the registry's
//! `StorageObserver`).

use std::time::Duration;

/// Receives the controller's measurements.
pub trait ControllerObserver: Send + Sync {
    /// One finished pass: the kind, `success` / `requeue` / `error` / `conflict`, its time.
    fn reconciled(&self, kind: &str, result: &str, elapsed: Duration);
    /// Keys waiting to be handed to a worker.
    fn queue_depth(&self, depth: usize);
    /// Whether this process leads (and so reconciles).
    fn leader(&self, leading: bool);
    /// A Proxmox task the controller saw end: its type (`qmclone`, `qmstart`…),
    /// `success` or `failed`, and the time from its start (in its UPID) until then.
    fn task_finished(&self, task_type: &str, result: &str, elapsed: Duration);
    /// The phase a ProxmoxMachine (`namespace/name`) was left in by a pass, or `None`
    /// once it is gone.
    fn machine_phase(&self, machine: &str, phase: Option<&'static str>);
    /// A ProxmoxMachine became provisioned this long after it was created.
    fn machine_provisioned(&self, elapsed: Duration);
}

/// An observer that records nothing.
pub struct NoObserver;

impl ControllerObserver for NoObserver {
    fn reconciled(&self, _: &str, _: &str, _: Duration) {}
    fn queue_depth(&self, _: usize) {}
    fn leader(&self, _: bool) {}
    fn task_finished(&self, _: &str, _: &str, _: Duration) {}
    fn machine_phase(&self, _: &str, _: Option<&'static str>) {}
    fn machine_provisioned(&self, _: Duration) {}
}
