//! Our Proxmox side against PVE's published API schema (issue #17): every public call of
//! `proxmox::Client`, and a machine's whole life through the controller, run against the
//! simulator with its request log on; `tests/pve-schema/check.py` (clientapi-pve, generated
//! from PVE's apidoc.js) then checks every logged request's method, path and parameters
//! and every successful answer's `data` against the schema. A mismatch fails the test with
//! the checker's report.

use std::path::{Path, PathBuf};

use capmox_apiserver::api::v1alpha2::ProxmoxMachine;
use capmox_apiserver::proxmox::Client;
use capmox_apiserver::proxmox::nocloud::{NoCloud, write_iso};
use capmox_apiserver::proxmox::propstring::SizeChange;
use capmox_apiserver::proxmox::sim::{self, SimConfig};
use capmox_apiserver::proxmox::types::{
    CloneRequest, ConfigUpdate, DeleteOptions, HaSettings, PowerAction, ResourceType, ha_sid,
};
use serde_json::json;

use super::{ok, start};
use crate::controller::harness::{Env, NS, cluster_spec};
use crate::controller::machine_spec;
use crate::server::{python, run};

/// The default simulator with a PCI mapping (a GPU on pve1), its requests logged.
fn logged(log: &Path) -> SimConfig {
    let mut seed = sim::seed::Seed::default();
    seed.pci_mappings = vec![sim::seed::SeedPciMapping {
        id: "gpu".into(),
        description: "a GPU".into(),
        map: vec![sim::seed::SeedPciDevice {
            node: "pve1".into(),
            path: "0000:41:00.0".into(),
            id: "10de:20b5".into(),
        }],
    }];
    SimConfig {
        seed,
        request_log: Some(log.to_path_buf()),
        ..SimConfig::default()
    }
}

/// Waits for a task given as `Result<Upid, _>`.
macro_rules! task {
    ($client:expr, $call:expr, $what:literal) => {
        ok($client, &$call.await.expect($what)).await
    };
}

/// Reads: cluster, nodes, guests, storages.
async fn reads(client: &Client) {
    client.version().await.expect("version");
    client.cluster_status().await.expect("cluster status");
    client.cluster_resources(None).await.expect("resources");
    for kind in [
        ResourceType::Vm,
        ResourceType::Storage,
        ResourceType::Node,
        ResourceType::Sdn,
    ] {
        client
            .cluster_resources(Some(kind))
            .await
            .expect("resources by type");
    }
    client.next_id().await.expect("nextid");
    assert!(client.is_vmid_free(4321).await.expect("free id"));
    assert!(!client.is_vmid_free(9000).await.expect("taken id"));
    client.nodes().await.expect("nodes");
    client.node_status("pve1").await.expect("node status");
    client.pci_mappings().await.expect("PCI mappings");
    client.node_pci_devices("pve1").await.expect("PCI devices");
    client.list_vms("pve1").await.expect("VMs");
    client.list_containers("pve1").await.expect("containers");
    client.storages("pve1", None).await.expect("storages");
    client
        .storages("pve1", Some("iso"))
        .await
        .expect("ISO storages");
    client
        .storage_content("pve1", "local-lvm", None)
        .await
        .expect("content");
}

/// Clones: linked into a pool, and full onto another node's shared storage.
async fn clones(client: &Client) {
    let linked = CloneRequest {
        newid: 201,
        name: Some("linked-201".into()),
        description: Some("a linked clone".into()),
        pool: Some("capi".into()),
        full: Some(false),
        ..CloneRequest::default()
    };
    task!(
        client,
        client.clone_vm("pve1", 9000, &linked),
        "linked clone"
    );
    let full = CloneRequest {
        newid: 202,
        name: Some("full-202".into()),
        full: Some(true),
        target: Some("pve1".into()),
        storage: Some("ceph".into()),
        bwlimit: Some(100_000),
        ..CloneRequest::default()
    };
    let upid = client
        .clone_vm("pve2", 9001, &full)
        .await
        .expect("full clone");
    client.task_status(&upid).await.expect("task status");
    ok(client, &upid).await;
    client.task_log(&upid, 0, 50).await.expect("task log");
}

/// Configuration of a stopped VM: POST and PUT, digest, delete, resize.
async fn configure(client: &Client, vmid: u32) {
    let config = client.vm_config("pve1", vmid).await.expect("config");
    let digest = config.digest().expect("digest").to_string();
    let update = ConfigUpdate::new()
        .set("cores", 2)
        .set("memory", 2048)
        .set("net0", "virtio,bridge=vmbr0,tag=100")
        .set("agent", "enabled=1")
        .set("tags", "capmox;schema")
        .set("description", "checked against the schema")
        .set("hostpci0", "mapping=gpu,pcie=1,rombar=0,x-vga=1")
        .delete("ostype")
        .digest(digest);
    task!(
        client,
        client.update_vm_config("pve1", vmid, &update),
        "config POST"
    );
    client
        .update_vm_config_sync("pve1", vmid, &ConfigUpdate::new().set("sockets", 1))
        .await
        .expect("config PUT");
    let size = SizeChange::parse("+1G").expect("size");
    if let Some(upid) = client
        .resize_disk("pve1", vmid, "scsi0", size)
        .await
        .expect("resize")
    {
        ok(client, &upid).await;
    }
    client.vm_status("pve1", vmid).await.expect("status");
    client
        .vm_config_current("pve1", vmid)
        .await
        .expect("current config");
}

