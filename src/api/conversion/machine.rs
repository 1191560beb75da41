//! ProxmoxMachine and ProxmoxMachineTemplate.

use std::collections::BTreeMap;

use super::conditions;
use super::error::FieldPath;
use super::leaf::{
    BoolIsSet, EmptyIsNone, FalseIsNone, Leaf, NoneIsEmpty, Result, ZeroIsNone, keep,
};
use super::network::{self, up_list};
use super::object::{object_kind, template_kind};
use super::prior::{Origin, Prior};
use super::same_fields::same_fields;
use crate::api::{v1alpha1 as v1, v1alpha2 as v2};

same_fields!(up_selector, down_selector: TemplateSelector { match_tags, match_policy });
same_fields!(up_disk, down_disk: DiskSize { disk, size_gb });
same_fields!(up_id_range, down_id_range: VmIdRange { start, end });
same_fields!(up_checks, down_checks: ProxmoxMachineChecks { skip_cloud_init_status, skip_qemu_guest_agent });

object_kind!(
    ProxmoxMachine,
    spec: up_spec, down_spec,
    status: up_status, down_status,
);

template_kind!(
    ProxmoxMachineTemplate,
    ProxmoxMachineTemplateSpec,
    ProxmoxMachineTemplateResource,
    up: up_spec,
    down: down_spec,
);

fn up_spec(
    spoke: v1::ProxmoxMachineSpec,
    prior: Prior<'_, v2::ProxmoxMachineSpec>,
    path: &FieldPath,
) -> Result<v2::ProxmoxMachineSpec> {
    let v1::ProxmoxMachineSpec {
        source_node,
        template_id,
        template_selector,
        description,
        format,
        full,
        pool,
        snap_name,
        storage,
        target,
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
    } = spoke;
    Ok(v2::ProxmoxMachineSpec {
        source_node: keep::<EmptyIsNone>(source_node, prior.field(|s| &s.source_node), path)?,
        template_id,
        template_selector: template_selector.map(up_selector),
        description,
        format,
        full,
        pool,
        snap_name,
        storage,
        provider_id: keep::<NoneIsEmpty>(provider_id, prior.field(|s| &s.provider_id), path)?,
        virtual_machine_id,
        num_sockets: keep::<ZeroIsNone<i32, i32>>(
            num_sockets,
            prior.field(|s| &s.num_sockets),
            path,
        )?,
        num_cores: keep::<ZeroIsNone<i32, i32>>(num_cores, prior.field(|s| &s.num_cores), path)?,
        memory_mib: keep::<ZeroIsNone<i32, i32>>(memory_mib, prior.field(|s| &s.memory_mib), path)?,
        cpu_type: prior.hidden(|s| &s.cpu_type),
        cloud_init_drive: prior.hidden(|s| &s.cloud_init_drive),
        ha_resource: prior.hidden(|s| &s.ha_resource),
        kubernetes_release: prior.hidden(|s| &s.kubernetes_release),
        pci_devices: prior.hidden(|s| &s.pci_devices),
        disks: up_storage(disks, prior.field(|s| &s.disks).flatten()),
        network: network::up(network, prior.field(|s| &s.network), &path.field("network"))?,
        vm_id_range: vm_id_range.map(up_id_range),
        checks: checks.map(up_checks),
        metadata_settings: metadata_settings
            .map(|m| {
                up_metadata_settings(m, prior.and_then(|s| s.metadata_settings.as_ref()), path)
            })
            .transpose()?,
        // v1alpha1 `target` pinned the clone onto one node (and took
        // precedence over allowedNodes); v1alpha2 says so with allowedNodes.
        allowed_nodes: match target {
            Some(node) if !node.is_empty() => vec![node],
            _ => allowed_nodes,
        },
        tags,
    })
}

fn down_spec(
    hub: &v2::ProxmoxMachineSpec,
    origin: Origin,
    path: &FieldPath,
) -> Result<v1::ProxmoxMachineSpec> {
    let v2::ProxmoxMachineSpec {
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
        num_sockets,
        num_cores,
        memory_mib,
        cpu_type: _,
        cloud_init_drive: _,
        ha_resource: _,
        kubernetes_release: _,
        pci_devices: _,
        disks,
        network,
        vm_id_range,
        checks,
        metadata_settings,
        allowed_nodes,
        tags,
    } = hub;
    Ok(v1::ProxmoxMachineSpec {
        source_node: EmptyIsNone::down(source_node, path)?,
        template_id: *template_id,
        template_selector: template_selector.as_ref().map(down_selector),
        description: description.clone(),
        format: format.clone(),
        full: *full,
        pool: pool.clone(),
        snap_name: snap_name.clone(),
        storage: storage.clone(),
        target: None,
        provider_id: NoneIsEmpty::down(provider_id, path)?,
        virtual_machine_id: *virtual_machine_id,
        num_sockets: ZeroIsNone::down(num_sockets, path)?,
        num_cores: ZeroIsNone::down(num_cores, path)?,
        memory_mib: ZeroIsNone::down(memory_mib, path)?,
        disks: disks.as_ref().map(down_storage),
        network: network::down(network, origin, &path.field("network"))?,
        vm_id_range: vm_id_range.as_ref().map(down_id_range),
        checks: checks.as_ref().map(down_checks),
        metadata_settings: metadata_settings
            .as_ref()
            .map(down_metadata_settings)
            .transpose()?,
        allowed_nodes: allowed_nodes.clone(),
        tags: tags.clone(),
    })
}

