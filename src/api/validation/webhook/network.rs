//! Network rules of upstream's ProxmoxMachine webhook (`validateNetworks`),
//! applied to machines and — fixing an upstream gap — machine templates.
//!
//! Fixes over upstream: devices are ordered by their number without
//! reordering the object (upstream sorts the user's list in place, and by
//! string, so `net10` sorts before `net2`); errors name the device's real
//! index in the user's list; all problems are reported, not just the first;
//! paths are real JSON paths (`vrfs[i]`, not `VirtualNetworkDevices.VRFs[i]`).

use serde_json::Value;

use crate::api::field::{Error, ErrorList, Path};
use crate::api::v1alpha2::{NetworkDevice, NetworkSpec, RouteSpec, RoutingPolicySpec, VrfDevice};

/// The device number of a `netN` name.
pub fn net_name_to_offset(name: &str) -> Option<u32> {
    name.strip_prefix("net")?.parse().ok()
}

/// Validates a machine network configuration found at `path`.
pub fn validate_network(network: &NetworkSpec, path: &Path) -> ErrorList {
    let devices_path = path.child("networkDevices");
    let mut errors = ErrorList::new();
    consecutive_names(&network.network_devices, &devices_path, &mut errors);
    single_defaults(&network.network_devices, &devices_path, &mut errors);
    for (i, device) in network.network_devices.iter().enumerate() {
        device_rules(device, &devices_path.index(i), &mut errors);
    }
    for (i, vrf) in network.vrfs.iter().enumerate() {
        vrf_rules(vrf, &path.child("vrfs").index(i), &mut errors);
    }
    errors
}

/// Warnings for devices that take addresses both from the cluster's pools (`defaultIPv4`,
/// `defaultIPv6`) and from their own `ipPoolRef`s: a referenced pool of a family the device
/// also defaults to gives it a second address of that family (upstream's semantics, which
/// surprised its users: #763, #810). The family of a referenced pool is not known here (it is
/// another object), so with one default the warning says "if".
pub fn shared_pool_warnings(network: &NetworkSpec, path: &Path) -> Vec<String> {
    let devices_path = path.child("networkDevices");
    network
        .network_devices
        .iter()
        .enumerate()
        .filter(|(_, d)| !d.ip_pool_ref.is_empty())
        .filter_map(|(i, d)| {
            let name = &d.name;
            let refs = d
                .ip_pool_ref
                .iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            let consequence = match (d.default_ipv4 == Some(true), d.default_ipv6 == Some(true)) {
                (true, true) => format!(
                    "takes addresses from the cluster's IPv4 and IPv6 pools (defaultIPv4, \
                     defaultIPv6) and from {refs} (ipPoolRef), so it gets a second address of \
                     each referenced pool's family; set defaultIPv4 or defaultIPv6 to false to \
                     take only the referenced pool's"
                ),
                (true, false) => format!(
                    "takes an address from the cluster's IPv4 pool (defaultIPv4) and from {refs} \
                     (ipPoolRef): if a referenced pool is IPv4 too, it gets two IPv4 addresses; \
                     set defaultIPv4 to false to take only the referenced pool's"
                ),
                (false, true) => format!(
                    "takes an address from the cluster's IPv6 pool (defaultIPv6) and from {refs} \
                     (ipPoolRef): if a referenced pool is IPv6 too, it gets two IPv6 addresses; \
                     set defaultIPv6 to false to take only the referenced pool's"
                ),
                (false, false) => return None,
            };
            Some(format!("{}: {name} {consequence}", devices_path.index(i)))
        })
        .collect()
}

/// Device names must be net0 … net(N-1): the device with the k-th smallest
/// number must be `net<k>`. Reports the first device that breaks the run.
fn consecutive_names(devices: &[NetworkDevice], path: &Path, errors: &mut ErrorList) {
    let mut numbered: Vec<(u32, usize)> = devices
        .iter()
        .enumerate()
        .filter_map(|(i, d)| net_name_to_offset(&d.name).map(|n| (n, i)))
        .collect();
    numbered.sort_unstable();
    let gap = numbered
        .iter()
        .enumerate()
        .find(|(position, (number, _))| usize::try_from(*number).ok() != Some(*position));
    if let Some((_, &(_, index))) = gap {
        errors.push(Error::invalid(
            path.index(index).child("name"),
            devices[index].name.as_str(),
            "Non-consecutive proxmox interface name",
        ));
    }
}

