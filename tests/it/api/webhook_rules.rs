//! Upstream's validating webhook rules on the hub, with its defects fixed:
//! the control-plane endpoint (and the new VIP pool), network device names,
//! defaults, MTUs, routes and policies, VRFs, immutable tags and templates.

use capmox_apiserver::api::resource::{
    ClusterKind, ClusterTemplateKind, MachineKind, MachineTemplateKind,
};
use serde_json::{Value, json};

use super::support::Edit::{Remove, Set};
use super::support::{
    case, cluster_template_v2, cluster_v2, create, edited, machine_template_v2, machine_v2,
    run_create_cases, run_update_cases, update, warnings,
};

fn ipam_pool() -> Value {
    pool("vip")
}

#[test]
fn control_plane_endpoint() {
    run_create_cases(vec![
        case("an IP outside the pools", cluster_v2, vec![], vec![]),
        case(
            "an FQDN",
            cluster_v2,
            vec![Set(
                "/spec/controlPlaneEndpoint/host",
                json!("api.example.com"),
            )],
            vec![],
        ),
        case(
            "a short host name",
            cluster_v2,
            vec![Set("/spec/controlPlaneEndpoint/host", json!("apiserver"))],
            vec![],
        ),
        case(
            "neither an IP nor an FQDN",
            cluster_v2,
            vec![Set("/spec/controlPlaneEndpoint/host", json!("api_server!"))],
            vec![
                r#"spec.controlPlaneEndpoint.host: Invalid value: "api_server!": provided endpoint address is not a valid IP or FQDN"#,
            ],
        ),
        case(
            "an endpoint inside the IPv4 pool",
            cluster_v2,
            vec![Set("/spec/controlPlaneEndpoint/host", json!("10.10.10.12"))],
            vec![
                r#"spec.ipv4Config.addresses: Invalid value: ["10.10.10.10-10.10.10.15"]: addresses may not contain the endpoint IP"#,
            ],
        ),
        case(
            "an endpoint inside a CIDR of the pool",
            cluster_v2,
            vec![
                Set(
                    "/spec/ipv4Config/addresses",
                    json!(["10.10.10.0/28", "10.10.20.5"]),
                ),
                Set("/spec/controlPlaneEndpoint/host", json!("10.10.10.9")),
            ],
            vec![
                r#"spec.ipv4Config.addresses: Invalid value: ["10.10.10.0/28","10.10.20.5"]: addresses may not contain the endpoint IP"#,
            ],
        ),
        case(
            "pool entries that are not addresses",
            cluster_v2,
            vec![Set("/spec/ipv4Config/addresses", json!(["10.10.10.300"]))],
            vec![
                r#"spec.ipv4Config.addresses: Invalid value: ["10.10.10.300"]: provided addresses are not valid IP addresses, ranges or CIDRs"#,
            ],
        ),
        case(
            "an IPv6 endpoint inside the IPv6 pool",
            cluster_v2,
            vec![
                Set(
                    "/spec/ipv6Config",
                    json!({ "addresses": ["2001:db8::10-2001:db8::20"], "prefix": 64, "gateway": "2001:db8::1" }),
                ),
                Set("/spec/controlPlaneEndpoint/host", json!("2001:db8::15")),
            ],
            vec![
                r#"spec.ipv6Config.addresses: Invalid value: ["2001:db8::10-2001:db8::20"]: addresses may not contain the endpoint IP"#,
            ],
        ),
        case(
            "an IPv6 endpoint outside the pools",
            cluster_v2,
            vec![Set(
                "/spec/controlPlaneEndpoint/host",
                json!("2001:db8::15"),
            )],
            vec![],
        ),
        case(
            "an endpoint inside a zone's pool",
            cluster_v2,
            vec![Set(
                "/spec/zoneConfig",
                json!([{ "zone": "b", "dnsServers": ["1.1.1.1"], "ipv4Config": { "addresses": ["10.10.10.0/24"], "prefix": 24, "gateway": "10.10.10.1" } }]),
            )],
            vec![
                r#"spec.zoneConfig[0].ipv4Config.addresses: Invalid value: ["10.10.10.0/24"]: addresses may not contain the endpoint IP"#,
            ],
        ),
        case(
            "an externally managed control plane is not checked",
            cluster_v2,
            vec![
                Set("/spec/externalManagedControlPlane", json!(true)),
                Set("/spec/controlPlaneEndpoint/host", json!("10.10.10.12")),
            ],
            vec![],
        ),
        case(
            "an externally managed control plane without an endpoint yet",
            cluster_v2,
            vec![
                Set("/spec/externalManagedControlPlane", json!(true)),
                Remove("/spec/controlPlaneEndpoint"),
            ],
            vec![],
        ),
        case(
            "no endpoint and no VIP pool",
            cluster_v2,
            vec![Remove("/spec/controlPlaneEndpoint")],
            vec![
                r#"spec.controlPlaneEndpoint.host: Invalid value: "": provided endpoint address is not a valid IP or FQDN"#,
            ],
        ),
        case(
            "no endpoint, claimed from the VIP pool",
            cluster_v2,
            vec![
                Remove("/spec/controlPlaneEndpoint"),
                Set("/spec/controlPlaneEndpointIPPoolRef", ipam_pool()),
            ],
            vec![],
        ),
        case(
            "a claimed endpoint must still lie outside the node pools",
            cluster_v2,
            vec![
                Set("/spec/controlPlaneEndpointIPPoolRef", ipam_pool()),
                Set("/spec/controlPlaneEndpoint/host", json!("10.10.10.11")),
            ],
            vec![
                r#"spec.ipv4Config.addresses: Invalid value: ["10.10.10.10-10.10.10.15"]: addresses may not contain the endpoint IP"#,
            ],
        ),
    ]);
}

