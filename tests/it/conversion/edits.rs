//! A stored object is read as v1alpha1, one v1alpha1 field is edited, and it
//! is written back with the stored object as context. Then:
//! - it reads back as edited (the edit wins, nothing else visible moved);
//! - the stored object changed only in the hub fields of the edited one
//!   (checked by restoring those fields and comparing with the stored object).

use capmox_apiserver::api::common::{LocalObjectReference, TypedLocalObjectReference};
use capmox_apiserver::api::conversion::Spoke;
use capmox_apiserver::api::{v1alpha1 as v1, v1alpha2 as v2};
use proptest::prelude::*;
use proptest::{option, sample::select};

use super::CASES;
use super::generate::{hub, one_of, pool_ref, spoke, strings};

/// An edit of a v1alpha1 machine spec.
#[derive(Clone, Debug)]
enum MachineSpecEdit {
    SourceNode(String),
    NumCores(i32),
    Bridge(usize, String),
    Mtu(usize, Option<u16>),
    Pools(
        usize,
        Option<TypedLocalObjectReference>,
        Option<TypedLocalObjectReference>,
    ),
    RouteMetric(usize, usize, u32),
    RemoveAdditionalDevice(usize),
    AddAdditionalDevice(v1::AdditionalNetworkDevice),
    ClearDefaultDevice,
    RemoveNetwork,
}

fn machine_spec_edit() -> BoxedStrategy<MachineSpecEdit> {
    use MachineSpecEdit::*;
    let device = || 0..4usize;
    prop_oneof![
        one_of(&["", "pve1", "pve9"]).prop_map(SourceNode),
        (0..8i32).prop_map(NumCores),
        (device(), one_of(&["vmbr0", "vmbr9"])).prop_map(|(d, b)| Bridge(d, b)),
        (device(), option::of(any::<u16>())).prop_map(|(d, m)| Mtu(d, m)),
        (device(), option::of(pool_ref()), option::of(pool_ref()))
            .prop_map(|(d, a, b)| Pools(d, a, b)),
        (device(), 0..2usize, 0..=i32::MAX as u32).prop_map(|(d, r, m)| RouteMetric(d, r, m)),
        device().prop_map(RemoveAdditionalDevice),
        spoke::additional_device().prop_map(|mut d| {
            d.name = NEW_DEVICE.into();
            AddAdditionalDevice(d)
        }),
        Just(ClearDefaultDevice),
        Just(RemoveNetwork),
    ]
    .boxed()
}

/// The name of an added device; the generators never use it.
const NEW_DEVICE: &str = "net7";

/// The effective names of hub devices (empty names go by position).
fn effective_names(devices: &[v2::NetworkDevice]) -> Vec<String> {
    devices
        .iter()
        .enumerate()
        .map(|(i, d)| {
            if d.name.is_empty() {
                format!("net{i}")
            } else {
                d.name.clone()
            }
        })
        .collect()
}

/// The hub index of the v1alpha1 view's device `k` (default first).
fn hub_device_index(network: &v2::NetworkSpec, view: &v1::NetworkSpec, k: usize) -> Option<usize> {
    let names = effective_names(&network.network_devices);
    let primary = names.iter().position(|n| n == "net0");
    let others: Vec<usize> = (0..names.len()).filter(|i| Some(*i) != primary).collect();
    match (view.default.is_some(), k) {
        (true, 0) => primary,
        (true, k) => others.get(k - 1).copied(),
        (false, k) => others.get(k).copied(),
    }
}

/// The v1alpha1 view's device `k` (default first).
fn view_device(view: &mut v1::NetworkSpec, k: usize) -> Option<&mut v1::NetworkDevice> {
    let has_default = view.default.is_some();
    match (view.default.as_mut(), k) {
        (Some(default), 0) => Some(default),
        _ => view
            .additional_devices
            .get_mut(k - usize::from(has_default))
            .map(|d| &mut d.device),
    }
}