/// The disks, with the hub-only additional volumes kept from the prior value. A
/// v1alpha1 reader sees `disks: {}` where only volumes are, so a v1alpha1 write without
/// `disks` removes them (what was written reads back as written).
fn up_storage(spoke: Option<v1::Storage>, prior: Prior<'_, v2::Storage>) -> Option<v2::Storage> {
    let v1::Storage { boot_volume } = spoke?;
    Some(v2::Storage {
        boot_volume: boot_volume.map(up_disk),
        additional_volumes: prior.hidden(|s| &s.additional_volumes),
    })
}

fn down_storage(hub: &v2::Storage) -> v1::Storage {
    let v2::Storage {
        boot_volume,
        additional_volumes: _,
    } = hub;
    v1::Storage {
        boot_volume: boot_volume.as_ref().map(down_disk),
    }
}

fn up_metadata_settings(
    spoke: v1::MetadataSettings,
    prior: Prior<'_, v2::MetadataSettings>,
    path: &FieldPath,
) -> Result<v2::MetadataSettings> {
    let v1::MetadataSettings {
        provider_id_injection,
    } = spoke;
    Ok(v2::MetadataSettings {
        // Required in the hub whenever metadataSettings is present.
        provider_id_injection: keep::<BoolIsSet>(
            provider_id_injection,
            prior.field(|m| &m.provider_id_injection),
            path,
        )?,
    })
}

fn down_metadata_settings(hub: &v2::MetadataSettings) -> Result<v1::MetadataSettings> {
    let v2::MetadataSettings {
        provider_id_injection,
    } = hub;
    Ok(v1::MetadataSettings {
        provider_id_injection: BoolIsSet::down(provider_id_injection, &FieldPath::ROOT)?,
    })
}

fn up_status(
    spoke: v1::ProxmoxMachineStatus,
    prior: Prior<'_, v2::ProxmoxMachineStatus>,
    path: &FieldPath,
) -> Result<v2::ProxmoxMachineStatus> {
    let v1::ProxmoxMachineStatus {
        ready,
        addresses,
        vm_status,
        bootstrap_data_provided,
        ip_addresses,
        network,
        proxmox_node,
        task_ref,
        retry_after,
        // Cluster API v1beta2 dropped the terminal failure fields.
        failure_reason: _,
        failure_message: _,
        conditions,
    } = spoke;
    Ok(v2::ProxmoxMachineStatus {
        conditions: conditions::up(conditions, prior.field(|s| &s.conditions)),
        initialization: v2::ProxmoxMachineInitializationStatus {
            provisioned: keep::<FalseIsNone>(
                ready,
                prior.field(|s| &s.initialization.provisioned),
                path,
            )?,
        },
        addresses,
        vm_status: keep::<EmptyIsNone>(vm_status, prior.field(|s| &s.vm_status), path)?,
        bootstrap_data_provided,
        ip_addresses: up_ip_addresses(ip_addresses, prior.field(|s| &s.ip_addresses)),
        network: up_list(
            network,
            prior.field(|s| &s.network),
            &path.field("network"),
            down_network_status,
            up_network_status,
        )?,
        proxmox_node,
        pve_cluster: prior.hidden(|s| &s.pve_cluster),
        failure_domain: prior.hidden(|s| &s.failure_domain),
        template: prior.hidden(|s| &s.template),
        task_ref,
        retry_after,
    })
}

fn down_status(
    hub: &v2::ProxmoxMachineStatus,
    origin: Origin,
    path: &FieldPath,
) -> Result<v1::ProxmoxMachineStatus> {
    let v2::ProxmoxMachineStatus {
        conditions,
        initialization: v2::ProxmoxMachineInitializationStatus { provisioned },
        addresses,
        vm_status,
        bootstrap_data_provided,
        ip_addresses,
        network,
        proxmox_node,
        pve_cluster: _,
        failure_domain: _,
        template: _,
        task_ref,
        retry_after,
    } = hub;
    Ok(v1::ProxmoxMachineStatus {
        ready: FalseIsNone::down(provisioned, path)?,
        addresses: addresses.clone(),
        vm_status: EmptyIsNone::down(vm_status, path)?,
        bootstrap_data_provided: *bootstrap_data_provided,
        ip_addresses: down_ip_addresses(ip_addresses),
        network: network::down_list(network, &path.field("network"), down_network_status)?,
        proxmox_node: proxmox_node.clone(),
        task_ref: task_ref.clone(),
        retry_after: retry_after.clone(),
        failure_reason: None,
        failure_message: None,
        conditions: conditions::down(conditions, origin),
    })
}

