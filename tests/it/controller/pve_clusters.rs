//! One Kubernetes cluster across two Proxmox VE clusters whose nodes have the same names:
//! failure domain `dc-a` in the cluster's own Proxmox VE cluster, `dc-b` in another one
//! named by the domain's `credentialsRef`. Every step of a machine talks to its domain's
//! Proxmox VE cluster; a domain pointed elsewhere strands no VM; a silent Proxmox VE
//! cluster delays only its own machines.

use std::collections::BTreeSet;
use std::time::Duration;

use capmox_apiserver::api::v1alpha2::{ProxmoxCluster, ProxmoxMachine};
use capmox_apiserver::controller::InfraStore;
use capmox_apiserver::proxmox::sim::{self, FaultPlan, ResponseDelay, RunningSim, SimConfig};
use serde_json::{Value, json};

use super::harness::{
    Chaos, Env, NS, assert_invariants, cluster_spec, condition, credentials_secret, vms,
};
use super::machine_spec;

/// The name the default seed gives the cluster's own Proxmox VE cluster.
const OWN: &str = "capmox-sim";

/// A second simulated Proxmox VE cluster, with the same nodes and templates as the first.
async fn second_pve(name: &str) -> RunningSim {
    second_pve_from(sim::Seed {
        cluster_name: name.to_string(),
        ..sim::Seed::default()
    })
    .await
}

/// A second simulated Proxmox VE cluster from `seed`.
async fn second_pve_from(seed: sim::Seed) -> RunningSim {
    sim::start(SimConfig {
        seed,
        // Another random sequence than the first's, as another cluster's SMBIOS UUIDs are.
        rng_seed: 2,
        ..SimConfig::default()
    })
    .await
    .expect("the second simulator starts")
}

/// `c1` with `dc-a` in its own Proxmox VE cluster and `dc-b` (VMIDs 5000–5099) in the
/// one `dc-b-credentials` reaches.
fn two_domains() -> Value {
    let mut spec = cluster_spec("c1");
    spec["failureDomains"] = json!([
        {"name": "dc-a", "nodes": ["pve1", "pve2"]},
        {"name": "dc-b", "nodes": ["pve1", "pve2"],
         "credentialsRef": {"name": "dc-b-credentials"},
         "vmIDRange": {"start": 5000, "end": 5099}}
    ]);
    spec
}

async fn two_pve_clusters() -> (Env, RunningSim) {
    let env = Env::with_cluster(SimConfig::default(), two_domains()).await;
    let pve_b = second_pve("pve-b").await;
    env.mgmt
        .put_secret(&credentials_secret(&pve_b, "dc-b-credentials"));
    (env, pve_b)
}

/// Adds machine `name` in failure domain `domain` (template 9001 on shared storage, which
/// both Proxmox VE clusters have).
fn add(env: &mut Env, name: &str, domain: &str, control_plane: bool) {
    let spec = machine_spec(json!({"sourceNode": "pve2", "templateID": 9001, "haResource": {}}));
    env.add_machine("c1", name, spec, "cloud-config", control_plane);
    env.put_failure_domain(name, domain);
}

fn names(vms: &[(u32, String, String)]) -> BTreeSet<String> {
    vms.iter().map(|(_, name, _)| name.clone()).collect()
}

fn ha_resources(pve: &RunningSim) -> BTreeSet<String> {
    pve.control()
        .with_world(|w| w.ha_resources.keys().cloned().collect())
}

/// The invariants in each Proxmox VE cluster, and every VM in the one its machine
/// records.
fn assert_each_cluster_consistent(env: &Env, pve_b: &RunningSim) {
    let machines = env.store.all::<ProxmoxMachine>();
    let clusters = env.store.all::<ProxmoxCluster>();
    for (pve, name) in [(&env.pve, OWN), (pve_b, "pve-b")] {
        assert_invariants(pve, &env.mgmt, &machines, &clusters, &[], &env.describe());
        for (_, vm, _) in vms(pve) {
            let machine = env.machine(&vm);
            assert_eq!(machine.status.pve_cluster.as_deref(), Some(name), "{vm}");
        }
    }
}