/// v1alpha1 values that mean "nothing" are written as absent, the form a
/// read gives back (see `generate::spoke`).
fn normalize_network(network: &mut Option<v1::NetworkSpec>) {
    if let Some(n) = network {
        if n.default.as_ref() == Some(&v1::NetworkDevice::default()) {
            n.default = None;
        }
        if *n == v1::NetworkSpec::default() {
            *network = None;
        }
    }
}

impl MachineSpecEdit {
    fn apply(&self, spec: &mut v1::ProxmoxMachineSpec) {
        use MachineSpecEdit::*;
        match self {
            SourceNode(node) => spec.source_node = node.clone(),
            NumCores(cores) => spec.num_cores = *cores,
            RemoveNetwork => spec.network = None,
            _ => {
                if let Some(network) = spec.network.as_mut() {
                    self.apply_to_network(network);
                }
                normalize_network(&mut spec.network);
            }
        }
    }

    fn apply_to_network(&self, network: &mut v1::NetworkSpec) {
        use MachineSpecEdit::*;
        match self {
            Bridge(k, bridge) => view_device(network, *k)
                .into_iter()
                .for_each(|d| d.bridge = bridge.clone()),
            Mtu(k, mtu) => view_device(network, *k)
                .into_iter()
                .for_each(|d| d.mtu = *mtu),
            Pools(k, v4, v6) => view_device(network, *k).into_iter().for_each(|d| {
                d.ipv4_pool_ref = v4.clone();
                d.ipv6_pool_ref = v6.clone();
            }),
            RouteMetric(k, r, metric) => {
                let route = network
                    .additional_devices
                    .get_mut(*k)
                    .and_then(|d| d.routing.routes.get_mut(*r));
                if let Some(route) = route {
                    route.metric = *metric;
                }
            }
            RemoveAdditionalDevice(k) => {
                if *k < network.additional_devices.len() {
                    network.additional_devices.remove(*k);
                }
            }
            AddAdditionalDevice(device) => network.additional_devices.push(device.clone()),
            ClearDefaultDevice => network.default = None,
            SourceNode(_) | NumCores(_) | RemoveNetwork => {}
        }
    }

    /// Puts the stored values back into the hub fields this edit may change
    /// in `written`, and brings `stored` into the shape the edit gives it
    /// (devices removed or added).
    fn restore(
        &self,
        written: &mut v2::ProxmoxMachineSpec,
        stored: &mut v2::ProxmoxMachineSpec,
        view: &v1::ProxmoxMachineSpec,
    ) {
        use MachineSpecEdit::*;
        match self {
            SourceNode(_) => written.source_node = stored.source_node.clone(),
            NumCores(_) => written.num_cores = stored.num_cores,
            RemoveNetwork => written.network = stored.network.clone(),
            _ => {
                let (Some(w), Some(s), Some(v)) = (
                    written.network.as_mut(),
                    stored.network.as_mut(),
                    view.network.as_ref(),
                ) else {
                    return;
                };
                self.restore_network(w, s, v);
            }
        }
    }

    fn restore_network(
        &self,
        written: &mut v2::NetworkSpec,
        stored: &mut v2::NetworkSpec,
        view: &v1::NetworkSpec,
    ) {
        use MachineSpecEdit::*;
        let device = |k: usize| hub_device_index(stored, view, k);
        match self {
            Bridge(k, _) => device(*k).into_iter().for_each(|i| {
                written.network_devices[i].bridge = stored.network_devices[i].bridge.clone();
            }),
            Mtu(k, _) => device(*k).into_iter().for_each(|i| {
                written.network_devices[i].mtu = stored.network_devices[i].mtu;
            }),
            Pools(k, _, _) => device(*k).into_iter().for_each(|i| {
                restore_pools(&mut written.network_devices[i], &stored.network_devices[i])
            }),
            RouteMetric(k, r, _) => {
                let i = hub_device_index(
                    stored,
                    &v1::NetworkSpec {
                        default: None,
                        ..view.clone()
                    },
                    *k,
                );
                if let Some(i) = i
                    && let Some(old) = stored.network_devices[i].routing.routes.get(*r)
                {
                    written.network_devices[i].routing.routes[*r].metric = old.metric;
                }
            }
            RemoveAdditionalDevice(k) => {
                let k = k + usize::from(view.default.is_some());
                if let Some(i) = device(k) {
                    name_by_position(&mut stored.network_devices);
                    stored.network_devices.remove(i);
                    name_by_position(&mut written.network_devices);
                }
            }
            AddAdditionalDevice(_) => written.network_devices.retain(|d| d.name != NEW_DEVICE),
            ClearDefaultDevice => {
                if let Some(i) = device(0).filter(|_| view.default.is_some()) {
                    let old = &stored.network_devices[i];
                    let new = &mut written.network_devices[i];
                    new.bridge = old.bridge.clone();
                    new.model = old.model.clone();
                    new.mtu = old.mtu;
                    new.vlan = old.vlan;
                    new.dns_servers = old.dns_servers.clone();
                    restore_pools(new, old);
                }
            }
            SourceNode(_) | NumCores(_) | RemoveNetwork => {}
        }
    }
}

