//! Proxmox VE: the client against the simulator and wiremock, the simulator against
//! the recorded PVE shapes, and the NoCloud ISO against Debian's ISO tools.

mod cli;
mod client;
mod faults;
mod lifecycle;
mod nocloud;
mod schema;
mod shapes;
mod timing;
mod tls;
mod wire;

use std::time::Duration;

use capmox_apiserver::proxmox::client::WaitOptions;
use capmox_apiserver::proxmox::sim::{self, RunningSim, SimConfig};
use capmox_apiserver::proxmox::types::{CloneRequest, TaskStatus};
use capmox_apiserver::proxmox::{Client, Error, ErrorKind, Upid};

/// A simulator with `config` and a client that trusts its CA.
pub async fn start(config: SimConfig) -> (RunningSim, Client) {
    let pve = sim::start(config).await.expect("simulator starts");
    let client = Client::new(pve.client_config()).expect("client builds");
    (pve, client)
}

/// The default simulator (instant profile).
pub async fn start_default() -> (RunningSim, Client) {
    start(SimConfig::default()).await
}

/// Short polling for tests: the instant profile finishes tasks at the next request.
pub fn quick() -> WaitOptions {
    WaitOptions {
        timeout: Duration::from_secs(20),
        initial_interval: Duration::from_millis(5),
        max_interval: Duration::from_millis(50),
    }
}

/// Waits for a task that must succeed.
pub async fn ok(client: &Client, upid: &Upid) -> TaskStatus {
    client
        .wait_task(upid, quick())
        .await
        .unwrap_or_else(|e| panic!("task {upid} failed: {e}"))
}

/// Starts a full clone of template 9000 (pve1, local-lvm) named `vm-<newid>`.
pub async fn start_clone(client: &Client, newid: u32) -> Result<Upid, Error> {
    client
        .clone_vm(
            "pve1",
            9000,
            &CloneRequest {
                newid,
                name: Some(format!("vm-{newid}")),
                full: Some(true),
                ..CloneRequest::default()
            },
        )
        .await
}

/// Full-clones template 9000 into `newid` and waits.
pub async fn clone_9000(client: &Client, newid: u32) {
    let upid = start_clone(client, newid).await.expect("clone starts");
    ok(client, &upid).await;
}

/// Registers VM `vmid` as an HA resource in group `capmox`; its settings.
pub async fn register_ha(
    client: &Client,
    vmid: u32,
) -> capmox_apiserver::proxmox::types::HaSettings {
    let settings = capmox_apiserver::proxmox::types::HaSettings {
        state: "started".into(),
        group: Some("capmox".into()),
        max_restart: 2,
        max_relocate: 1,
    };
    client
        .create_ha_resource(&capmox_apiserver::proxmox::types::ha_sid(vmid), &settings)
        .await
        .expect("HA resource registered");
    settings
}

/// Asserts an API error's class and reason phrase.
pub fn assert_api_error(err: &Error, kind: ErrorKind, reason: &str) {
    assert_eq!(err.kind(), kind, "{err}");
    assert_eq!(err.api().map(|a| a.reason.as_str()), Some(reason), "{err}");
}
