//! Provisioning flows end to end: a cluster with its endpoint claimed from a pool, machines
//! with one to three NICs, dual stack, DHCP, a template found by tags, Ignition, and
//! deletion of everything.

use capmox_apiserver::api::v1alpha2::{AdditionalVolume, ProxmoxMachine};
use capmox_apiserver::controller::InfraStore;
use capmox_apiserver::management::types::{IpAddressClaim, PoolKind, secret_value};
use capmox_apiserver::proxmox::nocloud::NoCloud;
use capmox_apiserver::proxmox::sim::SimConfig;
use serde_json::{Value, json};

use super::harness::{Env, NS, cluster_spec, condition};
use super::machine_spec;

/// The seed attached to a VM (or the last one uploaded for it), decoded.
fn seed(env: &Env, vmid: u32) -> Option<NoCloud> {
    env.pve.control().with_world(|w| {
        w.storages
            .values()
            .flat_map(|s| s.volumes.values().flat_map(|v| v.iter()))
            .find(|(name, _)| **name == format!("iso/user-data-{vmid}.iso"))
            .and_then(|(_, v)| v.seed.clone())
    })
}

fn vm_config(env: &Env, vmid: u32) -> std::collections::BTreeMap<String, String> {
    env.pve.control().with_world(|w| {
        w.vms
            .get(&vmid)
            .map(|vm| vm.effective_config())
            .unwrap_or_default()
    })
}

fn claim(env: &Env, name: &str) -> IpAddressClaim {
    env.mgmt
        .claims()
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("claim {name} exists"))
}

async fn cluster_env() -> Env {
    Env::with_cluster(SimConfig::default(), cluster_spec("c1")).await
}

