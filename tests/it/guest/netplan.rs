//! The network-config the controller renders, read by the guest's own reader: netplan
//! (Debian's `netplan.io`) generates systemd-networkd files from it into a scratch root, and
//! those files must carry exactly what the spec asked for: each device's MAC match, DHCP,
//! addresses, default routes through the pools' gateways (with their metrics), extra routes,
//! routing-policy rules, name servers, MTU and VRF membership, and each VRF's table, routes
//! and rules. Specs are generated: 1 to 8 devices, IPv4-only, IPv6-only and dual-stack,
//! several addresses per device, DHCP-only and bridge-only devices, VRFs.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use capmox_apiserver::api::v1alpha2::{
    NetworkDevice, RouteSpec, Routing, RoutingPolicySpec, VrfDevice,
};
use capmox_apiserver::controller::render::netplan;
use capmox_apiserver::controller::render::network::{
    DeviceInput, IpConfig, NetworkData, NetworkError, build,
};
use proptest::prelude::*;

/// A `[Section]` of a networkd file with its `Key=value` lines, in order.
pub(crate) type Section = (String, Vec<(String, String)>);

pub(crate) fn parse_unit(text: &str) -> Vec<Section> {
    let mut sections: Vec<Section> = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            sections.push((name.to_owned(), Vec::new()));
        } else if let Some((key, value)) = line.split_once('=') {
            let section = sections.last_mut().expect("a key inside a section");
            section.1.push((key.to_owned(), value.to_owned()));
        }
    }
    sections
}

/// The values of `key` in every `section` of a unit.
pub(crate) fn values(unit: &[Section], section: &str, key: &str) -> Vec<String> {
    unit.iter()
        .filter(|(name, _)| name == section)
        .flat_map(|(_, pairs)| pairs.iter().filter(|(k, _)| k == key))
        .map(|(_, v)| v.clone())
        .collect()
}

/// Every `section` of a unit as a sorted key → value map (routes, rules), sorted.
fn blocks(unit: &[Section], section: &str) -> Vec<BTreeMap<String, String>> {
    let mut all: Vec<BTreeMap<String, String>> = unit
        .iter()
        .filter(|(name, _)| name == section)
        .map(|(_, pairs)| pairs.iter().cloned().collect())
        .collect();
    all.sort();
    all
}