/// At most one device may carry the default IPv4 pool, and one the IPv6
/// pool. Reports the device where the second one appears.
fn single_defaults(devices: &[NetworkDevice], path: &Path, errors: &mut ErrorList) {
    let (mut ipv4, mut ipv6) = (0, 0);
    for (i, device) in devices.iter().enumerate() {
        ipv4 += usize::from(device.default_ipv4 == Some(true));
        ipv6 += usize::from(device.default_ipv6 == Some(true));
        if (ipv4 > 1 && device.default_ipv4 == Some(true))
            || (ipv6 > 1 && device.default_ipv6 == Some(true))
        {
            errors.push(Error::invalid(
                path.index(i),
                serde_json::to_value(device).unwrap_or(Value::Null),
                "More than one default IPv4/IPv6 interface in NetworkDevices",
            ));
        }
    }
}

/// MTUs below 1280 break IPv6; upstream refuses them (except the special
/// value 1, "inherit from the bridge", for the device MTU).
fn device_rules(device: &NetworkDevice, path: &Path, errors: &mut ErrorList) {
    if let Some(mtu) = device.mtu
        && mtu != 1
        && mtu < 1280
    {
        errors.push(Error::invalid(
            path.child("mtu"),
            mtu,
            format!("mtu must be at least 1280 or 1, but was {mtu}"),
        ));
    }
    if let Some(mtu) = device.link_mtu
        && mtu < 1280
    {
        errors.push(Error::invalid(
            path.child("linkMtu"),
            mtu,
            format!("mtu must be at least 1280, but was {mtu}"),
        ));
    }
    let policies_path = path.child("routingPolicy");
    for (k, policy) in device.routing.routing_policy.iter().enumerate() {
        if policy.table.is_none() {
            errors.push(Error::invalid(
                policies_path.clone(),
                policy_value(policy),
                format!("routing policy [{k}] requires a table"),
            ));
        }
        if let Some(problem) = policy_placeholder_problem(policy) {
            errors.push(Error::invalid(
                policies_path.clone(),
                policy_value(policy),
                format!("routing policy [{k}]: {problem}"),
            ));
        }
    }
    route_rules(&device.routing.routes, &path.child("routes"), "", errors);
}

fn vrf_rules(vrf: &VrfDevice, path: &Path, errors: &mut ErrorList) {
    let prefix = format!("VRF {}: ", vrf.name);
    let policies_path = path.child("routingPolicy");
    for policy in &vrf.routing.routing_policy {
        if let Some(table) = policy.table
            && table != vrf.table
        {
            errors.push(Error::invalid(
                policies_path.clone(),
                policy_value(policy),
                format!(
                    "{prefix}device/rule routing table mismatch {} != {table}",
                    vrf.table
                ),
            ));
        }
        if let Some(problem) = policy_placeholder_problem(policy) {
            errors.push(Error::invalid(
                policies_path.clone(),
                policy_value(policy),
                format!("{prefix}{problem}"),
            ));
        }
    }
    route_rules(&vrf.routing.routes, &path.child("routes"), &prefix, errors);
}

fn route_rules(routes: &[RouteSpec], path: &Path, prefix: &str, errors: &mut ErrorList) {
    for (k, route) in routes.iter().enumerate() {
        if is_placeholder(route.to.as_deref())
            && !is_concrete(route.via.as_deref())
            && route.is6.is_none()
        {
            errors.push(Error::invalid(
                path.clone(),
                serde_json::to_value(route).unwrap_or(Value::Null),
                format!(
                    "{prefix}route [{k}]: is6 must be set when 'to' is a placeholder and 'via' is unset"
                ),
            ));
        }
    }
}

/// The family of a rule whose `to`/`from` use the `default`/`all`
/// placeholder must come from the other field or from `is6`.
fn policy_placeholder_problem(policy: &RoutingPolicySpec) -> Option<&'static str> {
    let (to, from) = (policy.to.as_deref(), policy.from.as_deref());
    let placeholder = is_placeholder(to) || is_placeholder(from);
    let concrete = is_concrete(to) || is_concrete(from);
    (placeholder && !concrete && policy.is6.is_none()).then_some(
        "is6 must be set when 'to'/'from' is a placeholder and neither provides an address family",
    )
}

fn policy_value(policy: &RoutingPolicySpec) -> Value {
    serde_json::to_value(policy).unwrap_or(Value::Null)
}

/// `default` and `all` name "everything" without an address family.
fn is_placeholder(target: Option<&str>) -> bool {
    matches!(target, Some("default" | "all"))
}

/// A target from which the address family can be read.
fn is_concrete(target: Option<&str>) -> bool {
    target.is_some_and(|t| !t.is_empty()) && !is_placeholder(target)
}