#[tokio::test]
async fn a_machine_is_provisioned_and_its_seed_removed_after_the_node_joined() {
    let mut env = cluster_env().await;
    env.join_nodes = false;
    env.add_machine(
        "c1",
        "c1-cp-0",
        machine_spec(json!({})),
        "cloud-config",
        true,
    );
    let report = env.converge().await;
    env.assert_invariants();

    // The cluster: endpoint claimed from the VIP pool, pools per family, provisioned.
    let pc = env.cluster("c1");
    assert_eq!(pc.spec.control_plane_endpoint.host, "10.0.0.200");
    assert_eq!(pc.spec.control_plane_endpoint.port, 6443);
    assert_eq!(pc.status.initialization.provisioned, Some(true));
    let pool_names: Vec<String> = env
        .mgmt
        .pools(PoolKind::InCluster)
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert!(
        pool_names.contains(&"c1-v4-icip".to_string())
            && pool_names.contains(&"c1-v6-icip".to_string()),
        "{pool_names:?}"
    );
    let secret = env
        .mgmt
        .peek_secret(NS, "c1-proxmox-credentials")
        .expect("secret");
    assert!(
        secret
            .metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"proxmoxcluster.infrastructure.cluster.x-k8s.io/secret".to_string())
    );

    // The machine: one VM with our name, configured, seeded, running, addresses published.
    let m = env.machine("c1-cp-0");
    assert_eq!(
        condition(&m.status.conditions, "VirtualMachineProvisioned").0,
        "True"
    );
    assert_eq!(
        condition(&m.status.conditions, "VirtualMachineProvisioned").1,
        "WaitingForBootstrapReady",
        "seed stays until the node joins"
    );
    assert_eq!(condition(&m.status.conditions, "Ready").0, "True");
    assert_eq!(m.status.initialization.provisioned, Some(true));
    assert_eq!(m.status.vm_status.as_deref(), Some("ready"));
    let vmid = u32::try_from(m.spec.virtual_machine_id.expect("vmid")).expect("u32");
    let config = vm_config(&env, vmid);
    let uuid = config["smbios1"].trim_start_matches("uuid=").to_string();
    assert_eq!(m.spec.provider_id, format!("proxmox://{uuid}"));
    assert_eq!(config["cores"], "2");
    assert_eq!(config["memory"], "1024");
    assert!(config["scsi0"].contains("size=20G"), "{}", config["scsi0"]);
    assert!(
        config["ide0"].contains(&format!("iso/user-data-{vmid}.iso")),
        "{}",
        config["ide0"]
    );
    assert!(config["boot"].ends_with(";ide0"));
    assert!(
        config["tags"].contains("ip_net0_10.0.0.10"),
        "{}",
        config["tags"]
    );
    let running = env.pve.control().with_world(|w| {
        w.vms[&vmid].power != capmox_apiserver::proxmox::sim::world::Power::Stopped
    });
    assert!(running);
    let addresses: Vec<(&str, &str)> = m
        .status
        .addresses
        .iter()
        .map(|a| (a.type_.as_str(), a.address.as_str()))
        .collect();
    assert_eq!(
        addresses,
        [
            ("Hostname", "c1-cp-0"),
            ("InternalIP", "10.0.0.10"),
            ("InternalIP", "fd00:10::10")
        ]
    );
    assert_eq!(m.status.ip_addresses[0].net, "default");
    let placed = pc.status.node_locations.expect("locations");
    assert_eq!(placed.control_plane[0].node, "pve1");

    // The claims: upstream's names, owned by the machine, labelled.
    let c = claim(&env, "c1-cp-0-net0-00-inet");
    assert_eq!(c.spec.pool_ref.name, "c1-v4-icip");
    assert_eq!(
        c.metadata.annotations.clone().unwrap_or_default()["ipam.capmox.cluster.x-k8s.io/default-gateway"],
        "true"
    );
    assert_eq!(
        c.metadata.labels.clone().unwrap_or_default()["cluster.x-k8s.io/cluster-name"],
        "c1"
    );
    assert_eq!(
        claim(&env, "c1-cp-0-net0-01-inet").spec.pool_ref.name,
        "c1-v6-icip"
    );

    // The seed: meta-data and netplan for this VM.
    let s = seed(&env, vmid).expect("seed uploaded");
    let meta: serde_json::Value = serde_saphyr::from_slice(&s.meta_data).expect("YAML");
    assert_eq!(
        (&meta["instance-id"], &meta["kubernetes-version"]),
        (&uuid.to_string().into(), &"v1.32.3".into()),
        "{meta}"
    );
    // The keys the proxmox-labels flavor turns into node labels.
    let node = m.status.proxmox_node.clone().expect("node recorded");
    assert_eq!(
        (&meta["proxmox_node"], &meta["zone"]),
        (&node.into(), &"default".into()),
        "{meta}"
    );
    let net = String::from_utf8_lossy(s.network_config.as_deref().unwrap_or_default()).to_string();
    let eth0 = &serde_saphyr::from_str::<serde_json::Value>(&net).expect("YAML")["network"]["ethernets"]
        ["eth0"];
    assert_eq!(
        eth0["addresses"],
        serde_json::json!(["10.0.0.10/24", "fd00:10::10/64"]),
        "{net}"
    );
    assert!(
        eth0["routes"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|r| r["via"] == "10.0.0.1" && r["metric"] == 100),
        "{net}"
    );
    assert!(s.user_data.starts_with(b"#cloud-config"));
    assert!(report.requests > 0);

    // The node joins: the seed is detached and deleted.
    env.join_nodes = true;
    env.converge().await;
    let m = env.machine("c1-cp-0");
    assert_eq!(
        condition(&m.status.conditions, "VirtualMachineProvisioned").1,
        "Provisioned"
    );
    assert_eq!(vm_config(&env, vmid)["ide0"], "none,media=cdrom");
    assert!(env.seed_isos().is_empty(), "{:?}", env.seed_isos());

    // A quiet controller makes no Proxmox calls.
    let before = env.requests();
    env.converge().await;
    assert_eq!(env.requests(), before);
}

