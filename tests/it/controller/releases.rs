//! Machines whose template comes from a ProxmoxKubernetesRelease: a release found by the
//! Machine's version or by name, a release changed while machines exist, sources per failure
//! domain, and releases that cannot be resolved (a reason, no VM).

use capmox_apiserver::api::v1alpha2::ClonedTemplate;
use capmox_apiserver::proxmox::sim::SimConfig;
use serde_json::{Value, json};

use super::harness::{Env, NS, cluster_spec, condition, seed_with_local_copies};
use super::machine_spec;

/// A machine spec that names no template of its own but `release`.
fn from_release(release: Value) -> Value {
    machine_spec(json!({"sourceNode": null, "templateID": null, "kubernetesRelease": release}))
}

fn cloned_from(env: &Env, machine: &str) -> ClonedTemplate {
    env.machine(machine)
        .status
        .template
        .unwrap_or_else(|| panic!("{machine} recorded its template"))
}

fn template(node: &str, vmid: i64, release: &str, version: &str) -> ClonedTemplate {
    ClonedTemplate {
        source_node: node.into(),
        template_id: vmid,
        kubernetes_release: Some(release.into()),
        kubernetes_version: Some(version.into()),
    }
}

/// The VM of `machine`: its VMID and node.
fn vm_of(env: &Env, machine: &str) -> (u32, String) {
    env.vms()
        .into_iter()
        .find(|(_, name, _)| name == machine)
        .map(|(vmid, _, node)| (vmid, node))
        .unwrap_or_else(|| panic!("{machine} has a VM"))
}

/// The waiting reason of a machine that must not have cloned anything.
fn waits_without_a_vm(env: &Env, machine: &str) -> String {
    let m = env.machine(machine);
    assert_eq!(m.spec.virtual_machine_id, None, "{machine}: nothing cloned");
    assert!(
        !env.vms().iter().any(|(_, name, _)| name == machine),
        "{machine} has no VM"
    );
    condition(&m.status.conditions, "VirtualMachineProvisioned").2
}

/// The harness's Machines run v1.32.3: `kubernetesRelease: {}` takes the release of that
/// version, whose tags find template 9001 (shared storage on pve2). When the release is
/// changed to template 9000 on pve1, the next machine clones that one, and the first keeps
/// its VM and its record. A named release that does not exist, one of an unknown version and
/// one whose tags match no template leave their machines waiting with the reason.
#[tokio::test]
async fn machines_clone_the_template_their_release_names_when_they_are_created() {
    let mut env = Env::with_cluster(SimConfig::default(), cluster_spec("c1")).await;
    env.add_release(
        "kube-v1-32",
        json!({"version": "v1.32.3", "templates": [
            {"templateSelector": {"matchTags": ["capmox", "kube-v1.32", "ubuntu"]}}
        ]}),
    );
    env.add_machine("c1", "m-0", from_release(json!({})), "cloud-config", false);
    env.converge().await;
    env.assert_invariants();
    assert_eq!(
        cloned_from(&env, "m-0"),
        template("pve2", 9001, "kube-v1-32", "v1.32.3")
    );
    let first_vm = vm_of(&env, "m-0");

    // image-builder rebuilt the template: the release now names 9000 on pve1.
    env.edit_release(
        "kube-v1-32",
        json!({"version": "v1.32.3", "templates": [{"sourceNode": "pve1", "templateID": 9000}]}),
    )
    .await;
    env.add_machine(
        "c1",
        "m-1",
        from_release(json!({"name": "kube-v1-32"})),
        "cloud-config",
        false,
    );
    env.converge().await;
    env.assert_invariants();
    assert_eq!(
        cloned_from(&env, "m-1"),
        template("pve1", 9000, "kube-v1-32", "v1.32.3")
    );
    assert_eq!(
        vm_of(&env, "m-1").1,
        "pve1",
        "a local template clones on its node"
    );
    assert_eq!(
        cloned_from(&env, "m-0"),
        template("pve2", 9001, "kube-v1-32", "v1.32.3"),
        "the existing machine keeps its record"
    );
    assert_eq!(vm_of(&env, "m-0"), first_vm, "and its VM");
    assert_eq!(
        env.machine("m-0").status.initialization.provisioned,
        Some(true)
    );

    env.add_release(
        "no-template",
        json!({"version": "v1.99.0", "templates": [{"templateSelector": {"matchTags": ["kube-v1.99"]}}]}),
    );
    let waiting = [
        (
            "m-missing",
            json!({"name": "kube-v1-33"}),
            format!("ProxmoxKubernetesRelease kube-v1-33 not found in namespace {NS}"),
        ),
        (
            "m-no-template",
            json!({"name": "no-template"}),
            "ProxmoxKubernetesRelease no-template: VM template not found: found 0 VM templates \
             with tags \"kube-v1.99\""
                .to_string(),
        ),
    ];
    for (name, release, _) in &waiting {
        env.add_machine(
            "c1",
            name,
            from_release(release.clone()),
            "cloud-config",
            false,
        );
    }
    env.add_machine(
        "c1",
        "m-newer",
        from_release(json!({})),
        "cloud-config",
        false,
    );
    env.mgmt.edit_machine(NS, "m-newer", |m| {
        m.spec.version = Some("v1.33.0".into());
    });
    assert!(!env.run_for(40).await.converged, "they wait, retrying");
    for (name, _, reason) in &waiting {
        assert_eq!(&waits_without_a_vm(&env, name), reason, "{name}");
    }
    assert_eq!(
        waits_without_a_vm(&env, "m-newer"),
        format!(
            "no ProxmoxKubernetesRelease in namespace {NS} has version v1.33.0 (the Machine's \
             spec.version)"
        )
    );
    env.assert_invariants();
}

