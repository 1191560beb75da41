//! What the guest receives, read by the guest's own tools (issue: the documents the
//! controller hands each VM are checked by the programs that will read them, not only by
//! our re-parsing).

mod cloud_init;
mod ignition;
pub(crate) mod netplan;

use capmox_apiserver::controller::render::network::NetworkData;
use capmox_apiserver::controller::render::{self, Format, SeedInputs};
use capmox_apiserver::proxmox::nocloud::NoCloud;
use proptest::test_runner::{Config, TestRunner};

/// The SMBIOS UUID of the guest the seeds are rendered for.
const INSTANCE_ID: &str = "6c3fa683-bef9-4425-b413-eaa45a9d6191";

/// The seed the controller renders for a control-plane machine on pve2 with `network`.
fn seed(network: &NetworkData, format: Format, user_data: &str) -> NoCloud {
    render::seed(&SeedInputs {
        hostname: "capmox-test-cp-0",
        instance_id: INSTANCE_ID,
        provider_id_injection: true,
        kubernetes_version: Some("v1.34.3"),
        node: "pve2",
        zone: "default",
        network,
        format,
        user_data: user_data.as_bytes(),
    })
    .expect("seed renders")
}

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
