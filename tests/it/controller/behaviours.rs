//! Behaviours beyond the happy path: zones, VMID ranges, linked clones and pools, a given
//! endpoint, cloud-init outcomes, pausing, missing credentials or templates, memory
//! limits, global credentials and externally managed clusters.

use capmox_apiserver::api::v1alpha2::ProxmoxMachine;
use capmox_apiserver::controller::InfraStore;
use capmox_apiserver::management::types::PoolKind;
use capmox_apiserver::proxmox::sim::{
    self, ClockMode, CloudInitResult, FaultPlan, Profile, SimConfig,
};
use serde_json::json;

use super::harness::{
    Chaos, Env, NS, cluster_spec, condition, seed_with_gpus, seed_with_local_copies,
};
use super::machine_spec;

fn vm_field(env: &Env, vmid: u32, key: &str) -> Option<String> {
    env.pve.control().with_world(|w| {
        w.vms
            .get(&vmid)
            .and_then(|vm| vm.effective_config().get(key).cloned())
    })
}

#[tokio::test]
async fn zones_vmid_range_linked_clone_pool_and_a_given_endpoint() {
    let mut env = Env::start(SimConfig::default()).await;
    env.join_nodes = false;
    env.add_cluster(
        "c1",
        json!({
            "controlPlaneEndpoint": {"host": "10.0.0.250", "port": 6443},
            "ipv4Config": {"addresses": ["10.0.0.10-10.0.0.90"], "prefix": 24, "gateway": "10.0.0.1"},
            "dnsServers": ["10.0.0.53"],
            "zoneConfig": [{
                "zone": "east",
                "ipv4Config": {"addresses": ["10.0.1.10-10.0.1.50"], "prefix": 24, "gateway": "10.0.1.1", "metric": 200},
                "dnsServers": ["10.0.1.53"]
            }],
            "credentialsRef": {"name": "c1-proxmox-credentials"},
        }),
    );
    let spec = machine_spec(json!({
        "full": false,
        "pool": "capi",
        "description": "east worker",
        "vmIDRange": {"start": 700, "end": 705},
        "network": {"zone": "east", "networkDevices": [{"name": "net0", "bridge": "vmbr0"}]},
    }));
    env.add_machine("c1", "east-0", spec, "cloud-config", false);
    env.converge().await;
    env.assert_invariants();

    let pc = env.cluster("c1");
    assert_eq!(
        pc.spec.control_plane_endpoint.host, "10.0.0.250",
        "a given endpoint is kept"
    );
    assert!(env.mgmt.claims().iter().all(|c| {
        !c.metadata
            .name
            .clone()
            .unwrap_or_default()
            .ends_with("-vip")
    }));
    let zones: Vec<String> = pc
        .status
        .in_cluster_zone_ref
        .iter()
        .filter_map(|z| z.zone.clone())
        .collect();
    assert_eq!(zones, ["default", "east"]);

    let m = env.machine_in_phase("east-0", "WaitingForBootstrapReady");
    assert_eq!(
        m.spec.virtual_machine_id,
        Some(700),
        "first id of the range"
    );
    assert_eq!(
        m.metadata.labels.clone().unwrap_or_default()["topology.kubernetes.io/proxmox-zone"],
        "east"
    );
    let pool = env
        .pve
        .control()
        .with_world(|w| w.vms.get(&700).and_then(|vm| vm.pool.clone()));
    assert_eq!(pool.as_deref(), Some("capi"));
    assert_eq!(
        vm_field(&env, 700, "description")
            .map(|d| d.trim_end().to_string())
            .as_deref(),
        Some("east worker")
    );
    let disk = vm_field(&env, 700, "scsi0").unwrap_or_default();
    // On LVM-thin a linked clone's thin snapshot has a plain name; the clone task says which.
    assert!(disk.starts_with("local-lvm:vm-700-disk-0"), "{disk}");
    let linked = env.pve.control().with_world(|w| {
        w.tasks.list().any(|t| {
            t.log
                .iter()
                .any(|l| l.starts_with("create linked clone of drive scsi0"))
        })
    });
    assert!(linked, "the clone of VM 700 was not linked");
    let claim = env
        .mgmt
        .claims()
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some("east-0-net0-00-inet"))
        .expect("claim");
    assert_eq!(claim.spec.pool_ref.name, "c1-east-v4-icip");
    assert_eq!(
        claim.metadata.labels.clone().unwrap_or_default()["topology.kubernetes.io/proxmox-zone"],
        "east"
    );
    let seed = env.pve.control().with_world(|w| {
        w.storages
            .values()
            .flat_map(|s| s.volumes.values().flat_map(|v| v.iter()))
            .find(|(n, _)| n.as_str() == "iso/user-data-700.iso")
            .and_then(|(_, v)| v.seed.clone())
    });
    let seed = seed.expect("seed");
    let net =
        String::from_utf8_lossy(seed.network_config.as_deref().unwrap_or_default()).to_string();
    let eth0 = &serde_saphyr::from_str::<serde_json::Value>(&net).expect("YAML")["network"]["ethernets"]
        ["eth0"];
    assert!(
        eth0["nameservers"]["addresses"]
            .as_array()
            .is_some_and(|a| a.iter().any(|d| d == "10.0.1.53")),
        "the zone's DNS servers: {net}"
    );
    assert!(
        eth0["routes"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|r| r["via"] == "10.0.1.1" && r["metric"] == 200),
        "{net}"
    );
    let mac = vm_field(&env, 700, "net0").unwrap_or_default();
    let mac = mac
        .split(['=', ','])
        .nth(1)
        .unwrap_or_default()
        .to_ascii_lowercase();
    assert_eq!(
        eth0["match"]["macaddress"], mac,
        "the MAC of the VM's NIC: {mac}\n{net}"
    );
    let meta: serde_json::Value = serde_saphyr::from_slice(&seed.meta_data).expect("YAML");
    assert_eq!(meta["zone"], "east");
    let location = pc
        .status
        .node_locations
        .clone()
        .expect("locations")
        .workers
        .remove(0);
    assert_eq!(location.zone.as_deref(), Some("east"));
}