#[tokio::test]
async fn multi_nic_dual_stack_dhcp_template_by_tags_and_ignition() {
    let mut env = cluster_env().await;
    env.add_pool(
        PoolKind::GlobalInCluster,
        "storage-net",
        &["192.168.50.10-192.168.50.20"],
        24,
        None,
    );
    let spec = machine_spec(json!({
        "sourceNode": null, "templateID": null,
        "templateSelector": {"matchTags": ["kube-v1.32", "Capmox"], "matchPolicy": "bestSubset"},
        "tags": ["team-a"],
        "network": {
            "networkDevices": [
                {"name": "net0", "bridge": "vmbr0", "mtu": 1, "queues": 2},
                {"name": "net1", "bridge": "vmbr0", "vlan": 42, "model": "e1000",
                 "ipPoolRef": [{"apiGroup": "ipam.cluster.x-k8s.io", "kind": "GlobalInClusterIPPool", "name": "storage-net"}],
                 "linkMtu": 9000,
                 "routes": [{"to": "172.16.0.0/16", "via": "192.168.50.1", "metric": 50}]},
                {"name": "net2", "bridge": "vmbr0", "dhcp4": true}
            ]
        }
    }));
    env.add_machine("c1", "c1-md-0", spec.clone(), "cloud-config", false);
    env.add_machine(
        "c1",
        "c1-flatcar-0",
        machine_spec(json!({})),
        "ignition",
        false,
    );
    env.converge().await;
    env.assert_invariants();

    let m = env.machine_in_phase("c1-md-0", "Provisioned");
    let vmid = u32::try_from(m.spec.virtual_machine_id.expect("vmid")).expect("u32");
    let (_, _, node) = env
        .vms()
        .into_iter()
        .find(|(id, _, _)| *id == vmid)
        .expect("vm");
    assert_eq!(
        node, "pve2",
        "template 9001 (capmox;kube-v1.32;ubuntu) lives on pve2"
    );
    let config = vm_config(&env, vmid);
    assert!(
        config["net0"].contains("queues=2") && config["net0"].contains("mtu=1"),
        "{}",
        config["net0"]
    );
    assert!(
        config["net1"].starts_with("e1000=") && config["net1"].contains("tag=42"),
        "{}",
        config["net1"]
    );
    assert!(config.contains_key("net2"));
    assert!(
        config["tags"].contains("team-a") && config["tags"].contains("kube-v1.32"),
        "{}",
        config["tags"]
    );
    let nets: Vec<&str> = m
        .status
        .ip_addresses
        .iter()
        .map(|e| e.net.as_str())
        .collect();
    assert_eq!(nets, ["default", "net0", "net1", "net2"]);
    let net1 = &m.status.ip_addresses[2];
    assert_eq!(net1.ipv4, ["192.168.50.10"]);
    let dhcp = &m.status.ip_addresses[3];
    assert!(
        dhcp.ipv4.first().is_some_and(|a| a.starts_with("10.0.0.1")),
        "DHCP lease from the bridge: {dhcp:?}"
    );
    assert!(
        m.status.addresses.iter().any(|a| a.address == dhcp.ipv4[0]),
        "DHCP address published"
    );
    let (status, reason, _) = condition(&m.status.conditions, "DHCPAddressesKnown");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "ReportedByGuestAgent")
    );
    let claim1 = claim(&env, "c1-md-0-net1-00-inet");
    assert_eq!(claim1.spec.pool_ref.kind, "GlobalInClusterIPPool");
    assert!(
        env.mgmt.claims().iter().all(|c| !c
            .metadata
            .name
            .clone()
            .unwrap_or_default()
            .contains("net2")),
        "DHCP needs no claim"
    );

    // The Ignition machine: merged config with the hostname and networkd units.
    env.machine_in_phase("c1-flatcar-0", "Provisioned");
    let bootstrap = env
        .mgmt
        .peek_secret(NS, "c1-flatcar-0-bootstrap")
        .expect("secret");
    assert_eq!(
        secret_value(&bootstrap, "format").as_deref(),
        Some(&b"ignition"[..])
    );
    assert!(env.seed_isos().is_empty(), "seeds removed after the join");
}

