//! The built-in controller against the real Proxmox simulator, with the in-memory store
//! and management cluster: provisioning flows, deletion, fault runs, random kills, and
//! the provisioning benchmark.

mod behaviours;
mod bench;
mod faults;
// Also used by proxmox::schema, which runs a machine's life with the request log on.
pub(crate) mod harness;
mod kills;
mod outage;
mod provisioning;
mod pve_clusters;
mod releases;
mod runtime;

use serde_json::{Value, json};

/// A ProxmoxMachine spec: template 9000 on pve1, one NIC on vmbr0, `overrides` merged in
/// (JSON merge patch semantics).
pub fn machine_spec(overrides: Value) -> Value {
    let mut spec = json!({
        "sourceNode": "pve1",
        "templateID": 9000,
        "numCores": 2,
        "memoryMiB": 1024,
        "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 20}},
        "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0"}]},
    });
    capmox_apiserver::registry::patch::merge(&mut spec, &overrides);
    spec
}