#[test]
fn cluster_warnings() {
    let bad = edited(
        cluster_v2(),
        &[Set("/spec/controlPlaneEndpoint/host", json!("10.10.10.12"))],
    );
    assert_eq!(
        warnings(&create::<ClusterKind>(bad.clone())),
        ["cannot create proxmox cluster demo"]
    );
    assert_eq!(
        warnings(&update::<ClusterKind>(bad, cluster_v2())),
        ["cannot update proxmox cluster demo"]
    );
    assert!(warnings(&create::<ClusterKind>(cluster_v2())).is_empty());
}

#[test]
fn cluster_updates_check_the_endpoint() {
    run_update_cases(vec![
        case(
            "another DNS server",
            cluster_v2,
            vec![Set("/spec/dnsServers", json!(["9.9.9.9"]))],
            vec![],
        ),
        case(
            "an endpoint moved into the pool",
            cluster_v2,
            vec![Set("/spec/controlPlaneEndpoint/host", json!("10.10.10.10"))],
            vec![
                r#"spec.ipv4Config.addresses: Invalid value: ["10.10.10.10-10.10.10.15"]: addresses may not contain the endpoint IP"#,
            ],
        ),
    ]);
}

#[test]
fn cluster_template_rules() {
    run_create_cases(vec![case(
        "a template's endpoint lies outside its pools",
        cluster_template_v2,
        vec![Set(
            "/spec/template/spec/controlPlaneEndpoint/host",
            json!("10.10.10.14"),
        )],
        vec![
            r#"spec.template.spec.ipv4Config.addresses: Invalid value: ["10.10.10.10-10.10.10.15"]: addresses may not contain the endpoint IP"#,
        ],
    )]);
    let inside = edited(
        cluster_template_v2(),
        &[Set(
            "/spec/template/spec/controlPlaneEndpoint/host",
            json!("10.10.10.14"),
        )],
    );
    assert_eq!(
        warnings(&update::<ClusterTemplateKind>(
            inside,
            cluster_template_v2()
        )),
        ["cannot update proxmox cluster template demo"]
    );
}

fn two_devices() -> Value {
    edited(
        machine_v2(),
        &[Set(
            "/spec/network/networkDevices",
            json!([
                { "name": "net0", "bridge": "vmbr0" },
                { "name": "net1", "bridge": "vmbr1" }
            ]),
        )],
    )
}

#[test]
fn device_names() {
    let devices = "/spec/network/networkDevices";
    let eleven: Vec<Value> = (0..11)
        .map(|i| json!({ "name": format!("net{i}"), "bridge": "vmbr0" }))
        .collect();
    run_create_cases(vec![
        case(
            "net0 and net2 leave a gap",
            two_devices,
            vec![Set("/spec/network/networkDevices/1/name", json!("net2"))],
            vec![
                r#"spec.network.networkDevices[1].name: Invalid value: "net2": Non-consecutive proxmox interface name"#,
            ],
        ),
        case(
            "the gap is reported at the device's own index",
            two_devices,
            vec![Set(
                devices,
                json!([{ "name": "net2", "bridge": "vmbr1" }, { "name": "net0", "bridge": "vmbr0" }]),
            )],
            vec![
                r#"spec.network.networkDevices[0].name: Invalid value: "net2": Non-consecutive proxmox interface name"#,
            ],
        ),
        case(
            "without net0",
            machine_v2,
            vec![Set("/spec/network/networkDevices/0/name", json!("net1"))],
            vec![
                r#"spec.network.networkDevices[0].name: Invalid value: "net1": Non-consecutive proxmox interface name"#,
            ],
        ),
        case(
            "any order of net0..netN",
            two_devices,
            vec![Set(
                devices,
                json!([{ "name": "net1", "bridge": "vmbr1" }, { "name": "net0", "bridge": "vmbr0" }]),
            )],
            vec![],
        ),
        case(
            "eleven devices (net10 sorts after net9)",
            machine_v2,
            vec![Set(devices, Value::Array(eleven))],
            vec![],
        ),
        case(
            "templates get the network rules too",
            machine_template_v2,
            vec![Set(
                "/spec/template/spec/network/networkDevices/0/name",
                json!("net3"),
            )],
            vec![
                r#"spec.template.spec.network.networkDevices[0].name: Invalid value: "net3": Non-consecutive proxmox interface name"#,
            ],
        ),
    ]);
}

