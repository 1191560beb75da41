//! What individual flavors promise, on their rendered objects: the VIP pool, Ignition with the
//! controller's facts, node labels from meta-data the controller writes, load balancers in a VRF
//! whose guest network the controller's renderers accept.

use capmox_apiserver::api::v1alpha2::NetworkSpec;
use capmox_apiserver::controller::render::network::{DeviceInput, IpConfig, NetworkData, build};
use capmox_apiserver::controller::render::{self, Format, SeedInputs, netplan};
use serde_json::Value;

use super::templates::{render, templates};
use crate::guest::netplan::{generate, values};

fn rendered_flavor(file: &str) -> Vec<Value> {
    let (name, text) = templates()
        .into_iter()
        .find(|(n, _)| n == file)
        .unwrap_or_else(|| panic!("{file} is shipped"));
    render(&name, &text)
}

fn the<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

#[test]
fn vip_pool_flavor_claims_the_endpoint_from_a_pool() {
    let docs = rendered_flavor("cluster-template-vip-pool.yaml");
    let cluster = the(&docs, "ProxmoxCluster", "capmox-test");
    assert!(cluster["spec"].get("controlPlaneEndpoint").is_none());
    assert_eq!(
        cluster["spec"]["controlPlaneEndpointIPPoolRef"],
        serde_json::json!({"apiGroup": "ipam.cluster.x-k8s.io", "kind": "GlobalInClusterIPPool", "name": "capmox-vips"})
    );
    let kcp = the(&docs, "KubeadmControlPlane", "capmox-test-control-plane");
    let commands = &kcp["spec"]["kubeadmConfigSpec"]["preKubeadmCommands"];
    assert_eq!(
        commands[0], "/etc/kube-vip-address.sh",
        "the VIP is filled in before kube-vip starts"
    );
}

/// The failure-domains flavor gives the ProxmoxCluster the node groups of its variable, in the
/// shape the API admits (the template test admits it).
#[test]
fn failure_domains_flavor_groups_the_nodes() {
    let docs = rendered_flavor("cluster-template-failure-domains.yaml");
    let cluster = the(&docs, "ProxmoxCluster", "capmox-test");
    assert_eq!(
        cluster["spec"]["failureDomains"],
        serde_json::json!([
            {"name": "rack-a", "nodes": ["pve1"]},
            {"name": "rack-b", "nodes": ["pve2"]},
            {"name": "rack-c", "nodes": ["pve3", "pve4"]}
        ])
    );
}

/// The kubernetes-release flavor names no template on its machines: they take the release of
/// their Machine's version, which the flavor creates with the template's tags.
#[test]
fn kubernetes_release_flavor_takes_the_template_from_the_release() {
    let docs = rendered_flavor("cluster-template-kubernetes-release.yaml");
    let kcp = the(&docs, "KubeadmControlPlane", "capmox-test-control-plane");
    let version = kcp["spec"]["version"].as_str().expect("version");
    let release = the(
        &docs,
        "ProxmoxKubernetesRelease",
        &format!("kubernetes-{version}"),
    );
    assert_eq!(release["spec"]["version"], version);
    assert_eq!(
        release["spec"]["templates"],
        serde_json::json!([{"templateSelector": {"matchTags": ["ubuntu", "v1.34.8"], "matchPolicy": "exact"}}])
    );
    for template in ["capmox-test-control-plane", "capmox-test-worker"] {
        let spec = &the(&docs, "ProxmoxMachineTemplate", template)["spec"]["template"]["spec"];
        assert_eq!(
            spec["kubernetesRelease"],
            serde_json::json!({}),
            "{template}"
        );
        for field in ["sourceNode", "templateID", "templateSelector"] {
            assert!(spec.get(field).is_none(), "{template}: {field}");
        }
    }
}

