//! What the runtime reports for metrics, without depending on the server: the server's
//! `Metrics` implements [`ControllerObserver`] (like the registry's `StorageObserver`).

use std::time::Duration;

/// Receives the runtime's measurements.
pub trait ControllerObserver: Send + Sync {
    /// One finished pass: the kind, `success` / `requeue` / `error` / `conflict`, its time.
    fn reconciled(&self, kind: &str, result: &str, elapsed: Duration);
    /// Keys waiting to be handed to a worker.
    fn queue_depth(&self, depth: usize);
    /// Whether this process leads (and so reconciles).
    fn leader(&self, leading: bool);
}

/// An observer that records nothing.
pub struct NoObserver;

impl ControllerObserver for NoObserver {
    fn reconciled(&self, _: &str, _: &str, _: Duration) {}
    fn queue_depth(&self, _: usize) {}
    fn leader(&self, _: bool) {}
}