/// Points failure domain dc-b at the Proxmox VE cluster Secret `secret` reaches.
async fn point_dc_b_at(env: &Env, secret: &str) {
    let mut pc = env.cluster("c1");
    let reference = pc.spec.failure_domains[1].credentials_ref.as_mut();
    reference.expect("dc-b has credentials").name = secret.into();
    env.store.update(&pc).await.expect("updated");
}

fn message(env: &Env, machine: &str) -> String {
    condition(
        &env.machine(machine).status.conditions,
        "VirtualMachineProvisioned",
    )
    .2
}

/// Machines of two domains land in their own Proxmox VE cluster, on a node of the same
/// name, with the domain's VMID range; HA resources and deletion go to the right cluster;
/// the ProxmoxCluster reports both Proxmox VE clusters.
#[tokio::test]
async fn machines_live_in_their_domains_proxmox_ve_cluster() {
    let (mut env, pve_b) = two_pve_clusters().await;
    add(&mut env, "cp-a", "dc-a", true);
    add(&mut env, "cp-b", "dc-b", true);
    add(&mut env, "w-b", "dc-b", false);
    env.converge().await;
    assert_each_cluster_consistent(&env, &pve_b);

    assert_eq!(names(&env.vms()), BTreeSet::from(["cp-a".to_string()]));
    assert_eq!(
        names(&vms(&pve_b)),
        BTreeSet::from(["cp-b".to_string(), "w-b".to_string()])
    );
    for (machine, pve, domain) in [
        ("cp-a", OWN, "dc-a"),
        ("cp-b", "pve-b", "dc-b"),
        ("w-b", "pve-b", "dc-b"),
    ] {
        let m = env.machine(machine);
        assert_eq!(m.status.pve_cluster.as_deref(), Some(pve), "{machine}");
        assert_eq!(m.status.failure_domain.as_deref(), Some(domain));
        assert_eq!(m.status.initialization.provisioned, Some(true));
    }
    let provider_ids: BTreeSet<String> = ["cp-a", "cp-b", "w-b"]
        .iter()
        .map(|m| env.machine(m).spec.provider_id)
        .collect();
    assert_eq!(
        provider_ids.len(),
        3,
        "distinct providerIDs: {provider_ids:?}"
    );
    for (_, name, node) in vms(&pve_b) {
        let vmid = env.machine(&name).spec.virtual_machine_id.expect("vmid");
        assert!(
            (5000..=5099).contains(&vmid),
            "{name}: {vmid} in dc-b's range"
        );
        assert!(node == "pve1" || node == "pve2");
    }
    let vmid = |name: &str| env.machine(name).spec.virtual_machine_id.expect("vmid");
    assert_eq!(
        ha_resources(&env.pve),
        BTreeSet::from([format!("vm:{}", vmid("cp-a"))])
    );
    assert_eq!(
        ha_resources(&pve_b),
        BTreeSet::from([
            format!("vm:{}", vmid("cp-b")),
            format!("vm:{}", vmid("w-b"))
        ])
    );
    let reported: Vec<(Vec<String>, Option<String>, bool)> = env
        .cluster("c1")
        .status
        .pve_clusters
        .into_iter()
        .map(|r| {
            assert!(r.version.is_some() && r.since.is_some(), "{r:?}");
            (r.failure_domains, r.name, r.reachable)
        })
        .collect();
    assert_eq!(
        reported,
        [
            (vec!["dc-a".to_string()], Some(OWN.to_string()), true),
            (vec!["dc-b".to_string()], Some("pve-b".to_string()), true),
        ]
    );
    let secret = env
        .mgmt
        .peek_secret(NS, "dc-b-credentials")
        .expect("the domain's Secret");
    assert!(
        secret
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f.starts_with("proxmoxcluster")),
        "the domain's Secret is held like the cluster's"
    );

    for name in ["cp-a", "cp-b", "w-b"] {
        env.store.delete::<ProxmoxMachine>(NS, name);
    }
    env.converge().await;
    assert!(env.vms().is_empty() && vms(&pve_b).is_empty());
    assert!(ha_resources(&env.pve).is_empty() && ha_resources(&pve_b).is_empty());
}

