//! Types and patterns used by more than one v1alpha2 kind.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::common::is_zero;

/// Pattern of a Proxmox network device name (`net0`, `net1`, …).
pub const NET_NAME_PATTERN: &str = "^net[0-9]+$";

/// Pattern of a deployment zone name (label-like).
pub const ZONE_PATTERN: &str = "^[a-z0-9A-Z](?:[a-z0-9A-Z-_.]{0,61}[a-z0-9A-Z])?$";

/// The state of a virtual machine as tracked in `status.vmStatus`.
pub mod vm_state {
    /// The VM cannot be found.
    pub const NOT_FOUND: &str = "notfound";
    /// A Proxmox task is in flight for the VM.
    pub const PENDING: &str = "pending";
    /// The VM is powered on and reports its IP addresses.
    pub const READY: &str = "ready";
}

/// What the guest reports about one of the VM's network interfaces.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct NetworkStatus {
    /// connected tells whether the interface is currently connected to the VM.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-capmox-required" = true))]
    pub connected: Option<bool>,

    /// ipAddrs lists the IP addresses reported for the interface.
    #[serde(rename = "ipAddrs", skip_serializing_if = "is_zero")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub ip_addrs: Vec<String>,

    /// macAddr is the MAC address of the interface.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(
        extend("x-capmox-required" = true),
        length(min = 17, max = 17),
        pattern("^([0-9A-Fa-f]{2}[:]){5}([0-9A-Fa-f]{2})$")
    )]
    pub mac_addr: String,

    /// networkName is the Proxmox name of the device (`net0`, `net1`, …).
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(length(min = 4), pattern(NET_NAME_PATTERN))]
    pub network_name: String,
}