/// The dhcp flavor needs no IP pool: its cluster has no ipv4Config/ipv6Config (admitted, as
/// the template test shows), and every machine's net0 comes out of netplan as DHCP with no
/// static address.
#[test]
fn dhcp_flavor_takes_every_node_address_by_dhcp() {
    let docs = rendered_flavor("cluster-template-dhcp.yaml");
    let cluster = &the(&docs, "ProxmoxCluster", "capmox-test")["spec"];
    assert!(cluster.get("ipv4Config").is_none() && cluster.get("ipv6Config").is_none());
    let root = tempfile::tempdir().expect("tempdir");
    let mut templates = 0;
    for template in docs
        .iter()
        .filter(|d| d["kind"] == "ProxmoxMachineTemplate")
    {
        let network: NetworkSpec =
            serde_json::from_value(template["spec"]["template"]["spec"]["network"].clone())
                .expect("a network");
        let inputs = network
            .network_devices
            .iter()
            .map(|device| DeviceInput {
                device,
                mac: "bc:24:11:00:02:00".into(),
                addresses: Vec::new(),
                dns: vec!["8.8.8.8".into()],
            })
            .collect();
        let data = build(inputs, &network.vrfs).expect("DHCP alone is a valid network");
        let yaml = netplan::render(&data).expect("netplan");
        let _ = std::fs::remove_dir_all(root.path().join("run"));
        let units = generate(&yaml, root.path());
        let eth0 = &units["10-netplan-eth0.network"];
        assert_eq!(values(eth0, "Network", "DHCP"), ["ipv4"], "{yaml}");
        assert!(values(eth0, "Network", "Address").is_empty(), "{yaml}");
        templates += 1;
    }
    assert_eq!(templates, 2, "control plane and workers");
}

/// The values of kubelet's extra arguments named `arg` in every kubeadm configuration.
fn kubelet_args(docs: &[Value], arg: &str) -> Vec<String> {
    let mut found = Vec::new();
    for doc in docs {
        let spec = match doc["kind"].as_str() {
            Some("KubeadmControlPlane") => &doc["spec"]["kubeadmConfigSpec"],
            Some("KubeadmConfigTemplate") => &doc["spec"]["template"]["spec"],
            _ => continue,
        };
        for phase in ["initConfiguration", "joinConfiguration"] {
            for a in spec[phase]["nodeRegistration"]["kubeletExtraArgs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|a| a["name"] == arg)
            {
                found.push(a["value"].as_str().unwrap_or_default().to_owned());
            }
        }
    }
    found
}

/// What the controller renders for a machine on node `pve2` in zone `east`.
fn seed_inputs<'a>(
    format: Format,
    user_data: &'a [u8],
    network: &'a NetworkData,
) -> SeedInputs<'a> {
    SeedInputs {
        hostname: "capmox-test-worker-x7k2p",
        instance_id: "6c3fa683-bef9-4425-b413-eaa45a9d6191",
        provider_id_injection: false,
        kubernetes_version: Some("v1.34.8"),
        node: "pve2",
        zone: "east",
        network,
        format,
        user_data,
    }
}

/// `/etc/proxmox-env` as the controller merges it into an Ignition config.
fn proxmox_env() -> String {
    let network = NetworkData::default();
    let seed = render::seed(&seed_inputs(
        Format::Ignition,
        br#"{"ignition":{"version":"2.3.0"}}"#,
        &network,
    ))
    .expect("seed");
    let config: Value = serde_json::from_slice(&seed.user_data).expect("Ignition JSON");
    let source = config["storage"]["files"]
        .as_array()
        .expect("files")
        .iter()
        .find(|f| f["path"] == "/etc/proxmox-env")
        .and_then(|f| f["contents"]["source"].as_str())
        .expect("/etc/proxmox-env");
    percent_decode(source.strip_prefix("data:,").expect("a data URL"))
}

fn percent_decode(s: &str) -> String {
    let mut out = Vec::new();
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hex: String = bytes.by_ref().take(2).map(char::from).collect();
            out.push(u8::from_str_radix(&hex, 16).expect("percent escape"));
        } else {
            out.push(b);
        }
    }
    String::from_utf8(out).expect("UTF-8")
}

