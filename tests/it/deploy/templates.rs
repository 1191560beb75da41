//! Every cluster template renders with clusterctl's substitution into well-formed objects that
//! reference each other consistently, and every Proxmox object in it is admitted by our API
//! (decoding, defaulting, schema and webhook validation of v1alpha2).

use std::collections::HashMap;

use capmox_apiserver::api::Kind;
use serde_json::Value;

use super::envsubst::substitute;
use super::release_dir;
use crate::api::support::admit_create_warned;

/// The flavors this release ships (file names of the provider repository).
pub const FLAVORS: [&str; 16] = [
    "cluster-template.yaml",
    "cluster-template-dhcp.yaml",
    "cluster-template-failure-domains.yaml",
    "cluster-template-calico.yaml",
    "cluster-template-cilium.yaml",
    "cluster-template-cilium-load-balancer.yaml",
    "cluster-template-dual-stack.yaml",
    "cluster-template-multiple-vlans.yaml",
    "cluster-template-external-creds.yaml",
    "cluster-template-auto-image.yaml",
    "cluster-template-kubernetes-release.yaml",
    "cluster-template-vip-pool.yaml",
    "cluster-template-flatcar.yaml",
    "cluster-template-proxmox-labels.yaml",
    "cluster-template-topology.yaml",
    "cluster-template-talos.yaml",
];

/// The ClusterClasses this release ships, `clusterclass-<name>.yaml` as clusterctl looks
/// them up for a Cluster whose topology names the class.
pub const CLUSTER_CLASSES: [&str; 1] = ["clusterclass-proxmox.yaml"];

/// Values a user would give `clusterctl generate cluster` (variables with defaults are left
/// out, so the defaults are exercised).
pub fn test_values() -> HashMap<&'static str, &'static str> {
    HashMap::from([
        ("CLUSTER_NAME", "capmox-test"),
        ("NAMESPACE", "default"),
        ("KUBERNETES_VERSION", "v1.34.8"),
        ("CONTROL_PLANE_MACHINE_COUNT", "3"),
        ("WORKER_MACHINE_COUNT", "2"),
        ("LOAD_BALANCER_MACHINE_COUNT", "2"),
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
        ("FAILURE_DOMAIN_A_NODES", "[pve1]"),
        ("FAILURE_DOMAIN_B_NODES", "[pve2]"),
        ("FAILURE_DOMAIN_C_NODES", "[pve3, pve4]"),
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
        ("EXT_SERVICE_BRIDGE", "vmbr2"),
        ("LB_BGP_IPV4_RANGES", "[172.30.0.10-172.30.0.20]"),
        ("LB_BGP_IPV4_PREFIX", "24"),
        ("LB_BGP_IPV6_RANGE", "[2001:db8:30::10-2001:db8:30::20]"),
        ("LB_BGP_IPV6_PREFIX", "64"),
        ("METALLB_IPV4_ASN", "65001"),
        ("METALLB_IPV4_RANGE", "198.51.100.0/24"),
        ("METALLB_IPV4_BGP_SECRET", "v4-secret"),
        ("METALLB_IPV4_BGP_PEER", "172.30.0.1"),
        ("METALLB_IPV4_BGP_PEER_ASN", "65000"),
        ("METALLB_IPV4_BGP_PEER2", "172.30.0.2"),
        ("METALLB_IPV4_BGP_PEER2_ASN", "65000"),
        ("METALLB_IPV6_ASN", "65001"),
        ("METALLB_IPV6_RANGE", "2001:db8:100::/120"),
        ("METALLB_IPV6_BGP_SECRET", "v6-secret"),
        ("METALLB_IPV6_BGP_PEER", "2001:db8:30::1"),
        ("METALLB_IPV6_BGP_PEER_ASN", "65000"),
        ("METALLB_IPV6_BGP_PEER2", "2001:db8:30::2"),
        ("METALLB_IPV6_BGP_PEER2_ASN", "65000"),
        ("PROXMOX_URL", "https://pve.example.test:8006"),
        ("PROXMOX_TOKEN", "capmox@pve!capi"),
        ("PROXMOX_SECRET", "0b1e5b1c-7d3e-4a9f-8c2d-6f1e2a3b4c5d"),
    ])
}

