//! `spec.network` of machines: v1alpha1 `default` + `additionalDevices` ⇄
//! v1alpha2 `networkDevices`, VRFs, routes and routing policies.
//!
//! Devices are matched with the prior hub devices by name, never by
//! position. A device's name in the hub may be empty (it is then named after
//! its position, `net<i>`); v1alpha1 sees that effective name. v1alpha1's
//! default device is the first hub device whose effective name is `net0`.
//!
//! A v1alpha1 machine without a network (or without a default device) keeps
//! its template's network card and gives net0 the cluster's pools. The hub
//! requires a network, so that reads as a net0 with no bridge and both
//! default pools: the same as a v1alpha1 default device with every field
//! empty, which is what v1alpha1 sees of such a net0 (shown as no default
//! device, or no network when nothing else is set).

use std::borrow::Cow;

use super::error::FieldPath;
use super::leaf::{EmptyIsNone, FitOpt, Leaf, Result, ZeroIsNone, fit, keep};
use super::pairing::{pair_atomic, pair_keyed};
use super::pools::{self, HubPools, Role, SpokePools};
use super::prior::{Origin, Prior};
use crate::api::{v1alpha1 as v1, v1alpha2 as v2};

/// The name of v1alpha1's default device.
const PRIMARY: &str = "net0";

/// The hub network of a v1alpha1 network.
pub(crate) fn up(
    spoke: Option<v1::NetworkSpec>,
    prior: Prior<'_, Option<v2::NetworkSpec>>,
    path: &FieldPath,
) -> Result<Option<v2::NetworkSpec>> {
    if spoke.is_none()
        && let Some(old) = prior.get()
        && down(old, prior.origin(), path).is_ok_and(|seen| seen.is_none())
    {
        return Ok(old.clone());
    }
    up_spec(spoke.unwrap_or_default(), prior.flatten(), path).map(Some)
}

/// The v1alpha1 network of a hub network.
pub(crate) fn down(
    hub: &Option<v2::NetworkSpec>,
    origin: Origin,
    path: &FieldPath,
) -> Result<Option<v1::NetworkSpec>> {
    let Some(hub) = hub else {
        return Ok(None);
    };
    let v2::NetworkSpec {
        zone: _,
        network_devices,
        vrfs,
    } = hub;
    let devices_path = path.field("networkDevices");
    let primary = primary_index(network_devices);
    let mut default = None;
    let mut additional_devices = Vec::new();
    for (i, device) in network_devices.iter().enumerate() {
        let device_path = devices_path.index(i);
        if Some(i) == primary {
            let (device, _) = down_device(device, Role::Default, origin, &device_path)?;
            default = Some(device).filter(|d| *d != v1::NetworkDevice::default());
        } else {
            additional_devices.push(down_additional(network_devices, i, origin, &device_path)?);
        }
    }
    let vrfs_path = path.field("vrfs");
    let vrfs = vrfs
        .iter()
        .enumerate()
        .map(|(i, vrf)| down_vrf(vrf, &vrfs_path.index(i)))
        .collect::<Result<Vec<_>>>()?;
    if default.is_none() && additional_devices.is_empty() && vrfs.is_empty() {
        return Ok(None);
    }
    Ok(Some(v1::NetworkSpec {
        default,
        additional_devices,
        vrfs,
    }))
}

/// The name a hub device goes by: its own, or `net<i>` after its position.
fn effective_name(devices: &[v2::NetworkDevice], index: usize) -> Cow<'_, str> {
    match devices.get(index) {
        Some(device) if !device.name.is_empty() => Cow::Borrowed(&device.name),
        _ => Cow::Owned(format!("net{index}")),
    }
}

/// The hub device v1alpha1 shows as its default device.
fn primary_index(devices: &[v2::NetworkDevice]) -> Option<usize> {
    (0..devices.len()).find(|&i| effective_name(devices, i) == PRIMARY)
}

/// Hub device `i`, shown as a v1alpha1 additional device.
fn down_additional(
    devices: &[v2::NetworkDevice],
    i: usize,
    origin: Origin,
    path: &FieldPath,
) -> Result<v1::AdditionalNetworkDevice> {
    let (device, (routing, link_mtu)) = down_device(&devices[i], Role::Additional, origin, path)?;
    Ok(v1::AdditionalNetworkDevice {
        device,
        name: effective_name(devices, i).into_owned(),
        routing,
        link_mtu,
    })
}

/// The v1alpha1 fields of a hub device and, for additional devices, its
/// routing and guest MTU.
type InterfaceConfig = (v1::Routing, Option<u16>);

