//! Upstream's defaulting webhooks, on the hub (v1alpha2) objects. Only
//! ProxmoxMachine has one; the other kinds' webhooks do nothing.

use crate::api::v1alpha2::ProxmoxMachine;

/// The name of the primary network device.
pub const PRIMARY_DEVICE: &str = "net0";

/// Attaches the cluster's default IPv4 (IPv6) pool to `net0` when no device
/// asks for it and no device configures IPv4 (IPv6) by DHCP.
///
/// Fixes over upstream: the device named `net0` gets the flag (upstream uses
/// whatever device is at index 0), and a machine without a network is left
/// alone (upstream dereferences it).
pub fn default_proxmox_machine(machine: &mut ProxmoxMachine) {
    let Some(network) = machine.spec.network.as_mut() else {
        return;
    };
    let devices = &mut network.network_devices;
    let any = |pick: fn(&crate::api::v1alpha2::NetworkDevice) -> Option<bool>| {
        devices.iter().any(|d| pick(d) == Some(true))
    };
    let set_ipv4 = !any(|d| d.default_ipv4) && !any(|d| d.dhcp4);
    let set_ipv6 = !any(|d| d.default_ipv6) && !any(|d| d.dhcp6);
    let Some(primary) = devices.iter_mut().find(|d| d.name == PRIMARY_DEVICE) else {
        return;
    };
    if set_ipv4 {
        primary.default_ipv4 = Some(true);
    }
    if set_ipv6 {
        primary.default_ipv6 = Some(true);
    }
}