#[test]
fn flatcar_flavor_bootstraps_with_ignition_and_the_controllers_facts() {
    let docs = rendered_flavor("cluster-template-flatcar.yaml");
    // The escaped variables reach the objects as `${…}`, for envsubst on the node, and name
    // exactly the facts the controller writes into /etc/proxmox-env.
    assert_eq!(
        kubelet_args(&docs, "provider-id"),
        ["${COREOS_CUSTOM_PROVIDER_ID}"; 3]
    );
    let kcp = &the(&docs, "KubeadmControlPlane", "capmox-test-control-plane")["spec"]["kubeadmConfigSpec"];
    let worker =
        &the(&docs, "KubeadmConfigTemplate", "capmox-test-worker")["spec"]["template"]["spec"];
    for spec in [kcp, worker] {
        assert_eq!(spec["format"], "ignition");
        assert_eq!(
            spec["joinConfiguration"]["nodeRegistration"]["name"],
            "${COREOS_CUSTOM_HOSTNAME}"
        );
        assert!(
            spec["preKubeadmCommands"][0]
                .as_str()
                .is_some_and(|c| c.starts_with("envsubst < /etc/kubeadm.yml")),
            "the kubeadm configuration is filled before kubeadm runs"
        );
        assert!(
            spec["ignition"]["containerLinuxConfig"]["additionalConfig"]
                .as_str()
                .is_some_and(|c| c.contains("EnvironmentFile=/etc/proxmox-env")),
            "kubeadm.service gets the facts"
        );
    }
    let env = proxmox_env();
    for variable in ["COREOS_CUSTOM_PROVIDER_ID", "COREOS_CUSTOM_HOSTNAME"] {
        assert!(
            env.lines().any(|l| l.starts_with(&format!("{variable}="))),
            "the controller writes {variable}: {env}"
        );
    }
    for template in docs
        .iter()
        .filter(|d| d["kind"] == "ProxmoxMachineTemplate")
    {
        assert_eq!(
            template["spec"]["template"]["spec"]["checks"],
            serde_json::json!({"skipQemuGuestAgent": false, "skipCloudInitStatus": true})
        );
    }
}

#[test]
fn proxmox_labels_flavor_reads_keys_the_controller_writes() {
    let docs = rendered_flavor("cluster-template-proxmox-labels.yaml");
    let labels = kubelet_args(&docs, "node-labels");
    assert_eq!(labels.len(), 3, "control plane init and join, workers");
    let meta: Value = serde_saphyr::from_str(
        &render::meta_data(&seed_inputs(
            Format::CloudConfig,
            b"",
            &NetworkData::default(),
        ))
        .expect("meta-data"),
    )
    .expect("meta-data is YAML");
    for value in &labels {
        for label in value.split(',') {
            let key = label
                .split_once("{{ ds.meta_data.")
                .and_then(|(_, rest)| rest.split_once(" }}"))
                .map(|(key, _)| key)
                .unwrap_or_else(|| panic!("{label} reads meta-data"));
            assert!(
                meta[key].as_str().is_some_and(|v| !v.is_empty()),
                "the meta-data has no key {key}: {meta}"
            );
        }
    }
}

#[test]
fn cilium_load_balancer_flavor_routes_services_through_the_vrf() {
    let docs = rendered_flavor("cluster-template-cilium-load-balancer.yaml");
    let lb = &the(&docs, "ProxmoxMachineTemplate", "capmox-test-load-balancer")["spec"]["template"]
        ["spec"]["network"];
    let devices: Vec<&str> = lb["networkDevices"]
        .as_array()
        .expect("devices")
        .iter()
        .filter_map(|d| d["name"].as_str())
        .collect();
    assert_eq!(devices, ["net0", "net1", "net2"]);
    let vrf = &lb["vrfs"][0];
    assert_eq!(vrf["interfaces"], serde_json::json!(["net2"]));
    assert_eq!(
        vrf["routingPolicy"],
        serde_json::json!([{"from": "198.51.100.0/24"}, {"from": "2001:db8:100::/120"}])
    );
    for pool in docs.iter().filter(|d| d["kind"] == "GlobalInClusterIPPool") {
        assert!(
            pool["spec"].get("gateway").is_none(),
            "no default route through the service networks"
        );
    }
    let lb_bootstrap = &the(&docs, "KubeadmConfigTemplate", "capmox-test-load-balancer")["spec"]["template"]
        ["spec"];
    assert_eq!(
        lb_bootstrap["joinConfiguration"]["nodeRegistration"]["taints"][0]["key"],
        "node-role.kubernetes.io/load-balancer"
    );
    let config = the(&docs, "ConfigMap", "capmox-test-metallb")["data"]["metallb-config.yaml"]
        .as_str()
        .expect("MetalLB configuration");
    assert!(
        !config.contains("v4-secret") && !config.contains("v6-secret"),
        "BGP passwords stay out of ConfigMaps"
    );
}

