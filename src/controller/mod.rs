//! The built-in controller: reconcilers for ProxmoxCluster and ProxmoxMachine that turn
//! the stored objects into Proxmox VMs, IP address claims and a control-plane endpoint.
//!
//! The reconcilers only see three seams: [`seams::InfraStore`] (our objects, with
//! optimistic concurrency), [`seams::Management`] (CAPI objects, Secrets, IPAM) and the
//! Proxmox client built by [`clients::ClientFactory`]. Each `reconcile` call is one
//! idempotent pass that may be abandoned at any await point; see docs/controller.md for
//! the state machine and the argument why that is safe.

pub mod action;
pub mod clients;
pub mod clock;
pub mod cluster;
pub mod conditions;
pub mod devices;
pub mod error;
pub mod failure_domains;
pub mod handle;
pub mod machine;
pub mod memory;
pub mod names;
pub mod observe;
pub mod placements;
pub mod render;
pub mod runtime;
pub mod scheduler;
pub mod seams;
pub mod template;

pub use action::{Action, ErrorPolicy};
pub use clock::{Clock, ManualClock, SystemClock};
pub use error::ReconcileError;
pub use seams::{InfraStore, Management, ManagementError, StoreError};