#[tokio::test]
async fn cloud_init_degraded_is_success_and_an_error_waits_for_a_spec_change() {
    let mut faults = FaultPlan::default();
    faults.cloud_init.insert(710, CloudInitResult::Degraded);
    faults.cloud_init.insert(711, CloudInitResult::Error);
    let config = SimConfig {
        faults,
        ..SimConfig::default()
    };
    let mut env = Env::with_cluster(config, cluster_spec("c1")).await;
    env.join_nodes = false;
    env.add_machine(
        "c1",
        "degraded",
        machine_spec(json!({"vmIDRange": {"start": 710, "end": 710}})),
        "cloud-config",
        false,
    );
    env.add_machine(
        "c1",
        "broken",
        machine_spec(json!({"vmIDRange": {"start": 711, "end": 711}})),
        "cloud-config",
        false,
    );
    env.converge().await;

    let (status, reason, message) = condition(
        &env.machine("degraded").status.conditions,
        "VirtualMachineProvisioned",
    );
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "WaitingForBootstrapReady")
    );
    assert!(message.contains("degraded"), "{message}");
    let broken = env.machine("broken");
    let (status, reason, message) =
        condition(&broken.status.conditions, "VirtualMachineProvisioned");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "VMProvisionFailed")
    );
    assert!(
        message.starts_with("cloud-init failed execution (exit code 1)"),
        "{message}"
    );
    assert_eq!(condition(&broken.status.conditions, "Ready").0, "False");

    // Terminal: nothing happens until the spec changes.
    let before = env.requests();
    env.converge().await;
    assert_eq!(env.requests(), before);
    env.pve.control().update_faults(|f| f.cloud_init.clear());
    env.edit_spec("broken", |m| m.spec.description = Some("retry".into()))
        .await;
    env.converge().await;
    env.machine_in_phase("broken", "WaitingForBootstrapReady");
    assert_eq!(
        vm_field(&env, 711, "description")
            .map(|d| d.trim_end().to_string())
            .as_deref(),
        Some("retry")
    );
    env.assert_invariants();
    assert_eq!(env.vms().len(), 2, "the replay adopted the existing VM");
}

