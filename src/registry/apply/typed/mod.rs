//! Objects read with their schema (structured-merge-diff's `typed`): the
//! set of fields an object sets, the comparison of two objects, merging an
//! apply configuration, removing paths, and checking a configuration.

mod atomics;
mod compare;
mod items;
mod merge;
mod named;
mod remove;
mod schema;
mod to_set;
mod validate;

pub use atomics::atomic_paths;
pub use compare::{Comparison, compare};
pub use items::ItemError;
pub use merge::{merge, merge_into};
pub use named::with_named_fields;
pub use remove::remove_items;
pub use schema::{Atom, ListKind, Ty};
pub use to_set::{to_field_set, to_field_set_named};
pub use validate::validate_config;