fn restore_pools(written: &mut v2::NetworkDevice, stored: &v2::NetworkDevice) {
    written.default_ipv4 = stored.default_ipv4;
    written.default_ipv6 = stored.default_ipv6;
    written.ip_pool_ref = stored.ip_pool_ref.clone();
}

/// Gives every device its effective name, so that lists whose devices moved
/// compare by what the names mean.
fn name_by_position(devices: &mut [v2::NetworkDevice]) {
    let names = effective_names(devices);
    for (device, name) in devices.iter_mut().zip(names) {
        device.name = name;
    }
}

/// An edit of v1alpha1 machine status.
#[derive(Clone, Debug)]
enum MachineStatusEdit {
    Ready(bool),
    VmStatus(String),
    Ipv4(usize, String),
    ConditionStatus(usize, String),
}

fn machine_status_edit() -> BoxedStrategy<MachineStatusEdit> {
    use MachineStatusEdit::*;
    prop_oneof![
        any::<bool>().prop_map(Ready),
        one_of(&["", "ready", "notfound"]).prop_map(VmStatus),
        (0..3usize, one_of(&["", "10.9.9.9", "10.0.0.1"])).prop_map(|(k, a)| Ipv4(k, a)),
        (0..3usize, one_of(&["True", "False"])).prop_map(|(k, s)| ConditionStatus(k, s)),
    ]
    .boxed()
}

impl MachineStatusEdit {
    fn apply(&self, status: &mut v1::ProxmoxMachineStatus) {
        use MachineStatusEdit::*;
        match self {
            Ready(ready) => status.ready = *ready,
            VmStatus(vm_status) => status.vm_status = vm_status.clone(),
            Ipv4(k, address) => {
                if let Some(entry) = status.ip_addresses.values_mut().nth(*k) {
                    entry.ipv4 = address.clone();
                }
            }
            ConditionStatus(k, value) => edit_condition(&mut status.conditions, *k, value),
        }
    }

    fn restore(
        &self,
        written: &mut v2::ProxmoxMachineStatus,
        stored: &v2::ProxmoxMachineStatus,
        view: &v1::ProxmoxMachineStatus,
    ) {
        use MachineStatusEdit::*;
        match self {
            Ready(_) => written.initialization = stored.initialization.clone(),
            VmStatus(_) => written.vm_status = stored.vm_status.clone(),
            Ipv4(k, _) => {
                let Some(net) = view.ip_addresses.keys().nth(*k) else {
                    return;
                };
                let old = stored.ip_addresses.iter().find(|e| &e.net == net);
                let new = written.ip_addresses.iter_mut().find(|e| &e.net == net);
                if let (Some(old), Some(new)) = (old, new) {
                    new.ipv4 = old.ipv4.clone();
                }
            }
            ConditionStatus(k, _) => {
                restore_condition(&mut written.conditions, &stored.conditions, *k)
            }
        }
    }
}

fn edit_condition(
    conditions: &mut [capmox_apiserver::api::common::V1Beta1Condition],
    k: usize,
    status: &str,
) {
    if let Some(condition) = conditions.get_mut(k) {
        condition.status = status.to_string();
    }
}