/// Templates are looked up in the domain's Proxmox VE cluster: a tag only the second
/// cluster's template 9001 carries finds it for a machine of dc-b, while the same selector
/// finds nothing for a machine of dc-a.
#[tokio::test]
async fn templates_are_found_in_the_domains_proxmox_ve_cluster() {
    let mut env = Env::with_cluster(SimConfig::default(), two_domains()).await;
    let mut seed = sim::Seed {
        cluster_name: "pve-b".into(),
        ..sim::Seed::default()
    };
    let template = seed.templates.iter_mut().find(|t| t.vmid == 9001);
    let tags = &mut template.expect("the seed's 9001").tags;
    *tags = ["capmox", "kube-v1.34", "ubuntu"].map(String::from).into();
    let pve_b = second_pve_from(seed).await;
    env.mgmt
        .put_secret(&credentials_secret(&pve_b, "dc-b-credentials"));
    let selected = || {
        machine_spec(json!({"sourceNode": null, "templateID": null,
            "templateSelector": {"matchTags": ["capmox", "kube-v1.34", "ubuntu"]}}))
    };
    for (name, domain) in [("sel-a", "dc-a"), ("sel-b", "dc-b")] {
        env.add_machine("c1", name, selected(), "cloud-config", false);
        env.put_failure_domain(name, domain);
    }
    assert!(
        !env.run_for(60).await.converged,
        "sel-a waits for a template"
    );
    let b = env.machine("sel-b");
    assert_eq!(
        b.status.initialization.provisioned,
        Some(true),
        "{}",
        env.describe()
    );
    let template = b.status.template.expect("recorded");
    assert_eq!(template.template_id, 9001);
    assert_eq!(names(&vms(&pve_b)), BTreeSet::from(["sel-b".to_string()]));
    assert_eq!(env.machine("sel-a").spec.virtual_machine_id, None);
    assert!(env.vms().is_empty());
    let text = message(&env, "sel-a");
    assert!(text.contains("not found"), "{text}");
}

/// Pointing a domain at another Proxmox VE cluster under a running machine makes it wait
/// with a message; nothing is cloned in the new one, and its deletion waits until some
/// credentials reach its VM again, so the VM is never left behind.
#[tokio::test]
async fn a_domain_pointed_elsewhere_strands_no_vm() {
    let (mut env, pve_b) = two_pve_clusters().await;
    // The machine stays in provisioning (its guest agent never answers), so it keeps
    // coming back to Proxmox.
    pve_b.control().set_faults(FaultPlan {
        agent_never_ready: BTreeSet::from([5000]),
        ..FaultPlan::default()
    });
    add(&mut env, "cp-b", "dc-b", true);
    assert!(!env.run_for(60).await.converged);
    assert_eq!(env.machine("cp-b").spec.virtual_machine_id, Some(5000));
    point_dc_b_at(&env, "c1-proxmox-credentials").await;
    let report = env.run_for(30).await;
    assert!(!report.converged, "it waits, retrying");
    assert_eq!(
        message(&env, "cp-b"),
        format!(
            "the VM lives in Proxmox VE cluster pve-b, but failure domain dc-b's credentials now reach {OWN}: point the domain back at pve-b, or delete the machine to replace it"
        )
    );
    assert!(env.vms().is_empty(), "nothing cloned in {OWN}");

    env.store.delete::<ProxmoxMachine>(NS, "cp-b");
    env.run_for(30).await;
    assert_eq!(names(&vms(&pve_b)), BTreeSet::from(["cp-b".to_string()]));
    assert!(
        env.store.peek::<ProxmoxMachine>(NS, "cp-b").is_some(),
        "the finalizer stays while no credentials reach the VM"
    );
    point_dc_b_at(&env, "dc-b-credentials").await;
    env.converge().await;
    assert!(vms(&pve_b).is_empty() && env.vms().is_empty());
    assert!(env.store.peek::<ProxmoxMachine>(NS, "cp-b").is_none());
}

/// The same for a machine without a failure domain when the ProxmoxCluster's own
/// credentials are pointed at another Proxmox VE cluster.
#[tokio::test]
async fn the_clusters_own_credentials_pointed_elsewhere_strand_no_vm() {
    let (mut env, pve_b) = two_pve_clusters().await;
    env.pve.control().set_faults(FaultPlan {
        agent_never_ready: BTreeSet::from([100]),
        ..FaultPlan::default()
    });
    let spec = machine_spec(json!({"sourceNode": "pve2", "templateID": 9001}));
    env.add_machine("c1", "plain", spec, "cloud-config", false);
    assert!(!env.run_for(60).await.converged);
    assert_eq!(env.machine("plain").spec.virtual_machine_id, Some(100));
    let mut pc = env.cluster("c1");
    let own = pc.spec.credentials_ref.as_mut();
    own.expect("the cluster's credentials").name = "dc-b-credentials".into();
    env.store.update(&pc).await.expect("updated");
    assert!(!env.run_for(30).await.converged);
    assert_eq!(
        message(&env, "plain"),
        format!(
            "the VM lives in Proxmox VE cluster {OWN}, but the ProxmoxCluster's credentials now reach pve-b: point the credentials back at {OWN}, or delete the machine to replace it"
        )
    );
    assert!(vms(&pve_b).is_empty(), "nothing cloned in pve-b");
}

