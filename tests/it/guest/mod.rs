//! What the guest receives, read by the guest's own tools (issue: the documents the
//! controller hands each VM are checked by the programs that will read them, not only by
//! our re-parsing).

mod cloud_init;
mod ignition;
pub(crate) mod netplan;

use proptest::test_runner::{Config, TestRunner};

/// A runner of `default` cases, or `CAPMOX_GUEST_CASES` (the longer run).
fn runner(default: u32) -> TestRunner {
    let cases = std::env::var("CAPMOX_GUEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    TestRunner::new(Config {
        cases,
        ..Config::default()
    })
}