/// The first address, prefix and gateway of a pool spec (`addresses`, `prefix`, `gateway`).
fn first_address(spec: &Value, default: bool) -> IpConfig {
    let first = spec["addresses"][0].as_str().expect("addresses");
    let first = first.split(['-', '/']).next().unwrap_or(first);
    IpConfig {
        address: first.parse().expect("an address"),
        prefix: u8::try_from(spec["prefix"].as_u64().expect("prefix")).expect("prefix"),
        gateway: spec["gateway"]
            .as_str()
            .map(|g| g.parse().expect("gateway")),
        metric: None,
        default,
    }
}

/// The guest network of a load-balancer VM renders with the controller's own renderers: the
/// service networks add no default route, the VRF carries the Service ranges' rules.
#[test]
fn load_balancer_guest_network_renders() {
    let docs = rendered_flavor("cluster-template-cilium-load-balancer.yaml");
    let cluster = &the(&docs, "ProxmoxCluster", "capmox-test")["spec"];
    let network: NetworkSpec = serde_json::from_value(
        the(&docs, "ProxmoxMachineTemplate", "capmox-test-load-balancer")["spec"]["template"]
            ["spec"]["network"]
            .clone(),
    )
    .expect("a v1alpha2 network");
    let inputs = network
        .network_devices
        .iter()
        .enumerate()
        .map(|(i, device)| {
            let addresses = if device.name == "net0" {
                ["ipv4Config", "ipv6Config"]
                    .iter()
                    .map(|c| first_address(&cluster[c], true))
                    .collect()
            } else {
                device
                    .ip_pool_ref
                    .iter()
                    .map(|r| first_address(&the(&docs, &r.kind, &r.name)["spec"], false))
                    .collect()
            };
            DeviceInput {
                device,
                mac: format!("bc:24:11:00:00:0{i}"),
                addresses,
                dns: vec!["8.8.8.8".into()],
            }
        })
        .collect();
    let data = build(inputs, &network.vrfs).expect("a valid guest network");
    let netplan = netplan::render(&data).expect("netplan");
    let document: Value = serde_saphyr::from_str(&netplan).expect("YAML");
    let with_gateway: Vec<&str> = document["network"]["ethernets"]
        .as_object()
        .expect("ethernets")
        .iter()
        .filter(|(_, e)| {
            e["routes"]
                .as_array()
                .is_some_and(|r| r.iter().any(|r| r.get("via").is_some()))
        })
        .map(|(name, _)| name.as_str())
        .collect();
    assert_eq!(
        with_gateway,
        ["eth0"],
        "default routes through net0's gateways only:\n{netplan}"
    );
    let vrf = &document["network"]["vrfs"]["vrf-ext"];
    let sources: Vec<&Value> = vrf["routing-policy"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| &r["from"])
        .collect();
    assert!(
        vrf["table"] == 500
            && sources.contains(&&Value::from("198.51.100.0/24"))
            && sources.contains(&&Value::from("2001:db8:100::/120")),
        "{netplan}"
    );
    let units = render::ignition::networkd_units(&data).expect("renders");
    assert!(
        units
            .iter()
            .any(|(name, unit)| name.ends_with("-eth2.network")
                && unit.to_string().contains("VRF=vrf-ext")),
        "{units:?}"
    );
    // And netplan, as the guest runs it, turns it into the same VRF in networkd.
    let root = tempfile::tempdir().expect("tempdir");
    let generated = generate(&netplan, root.path());
    let eth2 = &generated["10-netplan-eth2.network"];
    assert_eq!(values(eth2, "Network", "VRF"), ["vrf-ext"], "{eth2:?}");
    assert!(generated.contains_key("10-netplan-vrf-ext.netdev"));
}

