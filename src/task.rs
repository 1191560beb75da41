//! A background task tied to the lifetime of its owner.

use tokio::task::JoinHandle;

/// Aborts its task when dropped (a watch, a reload loop, a forwarder that must not outlive
/// the server or controller that started it).
#[derive(Debug)]
pub struct TaskGuard(JoinHandle<()>);

impl TaskGuard {
    pub fn new(task: JoinHandle<()>) -> Self {
        Self(task)
    }
}

impl Drop for TaskGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}
