//! The controller's error type: what a reconcile returns when it must be retried later.
//! Problems that need a user to act (a template that does not exist, an invalid network)
//! are not errors: they become conditions and the reconcile waits for a change.

use super::seams::{ManagementError, StoreError};
use crate::proxmox;

/// Why a reconcile failed; the caller retries after [`super::ErrorPolicy`]'s delay.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// Reading or writing our own objects failed.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// The management cluster failed.
    #[error("management cluster: {0}")]
    Management(#[from] ManagementError),
    /// Proxmox VE failed.
    #[error("Proxmox VE: {0}")]
    Proxmox(#[from] proxmox::Error),
    /// No usable Proxmox credentials.
    #[error("credentials: {0}")]
    Credentials(String),
    /// Something else worth retrying.
    #[error("{0}")]
    Retry(String),
}

impl ReconcileError {
    /// An optimistic-concurrency conflict: retry soon, the newer object is there.
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            Self::Store(StoreError::Conflict(_)) | Self::Management(ManagementError::Conflict(_))
        )
    }
}