fn map(pairs: &[(&str, Option<String>)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .filter_map(|(k, v)| v.clone().map(|v| ((*k).to_owned(), v)))
        .collect()
}

/// What one generated device asks for.
#[derive(Clone, Debug)]
pub(crate) struct DeviceCase {
    mac: String,
    dhcp4: bool,
    dhcp6: bool,
    /// (IPv6, gateway metric): one address of that family from a pool, with a gateway
    /// when the metric is given (`Some(None)`: a gateway without a metric).
    addresses: Vec<(bool, Option<Option<i64>>)>,
    routes: Vec<(Option<i32>, Option<i32>)>,
    rules: usize,
    dns: usize,
    mtu: Option<i32>,
}

/// A generated machine network.
#[derive(Clone, Debug)]
pub(crate) struct NetworkCase {
    pub(crate) devices: Vec<DeviceCase>,
    /// Devices (by index, never the first) enslaved to the VRF `vrf-ext`, with its table.
    pub(crate) vrf: Option<(Vec<usize>, i32)>,
}

fn device_case(index: usize) -> impl Strategy<Value = DeviceCase> {
    let address = (
        any::<bool>(),
        prop::option::of(prop::option::of(1..500_i64)),
    );
    (
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        prop::collection::vec(address, 0..4),
        prop::collection::vec(
            (
                prop::option::of(1..1000_i32),
                prop::option::of(100..200_i32),
            ),
            0..3,
        ),
        0..3_usize,
        0..3_usize,
        prop::option::of(1280..9001_i32),
    )
        .prop_map(
            move |(upper, dhcp4, dhcp6, addresses, routes, rules, dns, mtu)| {
                // Digits only, a MAC reads as a base-60 integer to YAML 1.1 (PyYAML,
                // cloud-init's reader) unless it is quoted.
                let mac = if upper {
                    format!("BC:24:11:A0:{index:02X}:5E")
                } else {
                    format!("52:54:00:1{index}:34:56")
                };
                DeviceCase {
                    mac,
                    dhcp4,
                    dhcp6,
                    addresses,
                    routes,
                    rules,
                    dns,
                    mtu,
                }
            },
        )
}

pub(crate) fn network_case() -> impl Strategy<Value = NetworkCase> {
    (1..=8_usize)
        .prop_flat_map(|n| {
            (
                (0..n).map(device_case).collect::<Vec<_>>(),
                prop::option::of((
                    prop::collection::btree_set(1..n.max(2), 1..3),
                    prop_oneof![1..254_i32, 256..100_000_i32],
                )),
            )
        })
        .prop_map(|(devices, vrf)| {
            let n = devices.len();
            let vrf = vrf
                .map(|(members, table)| {
                    let members: Vec<usize> = members.into_iter().filter(|m| *m < n).collect();
                    (members, table)
                })
                .filter(|(members, _)| !members.is_empty());
            NetworkCase { devices, vrf }
        })
}

fn address(device: usize, k: usize, v6: bool) -> (String, String) {
    if v6 {
        (
            format!("fd00:{device}:{k}::5"),
            format!("fd00:{device}:{k}::1"),
        )
    } else {
        (format!("10.{device}.{k}.5"), format!("10.{device}.{k}.1"))
    }
}

/// The inputs of one case as the controller hands them to the renderer, and what networkd
/// must end up with.
pub(crate) struct Built {
    pub(crate) devices: Vec<NetworkDevice>,
    pub(crate) inputs: Vec<(String, Vec<IpConfig>, Vec<String>)>,
    pub(crate) vrfs: Vec<VrfDevice>,
}

pub(crate) fn build_case(case: &NetworkCase) -> Built {
    let members: Vec<usize> = case
        .vrf
        .as_ref()
        .map(|(m, _)| m.clone())
        .unwrap_or_default();
    let mut devices = Vec::new();
    let mut inputs = Vec::new();
    for (i, d) in case.devices.iter().enumerate() {
        let enslaved = members.contains(&i);
        let addresses: Vec<IpConfig> = d
            .addresses
            .iter()
            .enumerate()
            .map(|(k, (v6, gateway))| {
                let (ip, gw) = address(i, k, *v6);
                // Gateways of VRF members would route in the VRF's table; the VRF has its own.
                let gateway = gateway.filter(|_| !enslaved);
                IpConfig {
                    address: ip.parse().expect("address"),
                    prefix: if *v6 { 64 } else { 24 },
                    gateway: gateway.map(|_| gw.parse().expect("gateway")),
                    // Distinct per device and address: routes are unique by (table, to,
                    // metric), so only the first address may leave the metric out.
                    metric: gateway.and_then(|metric| match metric {
                        Some(m) => Some(m * 100 + (i * 10 + k) as i64),
                        None if i == 0 && k == 0 => None,
                        None => Some(100_000 + (i * 10 + k) as i64),
                    }),
                    default: gateway.is_some(),
                }
            })
            .collect();
        let routes = if enslaved {
            Vec::new()
        } else {
            d.routes
                .iter()
                .enumerate()
                .map(|(r, (metric, table))| RouteSpec {
                    to: Some(format!("192.168.{}.0/24", i * 8 + r)),
                    via: Some(format!("10.{i}.0.254")),
                    metric: *metric,
                    table: *table,
                    ..RouteSpec::default()
                })
                .collect()
        };
        let routing_policy = (0..d.rules)
            .map(|r| RoutingPolicySpec {
                from: Some(format!("10.{i}.{r}.0/24")),
                table: (!enslaved).then_some(100 + i as i32),
                priority: Some(1000 + (i * 10 + r) as i64),
                ..RoutingPolicySpec::default()
            })
            .collect();
        devices.push(NetworkDevice {
            name: format!("net{i}"),
            dhcp4: Some(d.dhcp4),
            dhcp6: Some(d.dhcp6),
            link_mtu: d.mtu,
            routing: Routing {
                routes,
                routing_policy,
            },
            ..NetworkDevice::default()
        });
        let dns = (0..d.dns).map(|n| format!("10.{i}.53.{n}")).collect();
        inputs.push((d.mac.clone(), addresses, dns));
    }
    let vrfs = case
        .vrf
        .iter()
        .map(|(members, table)| VrfDevice {
            name: "vrf-ext".into(),
            table: *table,
            interfaces: members.iter().map(|m| format!("net{m}")).collect(),
            routing: Routing {
                routes: vec![RouteSpec {
                    to: Some("172.16.0.0/16".into()),
                    via: Some(format!("10.{}.0.254", members[0])),
                    ..RouteSpec::default()
                }],
                routing_policy: vec![RoutingPolicySpec {
                    to: Some("172.17.0.0/16".into()),
                    priority: Some(10),
                    ..RoutingPolicySpec::default()
                }],
            },
        })
        .collect();
    Built {
        devices,
        inputs,
        vrfs,
    }
}

/// The renderer's view of a case, as the controller builds it.
pub(crate) fn network_data(built: &Built) -> Result<NetworkData, NetworkError> {
    let inputs: Vec<DeviceInput<'_>> = built
        .devices
        .iter()
        .zip(&built.inputs)
        .map(|(device, (mac, addresses, dns))| DeviceInput {
            device,
            mac: mac.clone(),
            addresses: addresses.clone(),
            dns: dns.clone(),
        })
        .collect();
    build(inputs, &built.vrfs)
}

/// `netplan generate` over `yaml` in a scratch root: the networkd files by name.
pub(crate) fn generate(yaml: &str, root: &Path) -> BTreeMap<String, Vec<Section>> {
    let netplan_dir = root.join("etc/netplan");
    std::fs::create_dir_all(&netplan_dir).expect("netplan dir");
    let file = netplan_dir.join("50-cloud-init.yaml");
    std::fs::write(&file, yaml).expect("network-config");
    // netplan warns about world-readable files; cloud-init writes them 0600.
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("mode");
    let output = Command::new("netplan")
        .args(["generate", "--root-dir"])
        .arg(root)
        .output()
        .expect("netplan runs (apt-get install netplan.io)");
    assert!(
        output.status.success() && output.stderr.is_empty(),
        "netplan refused:\n{yaml}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::read_dir(root.join("run/systemd/network"))
        .expect("networkd files")
        .map(|e| e.expect("entry"))
        .map(|e| {
            let text = std::fs::read_to_string(e.path()).expect("unit");
            (
                e.file_name().to_string_lossy().into_owned(),
                parse_unit(&text),
            )
        })
        .collect()
}

/// Where a writer of networkd files puts a machine network: the file of each device, the
/// `[Match]` key that carries its MAC, and the VRF's `.netdev` and `.network` files.
pub(crate) struct Layout {
    pub(crate) device: fn(usize) -> String,
    pub(crate) mac_key: &'static str,
    /// Given the number of devices.
    pub(crate) vrf: fn(usize) -> (String, String),
}

/// netplan's names.
const NETPLAN: Layout = Layout {
    device: |i| format!("10-netplan-eth{i}.network"),
    mac_key: "PermanentMACAddress",
    vrf: |_| {
        (
            "10-netplan-vrf-ext.netdev".to_owned(),
            "10-netplan-vrf-ext.network".to_owned(),
        )
    },
};

fn check_case(case: &NetworkCase, root: &Path) -> Result<(), TestCaseError> {
    let built = build_case(case);
    // A network with neither a gateway nor DHCP is refused before rendering.
    let Ok(data) = network_data(&built) else {
        let reachable = built
            .inputs
            .iter()
            .any(|(_, addresses, _)| addresses.iter().any(|a| a.gateway.is_some()))
            || case.devices.iter().any(|d| d.dhcp4 || d.dhcp6);
        prop_assert!(!reachable, "a valid network was refused: {case:?}");
        return Ok(());
    };
    let yaml = netplan::render(&data).expect("renders");
    let _ = std::fs::remove_dir_all(root);
    check_units(case, &built, &generate(&yaml, root), &NETPLAN)
}

/// The networkd files of a case carry exactly what its spec asked for.
pub(crate) fn check_units(
    case: &NetworkCase,
    built: &Built,
    units: &BTreeMap<String, Vec<Section>>,
    layout: &Layout,
) -> Result<(), TestCaseError> {
    let vrf_table = case.vrf.as_ref().map(|(_, t)| t.to_string());

    for (i, (device, (mac, addresses, dns))) in built.devices.iter().zip(&built.inputs).enumerate()
    {
        let name = (layout.device)(i);
        let unit = units
            .get(&name)
            .ok_or_else(|| TestCaseError::fail(format!("no {name} in {:?}", units.keys())))?;
        prop_assert_eq!(
            values(unit, "Match", layout.mac_key),
            vec![mac.to_lowercase()]
        );
        let dhcp = match (device.dhcp4 == Some(true), device.dhcp6 == Some(true)) {
            (true, true) => vec!["yes".to_owned()],
            (true, false) => vec!["ipv4".to_owned()],
            (false, true) => vec!["ipv6".to_owned()],
            (false, false) => vec![],
        };
        prop_assert_eq!(values(unit, "Network", "DHCP"), dhcp, "{}", name);
        // netplan lists IPv4 before IPv6; networkd's order of addresses has no meaning, nor
        // whether an address is a `[Network]` setting or an `[Address]` section.
        let mut expected: Vec<String> = addresses.iter().map(IpConfig::cidr).collect();
        let mut generated = values(unit, "Network", "Address");
        generated.extend(values(unit, "Address", "Address"));
        expected.sort();
        generated.sort();
        prop_assert_eq!(generated, expected, "{}", name);
        prop_assert_eq!(&values(unit, "Network", "DNS"), dns, "{}", name);
        let mtu: Vec<String> = device.link_mtu.iter().map(i32::to_string).collect();
        prop_assert_eq!(values(unit, "Link", "MTUBytes"), mtu, "{}", name);
        let enslaved = case
            .vrf
            .as_ref()
            .is_some_and(|(members, _)| members.contains(&i));
        let vrf: Vec<String> = enslaved.then(|| "vrf-ext".to_owned()).into_iter().collect();
        prop_assert_eq!(values(unit, "Network", "VRF"), vrf, "{}", name);

        let mut routes: Vec<BTreeMap<String, String>> = addresses
            .iter()
            .filter_map(|a| {
                let gateway = a.gateway?;
                let to = if gateway.is_ipv6() {
                    "::/0"
                } else {
                    "0.0.0.0/0"
                };
                Some(map(&[
                    ("Destination", Some(to.to_owned())),
                    ("Gateway", Some(gateway.to_string())),
                    ("Metric", a.metric.map(|m| m.to_string())),
                ]))
            })
            .chain(device.routing.routes.iter().map(|r| {
                map(&[
                    ("Destination", r.to.clone()),
                    ("Gateway", r.via.clone()),
                    ("Metric", r.metric.map(|m| m.to_string())),
                    ("Table", r.table.map(|t| t.to_string())),
                ])
            }))
            .collect();
        routes.sort();
        prop_assert_eq!(blocks(unit, "Route"), routes, "{}", name);
        let mut rules: Vec<BTreeMap<String, String>> = device
            .routing
            .routing_policy
            .iter()
            .map(|r| {
                map(&[
                    ("From", r.from.clone()),
                    ("Table", r.table.map(|t| t.to_string())),
                    ("Priority", r.priority.map(|p| p.to_string())),
                ])
            })
            .collect();
        rules.sort();
        prop_assert_eq!(blocks(unit, "RoutingPolicyRule"), rules, "{}", name);
    }

    if let Some(table) = vrf_table {
        let (netdev, network) = (layout.vrf)(built.devices.len());
        let netdev = &units[&netdev];
        prop_assert_eq!(values(netdev, "NetDev", "Name"), vec!["vrf-ext".to_owned()]);
        prop_assert_eq!(values(netdev, "NetDev", "Kind"), vec!["vrf".to_owned()]);
        prop_assert_eq!(values(netdev, "VRF", "Table"), vec![table.clone()]);
        let unit = &units[&network];
        let vrf = &built.vrfs[0];
        let route = &vrf.routing.routes[0];
        // Routes and rules of the VRF go to its table.
        prop_assert_eq!(
            blocks(unit, "Route"),
            vec![map(&[
                ("Destination", route.to.clone()),
                ("Gateway", route.via.clone()),
                ("Table", Some(table.clone())),
            ])]
        );
        prop_assert_eq!(
            blocks(unit, "RoutingPolicyRule"),
            vec![map(&[
                ("To", vrf.routing.routing_policy[0].to.clone()),
                ("Table", Some(table)),
                ("Priority", Some("10".to_owned())),
            ])]
        );
    } else {
        prop_assert!(!units.keys().any(|k| k.contains("vrf")));
    }
    Ok(())
}

#[test]
fn netplan_generates_what_the_spec_asked_for() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut runner = super::runner(64);
    let root = dir.path().join("root");
    runner
        .run(&network_case(), |case| check_case(&case, &root))
        .unwrap_or_else(|e| panic!("{e}"));
}