/// Talos and other images without a guest agent: a DHCP device's lease is unknowable, and
/// the machine says so instead of waiting for it or listing nothing silently.
#[tokio::test]
async fn a_dhcp_device_without_a_guest_agent_is_named_not_waited_for() {
    let mut env = cluster_env().await;
    let spec = machine_spec(json!({
        "checks": {"skipQemuGuestAgent": true, "skipCloudInitStatus": true},
        "network": {"networkDevices": [
            {"name": "net0", "bridge": "vmbr0"},
            {"name": "net1", "bridge": "vmbr0", "dhcp4": true}
        ]}
    }));
    env.add_machine("c1", "c1-talos-0", spec, "cloud-config", false);
    env.converge().await;
    env.assert_invariants();
    let m = env.machine_in_phase("c1-talos-0", "Provisioned");
    let (status, reason, message) = condition(&m.status.conditions, "DHCPAddressesKnown");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "GuestAgentSkipped")
    );
    assert!(message.starts_with("net1 take"), "{message}");
    // The static default address (from the IPAM claim) is published; no lease is made up.
    let published: Vec<&str> = m
        .status
        .addresses
        .iter()
        .filter(|a| a.type_ == "InternalIP")
        .map(|a| a.address.as_str())
        .collect();
    let defaults = &m.status.ip_addresses[0];
    assert_eq!(defaults.net, "default");
    let claimed: Vec<&str> = defaults
        .ipv4
        .iter()
        .chain(&defaults.ipv6)
        .map(String::as_str)
        .collect();
    assert!(!claimed.is_empty());
    assert_eq!(published, claimed);
    assert!(
        m.status.ip_addresses.iter().all(|e| e.net != "net1"),
        "{:?}",
        m.status.ip_addresses
    );
}

#[tokio::test]
async fn ignition_seed_carries_the_merged_config() {
    let mut env = cluster_env().await;
    env.join_nodes = false;
    env.add_machine(
        "c1",
        "c1-flatcar-0",
        machine_spec(json!({})),
        "ignition",
        false,
    );
    env.converge().await;
    let m = env.machine_in_phase("c1-flatcar-0", "WaitingForBootstrapReady");
    let vmid = u32::try_from(m.spec.virtual_machine_id.expect("vmid")).expect("u32");
    let s = seed(&env, vmid).expect("seed");
    let ignition: Value = serde_json::from_slice(&s.user_data).expect("ignition json");
    assert_eq!(
        ignition["passwd"]["users"][0]["name"], "core",
        "user config kept"
    );
    let files: Vec<&str> = ignition["storage"]["files"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["path"].as_str())
        .collect();
    assert_eq!(files, ["/etc/hostname", "/etc/proxmox-env"]);
    assert!(
        ignition["networkd"]["units"][0]["contents"]
            .as_str()
            .unwrap_or_default()
            .contains("Address=10.0.0.10/24")
    );
    assert_eq!(
        s.network_config.as_deref(),
        Some(&b"version: 1\nconfig: []\n"[..])
    );
}

#[tokio::test]
async fn deleting_machines_and_the_cluster_leaves_nothing_behind() {
    let mut env = cluster_env().await;
    for i in 0..3 {
        env.add_machine(
            "c1",
            &format!("c1-md-{i}"),
            machine_spec(json!({})),
            "cloud-config",
            false,
        );
    }
    env.converge().await;
    env.assert_invariants();
    assert_eq!(env.vms().len(), 3);

    // Deleting the ProxmoxCluster first waits for its machines and the owning Cluster.
    env.store
        .delete::<capmox_apiserver::api::v1alpha2::ProxmoxCluster>(NS, "c1");
    env.converge().await;
    assert!(
        env.store
            .peek::<capmox_apiserver::api::v1alpha2::ProxmoxCluster>(NS, "c1")
            .is_some(),
        "the Cluster still exists"
    );

    for i in 0..3 {
        env.store
            .delete::<ProxmoxMachine>(NS, &format!("c1-md-{i}"));
    }
    env.converge().await;
    assert!(env.vms().is_empty(), "{:?}", env.vms());
    assert!(env.store.all::<ProxmoxMachine>().is_empty());
    assert!(
        env.mgmt
            .claims()
            .iter()
            .all(|c| c.metadata.name.as_deref() == Some("c1-vip")),
        "only the endpoint claim is left"
    );
    assert!(env.seed_isos().is_empty());

    env.mgmt.delete_object("Cluster", NS, "c1");
    env.converge().await;
    assert_cluster_and_its_pools_gone(&env);
    assert!(env.mgmt.claims().is_empty(), "endpoint claim released");
    assert!(env.mgmt.addresses().is_empty());
    let secret = env
        .mgmt
        .peek_secret(NS, "c1-proxmox-credentials")
        .expect("secret kept for the GC");
    assert!(
        secret.metadata.finalizers.unwrap_or_default().is_empty(),
        "finalizer released"
    );
}

