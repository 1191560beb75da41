//! Crash safety: the controller is killed at random await points (the reconcile future
//! is dropped mid-flight, HTTP requests included) and restarted with empty caches over
//! the same persisted objects, at least 20 times; and the windows around the clone are
//! recreated exactly: VMID recorded but no clone, clone done but nothing recorded after
//! it, and the VMID taken by someone else's VM.

use capmox_apiserver::api::v1alpha2::ProxmoxMachine;
use capmox_apiserver::controller::InfraStore;
use capmox_apiserver::proxmox::Client;
use capmox_apiserver::proxmox::client::WaitOptions;
use capmox_apiserver::proxmox::sim::{ClockMode, Profile, SimConfig};
use capmox_apiserver::proxmox::types::CloneRequest;
use serde_json::json;

use super::harness::{Chaos, Env, NS, cluster_spec};
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
                    "haResource": {"group": "capmox"}}))
            };
            env.add_machine("c1", name, spec, "cloud-config", i == 0);
        }
        let report = env
            .drive(Chaos::kills(usize::MAX, 0.35, 40, 1 + cycle as u64))
            .await;
        kills += report.kills;
        restarts += report.restarts;
        eprintln!("cycle {cycle}: {report:?}");
        env.assert_invariants();
        for name in &names {
            assert_eq!(
                phase(&env, name),
                "Provisioned",
                "{name}\n{}",
                env.describe()
            );
        }
        assert_eq!(env.vms().len(), names.len(), "one VM per machine");
        let ha = env.pve.control().with_world(|w| w.ha_resources.len());
        assert_eq!(ha, names.len() / 2, "one HA resource per machine that asks");
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
    let config = SimConfig {
        profile: Profile::Fast,
        clock: ClockMode::Manual,
        ..SimConfig::default()
    };
    let mut env = Env::with_cluster(config, cluster_spec("c1")).await;
    env.set_task_wait(std::time::Duration::from_millis(20));
    let names: Vec<String> = (0..6).map(|i| format!("c1-slow-{i}")).collect();
    for name in &names {
        env.add_machine("c1", name, machine_spec(json!({})), "cloud-config", false);
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