fn up_network_status(
    spoke: v1::NetworkStatus,
    prior: Prior<'_, v2::NetworkStatus>,
    path: &FieldPath,
) -> Result<v2::NetworkStatus> {
    let v1::NetworkStatus {
        connected,
        ip_addrs,
        mac_addr,
        network_name,
    } = spoke;
    Ok(v2::NetworkStatus {
        // Required in the hub: an explicit false.
        connected: keep::<BoolIsSet>(connected, prior.field(|n| &n.connected), path)?,
        ip_addrs,
        mac_addr,
        network_name,
    })
}

fn down_network_status(hub: &v2::NetworkStatus, path: &FieldPath) -> Result<v1::NetworkStatus> {
    let v2::NetworkStatus {
        connected,
        ip_addrs,
        mac_addr,
        network_name,
    } = hub;
    Ok(v1::NetworkStatus {
        connected: BoolIsSet::down(connected, path)?,
        ip_addrs: ip_addrs.clone(),
        mac_addr: mac_addr.clone(),
        network_name: network_name.clone(),
    })
}

/// v1alpha1 keeps one address per family and device (the first); further
/// addresses stay in the hub while the first is unchanged.
fn up_ip_addresses(
    spoke: BTreeMap<String, v1::IpAddress>,
    prior: Prior<'_, Vec<v2::IpAddressesSpec>>,
) -> Vec<v2::IpAddressesSpec> {
    let mut spoke = spoke;
    let prior_list = prior.get().map_or(&[][..], Vec::as_slice);
    // Devices the hub knew keep their order; new ones follow by name.
    let mut merged: Vec<v2::IpAddressesSpec> = prior_list
        .iter()
        .filter_map(|old| {
            let new = spoke.remove(&old.net)?;
            Some(up_ip_address(old.net.clone(), new, Some(old)))
        })
        .collect();
    merged.extend(
        spoke
            .into_iter()
            .map(|(net, new)| up_ip_address(net, new, None)),
    );
    merged
}

fn up_ip_address(
    net: String,
    spoke: v1::IpAddress,
    prior: Option<&v2::IpAddressesSpec>,
) -> v2::IpAddressesSpec {
    let v1::IpAddress { ipv4, ipv6 } = spoke;
    v2::IpAddressesSpec {
        net,
        ipv4: up_family(ipv4, prior.map(|p| p.ipv4.as_slice())),
        ipv6: up_family(ipv6, prior.map(|p| p.ipv6.as_slice())),
    }
}

/// The hub addresses of one family: the prior ones while the first is
/// unchanged, else the new first one followed by the prior others.
fn up_family(first: String, prior: Option<&[String]>) -> Vec<String> {
    let prior = prior.unwrap_or_default();
    if prior.first().map_or("", String::as_str) == first {
        return prior.to_vec();
    }
    if first.is_empty() {
        return Vec::new();
    }
    let others = prior.iter().skip(1).filter(|a| **a != first).cloned();
    std::iter::once(first.clone()).chain(others).collect()
}

fn down_ip_addresses(hub: &[v2::IpAddressesSpec]) -> BTreeMap<String, v1::IpAddress> {
    let mut map = BTreeMap::new();
    for v2::IpAddressesSpec { net, ipv4, ipv6 } in hub {
        map.entry(net.clone()).or_insert_with(|| v1::IpAddress {
            ipv4: ipv4.first().cloned().unwrap_or_default(),
            ipv6: ipv6.first().cloned().unwrap_or_default(),
        });
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| v.to_string()).collect()
    }

    #[test]
    fn further_addresses_stay_while_the_first_is_unchanged() {
        let stored = strings(&["10.0.0.1", "10.0.0.2"]);
        assert_eq!(up_family("10.0.0.1".into(), Some(&stored)), stored);
        assert_eq!(
            up_family("10.0.0.9".into(), Some(&stored)),
            strings(&["10.0.0.9", "10.0.0.2"])
        );
        assert_eq!(
            up_family(String::new(), Some(&stored)),
            Vec::<String>::new()
        );
        assert_eq!(
            up_family(String::new(), Some(&strings(&[""]))),
            strings(&[""])
        );
        assert_eq!(up_family("a".into(), None), strings(&["a"]));
        assert_eq!(up_family(String::new(), None), Vec::<String>::new());
    }

    #[test]
    fn target_becomes_the_only_allowed_node() {
        let spoke = v1::ProxmoxMachineSpec {
            target: Some("pve3".into()),
            allowed_nodes: strings(&["pve1", "pve2"]),
            ..v1::ProxmoxMachineSpec::default()
        };
        let hub = up_spec(spoke, Prior::none(), &FieldPath::ROOT).unwrap();
        assert_eq!(hub.allowed_nodes, strings(&["pve3"]));
    }
}