#[tokio::test]
async fn pause_stops_everything_until_resumed() {
    let mut env = Env::with_cluster(SimConfig::default(), cluster_spec("c1")).await;
    env.converge().await;
    env.mgmt
        .edit_cluster(NS, "c1", |c| c.spec.paused = Some(true));
    env.add_machine("c1", "m-0", machine_spec(json!({})), "cloud-config", false);
    env.converge().await;
    assert!(env.vms().is_empty(), "nothing is created while paused");
    assert_eq!(
        condition(&env.machine("m-0").status.conditions, "Paused").0,
        "True"
    );
    // Deletion is held too (clusterctl move deletes paused source objects).
    env.mgmt.edit_cluster(NS, "c1", |c| c.spec.paused = None);
    env.converge().await;
    assert_eq!(env.vms().len(), 1);
    let m = env.machine("m-0");
    assert_eq!(condition(&m.status.conditions, "Paused").0, "False");
    assert_eq!(
        condition(&m.status.conditions, "VirtualMachineProvisioned").1,
        "Provisioned"
    );
    env.mgmt
        .edit_cluster(NS, "c1", |c| c.spec.paused = Some(true));
    env.converge().await;
    env.store.delete::<ProxmoxMachine>(NS, "m-0");
    env.converge().await;
    assert_eq!(
        env.vms().len(),
        1,
        "a paused machine's VM survives its deletion request"
    );
    env.mgmt.edit_cluster(NS, "c1", |c| c.spec.paused = None);
    env.converge().await;
    assert!(env.vms().is_empty());
}

#[tokio::test]
async fn missing_credentials_template_and_memory_are_reported_then_recovered() {
    let mut spec = cluster_spec("c1");
    spec["credentialsRef"] = json!({"name": "late-secret"});
    spec["allowedNodes"] = json!(["pve1"]);
    let mut env = Env::with_cluster(SimConfig::default(), spec).await;
    let report = env.run_for(40).await;
    assert!(!report.converged, "the controller keeps retrying");
    let (status, reason, message) =
        condition(&env.cluster("c1").status.conditions, "ProxmoxAvailable");
    assert_eq!(
        (status.as_str(), reason.as_str(), message.as_str()),
        (
            "False",
            "CredentialsNotFound",
            "credentials secret not found"
        )
    );
    env.mgmt.put_secret(&env.credentials_secret("late-secret"));
    env.converge().await;
    assert_eq!(
        condition(&env.cluster("c1").status.conditions, "ProxmoxAvailable").1,
        "Provisioned"
    );

    let missing = machine_spec(
        json!({"sourceNode": null, "templateID": null, "templateSelector": {"matchTags": ["nope"]}}),
    );
    env.add_machine("c1", "no-template", missing, "cloud-config", false);
    env.add_machine(
        "c1",
        "too-big",
        machine_spec(json!({"memoryMiB": 131072})),
        "cloud-config",
        false,
    );
    let report = env.run_for(40).await;
    assert!(!report.converged);
    let (_, reason, message) = condition(
        &env.machine("no-template").status.conditions,
        "VirtualMachineProvisioned",
    );
    assert_eq!(reason, "Cloning", "not terminal: a template may appear");
    assert_eq!(
        message,
        "VM template not found: found 0 VM templates with tags \"nope\""
    );
    let (_, reason, message) = condition(
        &env.machine("too-big").status.conditions,
        "VirtualMachineProvisioned",
    );
    assert_eq!(reason, "Cloning");
    assert!(
        message.starts_with("cannot reserve 137438953472B of memory on node pve1"),
        "{message}"
    );
    assert!(env.vms().is_empty());

    env.edit_spec("no-template", |m| {
        if let Some(s) = m.spec.template_selector.as_mut() {
            s.match_tags = vec!["debian".into()];
        }
    })
    .await;
    env.edit_spec("too-big", |m| m.spec.memory_mib = Some(2048))
        .await;
    env.converge().await;
    env.assert_invariants();
    for name in ["no-template", "too-big"] {
        assert_eq!(
            condition(
                &env.machine(name).status.conditions,
                "VirtualMachineProvisioned"
            )
            .1,
            "Provisioned",
            "{}",
            env.describe()
        );
    }
    assert!(
        env.vms().iter().all(|(_, _, node)| node == "pve1"),
        "{:?}",
        env.vms()
    );
}