/// A Proxmox VE cluster that stops answering delays only its machines: the other domain's
/// provision, the ProxmoxCluster stays reconciled and reports the silent one, the waiting
/// machines say which cluster is silent and since when; once it answers again they finish,
/// one VM each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_proxmox_ve_cluster_delays_only_its_machines() {
    let (mut env, pve_b) = two_pve_clusters().await;
    let silent = FaultPlan {
        response_delays: vec![ResponseDelay {
            method: None,
            path: "**".into(),
            millis: 3_600_000,
        }],
        ..FaultPlan::default()
    };
    pve_b.control().set_faults(silent);
    for i in 0..4 {
        add(&mut env, &format!("a-{i}"), "dc-a", i == 0);
        add(&mut env, &format!("b-{i}"), "dc-b", i == 0);
    }
    let report = env.run_for(400).await;
    assert!(!report.converged, "dc-b's machines keep retrying");
    for i in 0..4 {
        let a = env.machine(&format!("a-{i}"));
        assert_eq!(a.status.initialization.provisioned, Some(true), "a-{i}");
        let b = format!("b-{i}");
        let text = message(&env, &b);
        assert!(
            text.starts_with("Proxmox VE cluster of failure domain dc-b: ")
                && text.contains(" not answering since ")
                && text.contains(&pve_b.url().trim_end_matches('/').to_string()),
            "{b}: {text}"
        );
        assert_eq!(env.machine(&b).spec.virtual_machine_id, None, "{b}");
    }
    let pc = env.cluster("c1");
    assert_eq!(condition(&pc.status.conditions, "Ready").0, "True");
    let b = pc
        .status
        .pve_clusters
        .iter()
        .find(|r| r.failure_domains == ["dc-b"])
        .expect("dc-b's Proxmox VE cluster is reported");
    assert!(!b.reachable && b.message.is_some(), "{b:?}");

    pve_b.control().set_faults(FaultPlan::default());
    // Its probe goes after a short while (the harness's probe interval, in real time).
    tokio::time::sleep(Duration::from_millis(300)).await;
    env.drive(Chaos::none()).await;
    for i in 0..4 {
        let b = env.machine(&format!("b-{i}"));
        assert_eq!(b.status.initialization.provisioned, Some(true));
        assert_eq!(b.status.pve_cluster.as_deref(), Some("pve-b"));
    }
    assert_eq!(vms(&pve_b).len(), 4);
    assert_each_cluster_consistent(&env, &pve_b);
    let pc = env.cluster("c1");
    assert!(pc.status.pve_clusters.iter().all(|r| r.reachable));
}

/// Killed at random await points (and restarted with empty caches) while machines of both
/// domains are created and deleted: one VM per machine, each in its domain's Proxmox VE
/// cluster, and nothing left behind in either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_at_random_await_points_across_two_clusters() {
    let (mut env, pve_b) = two_pve_clusters().await;
    let mut kills = 0;
    for cycle in 0..3u64 {
        let names: Vec<String> = (0..6).map(|i| format!("k{cycle}-{i}")).collect();
        for (i, name) in names.iter().enumerate() {
            add(
                &mut env,
                name,
                if i % 2 == 0 { "dc-a" } else { "dc-b" },
                i == 0,
            );
        }
        let report = env
            .drive(Chaos::kills(usize::MAX, 0.35, 40, 7 + cycle))
            .await;
        kills += report.kills;
        assert_each_cluster_consistent(&env, &pve_b);
        assert_eq!(env.vms().len() + vms(&pve_b).len(), names.len());
        for name in &names {
            let m = env.machine(name);
            assert_eq!(m.status.initialization.provisioned, Some(true), "{name}");
        }
        for name in &names {
            env.store.delete::<ProxmoxMachine>(NS, name);
        }
        kills += env
            .drive(Chaos::kills(usize::MAX, 0.35, 40, 70 + cycle))
            .await
            .kills;
        assert!(
            env.vms().is_empty() && vms(&pve_b).is_empty(),
            "{}",
            env.describe()
        );
        assert!(ha_resources(&env.pve).is_empty() && ha_resources(&pve_b).is_empty());
    }
    assert!(kills >= 20, "{kills} kills");
}