fn down_device(
    hub: &v2::NetworkDevice,
    role: Role,
    origin: Origin,
    path: &FieldPath,
) -> Result<(v1::NetworkDevice, InterfaceConfig)> {
    let v2::NetworkDevice {
        bridge,
        default_ipv4,
        default_ipv6,
        dhcp4: _,
        dhcp6: _,
        model,
        mtu,
        vlan,
        queues: _,
        name: _,
        ip_pool_ref,
        dns_servers,
        routing,
        link_mtu,
    } = hub;
    let hub_pools = HubPools {
        default_ipv4: *default_ipv4,
        default_ipv6: *default_ipv6,
        refs: ip_pool_ref.clone(),
    };
    let SpokePools { ipv4, ipv6 } = pools::down(&hub_pools, role, origin);
    let device = v1::NetworkDevice {
        bridge: EmptyIsNone::down(bridge, path)?,
        model: model.clone(),
        mtu: FitOpt::down(mtu, &path.field("mtu"))?,
        vlan: FitOpt::down(vlan, &path.field("vlan"))?,
        dns_servers: dns_servers.clone(),
        ipv4_pool_ref: ipv4,
        ipv6_pool_ref: ipv6,
    };
    let interface = match role {
        // v1alpha1's default device has no routing and no guest MTU.
        Role::Default => InterfaceConfig::default(),
        Role::Additional => (
            down_routing(routing, path)?,
            FitOpt::down(link_mtu, &path.field("linkMtu"))?,
        ),
    };
    Ok((device, interface))
}

fn up_spec(
    spoke: v1::NetworkSpec,
    prior: Prior<'_, v2::NetworkSpec>,
    path: &FieldPath,
) -> Result<v2::NetworkSpec> {
    let v1::NetworkSpec {
        default,
        additional_devices,
        vrfs,
    } = spoke;
    Ok(v2::NetworkSpec {
        zone: prior.hidden(|n| &n.zone),
        network_devices: up_devices(default, additional_devices, prior, path)?,
        vrfs: up_vrfs(vrfs, prior.field(|n| &n.vrfs), &path.field("vrfs"))?,
    })
}

fn up_devices(
    default: Option<v1::NetworkDevice>,
    additional_devices: Vec<v1::AdditionalNetworkDevice>,
    prior: Prior<'_, v2::NetworkSpec>,
    path: &FieldPath,
) -> Result<Vec<v2::NetworkDevice>> {
    let prior_devices = prior
        .get()
        .map_or(&[][..], |n| n.network_devices.as_slice());
    let primary = primary_index(prior_devices);

    // Pair the additional devices by name with the prior devices v1alpha1
    // showed as additional ones.
    let candidates: Vec<usize> = (0..prior_devices.len())
        .filter(|&i| Some(i) != primary)
        .collect();
    let unchanged = |device: &v1::AdditionalNetworkDevice, &i: &usize| {
        down_additional(prior_devices, i, prior.origin(), path).is_ok_and(|seen| seen == *device)
    };
    let pairs: Vec<Option<usize>> = pair_keyed(
        &additional_devices,
        &candidates,
        |device, &i| effective_name(prior_devices, i) == device.name,
        unchanged,
    )
    .into_iter()
    .map(|pair| pair.map(|c| candidates[c]))
    .collect();

    // net0 goes back where it was: before the first device that followed it
    // (or is new); without a prior net0, first.
    let primary_at = primary.map_or(0, |p| {
        pairs
            .iter()
            .position(|pair| pair.is_none_or(|i| i > p))
            .unwrap_or(pairs.len())
    });

    // No default device in v1alpha1 is net0 on the cluster's pools (and the
    // template's card), unless the hub had no net0 to begin with.
    let with_primary = default.is_some() || primary.is_some() || prior.get().is_none();

    let additional_path = path.field("additionalDevices");
    let mut devices = Vec::with_capacity(additional_devices.len() + 1);
    for (j, (device, pair)) in additional_devices.into_iter().zip(pairs).enumerate() {
        let v1::AdditionalNetworkDevice {
            device,
            name,
            routing,
            link_mtu,
        } = device;
        let at = j + usize::from(with_primary && j >= primary_at);
        let device_prior = Prior::new(pair.map(|i| &prior_devices[i]), prior.origin());
        devices.push(up_device(
            device,
            Some((routing, link_mtu)),
            kept_name(name, pair, at, prior_devices),
            device_prior,
            &additional_path.index(j),
        )?);
    }
    if with_primary {
        let primary_prior = Prior::new(primary.map(|p| &prior_devices[p]), prior.origin());
        let primary_device = up_device(
            default.unwrap_or_default(),
            None,
            kept_name(PRIMARY.to_string(), primary, primary_at, prior_devices),
            primary_prior,
            &path.field("default"),
        )?;
        devices.insert(primary_at, primary_device);
    }
    Ok(devices)
}

