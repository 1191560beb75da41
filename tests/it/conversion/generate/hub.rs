//! v1alpha2 (hub) objects. Integers stay within what both versions can
//! hold (the schema ranges are narrower still), so that every generated
//! object can be read as v1alpha1.

use capmox_apiserver::api::common::LocalObjectReference;
use capmox_apiserver::api::v1alpha2::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;

use super::*;

const API_VERSION: &str = "infrastructure.cluster.x-k8s.io/v1alpha2";

fn route() -> BoxedStrategy<RouteSpec> {
    (
        maybe_string(&["", "default", "10.0.0.0/8"]),
        maybe_string(&["", "10.0.0.1", "fe80::1"]),
        option::of(0..=i32::MAX),
        option::of(0..=300i32),
        option::of(any::<bool>()),
    )
        .prop_map(|(to, via, metric, table, is6)| RouteSpec {
            to,
            via,
            metric,
            table,
            is6,
        })
        .boxed()
}

fn policy() -> BoxedStrategy<RoutingPolicySpec> {
    (
        maybe_string(&["", "all", "10.1.0.0/16"]),
        maybe_string(&["", "10.2.0.0/16"]),
        option::of(0..=i32::MAX),
        option::of(0..=i64::from(u32::MAX)),
        option::of(any::<bool>()),
    )
        .prop_map(|(to, from, table, priority, is6)| RoutingPolicySpec {
            to,
            from,
            table,
            priority,
            is6,
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
    let u16_range = 0..=i32::from(u16::MAX);
    (
        (
            maybe_string(&["", "vmbr0", "vmbr1"]),
            option::of(any::<bool>()),
            option::of(any::<bool>()),
            option::of(any::<bool>()),
            option::of(any::<bool>()),
            maybe_string(&["virtio", "e1000"]),
        ),
        (
            option::of(u16_range.clone()),
            option::of(u16_range.clone()),
            option::of(1..=8i32),
            one_of(&["", "net0", "net1", "net2", "net3"]),
            vec(pool_ref(), 0..=3),
            strings(&["1.1.1.1", "8.8.8.8"], 2),
            routing(),
            option::of(u16_range),
        ),
    )
        .prop_map(
            |(
                (bridge, default_ipv4, default_ipv6, dhcp4, dhcp6, model),
                (mtu, vlan, queues, name, ip_pool_ref, dns_servers, routing, link_mtu),
            )| NetworkDevice {
                bridge,
                default_ipv4,
                default_ipv6,
                dhcp4,
                dhcp6,
                model,
                mtu,
                vlan,
                queues,
                name,
                ip_pool_ref,
                dns_servers,
                routing,
                link_mtu,
            },
        )
        .boxed()
}

fn vrf() -> BoxedStrategy<VrfDevice> {
    (
        strings(&["net1", "net2"], 2),
        one_of(&["vrf-a", "vrf-b", ""]),
        0..=i32::MAX,
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

pub fn network() -> BoxedStrategy<NetworkSpec> {
    (
        maybe_string(&["", "zone-a"]),
        vec(device(), 0..=4),
        vec(vrf(), 0..=2),
    )
        .prop_map(|(zone, network_devices, vrfs)| NetworkSpec {
            zone,
            network_devices,
            vrfs,
        })
        .boxed()
}

fn additional_volume() -> BoxedStrategy<AdditionalVolume> {
    (
        one_of(&["scsi1", "virtio0", "sata2"]),
        any::<i32>(),
        maybe_string(&["local-lvm", "ceph"]),
        maybe_string(&["raw", "qcow2"]),
        (
            option::of(any::<bool>()),
            option::of(any::<bool>()),
            option::of(any::<bool>()),
        ),
    )
        .prop_map(
            |(disk, size_gb, storage, format, (discard, io_thread, ssd))| AdditionalVolume {
                disk,
                size_gb,
                storage,
                format,
                discard,
                io_thread,
                ssd,
            },
        )
        .boxed()
}

fn pci_device() -> BoxedStrategy<PciDevice> {
    (
        maybe_string(&["a100", "nic-sriov"]),
        strings(&["0000:01:00.0", "02:00"], 2),
        option::of(any::<bool>()),
        option::of(any::<bool>()),
        option::of(any::<bool>()),
        maybe_string(&["nvidia-35"]),
    )
        .prop_map(
            |(mapping, device_ids, pcie, rombar, primary_gpu, mdev)| PciDevice {
                mapping,
                device_ids,
                pcie,
                rombar,
                primary_gpu,
                mdev,
            },
        )
        .boxed()
}

pub fn machine_spec() -> BoxedStrategy<ProxmoxMachineSpec> {
    (
        (
            maybe_string(&["", "pve1", "pve2"]),
            option::of(any::<i32>()),
            option::of(
                (
                    strings(&["a", "b"], 2),
                    one_of(&["", "exact", "bestSubset"]),
                )
                    .prop_map(|(match_tags, match_policy)| TemplateSelector {
                        match_tags,
                        match_policy,
                    }),
            ),
            maybe_string(&["", "desc"]),
            maybe_string(&["raw", "qcow2"]),
            option::of(any::<bool>()),
            maybe_string(&["", "pool"]),
            maybe_string(&["snap"]),
            maybe_string(&["", "local"]),
            one_of(&["", "proxmox://6c3fa683-bef9-4425-b413-eaa45a9d6191"]),
            option::of(any::<i64>()),
            (
                option::of(
                    (
                        maybe_string(&["capmox"]),
                        maybe_string(&["started", "stopped"]),
                        option::of(0..=10i32),
                        option::of(0..=10i32),
                    )
                        .prop_map(
                            |(group, state, max_restart, max_relocate)| HaResource {
                                group,
                                state,
                                max_restart,
                                max_relocate,
                            },
                        ),
                ),
                option::of(
                    maybe_string(&["", "ubuntu-v1.34.8"])
                        .prop_map(|name| KubernetesReleaseReference { name }),
                ),
                vec(pci_device(), 0..3),
            ),
        ),
        (
            option::of(0..=4i32),
            option::of(0..=4i32),
            option::of(prop_oneof![Just(0), Just(2048), any::<i32>()]),
            maybe_string(&["host", "x86-64-v2-AES"]),
            option::of(
                (maybe_string(&["ide", "scsi"]), option::of(0..=30i32))
                    .prop_map(|(bus, slot)| CloudInitDrive { bus, slot }),
            ),
            option::of(
                (
                    option::of(
                        (one_of(&["", "scsi0"]), any::<i32>())
                            .prop_map(|(disk, size_gb)| DiskSize { disk, size_gb }),
                    ),
                    vec(additional_volume(), 0..3),
                )
                    .prop_map(|(boot_volume, additional_volumes)| Storage {
                        boot_volume,
                        additional_volumes,
                    }),
            ),
            option::of(network()),
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
            option::of(option::of(any::<bool>()).prop_map(|provider_id_injection| {
                MetadataSettings {
                    provider_id_injection,
                }
            })),
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
                    (ha_resource, kubernetes_release, pci_devices),
                ),
                (
                    num_sockets,
                    num_cores,
                    memory_mib,
                    cpu_type,
                    cloud_init_drive,
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
                kubernetes_release,
                description,
                format,
                full,
                pool,
                snap_name,
                storage,
                provider_id,
                virtual_machine_id,
                num_sockets,
                num_cores,
                memory_mib,
                cpu_type,
                cloud_init_drive,
                ha_resource,
                pci_devices,
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

pub fn condition() -> BoxedStrategy<Condition> {
    (
        time(true),
        one_of(&["", "waiting"]),
        option::of(0..5i64),
        one_of(&["APIConversionReason", "Provisioned", "Cloning", ""]),
        one_of(&["True", "False", "Unknown"]),
        one_of(&["Ready", "VirtualMachineProvisioned", "ProxmoxAvailable"]),
    )
        .prop_map(
            |(last_transition_time, message, observed_generation, reason, status, type_)| {
                Condition {
                    last_transition_time,
                    message,
                    observed_generation,
                    reason,
                    status,
                    type_,
                }
            },
        )
        .boxed()
}

fn ip_addresses() -> BoxedStrategy<Vec<IpAddressesSpec>> {
    let addresses = |pool: &'static [&'static str]| strings(pool, 3);
    net_names()
        .prop_flat_map(move |nets| {
            let n = nets.len();
            vec(
                (
                    addresses(&["10.0.0.1", "10.0.0.2", ""]),
                    addresses(&["fd00::1", "fd00::2"]),
                ),
                n,
            )
            .prop_map(move |families| {
                nets.clone()
                    .into_iter()
                    .zip(families)
                    .map(|(net, (ipv4, ipv6))| IpAddressesSpec { net, ipv4, ipv6 })
                    .collect()
            })
        })
        .boxed()
}

fn network_status() -> BoxedStrategy<NetworkStatus> {
    (
        option::of(any::<bool>()),
        strings(&["10.0.0.1", "fe80::1"], 2),
        one_of(&["", "aa:bb:cc:dd:ee:ff"]),
        one_of(&["", "net0"]),
    )
        .prop_map(
            |(connected, ip_addrs, mac_addr, network_name)| NetworkStatus {
                connected,
                ip_addrs,
                mac_addr,
                network_name,
            },
        )
        .boxed()
}

fn machine_status() -> BoxedStrategy<ProxmoxMachineStatus> {
    (
        vec(condition(), 0..=3),
        option::of(any::<bool>()),
        vec(machine_address(), 0..=2),
        maybe_string(&["", "ready", "pending"]),
        option::of(any::<bool>()),
        ip_addresses(),
        vec(network_status(), 0..=2),
        (maybe_string(&["", "pve1"]), maybe_string(&["pve-a"])),
        maybe_string(&["rack-a"]),
        option::of(
            (
                one_of(&["", "pve1"]),
                0..=999_999_999i64,
                maybe_string(&["ubuntu-v1.34.8"]),
                maybe_string(&["v1.34.8"]),
            )
                .prop_map(
                    |(source_node, template_id, kubernetes_release, kubernetes_version)| {
                        ClonedTemplate {
                            source_node,
                            template_id,
                            kubernetes_release,
                            kubernetes_version,
                        }
                    },
                ),
        ),
        maybe_string(&["UPID:pve1:1"]),
        option::of(time(true)),
    )
        .prop_map(
            |(
                conditions,
                provisioned,
                addresses,
                vm_status,
                bootstrap_data_provided,
                ip_addresses,
                network,
                (proxmox_node, pve_cluster),
                failure_domain,
                template,
                task_ref,
                retry_after,
            )| ProxmoxMachineStatus {
                conditions,
                initialization: ProxmoxMachineInitializationStatus { provisioned },
                addresses,
                vm_status,
                bootstrap_data_provided,
                ip_addresses,
                network,
                proxmox_node,
                pve_cluster,
                failure_domain,
                template,
                task_ref,
                retry_after,
            },
        )
        .boxed()
}

fn ip_config() -> BoxedStrategy<IpConfigSpec> {
    (
        strings(&["10.0.0.10-10.0.0.20", "10.0.1.0/28"], 2),
        any::<i32>(),
        one_of(&["", "10.0.0.1"]),
        option::of(0..=i32::MAX),
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
        (
            one_of(&["", "10.0.0.5", "api.example.com"]),
            prop_oneof![Just(0), Just(6443), any::<i32>()],
        )
            .prop_map(|(host, port)| ApiEndpoint { host, port }),
        option::of(pool_ref()),
        option::of(any::<bool>()),
        strings(&["pve1", "pve2"], 2),
        vec(
            (
                one_of(&["rack-a", "rack-b"]),
                strings(&["pve1", "pve2"], 2),
                option::of(any::<bool>()),
                option::of(secret_ref()),
                option::of(
                    (100..=200i64, 200..=300i64).prop_map(|(start, end)| VmIdRange { start, end }),
                ),
            )
                .prop_map(
                    |(name, nodes, control_plane, credentials_ref, vm_id_range)| {
                        FailureDomainSpec {
                            name,
                            nodes,
                            control_plane,
                            credentials_ref,
                            vm_id_range,
                        }
                    },
                ),
            0..=2,
        ),
        option::of((option::of(0..=i64::MAX), option::of(0..=400i64)).prop_map(
            |(memory_adjustment, cpu_adjustment)| SchedulerHints {
                memory_adjustment,
                cpu_adjustment,
            },
        )),
        option::of(ip_config()),
        option::of(ip_config()),
        strings(&["1.1.1.1", "8.8.8.8"], 2),
        vec(
            (
                maybe_string(&["", "zone-a", "zone-b"]),
                option::of(ip_config()),
                option::of(ip_config()),
                strings(&["9.9.9.9"], 1),
            )
                .prop_map(|(zone, ipv4_config, ipv6_config, dns_servers)| {
                    ZoneConfigSpec {
                        zone,
                        ipv4_config,
                        ipv6_config,
                        dns_servers,
                    }
                }),
            0..=2,
        ),
        option::of(secret_ref()),
    )
        .prop_map(
            |(
                control_plane_endpoint,
                control_plane_endpoint_ip_pool_ref,
                external_managed_control_plane,
                allowed_nodes,
                failure_domains,
                scheduler_hints,
                ipv4_config,
                ipv6_config,
                dns_servers,
                zone_config,
                credentials_ref,
            )| ProxmoxClusterSpec {
                control_plane_endpoint,
                control_plane_endpoint_ip_pool_ref,
                external_managed_control_plane,
                allowed_nodes,
                failure_domains,
                scheduler_hints,
                ipv4_config,
                ipv6_config,
                dns_servers,
                zone_config,
                credentials_ref,
            },
        )
        .boxed()
}

fn local_ref(names: &'static [&'static str]) -> BoxedStrategy<LocalObjectReference> {
    one_of(names)
        .prop_map(|name| LocalObjectReference { name })
        .boxed()
}

fn node_locations() -> BoxedStrategy<NodeLocations> {
    let location = || {
        (
            local_ref(&["m1", "m2", ""]),
            one_of(&["pve1", "pve2"]),
            maybe_string(&["", "zone-a"]),
        )
            .prop_map(|(machine, node, zone)| NodeLocation {
                machine,
                node,
                zone,
            })
    };
    (vec(location(), 0..=3), vec(location(), 0..=3))
        .prop_map(|(control_plane, workers)| NodeLocations {
            control_plane,
            workers,
        })
        .boxed()
}

fn cluster_status() -> BoxedStrategy<ProxmoxClusterStatus> {
    let zone_ref = (
        maybe_string(&["", "default", "zone-a"]),
        option::of(local_ref(&["c-v4-icip"])),
        option::of(local_ref(&["c-v6-icip"])),
    )
        .prop_map(
            |(zone, in_cluster_ip_pool_ref_v4, in_cluster_ip_pool_ref_v6)| InClusterZoneRef {
                zone,
                in_cluster_ip_pool_ref_v4,
                in_cluster_ip_pool_ref_v6,
            },
        );
    (
        vec(condition(), 0..=3),
        option::of(any::<bool>()),
        vec(local_ref(&["c-v4-icip", "c-v6-icip"]), 0..=2),
        vec(zone_ref, 0..=2),
        option::of(node_locations()),
        vec(
            (
                one_of(&["rack-a", "rack-b"]),
                option::of(any::<bool>()),
                maybe_string(&["pve1,pve2"]),
            )
                .prop_map(|(name, control_plane, nodes)| FailureDomain {
                    name,
                    control_plane,
                    attributes: nodes
                        .map(|n| ("nodes".to_string(), n))
                        .into_iter()
                        .collect(),
                }),
            0..=2,
        ),
        vec(
            (
                maybe_string(&["https://pve-b:8006"]),
                maybe_string(&["pve-b"]),
                maybe_string(&["9.0.10"]),
                strings(&["rack-a", "rack-b"], 2),
                any::<bool>(),
                option::of(time(false)),
                maybe_string(&["GET /version: connection refused"]),
            )
                .prop_map(
                    |(endpoint, name, version, failure_domains, reachable, since, message)| {
                        PveClusterStatus {
                            endpoint,
                            name,
                            version,
                            failure_domains,
                            reachable,
                            since,
                            message,
                        }
                    },
                ),
            0..=2,
        ),
    )
        .prop_map(
            |(
                conditions,
                provisioned,
                in_cluster_ip_pool_ref,
                in_cluster_zone_ref,
                node_locations,
                failure_domains,
                pve_clusters,
            )| {
                ProxmoxClusterStatus {
                    conditions,
                    initialization: ProxmoxClusterInitializationStatus { provisioned },
                    in_cluster_ip_pool_ref,
                    in_cluster_zone_ref,
                    node_locations,
                    failure_domains,
                    pve_clusters,
                }
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
