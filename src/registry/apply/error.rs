//! Why an apply is refused.

use super::conflicts::Conflicts;
use crate::api::field::{ErrorList, aggregate};
use crate::api::resource::ConversionError;

/// Why an apply is refused, with the HTTP status the server answers.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// Fields owned by other managers would change (409 `Conflict`, one
    /// `FieldManagerConflict` cause per field and manager).
    #[error("{0}")]
    Conflicts(Conflicts),
    /// The configuration does not fit the schema of its version (422
    /// `Invalid`, one cause per field error).
    #[error("{}", aggregate(.0))]
    Invalid(ErrorList),
    /// The configuration is of another kind or version, or carries
    /// `managedFields` (400 `BadRequest`).
    #[error("{0}")]
    BadRequest(String),
    /// The object could not be converted to a manager's version (500).
    #[error(transparent)]
    Conversion(#[from] ConversionError),
}