#[tokio::test]
async fn global_credentials_and_externally_managed_clusters() {
    let mut spec = cluster_spec("c1");
    spec.as_object_mut().map(|s| s.remove("credentialsRef"));
    let mut env = Env::with_cluster(SimConfig::default(), spec).await;
    env.use_global_credentials();
    env.add_machine("c1", "m-0", machine_spec(json!({})), "cloud-config", false);
    env.converge().await;
    assert_eq!(
        condition(
            &env.machine("m-0").status.conditions,
            "VirtualMachineProvisioned"
        )
        .1,
        "Provisioned"
    );

    let mut other = env.add_cluster("ext", cluster_spec("ext"));
    other.metadata.annotations = Some(
        [(
            "cluster.x-k8s.io/managed-by".to_string(),
            "someone".to_string(),
        )]
        .into(),
    );
    env.store.update(&other).await.expect("annotated");
    env.converge().await;
    let ext = env.cluster("ext");
    assert!(
        ext.metadata.finalizers.is_none() && ext.status.conditions.is_empty(),
        "left alone"
    );
    assert!(env.mgmt.pools(PoolKind::InCluster).iter().all(|p| {
        !p.metadata
            .name
            .clone()
            .unwrap_or_default()
            .starts_with("ext-")
    }));
}

#[tokio::test]
async fn tasks_longer_than_the_inline_wait_are_tracked_across_passes() {
    // The fast profile on a manual simulator clock that follows the controller's virtual
    // clock: clones, resizes, uploads and starts outlast the inline wait, so their UPIDs
    // go to status.taskRef and later passes poll them.
    let mut env = Env::with_slow_tasks().await;
    for i in 0..3 {
        env.add_machine(
            "c1",
            &format!("slow-{i}"),
            machine_spec(json!({})),
            "cloud-config",
            false,
        );
    }
    let mut tracked = std::collections::BTreeSet::new();
    env.drive_synced(Chaos::none(), |env| {
        for m in env.store.all::<ProxmoxMachine>() {
            if let Some(upid) = m.status.task_ref {
                tracked.insert(upid.split(':').nth(5).unwrap_or_default().to_string());
            }
        }
    })
    .await;
    env.assert_invariants();
    for i in 0..3 {
        let m = env.machine_in_phase(&format!("slow-{i}"), "Provisioned");
        assert_eq!(m.status.task_ref, None);
    }
    for task in ["qmclone", "qmstart"] {
        assert!(
            tracked.contains(task),
            "{task} was tracked through taskRef: {tracked:?}"
        );
    }
}

/// A template on local storage, copied to pve1 and pve2 (same tags, own VMIDs): every clone
/// comes from the copy on its own node (the simulator, like Proxmox, refuses a local-storage
/// clone across nodes). The scheduler prefers pve3, the roomiest node, which has no copy: the
/// condition says so and the VM lands on a node with one; allowed only pve3, nothing is cloned.
#[tokio::test]
async fn template_copies_are_cloned_on_their_own_node() {
    let seed = seed_with_local_copies();
    // Clones take time (the fast profile, on the controller's clock): the condition is seen
    // while one runs.
    let config = SimConfig {
        seed,
        profile: Profile::Fast,
        clock: ClockMode::Manual,
        ..SimConfig::default()
    };
    let mut spec = cluster_spec("c1");
    spec["allowedNodes"] = json!(["pve1", "pve2", "pve3"]);
    let mut env = Env::with_cluster(config, spec).await;
    let by_tags = |extra: serde_json::Value| {
        let mut s = machine_spec(json!({
            "sourceNode": null, "templateID": null,
            "templateSelector": {"matchTags": ["capmox", "local-copy"]}
        }));
        capmox_apiserver::registry::patch::merge(&mut s, &extra);
        s
    };
    env.add_machine("c1", "m-0", by_tags(json!({})), "cloud-config", false);
    // The condition's messages as the machine goes through its phases.
    let mut messages: Vec<String> = Vec::new();
    env.drive_synced(Chaos::none(), |env| {
        let (_, _, message) = condition(
            &env.machine("m-0").status.conditions,
            "VirtualMachineProvisioned",
        );
        if messages.last() != Some(&message) {
            messages.push(message);
        }
    })
    .await;
    env.assert_invariants();
    let m = env.machine("m-0");
    assert_eq!(m.status.initialization.provisioned, Some(true));
    let node = m.status.proxmox_node.clone().expect("node recorded");
    assert!(node == "pve1" || node == "pve2", "{node}");
    let said = format!("pve3 has no copy of the template (copies on pve1, pve2); cloned on {node}");
    assert!(messages.contains(&said), "{messages:?}");

    env.add_machine(
        "c1",
        "m-pinned",
        by_tags(json!({"allowedNodes": ["pve3"]})),
        "cloud-config",
        false,
    );
    let report = env.run_for(40).await;
    assert!(!report.converged, "m-pinned keeps waiting for a copy");
    let (_, reason, message) = condition(
        &env.machine("m-pinned").status.conditions,
        "VirtualMachineProvisioned",
    );
    assert_eq!(reason, "Cloning");
    assert_eq!(
        message,
        "no allowed node (pve3) has a copy of the template; copies are on pve1, pve2"
    );
    let vms = env.vms();
    assert!(
        !vms.iter().any(|(_, name, _)| name == "m-pinned"),
        "{vms:?}"
    );
}