/// A claim IPAM still holds on the cluster's pool (its address in the pool's reuse grace
/// period; the pool's webhook would refuse the deletion) makes the deletion wait, with the
/// reason in the status, instead of failing; the pool goes once the claim is released.
#[tokio::test]
async fn deletion_waits_for_ipam_to_release_the_claims_on_the_cluster_pools() {
    let mut env = cluster_env().await;
    env.converge().await;
    let own_pool = env
        .mgmt
        .pools(PoolKind::InCluster)
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .find(|name| name != "vip-pool")
        .expect("the cluster's own pool");
    let mut held = claim(&env, "c1-vip");
    held.metadata.name = Some("c1-md-0-net0-00-inet".into());
    held.metadata.uid = None;
    held.metadata.resource_version = None;
    held.spec.pool_ref.kind = PoolKind::InCluster.as_str().into();
    held.spec.pool_ref.name = own_pool.clone();
    env.mgmt.put_claim(&held);

    env.store
        .delete::<capmox_apiserver::api::v1alpha2::ProxmoxCluster>(NS, "c1");
    env.mgmt.delete_object("Cluster", NS, "c1");
    // It polls while the claim is held: it does not converge; let it run a while.
    env.run_for(200).await;
    let waiting = env
        .store
        .peek::<capmox_apiserver::api::v1alpha2::ProxmoxCluster>(NS, "c1")
        .expect("the ProxmoxCluster waits");
    let (status, reason, message) = condition(&waiting.status.conditions, "ProxmoxAvailable");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "Deleting"));
    assert!(
        message.contains("waiting for IPAM to release 1 address claim"),
        "{message}"
    );
    assert!(
        env.mgmt
            .pools(PoolKind::InCluster)
            .iter()
            .any(|p| p.metadata.name.as_ref() == Some(&own_pool)),
        "the pool stays while a claim holds it"
    );

    assert!(
        env.mgmt
            .delete_object("IPAddressClaim", NS, "c1-md-0-net0-00-inet")
    );
    env.converge().await;
    assert_cluster_and_its_pools_gone(&env);
}

/// ProxmoxCluster c1 is gone, and with it every pool but the user's `vip-pool`.
fn assert_cluster_and_its_pools_gone(env: &Env) {
    assert!(
        env.store
            .peek::<capmox_apiserver::api::v1alpha2::ProxmoxCluster>(NS, "c1")
            .is_none()
    );
    assert!(
        env.mgmt
            .pools(PoolKind::InCluster)
            .iter()
            .all(|p| p.metadata.name.as_deref() == Some("vip-pool")),
        "cluster pools deleted"
    );
}

/// `cpuType` and `cloudInitDrive` (an ARM64 `virt` machine has no IDE): the VM gets the CPU
/// model with the template's flags kept, the seed on `scsi5` (booted from there), and the
/// seed is detached from that drive once the node joined.
#[tokio::test]
async fn cpu_type_and_the_seed_on_a_scsi_drive() {
    let mut env = cluster_env().await;
    env.join_nodes = false;
    env.add_machine(
        "c1",
        "c1-arm-0",
        machine_spec(json!({
            "cpuType": "host",
            "cloudInitDrive": {"bus": "scsi", "slot": 5}
        })),
        "cloud-config",
        true,
    );
    env.converge().await;
    env.assert_invariants();
    let m = env.machine("c1-arm-0");
    assert_eq!(m.status.initialization.provisioned, Some(true));
    let vmid = u32::try_from(m.spec.virtual_machine_id.expect("vmid")).expect("u32");
    let config = vm_config(&env, vmid);
    assert_eq!(config["cpu"], "host");
    assert!(
        config["scsi5"].contains(&format!("iso/user-data-{vmid}.iso"))
            && config["scsi5"].contains("media=cdrom"),
        "{config:?}"
    );
    assert!(!config.contains_key("ide0"), "{config:?}");
    assert!(config["boot"].ends_with(";scsi5"), "{}", config["boot"]);

    env.join_nodes = true;
    env.converge().await;
    assert_eq!(vm_config(&env, vmid)["scsi5"], "none,media=cdrom");
    assert!(env.seed_isos().is_empty(), "{:?}", env.seed_isos());
}

