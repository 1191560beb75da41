//! Conversion between v1alpha1 and the hub (storage) version v1alpha2, for
//! the four kinds and their lists.
//!
//! Every field is converted by exhaustive destructuring, so a field added to
//! a type breaks the build here instead of being dropped silently.
//!
//! Going up, the stored hub object (or upstream's conversion-data annotation
//! when nothing is stored) is the context: a v1alpha1 value equal to what the
//! stored value shows in v1alpha1 keeps the stored value exactly, a changed
//! one wins, and what v1alpha1 cannot express keeps its stored value. So an
//! object read as v1alpha1 and written back unchanged leaves the stored
//! object unchanged. Lists are matched by key (device name, condition type,
//! …), never by position. See `docs/conversion.md` for the rules and for what
//! stays lossy.

mod annotation;
mod cluster;
mod conditions;
mod error;
mod leaf;
mod machine;
mod network;
mod object;
mod pairing;
mod pools;
mod prior;
mod same_fields;

pub use annotation::UPSTREAM_CONVERSION_DATA;
pub use conditions::EMPTY_REASON;
pub use error::ConversionError;
pub use object::Spoke;