/// Failure domains: the cluster reports its node groups (sorted, `controlPlane` explicit,
/// the nodes as an attribute); three control-plane Machines that Cluster API put in three
/// domains land on the domains' nodes and report their domain; a Machine without one
/// reports the domain of the node it got; a Machine in a domain the cluster does not have
/// waits with the reason and no VM is made.
#[tokio::test]
async fn machines_are_placed_in_their_failure_domains() {
    let mut spec = cluster_spec("c1");
    spec["failureDomains"] = json!([
        {"name": "rack-c", "nodes": ["pve3"]},
        {"name": "rack-a", "nodes": ["pve1"]},
        {"name": "rack-b", "nodes": ["pve2"], "controlPlane": false}
    ]);
    let mut env = Env::with_cluster(SimConfig::default(), spec).await;
    // The template on shared storage (ceph), so every node can take a clone.
    let shared = || machine_spec(json!({"sourceNode": "pve2", "templateID": 9001}));
    let placed = [("cp-a", "rack-a"), ("cp-b", "rack-b"), ("cp-c", "rack-c")];
    for (name, domain) in placed {
        env.add_machine("c1", name, shared(), "cloud-config", true);
        env.put_failure_domain(name, domain);
    }
    env.add_machine("c1", "worker", shared(), "cloud-config", false);
    env.converge().await;
    env.assert_invariants();
    env.add_machine("c1", "lost", shared(), "cloud-config", false);
    env.put_failure_domain("lost", "rack-z");
    assert!(!env.run_for(40).await.converged, "it waits, retrying");

    let reported: Vec<(String, Option<bool>, String)> = env
        .cluster("c1")
        .status
        .failure_domains
        .into_iter()
        .map(|d| (d.name, d.control_plane, d.attributes["nodes"].clone()))
        .collect();
    assert_eq!(
        reported,
        [
            ("rack-a".into(), Some(true), "pve1".into()),
            ("rack-b".into(), Some(false), "pve2".into()),
            ("rack-c".into(), Some(true), "pve3".into()),
        ]
    );
    let node_of = |env: &Env, name: &str| {
        let vmid = env.machine(name).spec.virtual_machine_id.expect("vmid");
        env.vms()
            .into_iter()
            .find(|(id, _, _)| i64::from(*id) == vmid)
            .map(|(_, _, node)| node)
            .expect("its VM")
    };
    for ((name, domain), node) in placed.into_iter().zip(["pve1", "pve2", "pve3"]) {
        assert_eq!(node_of(&env, name), node, "{name}");
        assert_eq!(
            env.machine(name).status.failure_domain.as_deref(),
            Some(domain)
        );
    }
    let worker_node = node_of(&env, "worker");
    let expected = match worker_node.as_str() {
        "pve1" => "rack-a",
        "pve2" => "rack-b",
        _ => "rack-c",
    };
    assert_eq!(
        env.machine("worker").status.failure_domain.as_deref(),
        Some(expected)
    );
    let lost = env.machine("lost");
    assert_eq!(lost.spec.virtual_machine_id, None, "nothing cloned");
    let (_, _, message) = condition(&lost.status.conditions, "VirtualMachineProvisioned");
    assert_eq!(
        message,
        "the Machine's failure domain rack-z is not one of ProxmoxCluster c1's (rack-c, rack-a, rack-b)"
    );
}