/// A second Proxmox VE cluster costs a machine no extra Proxmox calls: the same machines
/// converge with as many requests when half of them are in another cluster.
#[tokio::test]
async fn proxmox_calls_per_machine_are_those_of_one_cluster() {
    async fn requests(domains: Value, second: bool) -> u64 {
        let mut spec = cluster_spec("c1");
        spec["failureDomains"] = domains;
        let mut env = Env::with_cluster(SimConfig::default(), spec).await;
        let _pve_b = if second {
            let pve_b = second_pve("pve-b").await;
            env.mgmt
                .put_secret(&credentials_secret(&pve_b, "dc-b-credentials"));
            Some(pve_b)
        } else {
            None
        };
        for i in 0..6 {
            add(
                &mut env,
                &format!("m-{i}"),
                if i % 2 == 0 { "dc-a" } else { "dc-b" },
                false,
            );
        }
        env.converge().await.requests
    }
    let one = requests(
        json!([{"name": "dc-a", "nodes": ["pve1"]}, {"name": "dc-b", "nodes": ["pve2"]}]),
        false,
    )
    .await;
    let two = requests(
        json!([{"name": "dc-a", "nodes": ["pve1"]},
               {"name": "dc-b", "nodes": ["pve2"], "credentialsRef": {"name": "dc-b-credentials"}}]),
        true,
    )
    .await;
    let ratio = two as f64 / one as f64;
    println!("Proxmox requests for 6 machines: {two} in two clusters / {one} in one = {ratio:.2}");
    // The second cluster's own version and status checks, and no more.
    assert!(
        two <= one + 12,
        "{two} requests in two clusters, {one} in one"
    );
}

/// Each Proxmox VE cluster's storages are its own, even on nodes of the same name: the seed
/// ISO of a machine on the second cluster's pve1 goes to the ISO storage that cluster has
/// there, not to the one the first cluster's pve1 has, and no upload fails on the way.
#[tokio::test]
async fn seed_isos_go_to_the_storage_of_the_machines_own_cluster() {
    let mut spec = cluster_spec("c1");
    spec["failureDomains"] = json!([
        {"name": "dc-a", "nodes": ["pve1"]},
        {"name": "dc-b", "nodes": ["pve1"], "credentialsRef": {"name": "dc-b-credentials"}}
    ]);
    let mut env = Env::with_cluster(SimConfig::default(), spec).await;
    let mut seed = sim::Seed {
        cluster_name: "pve-b".into(),
        ..sim::Seed::default()
    };
    seed.storages.retain(|s| s.id != "local");
    let pve_b = second_pve_from(seed).await;
    env.mgmt
        .put_secret(&credentials_secret(&pve_b, "dc-b-credentials"));
    env.join_nodes = false; // the seeds stay attached
    add(&mut env, "iso-a", "dc-a", false);
    assert_eq!(env.converge().await.errors, 0);
    add(&mut env, "iso-b", "dc-b", false);
    let report = env.converge().await;
    assert_eq!(report.errors, 0, "no failed upload\n{}", env.describe());
    let isos = |pve: &RunningSim| -> Vec<String> {
        pve.control().with_world(|w| {
            w.storages
                .values()
                .flat_map(|s| {
                    let id = s.id.clone();
                    s.volumes
                        .values()
                        .flat_map(|v| v.keys().cloned())
                        .filter(|name| name.starts_with("iso/user-data-"))
                        .map(move |name| format!("{id}:{name}"))
                })
                .collect()
        })
    };
    let on_b = isos(&pve_b);
    assert_eq!(on_b.len(), 1, "{on_b:?}");
    assert!(on_b[0].starts_with("nfs-iso:"), "{on_b:?}");
    assert!(isos(&env.pve)[0].starts_with("local:"));
}
