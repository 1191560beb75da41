//! The guest network model both renderers (netplan for cloud-init, networkd units for
//! Ignition) are fed from, built from the machine's devices, their resolved addresses and
//! MACs, and checked once (upstream's shared validation, plus de-duplication of identical
//! routes so additive pools with the same gateway no longer collide).

use std::collections::BTreeSet;
use std::net::IpAddr;

use crate::api::v1alpha2::{NetworkDevice, RouteSpec, RoutingPolicySpec, VrfDevice};

/// Why the network configuration cannot be rendered (needs a spec or pool change).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NetworkError(pub String);

fn err(message: impl Into<String>) -> NetworkError {
    NetworkError(message.into())
}

/// One address of a device as IPAM handed it out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpConfig {
    /// The address.
    pub address: IpAddr,
    /// Prefix length.
    pub prefix: u8,
    /// Gateway (gives a default route).
    pub gateway: Option<IpAddr>,
    /// Metric of that default route (pool annotation `gateway-metric`).
    pub metric: Option<i64>,
    /// From a default (cluster or zone) pool.
    pub default: bool,
}

impl IpConfig {
    /// `address/prefix`.
    pub fn cidr(&self) -> String {
        format!("{}/{}", self.address, self.prefix)
    }
}

/// A route as rendered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// Destination CIDR (as written, host bits kept).
    pub to: String,
    /// Gateway.
    pub via: Option<String>,
    /// Metric.
    pub metric: Option<i64>,
    /// Routing table.
    pub table: Option<i64>,
}

/// A FIB rule as rendered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Destination match.
    pub to: Option<String>,
    /// Source match.
    pub from: Option<String>,
    /// Priority.
    pub priority: Option<i64>,
    /// Table looked up.
    pub table: Option<i64>,
}

/// One guest NIC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ethernet {
    /// Guest name, `eth<N>` for `net<N>`.
    pub name: String,
    /// Proxmox device, `net<N>`.
    pub net: String,
    /// MAC address, lower case.
    pub mac: String,
    /// DHCPv4.
    pub dhcp4: bool,
    /// DHCPv6.
    pub dhcp6: bool,
    /// Static addresses in pool order.
    pub addresses: Vec<IpConfig>,
    /// Routes (default routes through pool gateways first).
    pub routes: Vec<Route>,
    /// FIB rules.
    pub rules: Vec<Rule>,
    /// Name servers.
    pub dns: Vec<String>,
    /// MTU inside the guest.
    pub link_mtu: Option<i32>,
    /// The VRF the NIC is enslaved to.
    pub vrf: Option<String>,
}

/// A VRF device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vrf {
    /// Name.
    pub name: String,
    /// Routing table.
    pub table: i64,
    /// Enslaved NICs (guest names).
    pub interfaces: Vec<String>,
    /// Routes.
    pub routes: Vec<Route>,
    /// FIB rules.
    pub rules: Vec<Rule>,
}

/// The whole guest network.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetworkData {
    /// NICs ordered by device number.
    pub ethernets: Vec<Ethernet>,
    /// VRFs in spec order.
    pub vrfs: Vec<Vrf>,
}

/// What the controller knows about one device when rendering.
#[derive(Clone, Debug)]
pub struct DeviceInput<'a> {
    /// The spec of the device.
    pub device: &'a NetworkDevice,
    /// Its MAC from the VM config.
    pub mac: String,
    /// Its resolved addresses, in pool order.
    pub addresses: Vec<IpConfig>,
    /// Name servers (device's own, else zone's, else cluster's).
    pub dns: Vec<String>,
}

fn parse_ip(s: &str) -> Option<IpAddr> {
    s.trim().parse().ok()
}

/// Parses a route/rule destination: `default`/`all` (family from `v6`), a CIDR as written,
/// or a bare address (→ /32 or /128). Empty is `None`.
fn destination(raw: Option<&str>, v6: bool) -> Result<Option<String>, NetworkError> {
    let Some(raw) = raw.map(str::trim).filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    if raw == "default" || raw == "all" {
        return Ok(Some(if v6 { "::/0" } else { "0.0.0.0/0" }.to_string()));
    }
    if let Some((ip, prefix)) = raw.split_once('/') {
        let ip = parse_ip(ip).ok_or_else(|| err(format!("invalid destination {raw:?}")))?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        match prefix.parse::<u8>() {
            Ok(p) if p <= max => return Ok(Some(raw.to_string())),
            _ => return Err(err(format!("invalid destination {raw:?}"))),
        }
    }
    match parse_ip(raw) {
        Some(ip) if ip.is_ipv4() => Ok(Some(format!("{ip}/32"))),
        Some(ip) => Ok(Some(format!("{ip}/128"))),
        None => Err(err(format!("invalid destination {raw:?}"))),
    }
}

