//! v1alpha1 objects that convert and read back unchanged. What is left out
//! (each is in the lossy list of docs/conversion.md):
//! - fields with no place in v1alpha2: `target`, `failureReason`,
//!   `failureMessage`, condition `severity`, ProxmoxCluster `cloneSpec`;
//! - values v1alpha2 cannot tell from "unset": `providerID: ""`, a
//!   controlPlaneEndpoint with empty host and port 0, `network: {}`, a
//!   default device with every field empty, a condition reason
//!   `APIConversionReason` or lastTransitionTime at the Unix epoch;
//! - invalid values: additional devices without a name, and integers beyond
//!   the v1alpha2 type (`u32` above 2^31-1, `u64` above 2^63-1), which are
//!   conversion errors.

use capmox_apiserver::api::common::{LocalObjectReference, V1Beta1Condition};
use capmox_apiserver::api::v1alpha1::*;
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;

use super::*;

const API_VERSION: &str = "infrastructure.cluster.x-k8s.io/v1alpha1";
const I32_MAX: u32 = i32::MAX as u32;

fn route() -> BoxedStrategy<RouteSpec> {
    (
        one_of(&["", "default", "10.0.0.0/8"]),
        one_of(&["", "10.0.0.1"]),
        0..=I32_MAX,
        prop_oneof![Just(0), 1..=300u32],
    )
        .prop_map(|(to, via, metric, table)| RouteSpec {
            to,
            via,
            metric,
            table,
        })
        .boxed()
}

fn policy() -> BoxedStrategy<RoutingPolicySpec> {
    (
        one_of(&["", "all", "10.1.0.0/16"]),
        one_of(&["", "10.2.0.0/16"]),
        option::of(0..=I32_MAX),
        any::<u32>(),
    )
        .prop_map(|(to, from, table, priority)| RoutingPolicySpec {
            to,
            from,
            table,
            priority,
        })
        .boxed()
}

fn routing() -> BoxedStrategy<Routing> {
    (vec(route(), 0..=2), vec(policy(), 0..=2))
        .prop_map(|(routes, routing_policy)| Routing {
            routes,
            routing_policy,
        })
        .boxed()
}

pub fn device() -> BoxedStrategy<NetworkDevice> {
    (
        one_of(&["vmbr0", "vmbr1", ""]),
        maybe_string(&["virtio", "e1000"]),
        option::of(any::<u16>()),
        option::of(any::<u16>()),
        strings(&["1.1.1.1", "8.8.8.8"], 2),
        option::of(pool_ref()),
        option::of(pool_ref()),
    )
        .prop_map(
            |(bridge, model, mtu, vlan, dns_servers, ipv4_pool_ref, ipv6_pool_ref)| NetworkDevice {
                bridge,
                model,
                mtu,
                vlan,
                dns_servers,
                ipv4_pool_ref,
                ipv6_pool_ref,
            },
        )
        .boxed()
}

pub fn additional_device() -> BoxedStrategy<AdditionalNetworkDevice> {
    (
        device(),
        one_of(&["net1", "net2", "net3", "eth1"]),
        routing(),
        option::of(any::<u16>()),
    )
        .prop_map(
            |(device, name, routing, link_mtu)| AdditionalNetworkDevice {
                device,
                name,
                routing,
                link_mtu,
            },
        )
        .boxed()
}

fn vrf() -> BoxedStrategy<VrfDevice> {
    (
        strings(&["net1", "net2"], 2),
        one_of(&["vrf-a", "vrf-b"]),
        0..=I32_MAX,
        routing(),
    )
        .prop_map(|(interfaces, name, table, routing)| VrfDevice {
            interfaces,
            name,
            table,
            routing,
        })
        .boxed()
}

fn network() -> BoxedStrategy<Option<NetworkSpec>> {
    option::of(
        (
            option::of(
                device().prop_filter("an all-empty default device reads as none", |d| {
                    *d != NetworkDevice::default()
                }),
            ),
            vec(additional_device(), 0..=3),
            vec(vrf(), 0..=2),
        )
            .prop_map(|(default, additional_devices, vrfs)| NetworkSpec {
                default,
                additional_devices,
                vrfs,
            }),
    )
    // `network: {}` reads back as no network.
    .prop_map(|network| network.filter(|n| *n != NetworkSpec::default()))
    .boxed()
}