fn restore_condition(
    written: &mut [k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    stored: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    k: usize,
) {
    if let (Some(new), Some(old)) = (written.get_mut(k), stored.get(k)) {
        *new = old.clone();
    }
}

/// An edit of a v1alpha1 cluster spec.
#[derive(Clone, Debug)]
enum ClusterSpecEdit {
    DnsServers(Vec<String>),
    Endpoint(String, i32),
    ExternalManaged(bool),
    Ipv4Prefix(i32),
}

fn cluster_spec_edit() -> BoxedStrategy<ClusterSpecEdit> {
    use ClusterSpecEdit::*;
    prop_oneof![
        strings(&["1.1.1.1", "9.9.9.9"], 2).prop_map(DnsServers),
        (one_of(&["10.0.0.9", "api"]), 1..=65535i32).prop_map(|(h, p)| Endpoint(h, p)),
        any::<bool>().prop_map(ExternalManaged),
        (0..=128i32).prop_map(Ipv4Prefix),
    ]
    .boxed()
}

impl ClusterSpecEdit {
    fn apply(&self, spec: &mut v1::ProxmoxClusterSpec) {
        use ClusterSpecEdit::*;
        match self {
            DnsServers(servers) => spec.dns_servers = servers.clone(),
            Endpoint(host, port) => {
                spec.control_plane_endpoint = Some(v1::ApiEndpoint {
                    host: host.clone(),
                    port: *port,
                })
            }
            ExternalManaged(value) => spec.external_managed_control_plane = *value,
            Ipv4Prefix(prefix) => {
                if let Some(config) = spec.ipv4_config.as_mut() {
                    config.prefix = i64::from(*prefix);
                }
            }
        }
    }

    fn restore(&self, written: &mut v2::ProxmoxClusterSpec, stored: &v2::ProxmoxClusterSpec) {
        use ClusterSpecEdit::*;
        match self {
            DnsServers(_) => written.dns_servers = stored.dns_servers.clone(),
            Endpoint(..) => written.control_plane_endpoint = stored.control_plane_endpoint.clone(),
            ExternalManaged(_) => {
                written.external_managed_control_plane = stored.external_managed_control_plane
            }
            Ipv4Prefix(_) => {
                if let (Some(new), Some(old)) =
                    (written.ipv4_config.as_mut(), stored.ipv4_config.as_ref())
                {
                    new.prefix = old.prefix;
                }
            }
        }
    }
}

/// An edit of v1alpha1 cluster status.
#[derive(Clone, Debug)]
enum ClusterStatusEdit {
    Ready(bool),
    Node(usize, String),
    PoolRefs(Vec<String>),
    ConditionStatus(usize, String),
}

fn cluster_status_edit() -> BoxedStrategy<ClusterStatusEdit> {
    use ClusterStatusEdit::*;
    prop_oneof![
        any::<bool>().prop_map(Ready),
        (0..3usize, one_of(&["pve1", "pve7"])).prop_map(|(k, n)| Node(k, n)),
        strings(&["x-v4-icip"], 2).prop_map(PoolRefs),
        (
            0..3usize,
            select(&["True", "False"][..]).prop_map(String::from)
        )
            .prop_map(|(k, s)| ConditionStatus(k, s)),
    ]
    .boxed()
}

impl ClusterStatusEdit {
    fn apply(&self, status: &mut v1::ProxmoxClusterStatus) {
        use ClusterStatusEdit::*;
        match self {
            Ready(ready) => status.ready = *ready,
            Node(k, node) => {
                if let Some(location) = status
                    .node_locations
                    .as_mut()
                    .and_then(|n| n.control_plane.get_mut(*k))
                {
                    location.node = node.clone();
                }
            }
            PoolRefs(names) => {
                status.in_cluster_ip_pool_ref = names
                    .iter()
                    .map(|name| LocalObjectReference { name: name.clone() })
                    .collect()
            }
            ConditionStatus(k, value) => edit_condition(&mut status.conditions, *k, value),
        }
    }

    fn restore(&self, written: &mut v2::ProxmoxClusterStatus, stored: &v2::ProxmoxClusterStatus) {
        use ClusterStatusEdit::*;
        match self {
            Ready(_) => written.initialization = stored.initialization.clone(),
            Node(k, _) => {
                let old = stored
                    .node_locations
                    .as_ref()
                    .and_then(|n| n.control_plane.get(*k));
                let new = written
                    .node_locations
                    .as_mut()
                    .and_then(|n| n.control_plane.get_mut(*k));
                if let (Some(old), Some(new)) = (old, new) {
                    new.node = old.node.clone();
                }
            }
            PoolRefs(_) => written.in_cluster_ip_pool_ref = stored.in_cluster_ip_pool_ref.clone(),
            ConditionStatus(k, _) => {
                restore_condition(&mut written.conditions, &stored.conditions, *k)
            }
        }
    }
}

/// Reads `stored` as v1alpha1, edits it, writes it back; checks both claims
/// of the module documentation.
fn check_edit<S>(
    stored: &S::Hub,
    edit: impl FnOnce(&mut S),
    restore: impl FnOnce(&mut S::Hub, &mut S::Hub, &S),
) -> Result<(), TestCaseError>
where
    S: Spoke + Clone + PartialEq + std::fmt::Debug,
    S::Hub: Clone + PartialEq + std::fmt::Debug,
{
    let seen = S::from_hub(stored).expect("in-range objects convert down");
    let mut edited = seen.clone();
    edit(&mut edited);
    let mut written = edited.clone().to_hub(Some(stored)).expect("converts up");
    prop_assert_eq!(
        &S::from_hub(&written).expect("converts down"),
        &edited,
        "the edit reads back as written"
    );
    let mut expected = stored.clone();
    restore(&mut written, &mut expected, &seen);
    prop_assert_eq!(written, expected, "only the edited field changed");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn machine_edit_changes_exactly_that_field(
        stored in hub::machine(),
        spec_edit in option::of(machine_spec_edit()),
        status_edit in option::of(machine_status_edit()),
    ) {
        check_edit::<v1::ProxmoxMachine>(
            &stored,
            |m| {
                spec_edit.iter().for_each(|e| e.apply(&mut m.spec));
                status_edit.iter().for_each(|e| e.apply(&mut m.status));
            },
            |written, expected, seen| {
                spec_edit.iter().for_each(|e| e.restore(&mut written.spec, &mut expected.spec, &seen.spec));
                status_edit.iter().for_each(|e| e.restore(&mut written.status, &expected.status, &seen.status));
            },
        )?;
    }

    #[test]
    fn machine_template_edit_changes_exactly_that_field(
        stored in hub::machine_template(),
        edit in machine_spec_edit(),
    ) {
        check_edit::<v1::ProxmoxMachineTemplate>(
            &stored,
            |t| edit.apply(&mut t.spec.template.spec),
            |written, expected, seen| {
                edit.restore(&mut written.spec.template.spec, &mut expected.spec.template.spec, &seen.spec.template.spec)
            },
        )?;
    }

    #[test]
    fn cluster_edit_changes_exactly_that_field(
        stored in hub::cluster(),
        spec_edit in option::of(cluster_spec_edit()),
        status_edit in option::of(cluster_status_edit()),
    ) {
        check_edit::<v1::ProxmoxCluster>(
            &stored,
            |c| {
                spec_edit.iter().for_each(|e| e.apply(&mut c.spec));
                status_edit.iter().for_each(|e| e.apply(&mut c.status));
            },
            |written, expected, _| {
                spec_edit.iter().for_each(|e| e.restore(&mut written.spec, &expected.spec));
                status_edit.iter().for_each(|e| e.restore(&mut written.status, &expected.status));
            },
        )?;
    }

    #[test]
    fn cluster_template_edit_changes_exactly_that_field(
        stored in hub::cluster_template(),
        edit in cluster_spec_edit(),
    ) {
        check_edit::<v1::ProxmoxClusterTemplate>(
            &stored,
            |t| edit.apply(&mut t.spec.template.spec),
            |written, expected, _| edit.restore(&mut written.spec.template.spec, &expected.spec.template.spec),
        )?;
    }
}