/// The disk volumes a VM has, per drive: (volume id, size), without CD-ROMs.
fn disks(env: &Env, vmid: u32) -> std::collections::BTreeMap<String, (String, String)> {
    vm_config(env, vmid)
        .into_iter()
        .filter(|(key, value)| {
            capmox_apiserver::proxmox::propstring::is_drive_key(key)
                && !value.contains("media=cdrom")
        })
        .map(|(key, value)| {
            let mut parts = value.split(',');
            let volume = parts.next().unwrap_or_default().to_string();
            let size = parts
                .find_map(|p| p.strip_prefix("size="))
                .unwrap_or_default()
                .to_string();
            (key, (volume, size))
        })
        .collect()
}

/// `additionalVolumes`: data disks exist with their options before the first start (on the
/// boot volume's storage unless one is named); on the provisioned machine a grown volume
/// is resized and an added one attached to the running VM; a pass replayed over a wiped
/// status creates no disk twice; deleting the machine frees every volume.
#[tokio::test]
async fn additional_volumes_created_grown_and_freed_with_the_vm() {
    let mut env = cluster_env().await;
    env.add_machine(
        "c1",
        "c1-data-0",
        machine_spec(json!({"disks": {"additionalVolumes": [
            {"disk": "scsi1", "sizeGb": 16, "discard": true},
            {"disk": "virtio0", "sizeGb": 8, "storage": "ceph", "ioThread": true}
        ]}})),
        "cloud-config",
        true,
    );
    env.converge().await;
    env.assert_invariants();
    let m = env.machine("c1-data-0");
    assert_eq!(m.status.initialization.provisioned, Some(true));
    let vmid = u32::try_from(m.spec.virtual_machine_id.expect("vmid")).expect("u32");
    let config = vm_config(&env, vmid);
    let d = disks(&env, vmid);
    assert_eq!(d["scsi0"].1, "20G", "{d:?}");
    assert_eq!(
        d["scsi1"],
        (format!("local-lvm:vm-{vmid}-disk-1"), "16G".into())
    );
    assert_eq!(
        d["virtio0"],
        (format!("ceph:vm-{vmid}-disk-0"), "8G".into())
    );
    assert!(config["scsi1"].contains("discard=on"), "{config:?}");
    assert!(config["virtio0"].contains("iothread=1"), "{config:?}");

    env.edit_spec("c1-data-0", |pm| {
        let disks = pm.spec.disks.as_mut().expect("disks");
        disks.additional_volumes[0].size_gb = 24;
        disks.additional_volumes.push(AdditionalVolume {
            disk: "sata1".into(),
            size_gb: 4,
            ssd: Some(true),
            ..AdditionalVolume::default()
        });
    })
    .await;
    env.converge().await;
    env.assert_invariants();
    let d = disks(&env, vmid);
    assert_eq!(d["scsi1"].1, "24G", "grown: {d:?}");
    assert_eq!(
        d["sata1"],
        (format!("local-lvm:vm-{vmid}-disk-2"), "4G".into())
    );
    assert!(vm_config(&env, vmid)["sata1"].contains("ssd=1"));
    assert!(
        env.pve.control().with_world(
            |w| w.vms[&vmid].config.contains_key("sata1") && w.vms[&vmid].pending.is_empty()
        ),
        "hot-plugged into the running VM, not left pending"
    );

    // Replayed from the start over the existing VM: adopted, nothing created twice.
    let mut wiped = env.machine("c1-data-0");
    wiped.status = Default::default();
    env.store.update_status(&wiped).await.expect("status wiped");
    env.restart();
    env.converge().await;
    env.assert_invariants();
    assert_eq!(disks(&env, vmid).len(), 4, "{:?}", disks(&env, vmid));

    env.store.delete::<ProxmoxMachine>(NS, "c1-data-0");
    env.converge().await;
    assert!(env.vms().is_empty(), "{:?}", env.vms());
    env.assert_invariants();
}

