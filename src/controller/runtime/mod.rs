//! The runtime that runs the reconcilers inside the server, modelled on kube-rs' runtime:
//!
//! * `queue`: the work queue (dedup, one pass per key at a time, delayed requeues, error
//!   back-off per key by `ErrorPolicy`);
//! * `feed` + `index`: the registry's watches in process (list, watch with bookmarks,
//!   resume, relist on 410), mapping events to keys, the periodic resync;
//! * `store`: [`RegistryInfraStore`], the reconcilers' `InfraStore` over the registry;
//! * `workers`: passes over keys with the two reconcilers;
//! * `controller`: [`Controller::start`], leader election (`capmox_storage::Store::campaign`)
//!   and one term of queue + feed + workers per leadership.
//!
//! It reports to a `controller::observe::ControllerObserver` (the metrics seam).

mod controller;
mod feed;
mod index;
mod key;
pub mod queue;
mod store;
mod workers;

pub use controller::{Controller, ControllerHandle, ControllerOptions, ElectionOptions};
pub use key::{ObjectKey, ReconcileKind, Trigger};
pub use queue::{Outcome, WorkQueue};
pub use store::{FIELD_MANAGER, MissingKind, RegistryInfraStore};