/// Every flavor's machine networks, as the controller would render them with the first
/// address of each pool, come out of netplan (the guest's reader) with those addresses on
/// the devices they belong to.
#[test]
fn every_flavors_guest_network_passes_netplan() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut checked = 0;
    for (name, text) in templates() {
        let docs = super::templates::render_with_classes(&name, &text);
        let cluster = docs
            .iter()
            .find_map(|d| match d["kind"].as_str() {
                Some("ProxmoxCluster") => Some(&d["spec"]),
                Some("ProxmoxClusterTemplate") => Some(&d["spec"]["template"]["spec"]),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{name}: no ProxmoxCluster"));
        let dns: Vec<String> = cluster["dnsServers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d.as_str().map(str::to_owned))
            .collect();
        for template in docs
            .iter()
            .filter(|d| d["kind"] == "ProxmoxMachineTemplate")
        {
            let what = format!("{name}: {}", template["metadata"]["name"]);
            let network: NetworkSpec =
                serde_json::from_value(template["spec"]["template"]["spec"]["network"].clone())
                    .unwrap_or_default();
            if network.network_devices.is_empty() {
                continue;
            }
            let inputs: Vec<DeviceInput<'_>> = network
                .network_devices
                .iter()
                .enumerate()
                .map(|(i, device)| {
                    let mut addresses: Vec<IpConfig> = Vec::new();
                    if device.name == "net0" {
                        for config in ["ipv4Config", "ipv6Config"] {
                            if cluster[config].is_object() {
                                addresses.push(IpConfig {
                                    metric: cluster[config]["metric"].as_i64(),
                                    ..first_address(&cluster[config], true)
                                });
                            }
                        }
                    }
                    for pool in &device.ip_pool_ref {
                        if let Some(pool) = docs
                            .iter()
                            .find(|d| d["kind"] == pool.kind && d["metadata"]["name"] == pool.name)
                        {
                            // The controller ranks a pool's gateway by its metric annotation.
                            let annotations = &pool["metadata"]["annotations"];
                            let metric = annotations["ipam.capmox.cluster.x-k8s.io/gateway-metric"]
                                .as_str()
                                .or(annotations["metric"].as_str())
                                .map(|m| m.parse().expect("a metric"));
                            addresses.push(IpConfig {
                                metric,
                                ..first_address(&pool["spec"], false)
                            });
                        }
                    }
                    DeviceInput {
                        device,
                        mac: format!("bc:24:11:00:01:{i:02x}"),
                        addresses,
                        dns: dns.clone(),
                    }
                })
                .collect();
            let expected: Vec<(String, Vec<String>)> = inputs
                .iter()
                .map(|i| {
                    let mut cidrs: Vec<String> = i.addresses.iter().map(IpConfig::cidr).collect();
                    cidrs.sort();
                    (i.device.name.replace("net", "eth"), cidrs)
                })
                .collect();
            let data = build(inputs, &network.vrfs)
                .unwrap_or_else(|e| panic!("{what}: the renderer refused it: {e}"));
            let netplan = netplan::render(&data).expect("netplan");
            let dir = root.path().join(checked.to_string());
            let units = generate(&netplan, &dir);
            for (eth, cidrs) in expected {
                let unit = &units[&format!("10-netplan-{eth}.network")];
                let mut generated = values(unit, "Network", "Address");
                generated.sort();
                assert_eq!(generated, cidrs, "{what}: {eth}\n{netplan}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 20, "{checked} machine networks");
}