#[test]
fn default_pools_mtus_routes_and_vrfs() {
    run_create_cases(vec![
        case(
            "two devices with the default IPv4 pool",
            two_devices,
            vec![
                Set("/spec/network/networkDevices/0/defaultIPv4", json!(true)),
                Set("/spec/network/networkDevices/1/defaultIPv4", json!(true)),
            ],
            vec![
                r#"spec.network.networkDevices[1]: Invalid value: {"bridge":"vmbr1","defaultIPv4":true,"model":"virtio","name":"net1"}: More than one default IPv4/IPv6 interface in NetworkDevices"#,
            ],
        ),
        case(
            "two devices with the default IPv6 pool",
            two_devices,
            vec![
                Set("/spec/network/networkDevices/0/defaultIPv6", json!(true)),
                Set("/spec/network/networkDevices/1/defaultIPv6", json!(true)),
            ],
            vec![
                r#"spec.network.networkDevices[1]: Invalid value: {"bridge":"vmbr1","defaultIPv6":true,"model":"virtio","name":"net1"}: More than one default IPv4/IPv6 interface in NetworkDevices"#,
            ],
        ),
        case(
            "default pools on different devices",
            two_devices,
            vec![
                Set("/spec/network/networkDevices/0/defaultIPv4", json!(true)),
                Set("/spec/network/networkDevices/1/defaultIPv6", json!(true)),
            ],
            vec![],
        ),
        case(
            "mtu below 1280",
            machine_v2,
            vec![Set("/spec/network/networkDevices/0/mtu", json!(1000))],
            vec![
                "spec.network.networkDevices[0].mtu: Invalid value: 1000: mtu must be at least 1280 or 1, but was 1000",
            ],
        ),
        case(
            "mtu 1280",
            machine_v2,
            vec![Set("/spec/network/networkDevices/0/mtu", json!(1280))],
            vec![],
        ),
        case(
            "linkMtu below 1280",
            machine_v2,
            vec![Set("/spec/network/networkDevices/0/linkMtu", json!(1000))],
            vec![
                "spec.network.networkDevices[0].linkMtu: Invalid value: 1000: mtu must be at least 1280, but was 1000",
            ],
        ),
        case(
            "linkMtu 1500",
            machine_v2,
            vec![Set("/spec/network/networkDevices/0/linkMtu", json!(1500))],
            vec![],
        ),
        case(
            "a routing policy needs a table",
            machine_v2,
            vec![Set(
                "/spec/network/networkDevices/0/routingPolicy",
                json!([{ "to": "10.0.0.0/8" }]),
            )],
            vec![
                r#"spec.network.networkDevices[0].routingPolicy: Invalid value: {"to":"10.0.0.0/8"}: routing policy [0] requires a table"#,
            ],
        ),
        case(
            "a policy with placeholders only needs is6",
            machine_v2,
            vec![Set(
                "/spec/network/networkDevices/0/routingPolicy",
                json!([{ "from": "all", "table": 100 }]),
            )],
            vec![
                r#"spec.network.networkDevices[0].routingPolicy: Invalid value: {"from":"all","table":100}: routing policy [0]: is6 must be set when 'to'/'from' is a placeholder and neither provides an address family"#,
            ],
        ),
        case(
            "a placeholder policy whose peer gives the family",
            machine_v2,
            vec![Set(
                "/spec/network/networkDevices/0/routingPolicy",
                json!([{ "to": "all", "from": "192.168.1.0/24", "table": 100 }]),
            )],
            vec![],
        ),
        case(
            "a placeholder route without via needs is6",
            machine_v2,
            vec![Set(
                "/spec/network/networkDevices/0/routes",
                json!([{ "to": "default", "table": 100 }]),
            )],
            vec![
                r#"spec.network.networkDevices[0].routes: Invalid value: {"table":100,"to":"default"}: route [0]: is6 must be set when 'to' is a placeholder and 'via' is unset"#,
            ],
        ),
        case(
            "a placeholder route with via",
            machine_v2,
            vec![Set(
                "/spec/network/networkDevices/0/routes",
                json!([{ "to": "default", "via": "2001:db8::1" }]),
            )],
            vec![],
        ),
        case(
            "a placeholder route with is6",
            machine_v2,
            vec![Set(
                "/spec/network/networkDevices/0/routes",
                json!([{ "to": "default", "is6": true }]),
            )],
            vec![],
        ),
        case(
            "a VRF policy on another table",
            machine_v2,
            vec![Set(
                "/spec/network/vrfs",
                json!([{ "name": "vrf-green", "table": 665, "routingPolicy": [{ "table": 667 }] }]),
            )],
            vec![
                r#"spec.network.vrfs[0].routingPolicy: Invalid value: {"table":667}: VRF vrf-green: device/rule routing table mismatch 665 != 667"#,
            ],
        ),
        case(
            "a VRF policy on the VRF's table",
            machine_v2,
            vec![Set(
                "/spec/network/vrfs",
                json!([{ "name": "vrf-green", "table": 665, "routingPolicy": [{ "table": 665 }] }]),
            )],
            vec![],
        ),
        case(
            "a VRF placeholder policy needs is6",
            machine_v2,
            vec![Set(
                "/spec/network/vrfs",
                json!([{ "name": "vrf-green", "table": 665, "routingPolicy": [{ "to": "default" }] }]),
            )],
            vec![
                r#"spec.network.vrfs[0].routingPolicy: Invalid value: {"to":"default"}: VRF vrf-green: is6 must be set when 'to'/'from' is a placeholder and neither provides an address family"#,
            ],
        ),
        case(
            "a VRF placeholder route needs is6",
            machine_v2,
            vec![Set(
                "/spec/network/vrfs",
                json!([{ "name": "vrf-green", "table": 665, "routes": [{ "to": "all", "via": "" }] }]),
            )],
            vec![
                r#"spec.network.vrfs[0].routes: Invalid value: {"to":"all","via":""}: VRF vrf-green: route [0]: is6 must be set when 'to' is a placeholder and 'via' is unset"#,
            ],
        ),
        case(
            "DHCP devices and a bridge-only device",
            two_devices,
            vec![
                Set("/spec/network/networkDevices/0/dhcp4", json!(true)),
                Set("/spec/network/networkDevices/0/dhcp6", json!(true)),
            ],
            vec![],
        ),
    ]);
}