/// GPUs through a PCI resource mapping with two devices (one on pve2, one on pve3) and three
/// machines that want one each: two are provisioned, each on its own node with the device
/// written as `hostpci0` and started (the simulator hands each its device, as Proxmox VE
/// does); the third waits, naming the mapping and what each node has, and nothing is cloned
/// for it; once one of the first two is deleted, it takes the freed device.
#[tokio::test]
async fn machines_wait_for_a_free_device_of_their_pci_mapping() {
    let seed = seed_with_gpus("a100", &["pve2", "pve3"]);
    let config = SimConfig {
        seed,
        ..SimConfig::default()
    };
    let mut spec = cluster_spec("c1");
    spec["allowedNodes"] = json!(["pve1", "pve2", "pve3"]);
    let mut env = Env::with_cluster(config, spec).await;
    let gpu = machine_spec(json!({
        "sourceNode": "pve2", "templateID": 9001,
        "pciDevices": [{"mapping": "a100", "pcie": true}],
    }));
    let names = ["gpu-0", "gpu-1", "gpu-2"];
    for name in names {
        env.add_machine("c1", name, gpu.clone(), "cloud-config", false);
    }
    assert!(!env.run_for(80).await.converged, "one machine waits");
    let provisioned = |env: &Env| -> Vec<&str> {
        names
            .into_iter()
            .filter(|n| env.machine(n).status.initialization.provisioned == Some(true))
            .collect()
    };
    let done = provisioned(&env);
    assert_eq!(done.len(), 2, "{}", env.describe());
    let waiting = names.into_iter().find(|n| !done.contains(n)).expect("one");
    let (_, _, message) = condition(
        &env.machine(waiting).status.conditions,
        "VirtualMachineProvisioned",
    );
    assert_eq!(
        message,
        "no node has 1 free device of PCI mapping \"a100\" (pve1: none mapped, pve2: 1 of 1 \
         taken, pve3: 1 of 1 taken)"
    );
    let vms = env.vms();
    assert!(!vms.iter().any(|(_, name, _)| name == waiting), "{vms:?}");
    let node_of = |env: &Env, name: &str| env.machine(name).status.proxmox_node.expect("node");
    let mut nodes: Vec<String> = done.iter().map(|n| node_of(&env, n)).collect();
    nodes.sort();
    assert_eq!(nodes, ["pve2", "pve3"]);
    for name in &done {
        let vmid = env
            .machine(name)
            .spec
            .virtual_machine_id
            .and_then(|id| u32::try_from(id).ok())
            .expect("vmid");
        assert_eq!(
            vm_field(&env, vmid, "hostpci0").as_deref(),
            Some("mapping=a100,pcie=1")
        );
    }

    let freed = node_of(&env, done[0]);
    env.store.delete::<ProxmoxMachine>(NS, done[0]);
    env.converge().await;
    env.assert_invariants();
    assert_eq!(
        env.machine(waiting).status.initialization.provisioned,
        Some(true)
    );
    assert_eq!(node_of(&env, waiting), freed);
}