pub fn machine_spec() -> BoxedStrategy<ProxmoxMachineSpec> {
    (
        (
            one_of(&["", "pve1"]),
            option::of(any::<i32>()),
            option::of((strings(&["a", "b"], 2), one_of(&["", "exact"])).prop_map(
                |(match_tags, match_policy)| TemplateSelector {
                    match_tags,
                    match_policy,
                },
            )),
            maybe_string(&["", "desc"]),
            maybe_string(&["raw"]),
            option::of(any::<bool>()),
            maybe_string(&["", "pool"]),
            maybe_string(&["snap"]),
            maybe_string(&["local"]),
            maybe_string(&["proxmox://6c3fa683-bef9-4425-b413-eaa45a9d6191"]),
            option::of(any::<i64>()),
        ),
        (
            0..=4i32,
            0..=4i32,
            prop_oneof![Just(0), any::<i32>()],
            option::of(
                option::of(
                    (one_of(&["", "scsi0"]), any::<i32>())
                        .prop_map(|(disk, size_gb)| DiskSize { disk, size_gb }),
                )
                .prop_map(|boot_volume| Storage { boot_volume }),
            ),
            network(),
            option::of(
                (any::<i64>(), any::<i64>()).prop_map(|(start, end)| VmIdRange { start, end }),
            ),
            option::of(
                (option::of(any::<bool>()), option::of(any::<bool>())).prop_map(
                    |(skip_cloud_init_status, skip_qemu_guest_agent)| ProxmoxMachineChecks {
                        skip_cloud_init_status,
                        skip_qemu_guest_agent,
                    },
                ),
            ),
            option::of(
                any::<bool>().prop_map(|provider_id_injection| MetadataSettings {
                    provider_id_injection,
                }),
            ),
            strings(&["pve1", "pve2"], 2),
            strings(&["t1", "t2"], 2),
        ),
    )
        .prop_map(
            |(
                (
                    source_node,
                    template_id,
                    template_selector,
                    description,
                    format,
                    full,
                    pool,
                    snap_name,
                    storage,
                    provider_id,
                    virtual_machine_id,
                ),
                (
                    num_sockets,
                    num_cores,
                    memory_mib,
                    disks,
                    network,
                    vm_id_range,
                    checks,
                    metadata_settings,
                    allowed_nodes,
                    tags,
                ),
            )| ProxmoxMachineSpec {
                source_node,
                template_id,
                template_selector,
                description,
                format,
                full,
                pool,
                snap_name,
                storage,
                target: None,
                provider_id,
                virtual_machine_id,
                num_sockets,
                num_cores,
                memory_mib,
                disks,
                network,
                vm_id_range,
                checks,
                metadata_settings,
                allowed_nodes,
                tags,
            },
        )
        .boxed()
}

fn condition() -> BoxedStrategy<V1Beta1Condition> {
    (
        one_of(&["Ready", "VMProvisioned", "ClusterReady"]),
        one_of(&["True", "False", "Unknown"]),
        option::of(time(false)),
        one_of(&["", "Cloning", "WaitingForBootstrapData"]),
        one_of(&["", "message"]),
    )
        .prop_map(
            |(type_, status, last_transition_time, reason, message)| V1Beta1Condition {
                type_,
                status,
                severity: String::new(),
                last_transition_time,
                reason,
                message,
            },
        )
        .boxed()
}

fn machine_status() -> BoxedStrategy<ProxmoxMachineStatus> {
    (
        any::<bool>(),
        vec(machine_address(), 0..=2),
        one_of(&["", "ready"]),
        option::of(any::<bool>()),
        keyed(net_names(), || {
            (one_of(&["", "10.0.0.1"]), one_of(&["", "fd00::1"]))
                .prop_map(|(ipv4, ipv6)| IpAddress { ipv4, ipv6 })
                .boxed()
        }),
        vec(
            (
                any::<bool>(),
                strings(&["10.0.0.1"], 2),
                one_of(&["", "aa:bb:cc:dd:ee:ff"]),
                one_of(&["", "net0"]),
            )
                .prop_map(|(connected, ip_addrs, mac_addr, network_name)| {
                    NetworkStatus {
                        connected,
                        ip_addrs,
                        mac_addr,
                        network_name,
                    }
                }),
            0..=2,
        ),
        maybe_string(&["", "pve1"]),
        maybe_string(&["UPID:pve1:1"]),
        option::of(time(true)),
        vec(condition(), 0..=3),
    )
        .prop_map(
            |(
                ready,
                addresses,
                vm_status,
                bootstrap_data_provided,
                ip_addresses,
                network,
                proxmox_node,
                task_ref,
                retry_after,
                conditions,
            )| ProxmoxMachineStatus {
                ready,
                addresses,
                vm_status,
                bootstrap_data_provided,
                ip_addresses,
                network,
                proxmox_node,
                task_ref,
                retry_after,
                failure_reason: None,
                failure_message: None,
                conditions,
            },
        )
        .boxed()
}

