//! Fault runs: 50 machines (HA resources, a data disk each, spread over three failure
//! domains) converge while Proxmox answers 20 % of all requests with an error, tasks fail,
//! VMs carry foreign locks, and the store and management cluster drop requests or lose
//! responses — then all of them are deleted. Afterwards there is exactly one VM per
//! machine in its domain, no orphan, no duplicate, no leaked claim, seed, HA resource or
//! disk.

use std::collections::BTreeMap;

use capmox_apiserver::api::v1alpha2::ProxmoxMachine;
use capmox_apiserver::proxmox::sim::{FaultPlan, HttpFault, SimConfig, TaskFault};
use serde_json::json;

use super::harness::{Chaos, Env, NS, cluster_spec, seam_faults};
use super::machine_spec;

fn task_fault(task_type: &str, message: &str, count: u32) -> TaskFault {
    TaskFault {
        task_type: task_type.into(),
        vmid: None,
        message: message.into(),
        count: Some(count),
    }
}

fn faults(locks: bool) -> FaultPlan {
    FaultPlan {
        http_errors: vec![HttpFault {
            method: None,
            path: "**".into(),
            status: 500,
            message: "injected fault".into(),
            probability: 0.2,
            count: None,
        }],
        task_failures: vec![
            task_fault("qmclone", "clone failed: injected", 6),
            task_fault("imgcopy", "import failed: injected", 4),
            task_fault("resize", "resize failed: injected", 4),
            task_fault("qmconfig", "update failed: injected", 4),
            task_fault("qmstart", "start failed: QEMU exited with code 1", 4),
            task_fault("qmdestroy", "destroy failed: injected", 4),
        ],
        locked_vms: if locks {
            BTreeMap::from([
                (105, "backup".to_string()),
                (112, "backup".to_string()),
                (130, "snapshot".to_string()),
            ])
        } else {
            BTreeMap::new()
        },
        ..FaultPlan::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_machines_converge_and_are_deleted_under_faults() {
    let config = SimConfig {
        faults: faults(true),
        rng_seed: 42,
        ..SimConfig::default()
    };
    let mut spec = cluster_spec("c1");
    spec["allowedNodes"] = json!(["pve1", "pve2", "pve3"]);
    let racks = [("rack-a", "pve1"), ("rack-b", "pve2"), ("rack-c", "pve3")];
    spec["failureDomains"] = racks
        .iter()
        .map(|(name, node)| json!({"name": name, "nodes": [node]}))
        .collect();
    let mut env = Env::with_cluster(config, spec).await;
    for i in 0..50 {
        let machine = machine_spec(json!({
            "sourceNode": null, "templateID": null,
            "templateSelector": {"matchTags": ["capmox", "kube-v1.32", "ubuntu"]},
            "network": {"networkDevices": [
                {"name": "net0", "bridge": "vmbr0", "defaultIPv4": true},
                {"name": "net1", "bridge": "vmbr0", "dhcp4": true}
            ]},
            "haResource": {"maxRestart": 2},
            "disks": {"additionalVolumes": [{"disk": "scsi1", "sizeGb": 2}]}
        }));
        let name = format!("c1-md-{i:02}");
        env.add_machine("c1", &name, machine, "cloud-config", i < 3);
        env.put_failure_domain(&name, racks[i % 3].0);
    }
    env.store.set_faults(seam_faults(0.05, 0.03), 3);
    env.mgmt.set_faults(seam_faults(0.05, 0.03), 5);

    // The foreign locks go away after a while, as a backup would finish.
    let report = env
        .drive_with(Chaos::none(), |round, env| {
            if round == 150 {
                env.pve.control().update_faults(|f| f.locked_vms.clear());
            }
        })
        .await;
    env.assert_invariants();
    let machines = env.store.all::<ProxmoxMachine>();
    assert_eq!(machines.len(), 50);
    for m in &machines {
        let reason = m
            .status
            .conditions
            .iter()
            .find(|c| c.type_ == "VirtualMachineProvisioned")
            .map(|c| c.reason.clone());
        assert_eq!(
            reason.as_deref(),
            Some("Provisioned"),
            "{}\n{}",
            m.metadata.name.clone().unwrap_or_default(),
            env.describe()
        );
    }
    assert_eq!(env.vms().len(), 50, "one VM per machine");
    assert!(
        env.seed_isos().is_empty(),
        "seeds removed after the join: {:?}",
        env.seed_isos()
    );
    // Each in its failure domain, with its data disk.
    let vms = env.vms();
    for m in &machines {
        let name = m.metadata.name.clone().unwrap_or_default();
        let i: usize = name.trim_start_matches("c1-md-").parse().expect("c1-md-NN");
        let (rack, node) = racks[i % 3];
        let vmid = m.spec.virtual_machine_id.expect("vmid");
        let on = vms.iter().find(|(id, _, _)| i64::from(*id) == vmid);
        assert_eq!(on.map(|(_, _, n)| n.as_str()), Some(node), "{name}");
        assert_eq!(m.status.failure_domain.as_deref(), Some(rack));
        let disk = env.pve.control().with_world(|w| {
            w.vms
                .get(&u32::try_from(vmid).expect("u32"))
                .and_then(|vm| vm.effective_config().get("scsi1").cloned())
        });
        assert!(disk.is_some_and(|d| d.ends_with("size=2G")), "{name}");
    }
    let per_node =
        env.vms()
            .into_iter()
            .fold(BTreeMap::<String, usize>::new(), |mut m, (_, _, node)| {
                *m.entry(node).or_default() += 1;
                m
            });
    assert_eq!(
        per_node.len(),
        3,
        "spread over all allowed nodes: {per_node:?}"
    );
    assert_eq!(
        env.mgmt.claims().len(),
        1 + 50 * 2,
        "endpoint + v4 and v6 per machine"
    );
    assert!(report.errors > 50, "the faults were felt: {report:?}");
    eprintln!("fault run (provisioning): {report:?}");

    for i in 0..50 {
        env.store
            .delete::<ProxmoxMachine>(NS, &format!("c1-md-{i:02}"));
    }
    let report = env.drive(Chaos::none()).await;
    env.assert_invariants();
    assert!(env.vms().is_empty(), "{:?}", env.vms());
    assert!(env.seed_isos().is_empty());
    let claims: Vec<_> = env
        .mgmt
        .claims()
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(claims, ["c1-vip"], "only the endpoint claim remains");
    assert_eq!(env.mgmt.addresses().len(), 1);
    eprintln!("fault run (deletion): {report:?}");
    let _ = faults(false);
}