fn up_vrfs(
    vrfs: Vec<v1::VrfDevice>,
    prior: Prior<'_, Vec<v2::VrfDevice>>,
    path: &FieldPath,
) -> Result<Vec<v2::VrfDevice>> {
    let prior_vrfs = prior.get().map_or(&[][..], Vec::as_slice);
    let pairs = pair_keyed(
        &vrfs,
        prior_vrfs,
        |s, h| s.name == h.name,
        |s, h| down_vrf(h, path).is_ok_and(|seen| seen == *s),
    );
    vrfs.into_iter()
        .zip(pairs)
        .enumerate()
        .map(|(i, (vrf, pair))| {
            let vrf_prior = Prior::new(pair.map(|p| &prior_vrfs[p]), prior.origin());
            up_vrf(vrf, vrf_prior, &path.index(i))
        })
        .collect()
}

/// A device's hub name: an empty prior name (named after its position)
/// stays empty while the device keeps its position.
fn kept_name(
    name: String,
    pair: Option<usize>,
    at: usize,
    prior_devices: &[v2::NetworkDevice],
) -> String {
    match pair {
        Some(i) if i == at && prior_devices[i].name.is_empty() => String::new(),
        _ => name,
    }
}

fn up_device(
    spoke: v1::NetworkDevice,
    interface: Option<InterfaceConfig>,
    name: String,
    prior: Prior<'_, v2::NetworkDevice>,
    path: &FieldPath,
) -> Result<v2::NetworkDevice> {
    let v1::NetworkDevice {
        bridge,
        model,
        mtu,
        vlan,
        dns_servers,
        ipv4_pool_ref,
        ipv6_pool_ref,
    } = spoke;
    let role = if interface.is_some() {
        Role::Additional
    } else {
        Role::Default
    };
    let prior_pools = prior.get().map(|d| HubPools {
        default_ipv4: d.default_ipv4,
        default_ipv6: d.default_ipv6,
        refs: d.ip_pool_ref.clone(),
    });
    let spoke_pools = SpokePools {
        ipv4: ipv4_pool_ref,
        ipv6: ipv6_pool_ref,
    };
    let HubPools {
        default_ipv4,
        default_ipv6,
        refs,
    } = pools::up(spoke_pools, role, prior_pools.as_ref(), prior.origin());
    let (routing, link_mtu) = match interface {
        Some((routing, link_mtu)) => (
            up_routing(routing, prior.field(|d| &d.routing), path)?,
            keep::<FitOpt<u16, i32>>(
                link_mtu,
                prior.field(|d| &d.link_mtu),
                &path.field("linkMtu"),
            )?,
        ),
        // v1alpha1's default device cannot carry them: they stay as stored.
        None => (prior.hidden(|d| &d.routing), prior.hidden(|d| &d.link_mtu)),
    };
    Ok(v2::NetworkDevice {
        bridge: keep::<EmptyIsNone>(bridge, prior.field(|d| &d.bridge), path)?,
        default_ipv4,
        default_ipv6,
        dhcp4: prior.hidden(|d| &d.dhcp4),
        dhcp6: prior.hidden(|d| &d.dhcp6),
        model,
        mtu: keep::<FitOpt<u16, i32>>(mtu, prior.field(|d| &d.mtu), &path.field("mtu"))?,
        vlan: keep::<FitOpt<u16, i32>>(vlan, prior.field(|d| &d.vlan), &path.field("vlan"))?,
        queues: prior.hidden(|d| &d.queues),
        name,
        ip_pool_ref: refs,
        dns_servers,
        routing,
        link_mtu,
    })
}

fn down_vrf(hub: &v2::VrfDevice, path: &FieldPath) -> Result<v1::VrfDevice> {
    let v2::VrfDevice {
        interfaces,
        name,
        table,
        routing,
    } = hub;
    Ok(v1::VrfDevice {
        interfaces: interfaces.clone(),
        name: name.clone(),
        table: fit(*table, &path.field("table"))?,
        routing: down_routing(routing, path)?,
    })
}

fn up_vrf(
    spoke: v1::VrfDevice,
    prior: Prior<'_, v2::VrfDevice>,
    path: &FieldPath,
) -> Result<v2::VrfDevice> {
    let v1::VrfDevice {
        interfaces,
        name,
        table,
        routing,
    } = spoke;
    Ok(v2::VrfDevice {
        interfaces,
        name,
        table: fit(table, &path.field("table"))?,
        routing: up_routing(routing, prior.field(|v| &v.routing), path)?,
    })
}

fn down_routing(hub: &v2::Routing, path: &FieldPath) -> Result<v1::Routing> {
    let v2::Routing {
        routes,
        routing_policy,
    } = hub;
    Ok(v1::Routing {
        routes: down_list(routes, &path.field("routes"), down_route)?,
        routing_policy: down_list(routing_policy, &path.field("routingPolicy"), down_policy)?,
    })
}

