//! A check run right before each write request is sent (every method but GET): the
//! controller passes its leadership's fence here, so that a replica that lost the lease —
//! a paused process that woke up, a partitioned leader — sends nothing to Proxmox VE once
//! another replica may lead. The check sits after the rate limiter and the concurrency
//! limit, at the last moment before the request goes out.

use std::fmt;
use std::sync::Arc;

/// Says whether a write may be sent now, or why not.
#[derive(Clone)]
pub struct WriteFence(Arc<dyn Fn() -> Result<(), String> + Send + Sync>);

impl WriteFence {
    pub fn new(check: impl Fn() -> Result<(), String> + Send + Sync + 'static) -> Self {
        Self(Arc::new(check))
    }

    /// `Err(why)` when the write must not be sent.
    pub fn check(&self) -> Result<(), String> {
        (self.0)()
    }
}

impl fmt::Debug for WriteFence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WriteFence")
    }
}