fn is_placeholder(s: Option<&str>) -> bool {
    matches!(s.map(str::trim), Some("default" | "all"))
}

fn family_of(s: Option<&str>) -> Option<bool> {
    let s = s?.trim();
    if is_placeholder(Some(s)) {
        return None;
    }
    parse_ip(s.split('/').next().unwrap_or(s)).map(|ip| ip.is_ipv6())
}

fn route(spec: &RouteSpec) -> Result<Route, NetworkError> {
    let via = match spec.via.as_deref().map(str::trim).filter(|v| !v.is_empty()) {
        Some(v) => Some(
            parse_ip(v)
                .ok_or_else(|| err(format!("route via {v:?} is not an IP address")))?
                .to_string(),
        ),
        None => None,
    };
    let v6 = spec
        .is6
        .or_else(|| via.as_deref().and_then(|v| family_of(Some(v))))
        .unwrap_or(false);
    Ok(Route {
        to: destination(spec.to.as_deref(), v6)?.ok_or_else(|| err("route is malformed"))?,
        via,
        metric: spec.metric.map(i64::from),
        table: spec.table.map(i64::from),
    })
}

fn rule(spec: &RoutingPolicySpec) -> Result<Rule, NetworkError> {
    let v6 = spec
        .is6
        .or_else(|| family_of(spec.to.as_deref()))
        .or_else(|| family_of(spec.from.as_deref()))
        .unwrap_or(false);
    Ok(Rule {
        to: destination(spec.to.as_deref(), v6)?,
        from: destination(spec.from.as_deref(), v6)?,
        priority: spec.priority,
        table: spec.table.map(i64::from),
    })
}

fn net_number(name: &str) -> Option<u32> {
    name.strip_prefix("net")?.parse().ok()
}

