//! Conversion v1alpha1 ⇄ v1alpha2: property tests over generated objects of
//! every kind, and examples of the documented rules.

mod edits;
mod examples;
mod fuzz;
pub(crate) mod generate;
mod lists;
mod round_trips;

/// Cases per property and kind (each case is cheap; see docs/conversion.md
/// for the run time).
const CASES: u32 = 10_000;
