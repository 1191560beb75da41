//! The one error type of the storage layer.

use crate::types::{KeyValue, Revision};

/// Result of every storage operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, typed so the API server can map each case to one HTTP status.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The key does not exist (HTTP 404).
    #[error("key {key:?} not found")]
    NotFound { key: String },

    /// `create` on a key that already exists (HTTP 409 AlreadyExists).
    #[error("key {key:?} already exists")]
    AlreadyExists { key: String },

    /// A revision precondition failed (HTTP 409 Conflict). `current` is the object as it is now,
    /// read in the same transaction, so an update can be retried without another read.
    #[error(
        "key {key:?} was modified: expected revision {expected}, current revision {current_revision}"
    )]
    Conflict {
        key: String,
        expected: Revision,
        current_revision: Revision,
        current: Option<Box<KeyValue>>,
    },

    /// The requested revision has been compacted away (HTTP 410 Gone).
    #[error("revision {requested} has been compacted")]
    Expired { requested: Revision },

    /// The requested revision is newer than the store's current revision. Transient: a lagging
    /// member or a client that guessed ahead (kube-apiserver answers "Too large resource version").
    #[error("revision {requested} is newer than the current revision")]
    FutureRevision { requested: Revision },

    /// The caller passed something the store cannot accept (a malformed key, revision 0, …).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The backend cannot be reached right now; safe to retry.
    #[error("storage unavailable: {0}")]
    Unavailable(String),

    /// Anything else: a broken invariant, corrupt data, an unexpected backend answer.
    #[error("storage internal error: {0}")]
    Internal(String),
}

impl Error {
    /// Whether the same request may succeed if simply tried again later.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Unavailable(_) | Error::FutureRevision { .. })
    }

    pub(crate) fn internal(what: impl std::fmt::Display) -> Self {
        Error::Internal(what.to_string())
    }
}