/// Raw host PCI addresses pin the machine to the node that has the device (pve3 here),
/// free of any VM: with root@pam's token it is provisioned there with `hostpci0`; with
/// another user's token Proxmox VE refuses to write them, and the machine says so.
#[tokio::test]
async fn raw_pci_addresses_pin_the_machine_to_their_node() {
    let env_with = |token_id: &str| {
        let mut seed = sim::seed::Seed::default();
        seed.nodes[2].pci_devices = vec!["0000:81:00.0".into()];
        let config = SimConfig {
            seed,
            token_id: token_id.into(),
            ..SimConfig::default()
        };
        let mut spec = cluster_spec("c1");
        spec["allowedNodes"] = json!(["pve1", "pve2", "pve3"]);
        Env::with_cluster(config, spec)
    };
    let nic = machine_spec(json!({
        "sourceNode": "pve2", "templateID": 9001,
        "pciDevices": [{"deviceIDs": ["81:00.0"], "rombar": false}],
    }));

    // Two at once: the first placement holds the device before Proxmox shows its VM.
    let mut env = env_with("root@pam!capi").await;
    env.add_machine("c1", "nic-0", nic.clone(), "cloud-config", false);
    env.add_machine("c1", "nic-1", nic.clone(), "cloud-config", false);
    assert!(!env.run_for(60).await.converged, "one of them waits");
    let provisioned: Vec<&str> = ["nic-0", "nic-1"]
        .into_iter()
        .filter(|n| env.machine(n).status.initialization.provisioned == Some(true))
        .collect();
    let [done] = provisioned.as_slice() else {
        panic!(
            "exactly one provisioned: {provisioned:?}\n{}",
            env.describe()
        );
    };
    let m = env.machine(done);
    assert_eq!(m.status.proxmox_node.as_deref(), Some("pve3"));
    let vmid = m
        .spec
        .virtual_machine_id
        .and_then(|id| u32::try_from(id).ok());
    assert_eq!(
        vm_field(&env, vmid.expect("vmid"), "hostpci0").as_deref(),
        Some("host=81:00.0,rombar=0")
    );
    let waiting = if *done == "nic-0" { "nic-1" } else { "nic-0" };
    let (_, _, message) = condition(
        &env.machine(waiting).status.conditions,
        "VirtualMachineProvisioned",
    );
    assert_eq!(
        message,
        "no node has PCI device 81:00.0 free (pve1: absent, pve2: absent, pve3: held by another VM)"
    );
    assert_eq!(env.vms().len(), 1, "nothing cloned for {waiting}");

    let mut env = env_with("capmox@pve!capi").await;
    env.add_machine("c1", "nic-0", nic, "cloud-config", false);
    assert!(!env.run_for(40).await.converged);
    let (_, _, message) = condition(
        &env.machine("nic-0").status.conditions,
        "VirtualMachineProvisioned",
    );
    assert!(
        message.contains("only root can set 'hostpci0' config for non-mapped devices"),
        "{message}"
    );
}

/// `cpuAdjustment: 100` on nodes that differ in CPUs (pve1 and pve2 16, pve3 8): machines of
/// 8 CPUs fill them, two, two and one, and the sixth waits, saying what each node has left;
/// nothing is cloned for it until a machine is deleted.
#[tokio::test]
async fn placement_counts_cpus_when_asked() {
    let mut spec = cluster_spec("c1");
    spec["allowedNodes"] = json!(["pve1", "pve2", "pve3"]);
    spec["schedulerHints"] = json!({"cpuAdjustment": 100});
    let mut env = Env::with_cluster(SimConfig::default(), spec).await;
    let big = machine_spec(json!({
        "sourceNode": "pve2", "templateID": 9001, "numSockets": 2, "numCores": 4,
    }));
    let names: Vec<String> = (0..6).map(|i| format!("big-{i}")).collect();
    for name in &names {
        env.add_machine("c1", name, big.clone(), "cloud-config", false);
    }
    assert!(!env.run_for(80).await.converged, "one machine waits");
    let mut per_node = std::collections::BTreeMap::new();
    let mut waiting = Vec::new();
    for name in &names {
        let m = env.machine(name);
        match m.status.proxmox_node {
            Some(node) if m.status.initialization.provisioned == Some(true) => {
                *per_node.entry(node).or_insert(0) += 1;
            }
            _ => waiting.push(name.clone()),
        }
    }
    assert_eq!(
        per_node,
        [
            ("pve1".to_string(), 2),
            ("pve2".to_string(), 2),
            ("pve3".to_string(), 1)
        ]
        .into(),
        "{}",
        env.describe()
    );
    let [waiting] = waiting.as_slice() else {
        panic!("one waits: {waiting:?}");
    };
    let (_, _, message) = condition(
        &env.machine(waiting).status.conditions,
        "VirtualMachineProvisioned",
    );
    assert_eq!(
        message,
        "cannot reserve 8 CPUs: no allowed node has that many left (pve1: 0, pve2: 0, pve3: 0)"
    );
    assert_eq!(env.vms().len(), 5, "nothing cloned for it");
    let freed = names
        .iter()
        .find(|n| *n != waiting)
        .expect("another")
        .clone();
    env.store.delete::<ProxmoxMachine>(NS, &freed);
    env.converge().await;
    env.assert_invariants();
    assert_eq!(
        env.machine(waiting).status.initialization.provisioned,
        Some(true)
    );
}