/// A release with a template per failure domain: machines in rack-a clone the rack's own
/// template (9000, local to pve1), the others the shared one (9001); a release whose sources
/// all name other domains leaves a machine of rack-c waiting.
#[tokio::test]
async fn release_sources_serve_their_failure_domains() {
    let mut spec = cluster_spec("c1");
    spec["failureDomains"] = json!([
        {"name": "rack-a", "nodes": ["pve1"]},
        {"name": "rack-b", "nodes": ["pve2"]},
        {"name": "rack-c", "nodes": ["pve3"]}
    ]);
    let mut env = Env::with_cluster(SimConfig::default(), spec).await;
    env.add_release(
        "kube-v1-32",
        json!({"version": "v1.32.3", "templates": [
            {"sourceNode": "pve1", "templateID": 9000, "failureDomains": ["rack-a"]},
            {"sourceNode": "pve2", "templateID": 9001}
        ]}),
    );
    env.add_release(
        "rack-a-only",
        json!({"version": "v1.30.0", "templates": [
            {"sourceNode": "pve1", "templateID": 9000, "failureDomains": ["rack-a"]}
        ]}),
    );
    for (machine, domain) in [("m-a", "rack-a"), ("m-b", "rack-b")] {
        env.add_machine(
            "c1",
            machine,
            from_release(json!({})),
            "cloud-config",
            false,
        );
        env.put_failure_domain(machine, domain);
    }
    env.converge().await;
    env.assert_invariants();
    assert_eq!(
        cloned_from(&env, "m-a"),
        template("pve1", 9000, "kube-v1-32", "v1.32.3")
    );
    assert_eq!(vm_of(&env, "m-a").1, "pve1");
    assert_eq!(
        cloned_from(&env, "m-b"),
        template("pve2", 9001, "kube-v1-32", "v1.32.3")
    );
    assert_eq!(vm_of(&env, "m-b").1, "pve2", "placed in its domain");

    env.add_machine(
        "c1",
        "m-c",
        from_release(json!({"name": "rack-a-only"})),
        "cloud-config",
        false,
    );
    env.put_failure_domain("m-c", "rack-c");
    assert!(!env.run_for(40).await.converged, "it waits, retrying");
    assert_eq!(
        waits_without_a_vm(&env, "m-c"),
        "ProxmoxKubernetesRelease rack-a-only has no template for failure domain rack-c"
    );
}

/// Templates on only some nodes: the release's tags find copies on pve1 and pve2 (local
/// storage). Every machine clones the copy on its own node; allowed only pve3, which has none,
/// a machine waits and nothing is cloned.
#[tokio::test]
async fn release_templates_on_some_nodes_are_cloned_where_they_are() {
    let config = SimConfig {
        seed: seed_with_local_copies(),
        ..SimConfig::default()
    };
    let mut spec = cluster_spec("c1");
    spec["allowedNodes"] = json!(["pve1", "pve2", "pve3"]);
    let mut env = Env::with_cluster(config, spec).await;
    env.add_release(
        "kube-v1-32",
        json!({"version": "v1.32.3", "templates": [
            {"templateSelector": {"matchTags": ["capmox", "local-copy"]}}
        ]}),
    );
    for machine in ["m-0", "m-1"] {
        env.add_machine(
            "c1",
            machine,
            from_release(json!({})),
            "cloud-config",
            false,
        );
    }
    env.converge().await;
    env.assert_invariants();
    for machine in ["m-0", "m-1"] {
        let node = vm_of(&env, machine).1;
        let vmid = if node == "pve1" { 9501 } else { 9502 };
        assert_eq!(
            cloned_from(&env, machine),
            template(&node, vmid, "kube-v1-32", "v1.32.3"),
            "{machine} cloned the copy on its node"
        );
    }
    let mut pinned = from_release(json!({}));
    pinned["allowedNodes"] = json!(["pve3"]);
    env.add_machine("c1", "m-pinned", pinned, "cloud-config", false);
    assert!(!env.run_for(40).await.converged, "it waits for a copy");
    assert_eq!(
        waits_without_a_vm(&env, "m-pinned"),
        "no allowed node (pve3) has a copy of the template; copies are on pve1, pve2"
    );
}
