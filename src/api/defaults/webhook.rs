//! Upstream's defaulting webhooks, on the hub (v1alpha2) objects. Only
//! ProxmoxMachine has one; the other kinds' webhooks do nothing.

use crate::api::v1alpha2::{NetworkSpec, ProxmoxMachine};

/// The name of the primary network device.
pub const PRIMARY_DEVICE: &str = "net0";

/// Attaches the cluster's default IPv4 (IPv6) pool to `net0` when no device
/// says anything about it (`defaultIPv4` unset everywhere) and no device
/// configures IPv4 (IPv6) by DHCP.
///
/// Fixes over upstream: the device named `net0` gets the flag (upstream uses
/// whatever device is at index 0); an explicit `false` is respected (upstream
/// overrides it, which also undid v1alpha1 pool references on net0, as they
/// convert to `defaultIPv4: false` plus the reference); and a machine without
/// a network is left alone (upstream dereferences it).
pub fn default_proxmox_machine(machine: &mut ProxmoxMachine) {
    if let Some(network) = machine.spec.network.as_mut() {
        default_network(network);
    }
}

/// The network part of [`default_proxmox_machine`]: what a machine's network becomes, also
/// for a template's network, whose machines will be defaulted so.
pub fn default_network(network: &mut NetworkSpec) {
    let devices = &mut network.network_devices;
    type Flag = fn(&crate::api::v1alpha2::NetworkDevice) -> Option<bool>;
    let undecided = |default: Flag, dhcp: Flag| {
        devices
            .iter()
            .all(|d| default(d).is_none() && dhcp(d) != Some(true))
    };
    let set_ipv4 = undecided(|d| d.default_ipv4, |d| d.dhcp4);
    let set_ipv6 = undecided(|d| d.default_ipv6, |d| d.dhcp6);
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