/// Builds and validates the guest network.
pub fn build(
    devices: Vec<DeviceInput<'_>>,
    vrfs: &[VrfDevice],
) -> Result<NetworkData, NetworkError> {
    let mut devices: Vec<(u32, DeviceInput<'_>)> = devices
        .into_iter()
        .map(|d| {
            net_number(&d.device.name)
                .map(|n| (n, d.clone()))
                .ok_or_else(|| err(format!("invalid device name {:?}", d.device.name)))
        })
        .collect::<Result<_, _>>()?;
    devices.sort_by_key(|(n, _)| *n);
    let mut ethernets = Vec::new();
    for (n, input) in devices {
        let mut routes: Vec<Route> = input
            .addresses
            .iter()
            .filter_map(|a| {
                let gw = a.gateway?;
                Some(Route {
                    to: if gw.is_ipv6() { "::/0" } else { "0.0.0.0/0" }.to_string(),
                    via: Some(gw.to_string()),
                    metric: a.metric,
                    table: None,
                })
            })
            .collect();
        for r in &input.device.routing.routes {
            routes.push(route(r)?);
        }
        dedup(&mut routes);
        let rules = input
            .device
            .routing
            .routing_policy
            .iter()
            .map(rule)
            .collect::<Result<Vec<_>, _>>()?;
        ethernets.push(Ethernet {
            name: format!("eth{n}"),
            net: input.device.name.clone(),
            mac: input.mac.to_ascii_lowercase(),
            dhcp4: input.device.dhcp4 == Some(true),
            dhcp6: input.device.dhcp6 == Some(true),
            addresses: input.addresses,
            routes,
            rules,
            dns: input.dns,
            link_mtu: input.device.link_mtu,
            vrf: None,
        });
    }
    let mut rendered_vrfs = Vec::new();
    for v in vrfs {
        let mut interfaces = Vec::new();
        for member in &v.interfaces {
            let eth = ethernets
                .iter_mut()
                .find(|e| e.net == *member || e.name == *member)
                .ok_or_else(|| {
                    err(format!(
                        "unable to find vrf interface={} child interface {member}",
                        v.name
                    ))
                })?;
            eth.vrf = Some(v.name.clone());
            interfaces.push(eth.name.clone());
        }
        let mut routes = v
            .routing
            .routes
            .iter()
            .map(route)
            .collect::<Result<Vec<_>, _>>()?;
        dedup(&mut routes);
        rendered_vrfs.push(Vrf {
            name: v.name.clone(),
            table: i64::from(v.table),
            interfaces,
            routes,
            rules: v
                .routing
                .routing_policy
                .iter()
                .map(rule)
                .collect::<Result<Vec<_>, _>>()?,
        });
    }
    let data = NetworkData {
        ethernets,
        vrfs: rendered_vrfs,
    };
    validate(&data)?;
    Ok(data)
}

fn dedup(routes: &mut Vec<Route>) {
    let mut seen = BTreeSet::new();
    routes.retain(|r| seen.insert((r.to.clone(), r.via.clone(), r.metric, r.table)));
}

fn is_default_route(to: &str) -> bool {
    to == "0.0.0.0/0" || to == "::/0"
}

/// Upstream's checks shared by both renderers.
pub fn validate(data: &NetworkData) -> Result<(), NetworkError> {
    if data.ethernets.is_empty() {
        return Err(err("network config data is not set"));
    }
    let vrf_table = |name: &Option<String>| {
        name.as_ref()
            .and_then(|n| data.vrfs.iter().find(|v| &v.name == n))
            .map(|v| v.table)
    };
    let mut identities = BTreeSet::new();
    let mut check_routes = |routes: &[Route], implied: Option<i64>| -> Result<(), NetworkError> {
        for r in routes {
            let table = r.table.or(implied).unwrap_or(254);
            let metric = r.metric.unwrap_or(0);
            if !identities.insert((table, r.to.clone(), metric)) {
                return Err(err(format!(
                    "route already exists for destination {} metric {metric} in routing table {table}",
                    r.to
                )));
            }
        }
        Ok(())
    };
    for e in &data.ethernets {
        check_routes(&e.routes, vrf_table(&e.vrf))?;
    }
    for v in &data.vrfs {
        check_routes(&v.routes, Some(v.table))?;
    }
    let check_rules = |rules: &[Rule], on_vrf: bool| -> Result<(), NetworkError> {
        for r in rules {
            let families: BTreeSet<bool> = [&r.to, &r.from]
                .into_iter()
                .filter_map(|s| family_of(s.as_deref()))
                .collect();
            let no_match = r.to.is_none() && r.from.is_none();
            let no_table = !on_vrf && r.table.unwrap_or(0) == 0;
            if no_match || no_table || families.len() > 1 {
                return Err(err("routing policy is malformed"));
            }
        }
        Ok(())
    };
    for e in &data.ethernets {
        check_rules(&e.rules, e.vrf.is_some())?;
    }
    for v in &data.vrfs {
        check_rules(&v.rules, true)?;
    }
    let has_default = data
        .ethernets
        .iter()
        .flat_map(|e| &e.routes)
        .chain(data.vrfs.iter().flat_map(|v| &v.routes))
        .any(|r| is_default_route(&r.to));
    let has_dhcp = data.ethernets.iter().any(|e| e.dhcp4 || e.dhcp6);
    if !has_default && !has_dhcp {
        return Err(err("gateway is not set"));
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::api::v1alpha2::Routing;

    pub(crate) fn ip(a: &str, prefix: u8, gw: Option<&str>, metric: Option<i64>) -> IpConfig {
        IpConfig {
            address: a.parse().expect("address"),
            prefix,
            gateway: gw.map(|g| g.parse().expect("gateway")),
            metric,
            default: gw.is_some(),
        }
    }

    pub(crate) fn device(name: &str) -> NetworkDevice {
        NetworkDevice {
            name: name.to_string(),
            ..NetworkDevice::default()
        }
    }

    fn input<'a>(d: &'a NetworkDevice, mac: &str, addresses: Vec<IpConfig>) -> DeviceInput<'a> {
        DeviceInput {
            device: d,
            mac: mac.into(),
            addresses,
            dns: vec!["8.8.8.8".into()],
        }
    }

    #[test]
    fn builds_default_routes_and_parses_user_routes() {
        let mut net1 = device("net1");
        net1.routing = Routing {
            routes: vec![
                RouteSpec {
                    to: Some("172.16.24.1/24".into()),
                    via: Some("10.1.0.1".into()),
                    metric: Some(5),
                    ..Default::default()
                },
                RouteSpec {
                    to: Some("default".into()),
                    is6: Some(true),
                    table: Some(100),
                    ..Default::default()
                },
                RouteSpec {
                    to: Some("192.168.7.7".into()),
                    ..Default::default()
                },
            ],
            routing_policy: vec![RoutingPolicySpec {
                from: Some("10.1.0.0/24".into()),
                table: Some(100),
                priority: Some(999),
                ..Default::default()
            }],
        };
        let net0 = device("net0");
        let data = build(
            vec![
                input(
                    &net1,
                    "BC:24:11:00:00:02",
                    vec![ip("10.1.0.5", 24, None, None)],
                ),
                input(
                    &net0,
                    "BC:24:11:00:00:01",
                    vec![
                        ip("10.0.0.5", 24, Some("10.0.0.1"), Some(100)),
                        ip("fd00::5", 64, Some("fd00::1"), None),
                    ],
                ),
            ],
            &[],
        )
        .expect("valid");
        assert_eq!(data.ethernets[0].name, "eth0");
        assert_eq!(data.ethernets[0].mac, "bc:24:11:00:00:01");
        let tos: Vec<&str> = data.ethernets[0]
            .routes
            .iter()
            .map(|r| r.to.as_str())
            .collect();
        assert_eq!(tos, ["0.0.0.0/0", "::/0"]);
        let tos: Vec<&str> = data.ethernets[1]
            .routes
            .iter()
            .map(|r| r.to.as_str())
            .collect();
        assert_eq!(tos, ["172.16.24.1/24", "::/0", "192.168.7.7/32"]);
        assert_eq!(data.ethernets[1].rules[0].table, Some(100));
    }

    #[test]
    fn identical_default_routes_are_merged_but_conflicts_are_reported() {
        let net0 = device("net0");
        let same = build(
            vec![input(
                &net0,
                "m",
                vec![
                    ip("10.0.0.5", 24, Some("10.0.0.1"), None),
                    ip("10.0.0.6", 24, Some("10.0.0.1"), None),
                ],
            )],
            &[],
        )
        .expect("identical routes merge");
        assert_eq!(same.ethernets[0].routes.len(), 1);
        let net1 = device("net1");
        let clash = build(
            vec![
                input(&net0, "a", vec![ip("10.0.0.5", 24, Some("10.0.0.1"), None)]),
                input(&net1, "b", vec![ip("10.1.0.5", 24, Some("10.1.0.1"), None)]),
            ],
            &[],
        );
        assert_eq!(
            clash,
            Err(NetworkError(
                "route already exists for destination 0.0.0.0/0 metric 0 in routing table 254"
                    .into()
            ))
        );
        let distinct = build(
            vec![
                input(
                    &net0,
                    "a",
                    vec![ip("10.0.0.5", 24, Some("10.0.0.1"), Some(100))],
                ),
                input(
                    &net1,
                    "b",
                    vec![ip("10.1.0.5", 24, Some("10.1.0.1"), Some(200))],
                ),
            ],
            &[],
        );
        assert!(distinct.is_ok());
    }

    #[test]
    fn gateway_dhcp_vrf_and_rule_checks() {
        let net0 = device("net0");
        assert_eq!(
            build(
                vec![input(&net0, "a", vec![ip("10.0.0.5", 24, None, None)])],
                &[]
            ),
            Err(NetworkError("gateway is not set".into()))
        );
        let mut dhcp = device("net0");
        dhcp.dhcp4 = Some(true);
        assert!(build(vec![input(&dhcp, "a", vec![])], &[]).is_ok());
        assert_eq!(
            build(vec![], &[]),
            Err(NetworkError("network config data is not set".into()))
        );
        let vrf = VrfDevice {
            name: "vrf-blue".into(),
            table: 500,
            interfaces: vec!["net1".into()],
            ..Default::default()
        };
        assert_eq!(
            build(vec![input(&dhcp, "a", vec![])], std::slice::from_ref(&vrf)),
            Err(NetworkError(
                "unable to find vrf interface=vrf-blue child interface net1".into()
            ))
        );
        let mut bad_rule = device("net0");
        bad_rule.dhcp4 = Some(true);
        bad_rule.routing.routing_policy = vec![RoutingPolicySpec {
            to: Some("10.0.0.0/8".into()),
            from: Some("fd00::/8".into()),
            table: Some(5),
            ..Default::default()
        }];
        assert_eq!(
            build(vec![input(&bad_rule, "a", vec![])], &[]),
            Err(NetworkError("routing policy is malformed".into()))
        );
        let mut bad_via = device("net0");
        bad_via.routing.routes = vec![RouteSpec {
            to: Some("default".into()),
            via: Some("gw".into()),
            ..Default::default()
        }];
        assert!(build(vec![input(&bad_via, "a", vec![])], &[]).is_err());
    }
}
