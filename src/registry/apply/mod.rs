//! Server-side apply and `managedFields` (KEP-555), as kube-apiserver does
//! them for custom resources: field ownership per manager, operation and
//! subresource in the `FieldsV1` form, structured merge driven by each
//! version's schema, conflicts, and ownership recorded on every write.
//!
//! [`FieldManager`] is the entry point: [`FieldManager::update`] for
//! create, update and patch, [`FieldManager::apply`] for
//! `application/apply-patch+yaml`. It works on the JSON of the request's
//! version and reaches other versions through [`KindVersions`]. See
//! `docs/ssa.md` for the semantics and how the registry calls it.

mod conflicts;
mod error;
mod field_manager;
pub mod fieldpath;
mod housekeeping;
mod last_applied;
mod managed;
mod manager_name;
pub mod typed;
mod updater;
mod versions;

pub use conflicts::{CAUSE_TYPE, Conflict, Conflicts};
pub use error::ApplyError;
pub use field_manager::{BEFORE_FIRST_APPLY, FieldManager, Request, UNKNOWN_MANAGER};
pub use housekeeping::{ANCIENT_CHANGES, MAX_UPDATE_MANAGERS};
pub use last_applied::{ANNOTATION as LAST_APPLIED_ANNOTATION, KUBECTL};
pub use managed::{Managed, ManagedError, ManagerId, Operation, VersionedSet, format_time};
pub use manager_name::{FIELD_MANAGER_MAX_LENGTH, manager_or_user_agent};
pub use updater::Subresource;
pub use versions::{HubVersions, KindVersions};
