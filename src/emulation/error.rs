//! The error of one emulation pass.

use crate::controller::seams::ManagementError;

/// Why a pass of an emulation loop failed; the loop retries the object with back-off.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EmulationError {
    /// A call to the cluster failed (conflicts included).
    #[error(transparent)]
    Api(#[from] ManagementError),
}

impl EmulationError {
    /// A write lost against a concurrent change: retried soon, after a fresh read.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Api(ManagementError::Conflict(_)))
    }
}
