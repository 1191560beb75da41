//! The provisioning benchmark (printed, figures in docs/controller.md): machines
//! provisioned per minute on the instant simulator, against a baseline measured in the
//! same process (the same Proxmox work done directly with the client, no controller);
//! and Proxmox API calls per machine next to that baseline's. Upstream's controller's
//! calls are measured beside ours by `tests/e2e/run controllers` (docs/controller.md).
//!
//! Run: `cargo test --test it controller::bench -- --nocapture`.

use std::time::{Duration, Instant};

use capmox_apiserver::api::v1alpha2::ProxmoxMachine;
use capmox_apiserver::proxmox::Client;
use capmox_apiserver::proxmox::client::WaitOptions;
use capmox_apiserver::proxmox::nocloud::{NoCloud, write_iso};
use capmox_apiserver::proxmox::propstring::SizeChange;
use capmox_apiserver::proxmox::sim::{Seed, SimConfig};
use capmox_apiserver::proxmox::types::{CloneRequest, ConfigUpdate};
use futures::StreamExt;
use serde_json::json;

use super::harness::{Env, NS, cluster_spec};
use super::machine_spec;

const MACHINES: usize = 50;

/// At most this many calls per machine over its life for each call of the raw baseline's
/// provisioning: reads and task polls on top of the work itself (2.4 when measured).
const CALL_BUDGET: f64 = 2.5;

fn wait() -> WaitOptions {
    WaitOptions {
        timeout: Duration::from_secs(30),
        initial_interval: Duration::from_millis(5),
        max_interval: Duration::from_millis(50),
    }
}

/// The same Proxmox work per machine, straight through the client.
async fn raw_machine(client: Client, vmid: u32) {
    let clone = CloneRequest {
        newid: vmid,
        name: Some(format!("raw-{vmid}")),
        full: Some(true),
        ..CloneRequest::default()
    };
    let upid = client.clone_vm("pve1", 9000, &clone).await.expect("clone");
    client.wait_task(&upid, wait()).await.expect("cloned");
    let config = ConfigUpdate::new().set("cores", 2).set("memory", 1024);
    client
        .update_vm_config_sync("pve1", vmid, &config)
        .await
        .expect("configured");
    let resize = client
        .resize_disk("pve1", vmid, "scsi0", SizeChange::Absolute(20 << 30))
        .await
        .expect("resize");
    client
        .wait_optional(resize.as_ref(), wait())
        .await
        .expect("resized");
    let iso = write_iso(&NoCloud::new("#cloud-config\n", "instance-id: x\n")).expect("iso");
    let name = format!("user-data-{vmid}.iso");
    let upid = client
        .upload("pve1", "local", "iso", &name, iso)
        .await
        .expect("upload");
    client.wait_task(&upid, wait()).await.expect("uploaded");
    let attach = ConfigUpdate::new().set("ide0", format!("local:iso/{name},media=cdrom"));
    client
        .update_vm_config_sync("pve1", vmid, &attach)
        .await
        .expect("attached");
    let upid = client.start_vm("pve1", vmid).await.expect("start");
    client.wait_task(&upid, wait()).await.expect("started");
}

/// The default cluster with room for every machine's disk on pve1's local-lvm.
fn roomy() -> SimConfig {
    let mut seed = Seed::default();
    for s in seed.storages.iter_mut().filter(|s| s.id == "local-lvm") {
        s.total_gib = 4096;
    }
    SimConfig {
        seed,
        ..SimConfig::default()
    }
}

fn per_minute(count: usize, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64() * 60.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provisioning_throughput_and_api_calls() {
    // Baseline: the raw calls, 8 machines at a time like the driver's 8 workers.
    let baseline_env = Env::start(roomy()).await;
    let client = Client::new(baseline_env.pve.client_config()).expect("client");
    let started = Instant::now();
    futures::stream::iter((0..MACHINES as u32).map(|i| raw_machine(client.clone(), 500 + i)))
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await;
    let raw = started.elapsed();
    let raw_calls = client.requests_sent() as f64 / MACHINES as f64;

    let mut spec = cluster_spec("c1");
    spec["ipv4Config"]["addresses"] = json!(["10.0.0.10-10.0.0.99"]);
    let mut env = Env::with_cluster(roomy(), spec).await;
    env.join_nodes = false;
    // The in-cluster provider answers claims in milliseconds, long before a clone is done
    // on a real cluster; the instant simulator would otherwise make IPAM the bottleneck.
    env.mgmt.allocate_on_create(true);
    env.converge().await;
    for i in 0..MACHINES {
        env.add_machine(
            "c1",
            &format!("c1-md-{i:02}"),
            machine_spec(json!({})),
            "cloud-config",
            false,
        );
    }
    let started = Instant::now();
    let provision = env.converge().await;
    let controller = started.elapsed();
    env.assert_invariants();
    assert_eq!(env.vms().len(), MACHINES);
    env.join_nodes = true;
    let join = env.converge().await;
    for i in 0..MACHINES {
        env.store
            .delete::<ProxmoxMachine>(NS, &format!("c1-md-{i:02}"));
    }
    let delete = env.converge().await;
    assert!(env.vms().is_empty());

    let per = |r: &super::harness::Report| r.requests as f64 / MACHINES as f64;
    let (p, j, d) = (per(&provision), per(&join), per(&delete));
    let ours = p + j + d;
    println!("controller benchmark, {MACHINES} machines, instant simulator, 8 workers");
    println!(
        "  provisioned per minute: controller {:.0}, raw client baseline {:.0} (ratio {:.2})",
        per_minute(MACHINES, controller),
        per_minute(MACHINES, raw),
        controller.as_secs_f64() / raw.as_secs_f64()
    );
    println!("  Proxmox calls per machine:");
    println!("    provision {p:5.1}, seed removal {j:3.1}, deletion {d:3.1}");
    println!(
        "    lifecycle {ours:5.1}; raw client baseline (provision) {raw_calls:.1}; ratio {:.2}",
        ours / raw_calls
    );
    println!(
        "  reconcile passes per machine: provision {:.1}, join {:.1}, delete {:.1}",
        provision.passes as f64 / MACHINES as f64,
        join.passes as f64 / MACHINES as f64,
        delete.passes as f64 / MACHINES as f64
    );
    // Counts, not timings: deterministic for a fault-free run.
    assert!(
        ours / raw_calls <= CALL_BUDGET,
        "{ours:.1} calls per machine against the raw baseline's {raw_calls:.1}"
    );
}