/// A volume on a drive that holds a CD-ROM fails the machine with the reason (nothing is
/// detached), and a spec that moves it to a free drive lets it go on.
#[tokio::test]
async fn a_volume_on_a_cdrom_drive_fails_until_moved() {
    let mut env = cluster_env().await;
    env.join_nodes = false;
    env.add_machine(
        "c1",
        "c1-data-1",
        machine_spec(json!({"disks": {"additionalVolumes": [{"disk": "ide2", "sizeGb": 2}]}})),
        "cloud-config",
        true,
    );
    env.pve.control().with_world(|w| {
        if let Some(t) = w.vms.get_mut(&9000) {
            t.config.insert("ide2".into(), "none,media=cdrom".into());
        }
    });
    env.converge().await;
    let (_, reason, message) = condition(
        &env.machine("c1-data-1").status.conditions,
        "VirtualMachineProvisioned",
    );
    assert_eq!(reason, "VMProvisionFailed");
    assert!(
        message.contains("ide2 holds a CD-ROM (none), not a disk"),
        "{message}"
    );
    env.edit_spec("c1-data-1", |pm| {
        pm.spec.disks.as_mut().expect("disks").additional_volumes[0].disk = "scsi2".into();
    })
    .await;
    env.converge().await;
    env.assert_invariants();
    let m = env.machine("c1-data-1");
    assert_eq!(m.status.initialization.provisioned, Some(true));
    let vmid = u32::try_from(m.spec.virtual_machine_id.expect("vmid")).expect("u32");
    assert_eq!(disks(&env, vmid)["scsi2"].1, "2G");
    assert_eq!(
        vm_config(&env, vmid)["ide2"],
        "none,media=cdrom",
        "left alone"
    );
}

/// `haResource`: once the VM runs it is a Proxmox VE HA resource with the spec's settings;
/// one an operator set up differently beforehand is brought to them; deleting the machine
/// destroys the VM with `purge`, so the resource goes with it and never blocks the deletion
/// ("used in HA resources and purge parameter not set").
#[tokio::test]
async fn ha_resource_registered_and_purged_with_the_vm() {
    let mut env = cluster_env().await;
    env.add_machine(
        "c1",
        "c1-ha-0",
        machine_spec(json!({"haResource": {"group": "capmox", "maxRestart": 3}})),
        "cloud-config",
        true,
    );
    env.converge().await;
    env.assert_invariants();
    let m = env.machine("c1-ha-0");
    assert_eq!(m.status.initialization.provisioned, Some(true));
    let vmid = u32::try_from(m.spec.virtual_machine_id.expect("vmid")).expect("u32");
    let ha = |env: &super::harness::Env| {
        env.pve.control().with_world(|w| {
            w.ha_resources.get(&format!("vm:{vmid}")).map(|r| {
                (
                    r.state.clone(),
                    r.group.clone(),
                    r.max_restart,
                    r.max_relocate,
                )
            })
        })
    };
    assert_eq!(
        ha(&env),
        Some(("started".into(), Some("capmox".into()), 3, 1))
    );
    // Replayed from its phase (a status restored from a backup, say) with the resource set
    // up otherwise: brought back to the spec's settings.
    env.pve.control().with_world(|w| {
        if let Some(r) = w.ha_resources.get_mut(&format!("vm:{vmid}")) {
            r.max_restart = 7;
            r.group = None;
        }
    });
    let mut wiped = env.machine("c1-ha-0");
    wiped.status = Default::default();
    env.store.update_status(&wiped).await.expect("status wiped");
    env.restart();
    env.converge().await;
    env.assert_invariants();
    assert_eq!(env.vms().len(), 1, "adopted, not cloned");
    assert_eq!(
        ha(&env),
        Some(("started".into(), Some("capmox".into()), 3, 1))
    );

    env.store.delete::<ProxmoxMachine>(NS, "c1-ha-0");
    env.converge().await;
    assert!(env.vms().is_empty(), "{:?}", env.vms());
    assert_eq!(ha(&env), None, "purged with the VM");
    env.assert_invariants();
}
