//! Field paths and sets of them, and their `FieldsV1` JSON form: the
//! vocabulary of field ownership (structured-merge-diff's `fieldpath`).

mod element;
mod fields_v1;
mod set;
pub mod value;

pub use element::{ElementError, Path, PathElement};
pub use fields_v1::FieldsError;
pub use set::Set;
