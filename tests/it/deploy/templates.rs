//! Every cluster template renders with clusterctl's substitution into objects that reference
//! each other consistently, and every Proxmox object in it is admitted by our API (decoding,
//! defaulting, schema and webhook validation of v1alpha2).

use std::collections::HashMap;

use capmox_apiserver::api::Kind;
use serde_json::Value;

use super::envsubst::substitute;
use super::{documents, release_dir};
use crate::api::support::admit_create;

/// Values a user would give `clusterctl generate cluster` (variables with defaults are left
/// out, so the defaults are exercised).
fn test_values() -> HashMap<&'static str, &'static str> {
    HashMap::from([
        ("CLUSTER_NAME", "capmox-test"),
        ("NAMESPACE", "default"),
        ("KUBERNETES_VERSION", "v1.34.8"),
        ("CONTROL_PLANE_MACHINE_COUNT", "3"),
        ("WORKER_MACHINE_COUNT", "2"),
        ("CONTROL_PLANE_ENDPOINT_IP", "10.10.10.9"),
        ("CONTROL_PLANE_ENDPOINT_IP_POOL", "capmox-vips"),
        ("NODE_IP_RANGES", "[10.10.10.10-10.10.10.15]"),
        ("IP_PREFIX", "24"),
        ("GATEWAY", "10.10.10.1"),
        ("DNS_SERVERS", "[8.8.8.8, 8.8.4.4]"),
        (
            "VM_SSH_KEYS",
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK0wmN/Cr3JXqmLW7u+g9pTh+wyqDHpSQEIQczXkVx9q admin",
        ),
        ("PROXMOX_SOURCENODE", "pve1"),
        ("TEMPLATE_VMID", "100"),
        ("TEMPLATE_TAGS", "ubuntu, v1.34.8"),
        ("BOOT_VOLUME_DEVICE", "scsi0"),
        ("BRIDGE", "vmbr0"),
        ("NODE_IPV6_RANGES", "[2001:db8::10-2001:db8::20]"),
        ("IPV6_PREFIX", "64"),
        ("IPV6_GATEWAY", "2001:db8::1"),
        ("SECONDARY_BRIDGE", "vmbr1"),
        ("SECONDARY_IP_RANGES", "[10.20.0.10-10.20.0.50]"),
        ("SECONDARY_IP_PREFIX", "24"),
        ("SECONDARY_GATEWAY", "10.20.0.1"),
        ("PROXMOX_URL", "https://pve.example.test:8006"),
        ("PROXMOX_TOKEN", "capmox@pve!capi"),
        ("PROXMOX_SECRET", "0b1e5b1c-7d3e-4a9f-8c2d-6f1e2a3b4c5d"),
    ])
}

fn templates() -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = std::fs::read_dir(release_dir())
        .expect("release dir")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("cluster-template") && name.ends_with(".yaml"))
        .map(|name| {
            let text = std::fs::read_to_string(release_dir().join(&name)).expect("read");
            (name, text)
        })
        .collect();
    found.sort();
    found
}

/// The name of a same-namespace reference, checked to point at a document of this template.
fn assert_refers(docs: &[Value], reference: &Value, template: &str) {
    let (kind, name) = (&reference["kind"], &reference["name"]);
    assert!(
        docs.iter()
            .any(|d| d["kind"] == *kind && d["metadata"]["name"] == *name),
        "{template}: {kind} {name} is referenced but not defined"
    );
}

#[test]
fn cluster_templates_render_and_are_admitted() {
    let templates = templates();
    let names: Vec<&str> = templates.iter().map(|(n, _)| n.as_str()).collect();
    for flavor in [
        "cluster-template.yaml",
        "cluster-template-calico.yaml",
        "cluster-template-cilium.yaml",
        "cluster-template-dual-stack.yaml",
        "cluster-template-multiple-vlans.yaml",
        "cluster-template-external-creds.yaml",
        "cluster-template-auto-image.yaml",
        "cluster-template-vip-pool.yaml",
    ] {
        assert!(names.contains(&flavor), "{flavor} is shipped");
    }
    let values = test_values();
    for (name, text) in &templates {
        let rendered = substitute(text, &values).unwrap_or_else(|e| panic!("{name}: {e}"));
        let docs = documents(&rendered);
        let mut proxmox = 0;
        for doc in &docs {
            let kind = doc["kind"].as_str().unwrap_or_default();
            if let Some(kind) = Kind::from_name(kind) {
                assert_eq!(
                    doc["apiVersion"], "infrastructure.cluster.x-k8s.io/v1alpha2",
                    "{name}"
                );
                let errors = admit_create(kind, doc.clone());
                assert!(
                    errors.is_empty(),
                    "{name}: {kind:?} {} refused: {errors:?}",
                    doc["metadata"]["name"]
                );
                proxmox += 1;
            }
        }
        assert!(
            proxmox >= 3,
            "{name}: a ProxmoxCluster and two machine templates"
        );
        let cluster = docs
            .iter()
            .find(|d| d["kind"] == "Cluster")
            .expect("Cluster");
        assert_eq!(cluster["apiVersion"], "cluster.x-k8s.io/v1beta2");
        assert_refers(&docs, &cluster["spec"]["infrastructureRef"], name);
        assert_refers(&docs, &cluster["spec"]["controlPlaneRef"], name);
        for kcp in docs.iter().filter(|d| d["kind"] == "KubeadmControlPlane") {
            assert_refers(
                &docs,
                &kcp["spec"]["machineTemplate"]["spec"]["infrastructureRef"],
                name,
            );
        }
        for md in docs.iter().filter(|d| d["kind"] == "MachineDeployment") {
            let spec = &md["spec"]["template"]["spec"];
            assert_refers(&docs, &spec["infrastructureRef"], name);
            assert_refers(&docs, &spec["bootstrap"]["configRef"], name);
        }
    }
}

#[test]
fn vip_pool_flavor_claims_the_endpoint_from_a_pool() {
    let (_, text) = templates()
        .into_iter()
        .find(|(n, _)| n == "cluster-template-vip-pool.yaml")
        .expect("vip-pool flavor");
    let docs = documents(&substitute(&text, &test_values()).expect("render"));
    let cluster = docs
        .iter()
        .find(|d| d["kind"] == "ProxmoxCluster")
        .expect("ProxmoxCluster");
    assert!(cluster["spec"].get("controlPlaneEndpoint").is_none());
    assert_eq!(
        cluster["spec"]["controlPlaneEndpointIPPoolRef"],
        serde_json::json!({"apiGroup": "ipam.cluster.x-k8s.io", "kind": "GlobalInClusterIPPool", "name": "capmox-vips"})
    );
    let kcp = docs
        .iter()
        .find(|d| d["kind"] == "KubeadmControlPlane")
        .expect("KCP");
    let commands = &kcp["spec"]["kubeadmConfigSpec"]["preKubeadmCommands"];
    assert_eq!(
        commands[0], "/etc/kube-vip-address.sh",
        "the VIP is filled in before kube-vip starts"
    );
}