fn up_routing(
    spoke: v1::Routing,
    prior: Prior<'_, v2::Routing>,
    path: &FieldPath,
) -> Result<v2::Routing> {
    let v1::Routing {
        routes,
        routing_policy,
    } = spoke;
    Ok(v2::Routing {
        routes: up_list(
            routes,
            prior.field(|r| &r.routes),
            &path.field("routes"),
            down_route,
            up_route,
        )?,
        routing_policy: up_list(
            routing_policy,
            prior.field(|r| &r.routing_policy),
            &path.field("routingPolicy"),
            down_policy,
            up_policy,
        )?,
    })
}

/// Converts each element of a hub list down.
pub(crate) fn down_list<H, S>(
    hub: &[H],
    path: &FieldPath,
    down: impl Fn(&H, &FieldPath) -> Result<S>,
) -> Result<Vec<S>> {
    hub.iter()
        .enumerate()
        .map(|(i, element)| down(element, &path.index(i)))
        .collect()
}

/// Converts each element of an unkeyed v1alpha1 list up, paired with the
/// prior hub element it continues (see [`pair_atomic`]).
pub(crate) fn up_list<S: PartialEq, H>(
    spoke: Vec<S>,
    prior: Prior<'_, Vec<H>>,
    path: &FieldPath,
    down: impl Fn(&H, &FieldPath) -> Result<S>,
    up: impl Fn(S, Prior<'_, H>, &FieldPath) -> Result<H>,
) -> Result<Vec<H>> {
    let prior_list = prior.get().map_or(&[][..], Vec::as_slice);
    let pairs = pair_atomic(&spoke, prior_list, |s, h| {
        down(h, path).is_ok_and(|seen| seen == *s)
    });
    spoke
        .into_iter()
        .zip(pairs)
        .enumerate()
        .map(|(i, (element, pair))| {
            let element_prior = Prior::new(pair.map(|p| &prior_list[p]), prior.origin());
            up(element, element_prior, &path.index(i))
        })
        .collect()
}

fn down_route(hub: &v2::RouteSpec, path: &FieldPath) -> Result<v1::RouteSpec> {
    let v2::RouteSpec {
        to,
        via,
        metric,
        table,
        is6: _,
    } = hub;
    Ok(v1::RouteSpec {
        to: EmptyIsNone::down(to, path)?,
        via: EmptyIsNone::down(via, path)?,
        metric: ZeroIsNone::down(metric, &path.field("metric"))?,
        table: ZeroIsNone::down(table, &path.field("table"))?,
    })
}

fn up_route(
    spoke: v1::RouteSpec,
    prior: Prior<'_, v2::RouteSpec>,
    path: &FieldPath,
) -> Result<v2::RouteSpec> {
    let v1::RouteSpec {
        to,
        via,
        metric,
        table,
    } = spoke;
    Ok(v2::RouteSpec {
        to: keep::<EmptyIsNone>(to, prior.field(|r| &r.to), path)?,
        via: keep::<EmptyIsNone>(via, prior.field(|r| &r.via), path)?,
        metric: keep::<ZeroIsNone<u32, i32>>(
            metric,
            prior.field(|r| &r.metric),
            &path.field("metric"),
        )?,
        table: keep::<ZeroIsNone<u32, i32>>(
            table,
            prior.field(|r| &r.table),
            &path.field("table"),
        )?,
        is6: prior.hidden(|r| &r.is6),
    })
}

fn down_policy(hub: &v2::RoutingPolicySpec, path: &FieldPath) -> Result<v1::RoutingPolicySpec> {
    let v2::RoutingPolicySpec {
        to,
        from,
        table,
        priority,
        is6: _,
    } = hub;
    Ok(v1::RoutingPolicySpec {
        to: EmptyIsNone::down(to, path)?,
        from: EmptyIsNone::down(from, path)?,
        table: FitOpt::down(table, &path.field("table"))?,
        priority: ZeroIsNone::down(priority, &path.field("priority"))?,
    })
}

fn up_policy(
    spoke: v1::RoutingPolicySpec,
    prior: Prior<'_, v2::RoutingPolicySpec>,
    path: &FieldPath,
) -> Result<v2::RoutingPolicySpec> {
    let v1::RoutingPolicySpec {
        to,
        from,
        table,
        priority,
    } = spoke;
    Ok(v2::RoutingPolicySpec {
        to: keep::<EmptyIsNone>(to, prior.field(|r| &r.to), path)?,
        from: keep::<EmptyIsNone>(from, prior.field(|r| &r.from), path)?,
        table: keep::<FitOpt<u32, i32>>(table, prior.field(|r| &r.table), &path.field("table"))?,
        priority: keep::<ZeroIsNone<u32, i64>>(
            priority,
            prior.field(|r| &r.priority),
            &path.field("priority"),
        )?,
        is6: prior.hidden(|r| &r.is6),
    })
}