fn ip_config() -> BoxedStrategy<IpConfigSpec> {
    (
        strings(&["10.0.0.10-10.0.0.20", "10.0.1.0/28"], 2),
        any::<i32>().prop_map(i64::from),
        one_of(&["", "10.0.0.1"]),
        option::of(0..=I32_MAX),
    )
        .prop_map(|(addresses, prefix, gateway, metric)| IpConfigSpec {
            addresses,
            prefix,
            gateway,
            metric,
        })
        .boxed()
}

pub fn cluster_spec() -> BoxedStrategy<ProxmoxClusterSpec> {
    (
        option::of(
            (
                one_of(&["", "10.0.0.5"]),
                prop_oneof![Just(6443), any::<i32>()],
            )
                .prop_map(|(host, port)| ApiEndpoint { host, port })
                .prop_filter("an empty endpoint reads as none", |e| {
                    *e != ApiEndpoint::default()
                }),
        ),
        any::<bool>(),
        strings(&["pve1", "pve2"], 2),
        option::of(
            option::of(0..=i64::MAX as u64)
                .prop_map(|memory_adjustment| SchedulerHints { memory_adjustment }),
        ),
        option::of(ip_config()),
        option::of(ip_config()),
        strings(&["1.1.1.1", "8.8.8.8"], 2),
        option::of(secret_ref()),
    )
        .prop_map(
            |(
                control_plane_endpoint,
                external_managed_control_plane,
                allowed_nodes,
                scheduler_hints,
                ipv4_config,
                ipv6_config,
                dns_servers,
                credentials_ref,
            )| ProxmoxClusterSpec {
                control_plane_endpoint,
                external_managed_control_plane,
                allowed_nodes,
                scheduler_hints,
                ipv4_config,
                ipv6_config,
                dns_servers,
                clone_spec: None,
                credentials_ref,
            },
        )
        .boxed()
}

fn cluster_status() -> BoxedStrategy<ProxmoxClusterStatus> {
    let location = || {
        (one_of(&["m1", "m2"]), one_of(&["pve1", "pve2"])).prop_map(|(machine, node)| {
            NodeLocation {
                machine: LocalObjectReference { name: machine },
                node,
            }
        })
    };
    (
        any::<bool>(),
        vec(
            one_of(&["c-v4-icip"]).prop_map(|name| LocalObjectReference { name }),
            0..=2,
        ),
        option::of((vec(location(), 0..=2), vec(location(), 0..=2)).prop_map(
            |(control_plane, workers)| NodeLocations {
                control_plane,
                workers,
            },
        )),
        vec(condition(), 0..=3),
    )
        .prop_map(
            |(ready, in_cluster_ip_pool_ref, node_locations, conditions)| ProxmoxClusterStatus {
                ready,
                in_cluster_ip_pool_ref,
                node_locations,
                failure_reason: None,
                failure_message: None,
                conditions,
            },
        )
        .boxed()
}

kind_and_template!(
    API_VERSION,
    machine: ProxmoxMachine { spec: machine_spec(), status: machine_status() },
    machine_template: ProxmoxMachineTemplate { ProxmoxMachineTemplateSpec, ProxmoxMachineTemplateResource },
);

kind_and_template!(
    API_VERSION,
    cluster: ProxmoxCluster { spec: cluster_spec(), status: cluster_status() },
    cluster_template: ProxmoxClusterTemplate { ProxmoxClusterTemplateSpec, ProxmoxClusterTemplateResource },
);