/// A NoCloud seed: upload, list, inspect; returns its volume id.
async fn seed(client: &Client, vmid: u32) -> String {
    let iso = write_iso(&NoCloud::new(
        "#cloud-config\n",
        format!("instance-id: {vmid}\nlocal-hostname: vm-{vmid}\n"),
    ))
    .expect("iso");
    let file = format!("user-data-{vmid}.iso");
    task!(
        client,
        client.upload("pve1", "local", "iso", &file, iso),
        "upload"
    );
    client
        .storage_content("pve1", "local", Some("iso"))
        .await
        .expect("ISO content");
    let volid = format!("local:iso/{file}");
    client
        .volume_info("pve1", "local", &volid)
        .await
        .expect("volume info");
    volid
}

/// Power, a pending change reverted, and the guest agent.
async fn power_and_agent(client: &Client, vmid: u32) {
    task!(client, client.start_vm("pve1", vmid), "start");
    // Not hot-pluggable on a running VM: pending, then reverted.
    task!(
        client,
        client.update_vm_config("pve1", vmid, &ConfigUpdate::new().set("cores", 4)),
        "pending change"
    );
    task!(
        client,
        client.update_vm_config("pve1", vmid, &ConfigUpdate::new().revert("cores")),
        "revert"
    );
    client.agent_ping("pve1", vmid).await.expect("ping");
    client.agent_os_info("pve1", vmid).await.expect("os info");
    client
        .agent_network_interfaces("pve1", vmid)
        .await
        .expect("interfaces");
    let pid = client
        .agent_exec("pve1", vmid, &["cat"], Some("hello"))
        .await
        .expect("exec");
    client
        .agent_exec_status("pve1", vmid, pid)
        .await
        .expect("exec status");
    for action in [
        PowerAction::Suspend,
        PowerAction::Resume,
        PowerAction::Reboot,
        PowerAction::Reset,
    ] {
        task!(client, client.vm_power("pve1", vmid, action), "power");
    }
    task!(client, client.resume_vm("pve1", vmid), "resume");
    task!(client, client.shutdown_vm("pve1", vmid), "shutdown");
    task!(client, client.start_vm("pve1", vmid), "start again");
    task!(client, client.stop_vm("pve1", vmid), "stop");
}

/// HA resources: register, list, update (removed with the VM by `purge`).
async fn ha(client: &Client, vmid: u32) {
    let settings = super::register_ha(client, vmid).await;
    client.ha_resources().await.expect("HA list");
    let stopped = HaSettings {
        state: "stopped".into(),
        ..settings
    };
    client
        .update_ha_resource(&ha_sid(vmid), &stopped)
        .await
        .expect("HA update");
}

/// Every public call of the client.
async fn every_client_call(log: &Path) {
    let (_pve, client) = start(logged(log)).await;
    reads(&client).await;
    clones(&client).await;
    configure(&client, 201).await;
    let volid = seed(&client, 201).await;
    power_and_agent(&client, 201).await;
    ha(&client, 201).await;
    task!(
        &client,
        client.delete_volume("pve1", "local", &volid),
        "volume delete"
    );
    let options = DeleteOptions {
        purge: true,
        destroy_unreferenced_disks: true,
        skiplock: false,
    };
    task!(&client, client.delete_vm("pve1", 201, options), "delete");
    let options = DeleteOptions {
        skiplock: true,
        ..DeleteOptions::default()
    };
    task!(&client, client.delete_vm("pve1", 202, options), "delete");
}

/// One machine provisioned and deleted by the controller (its real call sequence).
async fn controller_life_cycle(log: &Path) {
    let mut env = Env::with_cluster(logged(log), cluster_spec("c1")).await;
    env.add_machine(
        "c1",
        "c1-cp-0",
        machine_spec(json!({
            "haResource": {"group": "capmox"},
            "disks": {"additionalVolumes": [
                {"disk": "scsi1", "sizeGb": 4, "discard": true, "ssd": true},
                {"disk": "virtio0", "sizeGb": 2, "storage": "ceph", "ioThread": true, "format": "raw"}
            ]}
        })),
        "cloud-config",
        true,
    );
    env.converge().await;
    assert!(!env.vms().is_empty(), "{}", env.describe());
    env.store.delete::<ProxmoxMachine>(NS, "c1-cp-0");
    env.converge().await;
    assert!(env.vms().is_empty(), "{}", env.describe());
}

/// Runs the checker on `logs`; its report is the failure message.
async fn check(logs: &[PathBuf]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pve-schema/check.py");
    let mut args = vec![script.to_str().expect("UTF-8 path")];
    args.extend(logs.iter().map(|l| l.to_str().expect("UTF-8 path")));
    let (success, out, err) = run(&python(), &args).await;
    assert!(success, "schema check failed:\n{out}\n{err}");
    println!("{out}");
}

#[tokio::test]
async fn our_calls_and_the_simulators_answers_match_pves_published_schema() {
    let dir = tempfile::tempdir().expect("temp dir");
    let client_log = dir.path().join("client.jsonl");
    let controller_log = dir.path().join("controller.jsonl");
    every_client_call(&client_log).await;
    controller_life_cycle(&controller_log).await;
    check(&[client_log, controller_log]).await;
}