#[test]
fn tags_are_immutable() {
    let with_tags = || edited(machine_v2(), &[Set("/spec/tags", json!(["foo_bar"]))]);
    let changed = edited(
        with_tags(),
        &[Set("/spec/tags", json!(["foobar", "barfoo"]))],
    );
    let result = update::<MachineKind>(changed, with_tags());
    assert_eq!(
        super::support::messages(&result),
        [r#"spec.tags: Invalid value: ["foobar","barfoo"]: tags are immutable"#]
    );
    assert_eq!(
        warnings(&result),
        ["cannot update proxmox machine demo-cp-0"]
    );
    let added = edited(machine_v2(), &[Set("/spec/tags", json!(["new"]))]);
    assert_eq!(
        super::support::messages(&update::<MachineKind>(added, machine_v2())),
        [r#"spec.tags: Invalid value: ["new"]: tags are immutable"#]
    );
    let same = edited(with_tags(), &[Set("/spec/numCores", json!(8))]);
    assert!(update::<MachineKind>(same, with_tags()).is_ok());
}

#[test]
fn machine_template_rules() {
    run_create_cases(vec![case(
        "a template with a providerID",
        machine_template_v2,
        vec![Set(
            "/spec/template/spec/providerID",
            json!("proxmox://6c3fa683-bef9-4425-b413-eaa45a9d6191"),
        )],
        vec!["spec.template.spec.providerID: Forbidden: cannot be set in templates"],
    )]);
    run_update_cases(vec![
        case(
            "a changed template spec",
            machine_template_v2,
            vec![Set("/spec/template/spec/numCores", json!(8))],
            vec!["spec: Forbidden: ProxmoxMachineTemplate is immutable"],
        ),
        case(
            "changed labels on the template object",
            machine_template_v2,
            vec![Set("/metadata/labels", json!({ "team": "a" }))],
            vec![],
        ),
    ]);
}

fn pool(name: &str) -> Value {
    json!({ "apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": name })
}

/// A device with the cluster's default pools and a pool of its own gets an address from each
/// (upstream's semantics, kept): the request is accepted with a warning that says so.
#[test]
fn a_device_on_the_clusters_pools_and_its_own_is_warned() {
    let with = |device: Value| {
        edited(
            machine_v2(),
            &[Set("/spec/network/networkDevices", json!([device]))],
        )
    };
    // The defaulting webhook gives net0 both defaults: every pool shares a family with one.
    let defaulted = create::<MachineKind>(with(
        json!({ "name": "net0", "bridge": "vmbr0", "ipPoolRef": [pool("extra-v4")] }),
    ));
    assert!(defaulted.is_ok());
    assert_eq!(
        warnings(&defaulted),
        [
            "spec.network.networkDevices[0]: net0 takes addresses from the cluster's IPv4 and IPv6 \
             pools (defaultIPv4, defaultIPv6) and from extra-v4 (ipPoolRef), so it gets a second \
             address of each referenced pool's family; set defaultIPv4 or defaultIPv6 to false to \
             take only the referenced pool's"
        ]
    );
    let one = create::<MachineKind>(with(json!({
        "name": "net0", "bridge": "vmbr0", "defaultIPv4": true, "defaultIPv6": false,
        "ipPoolRef": [pool("a"), pool("b")]
    })));
    assert_eq!(
        warnings(&one),
        [
            "spec.network.networkDevices[0]: net0 takes an address from the cluster's IPv4 pool \
             (defaultIPv4) and from a, b (ipPoolRef): if a referenced pool is IPv4 too, it gets two \
             IPv4 addresses; set defaultIPv4 to false to take only the referenced pool's"
        ]
    );
    // Only its own pool, or only the cluster's: nothing to warn about.
    for device in [
        json!({ "name": "net0", "bridge": "vmbr0", "defaultIPv4": false, "defaultIPv6": false,
                "ipPoolRef": [pool("a")] }),
        json!({ "name": "net0", "bridge": "vmbr0" }),
    ] {
        let quiet = create::<MachineKind>(with(device.clone()));
        assert_eq!(warnings(&quiet), Vec::<String>::new(), "{device}");
    }
    // Templates and updates say it too.
    let template = create::<MachineTemplateKind>(edited(
        machine_template_v2(),
        &[Set(
            "/spec/template/spec/network/networkDevices",
            json!([{ "name": "net0", "bridge": "vmbr0", "ipPoolRef": [pool("x")] }]),
        )],
    ));
    assert!(
        warnings(&template)
            .first()
            .is_some_and(|w| w.starts_with("spec.template.spec.network.networkDevices[0]: net0")),
        "{:?}",
        warnings(&template)
    );
    let old = machine_v2();
    let new = with(json!({ "name": "net0", "bridge": "vmbr0", "ipPoolRef": [pool("x")] }));
    assert_eq!(warnings(&update::<MachineKind>(new, old)).len(), 1);
}

#[test]
fn failure_domains_partition_the_allowed_nodes() {
    let racks = || {
        json!([
            {"name": "rack-a", "nodes": ["pve1", "pve2"]},
            {"name": "rack-b", "nodes": ["pve3"], "controlPlane": false}
        ])
    };
    run_create_cases(vec![
        case(
            "two racks",
            cluster_v2,
            vec![Set("/spec/failureDomains", racks())],
            vec![],
        ),
        case(
            "a node in two racks, one outside allowedNodes",
            cluster_v2,
            vec![
                Set("/spec/failureDomains", racks()),
                Set("/spec/failureDomains/1/nodes/1", json!("pve2")),
                Set("/spec/allowedNodes", json!(["pve1", "pve2"])),
            ],
            vec![
                r#"spec.failureDomains[1].nodes[0]: Invalid value: "pve3": not one of the cluster's allowedNodes"#,
                r#"spec.failureDomains[1].nodes[1]: Invalid value: "pve2": pve2 is in failure domain rack-a already"#,
            ],
        ),
        case(
            "one name twice, a rack without nodes",
            cluster_v2,
            vec![
                Set("/spec/failureDomains", racks()),
                Set("/spec/failureDomains/1/name", json!("rack-a")),
                Set("/spec/failureDomains/1/nodes", json!([])),
            ],
            vec![
                r#"spec.failureDomains[1].nodes: Invalid value: 0: spec.failureDomains[1].nodes in body should have at least 1 items"#,
                r#"spec.failureDomains[1]: Duplicate value: {"name":"rack-a"}"#,
            ],
        ),
    ]);
}
