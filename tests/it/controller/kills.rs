//! Crash safety: the controller is killed at random await points (the reconcile future
//! is dropped mid-flight, HTTP requests included) and restarted with empty caches over
//! the same persisted objects, at least 20 times; and the windows around the clone are
//! recreated exactly: VMID recorded but no clone, clone done but nothing recorded after
//! it, and the VMID taken by someone else's VM.

use capmox_apiserver::api::v1alpha2::ProxmoxMachine;
use capmox_apiserver::controller::InfraStore;
use capmox_apiserver::proxmox::Client;
use capmox_apiserver::proxmox::client::WaitOptions;
use capmox_apiserver::proxmox::sim::SimConfig;
use capmox_apiserver::proxmox::types::CloneRequest;
use serde_json::json;

use super::harness::{Chaos, Env, NS, cluster_spec, seed_with_gpus};
use super::machine_spec;

async fn env() -> Env {
    Env::with_cluster(SimConfig::default(), cluster_spec("c1")).await
}

fn phase(env: &Env, name: &str) -> String {
    env.machine(name)
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == "VirtualMachineProvisioned")
        .map(|c| c.reason.clone())
        .unwrap_or_default()
}

/// The invariants hold, every machine of `names` is provisioned, with one VM each.
fn assert_one_provisioned_vm_each(env: &Env, names: &[String]) {
    env.assert_invariants();
    for name in names {
        assert_eq!(
            phase(env, name),
            "Provisioned",
            "{name}\n{}",
            env.describe()
        );
    }
    assert_eq!(env.vms().len(), names.len(), "one VM per machine");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_twenty_times_at_random_await_points() {
    let mut env = env().await;
    let (mut kills, mut restarts) = (0, 0);
    for cycle in 0..10 {
        let names: Vec<String> = (0..8).map(|i| format!("c1-k{cycle}-{i}")).collect();
        for (i, name) in names.iter().enumerate() {
            let spec = if i % 2 == 0 {
                machine_spec(json!({}))
            } else {
                machine_spec(json!({"network": {"networkDevices": [
                    {"name": "net0", "bridge": "vmbr0"},
                    {"name": "net1", "bridge": "vmbr0", "dhcp4": true}]},
                    "haResource": {"group": "capmox"},
                    "disks": {"additionalVolumes": [
                        {"disk": "scsi1", "sizeGb": 4},
                        {"disk": "virtio0", "sizeGb": 2, "storage": "ceph"}]}}))
            };
            env.add_machine("c1", name, spec, "cloud-config", i == 0);
        }
        let report = env
            .drive(Chaos::kills(usize::MAX, 0.35, 40, 1 + cycle as u64))
            .await;
        kills += report.kills;
        restarts += report.restarts;
        eprintln!("cycle {cycle}: {report:?}");
        assert_one_provisioned_vm_each(&env, &names);
        let ha = env.pve.control().with_world(|w| w.ha_resources.len());
        assert_eq!(ha, names.len() / 2, "one HA resource per machine that asks");
        let data_disks = env.pve.control().with_world(|w| {
            w.vms
                .values()
                .flat_map(|vm| vm.effective_config())
                .filter(|(k, v)| {
                    (k == "scsi1" && v.ends_with(",size=4G"))
                        || (k == "virtio0" && v.ends_with(",size=2G"))
                })
                .count()
        });
        assert_eq!(
            data_disks,
            names.len(),
            "both volumes of every machine that asks"
        );
        for name in &names {
            env.store.delete::<ProxmoxMachine>(NS, name);
        }
        let report = env
            .drive(Chaos::kills(usize::MAX, 0.35, 40, 100 + cycle as u64))
            .await;
        kills += report.kills;
        restarts += report.restarts;
        env.assert_invariants();
        assert!(env.vms().is_empty(), "{:?}", env.vms());
        assert!(env.seed_isos().is_empty(), "{:?}", env.seed_isos());
        assert_eq!(
            env.mgmt.claims().len(),
            1,
            "only the endpoint claim remains"
        );
        if kills >= 20 && restarts >= 20 {
            break;
        }
    }
    assert!(
        kills >= 20 && restarts >= 20,
        "only {kills} kills and {restarts} restarts happened"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_while_tasks_are_running() {
    // Tasks take the fast profile's time on a simulator clock that follows the
    // controller's: kills land while clones, uploads and starts are in flight.
    let mut env = Env::with_slow_tasks().await;
    let names: Vec<String> = (0..6).map(|i| format!("c1-slow-{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        // Half with data disks: kills land while their creation tasks run too.
        let spec = if i % 2 == 0 {
            machine_spec(json!({}))
        } else {
            machine_spec(json!({"disks": {"additionalVolumes": [{"disk": "scsi1", "sizeGb": 3}]}}))
        };
        env.add_machine("c1", name, spec, "cloud-config", false);
    }
    let report = env
        .drive_synced(Chaos::kills(12, 0.4, 30, 77), |_| {})
        .await;
    env.assert_invariants();
    for name in &names {
        assert_eq!(
            phase(&env, name),
            "Provisioned",
            "{name}\n{}",
            env.describe()
        );
    }
    for name in &names {
        env.store.delete::<ProxmoxMachine>(NS, name);
    }
    let deletion = env
        .drive_synced(Chaos::kills(12, 0.4, 30, 78), |_| {})
        .await;
    env.assert_invariants();
    assert!(env.vms().is_empty(), "{:?}", env.vms());
    assert!(env.seed_isos().is_empty(), "{:?}", env.seed_isos());
    assert!(
        report.kills + deletion.kills >= 10,
        "{report:?} {deletion:?}"
    );
}

fn config() -> WaitOptions {
    WaitOptions {
        timeout: std::time::Duration::from_secs(10),
        initial_interval: std::time::Duration::from_millis(5),
        max_interval: std::time::Duration::from_millis(50),
    }
}

/// Records `vmid` in the machine's spec as the controller does before cloning.
async fn record_vmid(env: &Env, name: &str, vmid: i64) {
    let mut pm = env.machine(name);
    pm.spec.virtual_machine_id = Some(vmid);
    pm.metadata.finalizers = Some(vec![
        "proxmoxmachine.infrastructure.cluster.x-k8s.io".into(),
    ]);
    env.store.update(&pm).await.expect("recorded");
}

async fn clone(client: &Client, vmid: u32, name: &str) {
    let request = CloneRequest {
        newid: vmid,
        name: Some(name.into()),
        full: Some(true),
        ..CloneRequest::default()
    };
    let upid = client
        .clone_vm("pve1", 9000, &request)
        .await
        .expect("clone starts");
    client.wait_task(&upid, config()).await.expect("clone done");
}

#[tokio::test]
async fn the_windows_around_the_clone() {
    let mut env = env().await;
    let client = Client::new(env.pve.client_config()).expect("client");
    // Let the cluster get ready first.
    env.converge().await;

    // Crash after the VMID was recorded, before the clone: the VM is cloned once.
    env.add_machine(
        "c1",
        "before-clone",
        machine_spec(json!({})),
        "cloud-config",
        false,
    );
    record_vmid(&env, "before-clone", 300).await;
    // Crash after the clone, before anything else was recorded: the VM is adopted.
    env.add_machine(
        "c1",
        "after-clone",
        machine_spec(json!({})),
        "cloud-config",
        false,
    );
    record_vmid(&env, "after-clone", 301).await;
    clone(&client, 301, "after-clone").await;
    // The recorded VMID was taken by someone else: left alone, another id is chosen.
    env.add_machine(
        "c1",
        "id-taken",
        machine_spec(json!({})),
        "cloud-config",
        false,
    );
    record_vmid(&env, "id-taken", 302).await;
    clone(&client, 302, "someone-else").await;

    env.converge().await;
    env.assert_invariants_besides(&["someone-else"]);
    let vms = env.vms();
    let named = |n: &str| {
        vms.iter()
            .filter(|(_, name, _)| name == n)
            .map(|(id, _, _)| *id)
            .collect::<Vec<_>>()
    };
    assert_eq!(named("before-clone"), [300]);
    assert_eq!(named("after-clone"), [301], "adopted, not cloned again");
    assert_eq!(named("someone-else"), [302], "the foreign VM is untouched");
    let taken = named("id-taken");
    assert_eq!(taken.len(), 1);
    assert_ne!(taken[0], 302);
    for name in ["before-clone", "after-clone", "id-taken"] {
        assert_eq!(phase(&env, name), "Provisioned", "{}", env.describe());
    }

    // Deleting the machine that lost its id never deletes the foreign VM.
    env.store.delete::<ProxmoxMachine>(NS, "id-taken");
    env.converge().await;
    assert_eq!(
        env.vms()
            .iter()
            .filter(|(_, n, _)| n == "someone-else")
            .count(),
        1
    );
}

#[tokio::test]
async fn a_restored_machine_is_adopted_without_a_second_bootstrap() {
    let mut env = env().await;
    env.add_machine("c1", "m-0", machine_spec(json!({})), "cloud-config", false);
    env.converge().await;
    let before = env.machine("m-0");
    assert_eq!(phase(&env, "m-0"), "Provisioned");

    // A management-cluster restore (clusterctl move) brings spec and metadata back but
    // no status; the controller also restarts with empty caches.
    let mut wiped = before.clone();
    wiped.status = Default::default();
    env.store.update_status(&wiped).await.expect("status wiped");
    env.restart();
    env.converge().await;
    env.assert_invariants();
    let after = env.machine("m-0");
    assert_eq!(phase(&env, "m-0"), "Provisioned", "{}", env.describe());
    assert_eq!(env.vms().len(), 1, "adopted, not cloned");
    assert_eq!(
        after.spec.virtual_machine_id,
        before.spec.virtual_machine_id
    );
    assert_eq!(
        after.status.ip_addresses, before.status.ip_addresses,
        "addresses republished from the claims"
    );
    assert_eq!(after.status.addresses, before.status.addresses);
    assert_eq!(
        after.status.bootstrap_data_provided, None,
        "no new seed for a running VM"
    );
    assert!(env.seed_isos().is_empty());
}

/// The window around a data disk's creation: the pass that sent it is killed before its
/// task was recorded, while the task still runs, and the next pass plans on the config
/// without the disk. Its creation, sent with that config's digest, is refused once the
/// first has run, so the VM ends with the one disk and no `unusedN` (without the digest
/// PVE would allocate a second and detach the first).
#[tokio::test]
async fn killed_after_sending_a_disk_creation() {
    let mut env = Env::with_slow_tasks().await;
    env.add_machine(
        "c1",
        "data",
        machine_spec(json!({"disks": {"additionalVolumes": [{"disk": "scsi1", "sizeGb": 3}]}})),
        "cloud-config",
        false,
    );
    // Step the controller and the simulator's clock until the creation task is in flight.
    let in_flight = |env: &Env| {
        let m = env.machine("data");
        phase(env, "data") == "WaitingForDiskReconciliation"
            && m.status
                .task_ref
                .as_deref()
                .is_some_and(|t| t.contains(":qmconfig:"))
    };
    for _ in 0..2_000 {
        env.run_for(1).await;
        if in_flight(&env) {
            break;
        }
        env.pve
            .control()
            .advance(std::time::Duration::from_millis(50));
    }
    assert!(in_flight(&env), "{}", env.describe());
    // The kill: the task's UPID was never persisted; the controller restarts.
    let mut lost = env.machine("data");
    lost.status.task_ref = None;
    env.store.update_status(&lost).await.expect("status");
    env.restart();
    // The restarted controller sends its own creation while the first still runs.
    let creations = |env: &Env| {
        env.pve.control().with_world(|w| {
            w.tasks
                .list()
                .filter(|t| t.upid.task_type() == "qmconfig" && t.exitstatus.is_none())
                .count()
        })
    };
    for _ in 0..50 {
        if creations(&env) == 2 {
            break;
        }
        env.run_for(1).await;
    }
    assert_eq!(creations(&env), 2, "{}", env.describe());
    env.drive_synced(Chaos::none(), |_| {}).await;
    env.assert_invariants();
    assert_eq!(phase(&env, "data"), "Provisioned", "{}", env.describe());
    let vmid =
        u32::try_from(env.machine("data").spec.virtual_machine_id.expect("vmid")).expect("u32");
    let config = env
        .pve
        .control()
        .with_world(|w| w.vms[&vmid].effective_config());
    assert_eq!(
        config.get("scsi1").map(String::as_str),
        Some(format!("local-lvm:vm-{vmid}-disk-1,size=3G").as_str())
    );
    assert!(
        !config.keys().any(|k| k.starts_with("unused")),
        "{config:?}"
    );
}

/// Two replicas that both believe they lead, which the lease's fence normally prevents:
/// a twin reconciler passes over every machine again and again while the controller
/// converges. The VMID is recorded with optimistic concurrency before each clone, and a
/// clone onto a taken id adopts the machine's own VM, so the overlap is harmless: one VM per
/// machine and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_leaders_at_once_make_one_vm_per_machine() {
    let mut env = env().await;
    let names: Vec<String> = (0..6).map(|i| format!("c1-twin-{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        env.add_machine("c1", name, machine_spec(json!({})), "cloud-config", i == 0);
    }
    let twin = env.twin();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let twin_names = names.clone();
    let overlapping = tokio::spawn(async move {
        let mut passes = 0;
        while !*stopped.borrow() {
            let all = twin_names.iter().map(|n| twin.reconcile(NS, n));
            passes += futures::future::join_all(all).await.len();
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        passes
    });
    env.drive(Chaos::none()).await;
    stop.send_replace(true);
    let twin_passes = overlapping.await.expect("twin");
    assert!(
        twin_passes > names.len(),
        "the twin overlapped: {twin_passes} passes"
    );
    // Whatever the twin did last is settled by the controller alone.
    env.drive(Chaos::none()).await;
    assert_one_provisioned_vm_each(&env, &names);
}

/// Two machines that each want the one device of PCI mapping `a100` on pve2 or pve3, killed
/// at random await points while they are made and while they are deleted: each VM gets its
/// own device, written once, and none is held once they are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_while_machines_take_pci_devices() {
    let seed = seed_with_gpus("a100", &["pve2", "pve3"]);
    let mut spec = cluster_spec("c1");
    spec["allowedNodes"] = json!(["pve1", "pve2", "pve3"]);
    let config = SimConfig {
        seed,
        ..SimConfig::default()
    };
    let mut env = Env::with_cluster(config, spec).await;
    let mut kills = 0;
    for cycle in 0..20u64 {
        let names: Vec<String> = (0..2).map(|i| format!("gpu-{cycle}-{i}")).collect();
        for name in &names {
            let spec = machine_spec(json!({
                "sourceNode": "pve2", "templateID": 9001,
                "pciDevices": [{"mapping": "a100"}],
            }));
            env.add_machine("c1", name, spec, "cloud-config", false);
        }
        kills += env
            .drive(Chaos::kills(usize::MAX, 0.35, 40, cycle))
            .await
            .kills;
        assert_one_provisioned_vm_each(&env, &names);
        let nodes = env.pve.control().with_world(|w| {
            w.vms
                .values()
                .filter(|vm| vm.effective_config().contains_key("hostpci0"))
                .map(|vm| vm.node.clone())
                .collect::<std::collections::BTreeSet<_>>()
        });
        assert_eq!(
            nodes.len(),
            2,
            "one device each, on distinct nodes: {nodes:?}"
        );
        assert_eq!(env.pve.control().with_world(|w| w.pci.held.len()), 2);
        for name in &names {
            env.store.delete::<ProxmoxMachine>(NS, name);
        }
        kills += env
            .drive(Chaos::kills(usize::MAX, 0.35, 40, 100 + cycle))
            .await
            .kills;
        env.assert_invariants();
        assert!(env.vms().is_empty(), "{:?}", env.vms());
        assert!(env.pve.control().with_world(|w| w.pci.held.is_empty()));
        if kills >= 20 {
            return;
        }
    }
    panic!("only {kills} kills happened");
}
