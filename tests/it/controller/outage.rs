//! A whole Proxmox VE cluster lost, in the controller's runtime (real workers, real time):
//! one of three failure domains lives in a second Proxmox VE cluster that stops
//! answering. The machines of the other domains provision as fast as in a run without the
//! fault (the ratio of their mean time to ready is printed); the silent cluster's machines
//! wait with a message naming it; when it answers again they finish, with one VM each and
//! no leaked claim.
//!
//! The simulators run the `fast` profile, about 25 times faster than a real cluster (a
//! machine is ready in seconds, not minutes), so the client's timings are compressed by
//! the same factor: 200 ms of silence instead of 5 s, a 100 ms probe every 200 ms instead
//! of 2 s every 5 s. What the test compares, time lost to the silent cluster against
//! time to ready, keeps its real proportion.
//!
//! The outage lasts `CAPMOX_OUTAGE_SECS` seconds (60 by default; the long run in
//! docs/controller.md uses 600).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capmox_apiserver::api::v1alpha2::ProxmoxMachine;
use capmox_apiserver::controller::clients::{ClientFactory, FactoryOptions};
use capmox_apiserver::controller::runtime::ControllerOptions;
use capmox_apiserver::proxmox::client::HealthOptions;
use capmox_apiserver::proxmox::sim::{self, FaultPlan, Profile, ResponseDelay, SimConfig};
use serde_json::json;

use super::harness::{
    NS, assert_invariants, cluster_parts, cluster_spec, condition, credentials_secret,
    machine_parts, vms,
};
use super::machine_spec;
use super::runtime::{Passes, Rig};

/// Machines in the domains of the cluster's own Proxmox VE cluster.
const HEALTHY: usize = 30;
/// Machines in the domain of the second one.
const IN_SILENT: usize = 6;

/// A simulator of the fast profile named `name`, its random sequence (MACs, SMBIOS UUIDs)
/// from `rng_seed`.
fn fast(name: &str, rng_seed: u64) -> SimConfig {
    SimConfig {
        profile: Profile::Fast,
        seed: sim::Seed {
            cluster_name: name.to_string(),
            ..sim::Seed::default()
        },
        rng_seed,
        ..SimConfig::default()
    }
}

fn silent() -> FaultPlan {
    FaultPlan {
        response_delays: vec![ResponseDelay {
            method: None,
            path: "**".into(),
            millis: 3_600_000,
        }],
        ..FaultPlan::default()
    }
}

/// Creates machine `name` in failure domain `domain` (the Machine first, so the controller
/// never sees it without its domain).
async fn add(rig: &Rig, name: &str, domain: &str) {
    let spec = machine_spec(json!({"sourceNode": "pve2", "templateID": 9001}));
    let body = machine_parts(&rig.mgmt, "c1", name, spec, "cloud-config", false);
    let mut machine = rig.mgmt.peek_machine(NS, name).expect("the Machine");
    machine.spec.failure_domain = Some(domain.to_string());
    rig.mgmt.put_machine(&machine);
    rig.create("proxmoxmachines", body).await;
}

fn provisioned(m: &ProxmoxMachine) -> bool {
    condition(&m.status.conditions, "VirtualMachineProvisioned").1 == "Provisioned"
}