/// The cluster templates of the release, `(file name, text)`, sorted by name.
pub fn templates() -> Vec<(String, String)> {
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

/// The ClusterClass files of the release, `(file name, text)`.
pub fn cluster_classes() -> Vec<(String, String)> {
    CLUSTER_CLASSES
        .iter()
        .map(|name| {
            let text = std::fs::read_to_string(release_dir().join(name)).expect("read");
            (name.to_string(), text)
        })
        .collect()
}

/// The documents of a YAML stream, or why it does not parse (`what` names it).
fn parse(what: &str, yaml: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(yaml)
        .unwrap_or_else(|e| panic!("{what}: invalid YAML: {e}\n{yaml}"))
        .into_iter()
        .filter(|doc| !doc.is_null())
        .collect()
}

/// A template rendered with the test values, as `clusterctl generate cluster` prints it.
pub fn render(name: &str, text: &str) -> Vec<Value> {
    let rendered = substitute(text, &test_values()).unwrap_or_else(|e| panic!("{name}: {e}"));
    parse(name, &rendered)
}

/// What `clusterctl generate cluster` prints for a template: the ClusterClass file of every
/// class its Clusters' topologies name, then the template.
pub fn render_with_classes(name: &str, text: &str) -> Vec<Value> {
    let docs = render(name, text);
    let mut classes: Vec<Value> = Vec::new();
    for class in docs
        .iter()
        .filter_map(|d| d["spec"]["topology"]["classRef"]["name"].as_str())
    {
        let file = format!("clusterclass-{class}.yaml");
        let path = release_dir().join(&file);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{name}: ClusterClass {class} is not in the release: {e}"));
        classes.extend(render(&file, &text));
    }
    classes.into_iter().chain(docs).collect()
}

/// Every Kubernetes object needs these to be applied at all.
fn assert_object_shape(what: &str, doc: &Value) {
    let nonempty = |v: &Value| v.as_str().is_some_and(|s| !s.is_empty());
    assert!(
        nonempty(&doc["apiVersion"])
            && nonempty(&doc["kind"])
            && nonempty(&doc["metadata"]["name"]),
        "{what}: a document without apiVersion, kind or metadata.name: {doc}"
    );
}

/// YAML carried inside objects: manifests a ClusterResourceSet applies to the workload cluster,
/// files kubeadm writes to the nodes, the Ignition additions.
fn check_embedded_yaml(template: &str, docs: &[Value]) {
    let applied: Vec<(&Value, &Value)> = docs
        .iter()
        .filter(|d| d["kind"] == "ClusterResourceSet")
        .flat_map(|crs| crs["spec"]["resources"].as_array().into_iter().flatten())
        .map(|r| (&r["kind"], &r["name"]))
        .collect();
    for doc in docs {
        let name = &doc["metadata"]["name"];
        let carried = match doc["kind"].as_str() {
            Some("ConfigMap") => &doc["data"],
            Some("Secret") => &doc["stringData"],
            _ => continue,
        };
        if !applied.contains(&(&doc["kind"], name)) {
            continue;
        }
        if doc["kind"] == "Secret" {
            assert_eq!(
                doc["type"], "addons.cluster.x-k8s.io/resource-set",
                "{template}: a ClusterResourceSet only applies Secrets of its type"
            );
        }
        let entries = carried.as_object().expect("data of a resource set");
        assert!(!entries.is_empty(), "{template}: {name} carries nothing");
        for (key, manifest) in entries {
            let what = format!("{template}: {} {name} key {key}", doc["kind"]);
            let manifests = parse(&what, manifest.as_str().expect("string data"));
            assert!(!manifests.is_empty(), "{what}: empty");
            for m in &manifests {
                assert_object_shape(&what, m);
            }
        }
    }
    // Talos machine config patches: each one mapping.
    for doc in docs {
        let configs: Vec<&Value> = match doc["kind"].as_str() {
            Some("TalosControlPlane") => {
                let config = &doc["spec"]["controlPlaneConfig"];
                vec![&config["init"], &config["controlplane"]]
            }
            Some("TalosConfigTemplate") => vec![&doc["spec"]["template"]["spec"]],
            _ => continue,
        };
        for patch in configs
            .into_iter()
            .flat_map(|c| c["strategicPatches"].as_array().into_iter().flatten())
        {
            let what = format!("{template}: a Talos strategic patch");
            let parsed = parse(&what, patch.as_str().expect("a patch is text"));
            assert!(
                parsed.len() == 1 && parsed[0].is_object(),
                "{what} is one mapping: {patch}"
            );
        }
    }
    for doc in docs {
        let spec = match doc["kind"].as_str() {
            Some("KubeadmControlPlane") => &doc["spec"]["kubeadmConfigSpec"],
            Some("KubeadmControlPlaneTemplate") => {
                &doc["spec"]["template"]["spec"]["kubeadmConfigSpec"]
            }
            Some("KubeadmConfigTemplate") => &doc["spec"]["template"]["spec"],
            _ => continue,
        };
        for file in spec["files"].as_array().into_iter().flatten() {
            let path = file["path"].as_str().unwrap_or_default();
            if path.ends_with(".yaml") {
                let what = format!("{template}: file {path}");
                for m in parse(&what, file["content"].as_str().expect("content")) {
                    assert_object_shape(&what, &m);
                }
            }
        }
        if let Some(extra) = spec["ignition"]["containerLinuxConfig"]["additionalConfig"].as_str() {
            let config = parse(&format!("{template}: additionalConfig"), extra);
            assert!(
                config.len() == 1 && config[0].is_object(),
                "{template}: additionalConfig is one mapping"
            );
        }
    }
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

/// A Cluster with a topology: its class and the classes of its MachineDeployments exist, and
/// every template the class names is in the output.
fn check_topology(name: &str, docs: &[Value], cluster: &Value) {
    let topology = &cluster["spec"]["topology"];
    let class = docs
        .iter()
        .find(|d| {
            d["kind"] == "ClusterClass" && d["metadata"]["name"] == topology["classRef"]["name"]
        })
        .unwrap_or_else(|| panic!("{name}: the Cluster's ClusterClass is not in the output"));
    let spec = &class["spec"];
    let mut refs = vec![
        &spec["infrastructure"]["templateRef"],
        &spec["controlPlane"]["templateRef"],
        &spec["controlPlane"]["machineInfrastructure"]["templateRef"],
    ];
    let workers: Vec<&Value> = spec["workers"]["machineDeployments"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    for worker in &workers {
        refs.push(&worker["bootstrap"]["templateRef"]);
        refs.push(&worker["infrastructure"]["templateRef"]);
    }
    for reference in refs {
        assert_refers(docs, reference, name);
    }
    for md in topology["workers"]["machineDeployments"]
        .as_array()
        .into_iter()
        .flatten()
    {
        assert!(
            workers.iter().any(|w| w["class"] == md["class"]),
            "{name}: MachineDeployment class {} is not in the ClusterClass",
            md["class"]
        );
    }
    let declared: Vec<&Value> = spec["variables"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| &v["name"])
        .collect();
    for variable in topology["variables"].as_array().into_iter().flatten() {
        assert!(
            declared.contains(&&variable["name"]),
            "{name}: variable {} is not declared by the ClusterClass",
            variable["name"]
        );
    }
}

fn check_references(name: &str, docs: &[Value]) {
    let cluster = docs
        .iter()
        .find(|d| d["kind"] == "Cluster")
        .expect("Cluster");
    assert_eq!(cluster["apiVersion"], "cluster.x-k8s.io/v1beta2");
    if cluster["spec"]["topology"].is_object() {
        return check_topology(name, docs, cluster);
    }
    assert_refers(docs, &cluster["spec"]["infrastructureRef"], name);
    assert_refers(docs, &cluster["spec"]["controlPlaneRef"], name);
    for kcp in docs.iter().filter(|d| d["kind"] == "KubeadmControlPlane") {
        assert_refers(
            docs,
            &kcp["spec"]["machineTemplate"]["spec"]["infrastructureRef"],
            name,
        );
    }
    for tcp in docs.iter().filter(|d| d["kind"] == "TalosControlPlane") {
        assert_refers(docs, &tcp["spec"]["infrastructureTemplate"], name);
    }
    for md in docs.iter().filter(|d| d["kind"] == "MachineDeployment") {
        let spec = &md["spec"]["template"]["spec"];
        assert_refers(docs, &spec["infrastructureRef"], name);
        assert_refers(docs, &spec["bootstrap"]["configRef"], name);
    }
    let machine_templates: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == "ProxmoxMachineTemplate")
        .collect();
    for template in machine_templates {
        let devices = &template["spec"]["template"]["spec"]["network"]["networkDevices"];
        for pool in devices
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|d| d["ipPoolRef"].as_array().into_iter().flatten())
            .filter(|p| p["kind"] == "GlobalInClusterIPPool")
        {
            assert_refers(docs, pool, name);
        }
    }
}

#[test]
fn cluster_templates_render_and_are_admitted() {
    let templates = templates();
    let names: Vec<&str> = templates.iter().map(|(n, _)| n.as_str()).collect();
    let mut shipped = FLAVORS.to_vec();
    shipped.sort_unstable();
    assert_eq!(names, shipped, "the shipped flavors");
    for (name, text) in &templates {
        let docs = render_with_classes(name, text);
        for doc in &docs {
            assert_object_shape(name, doc);
        }
        check_embedded_yaml(name, &docs);
        let mut proxmox = 0;
        for doc in &docs {
            let kind = doc["kind"].as_str().unwrap_or_default();
            if let Some(kind) = Kind::from_name(kind) {
                assert_eq!(
                    doc["apiVersion"], "infrastructure.cluster.x-k8s.io/v1alpha2",
                    "{name}"
                );
                let (errors, warnings) = admit_create_warned(kind, doc.clone());
                assert!(
                    errors.is_empty(),
                    "{name}: {kind:?} {} refused: {errors:?}",
                    doc["metadata"]["name"]
                );
                // A shipped flavor asks for nothing the server warns about (two addresses
                // of a family on one device, say).
                assert!(
                    warnings.is_empty(),
                    "{name}: {kind:?} {} warned: {warnings:?}",
                    doc["metadata"]["name"]
                );
                proxmox += 1;
            }
        }
        assert!(
            proxmox >= 3,
            "{name}: a ProxmoxCluster (or its template) and two machine templates"
        );
        check_references(name, &docs);
    }
}