/// Creates the round's machines at once (`b-` ones in the second cluster's domain) and
/// returns the mean time to ready of the others.
async fn round(rig: &Rig, prefix: &str) -> Duration {
    let started = Instant::now();
    for i in 0..IN_SILENT {
        add(rig, &format!("{prefix}-b-{i}"), "dc-b").await;
    }
    for i in 0..HEALTHY {
        let domain = if i % 2 == 0 { "dc-a" } else { "dc-c" };
        add(rig, &format!("{prefix}-{i}"), domain).await;
    }
    let mut ready: BTreeMap<String, Duration> = BTreeMap::new();
    let deadline = started + Duration::from_secs(120);
    while ready.len() < HEALTHY {
        assert!(Instant::now() < deadline, "{}", rig.describe().await);
        for m in rig.machines().await {
            let name = m.metadata.name.clone().unwrap_or_default();
            if !name.contains("-b-") && provisioned(&m) {
                ready.entry(name).or_insert_with(|| started.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ready.values().sum::<Duration>() / HEALTHY as u32
}

async fn delete_all(rig: &Rig) {
    for m in rig.machines().await {
        let name = m.metadata.name.unwrap_or_default();
        rig.delete("proxmoxmachines", &name).await;
    }
    rig.wait_for("deleted", |machines, _| machines.is_empty())
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_proxmox_ve_cluster_slows_no_other_domain() {
    let outage = Duration::from_secs(
        std::env::var("CAPMOX_OUTAGE_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(60),
    );
    let mut rig = Rig::embedded_with(fast("capmox-sim", 1)).await;
    rig.workers = ControllerOptions::default().workers;
    rig.clients = Arc::new(ClientFactory::new(
        None,
        FactoryOptions {
            rate_limit: None,
            request_timeout: Duration::from_millis(2_400),
            health: HealthOptions {
                stall_after: Duration::from_millis(200),
                probe_every: Duration::from_millis(200),
                probe_patience: Duration::from_millis(100),
            },
            ..FactoryOptions::default()
        },
    ));
    let pve_b = sim::start(fast("pve-b", 2))
        .await
        .expect("second simulator");
    rig.mgmt
        .put_secret(&credentials_secret(&pve_b, "dc-b-credentials"));
    let mut spec = cluster_spec("c1");
    spec["failureDomains"] = json!([
        {"name": "dc-a", "nodes": ["pve1", "pve2"]},
        {"name": "dc-c", "nodes": ["pve3"]},
        {"name": "dc-b", "nodes": ["pve1", "pve2", "pve3"],
         "credentialsRef": {"name": "dc-b-credentials"}}
    ]);
    let body = cluster_parts(&rig.mgmt, &rig.pve, "c1", spec);
    rig.create("proxmoxclusters", body).await;
    let _controller = rig.start("solo", Arc::new(Passes::default()));

    let without_fault = round(&rig, "calm").await;
    rig.wait_for("all provisioned", |machines, _| {
        machines.iter().all(provisioned)
    })
    .await;
    delete_all(&rig).await;

    let outage_began = Instant::now();
    pve_b.control().set_faults(silent());
    let with_fault = round(&rig, "lost").await;

    tokio::time::sleep(outage.saturating_sub(outage_began.elapsed())).await;
    let machines = rig.machines().await;
    for m in machines.iter().filter(|m| !provisioned(m)) {
        let name = m.metadata.name.as_deref().unwrap_or_default();
        assert!(name.contains("-b-"), "{name} is not in the silent cluster");
        let message = condition(&m.status.conditions, "VirtualMachineProvisioned").2;
        assert!(
            message.contains("pve-b") && message.contains(" not answering since "),
            "{name}: {message}"
        );
    }
    let cluster = rig.clusters().await.pop().expect("the ProxmoxCluster");
    let reported = cluster
        .status
        .pve_clusters
        .iter()
        .find(|r| r.failure_domains == ["dc-b"])
        .expect("dc-b's cluster is reported");
    assert!(!reported.reachable, "{reported:?}");
    assert!(vms(&pve_b).is_empty());

    pve_b.control().set_faults(FaultPlan::default());
    let back = Instant::now();
    rig.wait_for(
        "the silent cluster's machines provisioned",
        |machines, _| machines.iter().all(provisioned),
    )
    .await;
    println!(
        "after {:.0?} of outage, its {IN_SILENT} machines were ready {:.1?} after it answered",
        outage_began.elapsed() - back.elapsed(),
        back.elapsed()
    );
    assert_eq!(vms(&pve_b).len(), IN_SILENT);
    assert_eq!(vms(&rig.pve).len(), HEALTHY);
    let machines = rig.machines().await;
    let clusters = rig.clusters().await;
    let describe = rig.describe().await;
    for pve in [&rig.pve, &pve_b] {
        assert_invariants(pve, &rig.mgmt, &machines, &clusters, &[], &describe);
    }

    // The run without the fault again, so that a change of the machine's load between the
    // rounds (other tests run beside this one) falls on both sides of the ratio.
    delete_all(&rig).await;
    let again = round(&rig, "calm-again").await;
    let without_fault = (without_fault + again) / 2;
    let ratio = with_fault.as_secs_f64() / without_fault.as_secs_f64();
    println!(
        "time to ready, {HEALTHY} machines beside a silent Proxmox VE cluster: {with_fault:.2?} \
         / {without_fault:.2?} without the fault = {ratio:.2}"
    );
    // The target. Measured 0.90-0.98; with the client's 2.4 s timeout alone (the
    // silent cluster's requests holding workers until it) it is 1.44.
    assert!(ratio <= 1.2, "ratio {ratio:.2}");
}
