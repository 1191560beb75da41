//! The CEL (`x-kubernetes-validations`) rules of both versions: one
//! accepted and one refused case per rule, with kube-apiserver's paths and
//! messages, evaluation errors for unset fields, and transition rules.

use serde_json::{Value, json};

use super::support::Edit::{Remove, Set};
use super::support::{
    NOT_CHECKED, case, cluster_template_v2, cluster_v1, cluster_v2, machine_template_v1,
    machine_template_v2, machine_v1, machine_v2, run_create_cases, run_update_cases,
};

fn pool(kind: &str, group: Option<&str>) -> Value {
    let mut r = json!({ "kind": kind, "name": "pool" });
    if let Some(group) = group {
        r["apiGroup"] = json!(group);
    }
    r
}

#[test]
fn cluster_rules() {
    run_create_cases(vec![
        case(
            "no ip config: the machines take their addresses by DHCP or from their own pools",
            cluster_v2,
            vec![Remove("/spec/ipv4Config")],
            vec![],
        ),
        case(
            "ipv6Config alone is enough",
            cluster_v2,
            vec![
                Remove("/spec/ipv4Config"),
                Set(
                    "/spec/ipv6Config",
                    json!({ "addresses": ["2001:db8::10-2001:db8::20"], "prefix": 64, "gateway": "2001:db8::1" }),
                ),
            ],
            vec![],
        ),
        case(
            "ipv4Config addresses must not be empty",
            cluster_v2,
            vec![Set("/spec/ipv4Config/addresses", json!([]))],
            vec![
                r#"spec.ipv4Config: Invalid value: "object": IPv4Config addresses must be provided"#,
            ],
        ),
        case(
            "ipv6Config addresses must not be empty",
            cluster_v2,
            vec![Set(
                "/spec/ipv6Config",
                json!({ "addresses": [], "prefix": 64, "gateway": "2001:db8::1" }),
            )],
            vec![
                r#"spec.ipv6Config: Invalid value: "object": IPv6Config addresses must be provided"#,
            ],
        ),
        case(
            "zone ipv4Config addresses must not be empty",
            cluster_v2,
            vec![Set(
                "/spec/zoneConfig",
                json!([{ "zone": "a", "dnsServers": ["1.1.1.1"], "ipv4Config": { "addresses": [], "prefix": 24, "gateway": "10.1.0.1" } }]),
            )],
            vec![
                r#"spec.zoneConfig[0].ipv4Config: Invalid value: "object": IPv4Config addresses must be provided"#,
            ],
        ),
        case(
            "a zone with a pool",
            cluster_v2,
            vec![Set(
                "/spec/zoneConfig",
                json!([{ "zone": "a", "dnsServers": ["1.1.1.1"], "ipv4Config": { "addresses": ["10.1.0.10"], "prefix": 24, "gateway": "10.1.0.1" } }]),
            )],
            vec![],
        ),
        case(
            "the endpoint port must be set",
            cluster_v2,
            vec![Remove("/spec/controlPlaneEndpoint/port")],
            vec![
                r#"spec.controlPlaneEndpoint: Invalid value: "object": no such key: port evaluating rule: port must be within 1-65535"#,
            ],
        ),
        case(
            "the VIP pool must be an IPAM group",
            cluster_v2,
            vec![Set(
                "/spec/controlPlaneEndpointIPPoolRef",
                pool("InClusterIPPool", Some("example.com")),
            )],
            vec![
                r#"spec.controlPlaneEndpointIPPoolRef: Invalid value: "object": controlPlaneEndpointIPPoolRef allows only IPAM apiGroup ipam.cluster.x-k8s.io"#,
            ],
        ),
        case(
            "the VIP pool group is required by the rule",
            cluster_v2,
            vec![Set(
                "/spec/controlPlaneEndpointIPPoolRef",
                pool("InClusterIPPool", None),
            )],
            vec![
                r#"spec.controlPlaneEndpointIPPoolRef: Invalid value: "object": no such key: apiGroup evaluating rule: controlPlaneEndpointIPPoolRef allows only IPAM apiGroup ipam.cluster.x-k8s.io"#,
            ],
        ),
        case(
            "the VIP pool must be an in-cluster pool",
            cluster_v2,
            vec![Set(
                "/spec/controlPlaneEndpointIPPoolRef",
                pool("Secret", Some("ipam.cluster.x-k8s.io")),
            )],
            vec![
                r#"spec.controlPlaneEndpointIPPoolRef: Invalid value: "object": controlPlaneEndpointIPPoolRef allows either InClusterIPPool or GlobalInClusterIPPool"#,
            ],
        ),
        case(
            "a global VIP pool",
            cluster_v2,
            vec![Set(
                "/spec/controlPlaneEndpointIPPoolRef",
                pool("GlobalInClusterIPPool", Some("ipam.cluster.x-k8s.io")),
            )],
            vec![],
        ),
        case(
            "rules are skipped when the schema finds blocking errors",
            cluster_v2,
            vec![Remove("/spec/ipv4Config"), Remove("/spec/dnsServers")],
            vec!["spec.dnsServers: Required value", NOT_CHECKED],
        ),
        case(
            "v1alpha1: no ip config either, so v1alpha1 clients can write such clusters back",
            cluster_v1,
            vec![Remove("/spec/ipv4Config")],
            vec![],
        ),
        case(
            "v1alpha1: the endpoint port is within 1-65535",
            cluster_v1,
            vec![Set("/spec/controlPlaneEndpoint/port", json!(0))],
            vec![
                r#"spec.controlPlaneEndpoint: Invalid value: "object": port must be within 1-65535"#,
            ],
        ),
        case(
            "v1alpha1: addresses must not be empty",
            cluster_v1,
            vec![Set("/spec/ipv4Config/addresses", json!([]))],
            vec![
                r#"spec.ipv4Config: Invalid value: "object": IPv4Config addresses must be provided"#,
            ],
        ),
    ]);
}

#[test]
fn cluster_template_needs_no_ip_config() {
    // Upstream refuses it (its webhook); here a template, like a cluster, may leave the
    // addresses to DHCP or the machines' own pools.
    run_create_cases(vec![case(
        "template without ip config",
        cluster_template_v2,
        vec![Remove("/spec/template/spec/ipv4Config")],
        vec![],
    )]);
}

#[test]
fn machine_template_source_rules() {
    const EITHER: &str = r#"spec: Invalid value: "object": must define either a SourceNode with a TemplateID or a TemplateSelector"#;
    const MUST: &str =
        r#"spec: Invalid value: "object": Must specify either templateID or templateSelector"#;
    let selector = json!({ "matchTags": ["ubuntu"] });
    run_create_cases(vec![
        case("sourceNode with templateID", machine_v2, vec![], vec![]),
        case(
            "templateSelector alone",
            machine_v2,
            vec![
                Remove("/spec/sourceNode"),
                Remove("/spec/templateID"),
                Set("/spec/templateSelector", selector.clone()),
            ],
            vec![],
        ),
        case(
            "both a template and a selector",
            machine_v2,
            vec![Set("/spec/templateSelector", selector.clone())],
            vec![EITHER, EITHER],
        ),
        case(
            "neither a template nor a selector",
            machine_v2,
            vec![Remove("/spec/sourceNode"), Remove("/spec/templateID")],
            vec![EITHER, EITHER, MUST],
        ),
        case(
            "a templateID without its node",
            machine_v2,
            vec![Remove("/spec/sourceNode")],
            vec![EITHER, MUST],
        ),
        case(
            "a selector with a node",
            machine_v2,
            vec![
                Remove("/spec/templateID"),
                Set("/spec/templateSelector", selector.clone()),
            ],
            vec![EITHER],
        ),
        case(
            "format needs a full clone",
            machine_v2,
            vec![
                Set("/spec/full", json!(false)),
                Set("/spec/format", json!("qcow2")),
            ],
            vec![r#"spec: Invalid value: "object": Must set full=true when specifying format"#],
        ),
        case(
            "format with a full clone (full defaults to true)",
            machine_v2,
            vec![Set("/spec/format", json!("qcow2"))],
            vec![],
        ),
        case(
            "storage needs a full clone",
            machine_v2,
            vec![
                Set("/spec/full", json!(false)),
                Set("/spec/storage", json!("local-lvm")),
            ],
            vec![r#"spec: Invalid value: "object": Must set full=true when specifying storage"#],
        ),
        case(
            "a linked clone",
            machine_v2,
            vec![Set("/spec/full", json!(false))],
            vec![],
        ),
        case(
            "templates: format needs a full clone",
            machine_template_v2,
            vec![
                Set("/spec/template/spec/full", json!(false)),
                Set("/spec/template/spec/format", json!("raw")),
            ],
            vec![
                r#"spec.template.spec: Invalid value: "object": Must set full=true when specifying format"#,
            ],
        ),
        case(
            "templates may leave the template source to ClusterClass patches",
            machine_template_v2,
            vec![
                Remove("/spec/template/spec/sourceNode"),
                Remove("/spec/template/spec/templateID"),
            ],
            vec![],
        ),
        case(
            "v1alpha1: both a template and a selector",
            machine_v1,
            vec![Set("/spec/templateSelector", selector.clone())],
            vec![
                r#"spec: Invalid value: "object": must define either SourceNode with TemplateID, OR TemplateSelector"#,
                r#"spec: Invalid value: "object": must define either SourceNode with TemplateID, OR TemplateSelector."#,
            ],
        ),
        case(
            "v1alpha1: storage needs a full clone",
            machine_v1,
            vec![
                Set("/spec/full", json!(false)),
                Set("/spec/storage", json!("local")),
            ],
            vec![r#"spec: Invalid value: "object": Must set full=true when specifying storage"#],
        ),
        case(
            "v1alpha1 templates: format needs a full clone",
            machine_template_v1,
            vec![
                Set("/spec/template/spec/full", json!(false)),
                Set("/spec/template/spec/format", json!("raw")),
            ],
            vec![
                r#"spec.template.spec: Invalid value: "object": Must set full=true when specifying format"#,
            ],
        ),
    ]);
}

#[test]
fn machine_value_rules() {
    let device = |extra: Value| {
        let mut d = json!({ "name": "net0", "bridge": "vmbr0" });
        if let (Value::Object(d), Value::Object(extra)) = (&mut d, extra) {
            d.extend(extra);
        }
        json!([d])
    };
    let devices = "/spec/network/networkDevices";
    run_create_cases(vec![
        case(
            "vmIDRange end is not before start",
            machine_v2,
            vec![Set("/spec/vmIDRange", json!({ "start": 200, "end": 100 }))],
            vec![
                r#"spec.vmIDRange: Invalid value: "object": end should be greater than or equal to start"#,
            ],
        ),
        case(
            "a one-VMID range",
            machine_v2,
            vec![Set("/spec/vmIDRange", json!({ "start": 200, "end": 200 }))],
            vec![],
        ),
        case(
            "mtu below 576",
            machine_v2,
            vec![Set(devices, device(json!({ "mtu": 100 })))],
            vec![
                "spec.network.networkDevices[0].mtu: Invalid value: \"integer\": invalid MTU value",
            ],
        ),
        case(
            "mtu above 65520",
            machine_v2,
            vec![Set(devices, device(json!({ "mtu": 65521 })))],
            vec![
                "spec.network.networkDevices[0].mtu: Invalid value: \"integer\": invalid MTU value",
            ],
        ),
        case(
            "mtu 1 inherits the bridge",
            machine_v2,
            vec![Set(devices, device(json!({ "mtu": 1 })))],
            vec![],
        ),
        case(
            "mtu 9000",
            machine_v2,
            vec![Set(devices, device(json!({ "mtu": 9000 })))],
            vec![],
        ),
        case(
            "linkMtu below 576",
            machine_v2,
            vec![Set(devices, device(json!({ "linkMtu": 575 })))],
            vec![
                "spec.network.networkDevices[0].linkMtu: Invalid value: \"integer\": invalid MTU value",
            ],
        ),
        case(
            "policy priority 32765 is the kernel's",
            machine_v2,
            vec![Set(
                devices,
                device(json!({ "routingPolicy": [{ "table": 100, "priority": 32765 }] })),
            )],
            vec![
                "spec.network.networkDevices[0].routingPolicy[0].priority: Invalid value: \"integer\": Cowardly refusing to insert FIB rule matching kernel rules",
            ],
        ),
        case(
            "policy priority 0",
            machine_v2,
            vec![Set(
                devices,
                device(json!({ "routingPolicy": [{ "table": 100, "priority": 0 }] })),
            )],
            vec![
                "spec.network.networkDevices[0].routingPolicy[0].priority: Invalid value: \"integer\": Cowardly refusing to insert FIB rule matching kernel rules",
            ],
        ),
        case(
            "policy priority 100",
            machine_v2,
            vec![Set(
                devices,
                device(json!({ "routingPolicy": [{ "table": 100, "priority": 100 }] })),
            )],
            vec![],
        ),
        case(
            "vrf table 254 is the kernel's",
            machine_v2,
            vec![Set(
                "/spec/network/vrfs",
                json!([{ "name": "vrf-a", "table": 254 }]),
            )],
            vec![
                "spec.network.vrfs[0].table: Invalid value: \"integer\": Cowardly refusing to insert l3mdev rules into kernel tables",
            ],
        ),
        case(
            "vrf table 256",
            machine_v2,
            vec![Set(
                "/spec/network/vrfs",
                json!([{ "name": "vrf-a", "table": 256 }]),
            )],
            vec![],
        ),
        case(
            "pool refs are IPAM pools",
            machine_v2,
            vec![Set(
                devices,
                device(json!({ "ipPoolRef": [pool("InClusterIPPool", Some("example.com"))] })),
            )],
            vec![
                r#"spec.network.networkDevices[0].ipPoolRef[0]: Invalid value: "object": ipPoolRef allows only IPAM apiGroup ipam.cluster.x-k8s.io"#,
            ],
        ),
        case(
            "pool refs without a group cannot be checked",
            machine_v2,
            vec![Set(
                devices,
                device(json!({ "ipPoolRef": [pool("InClusterIPPool", None)] })),
            )],
            vec![
                r#"spec.network.networkDevices[0].ipPoolRef[0]: Invalid value: "object": no such key: apiGroup evaluating rule: ipPoolRef allows only IPAM apiGroup ipam.cluster.x-k8s.io"#,
            ],
        ),
        case(
            "pool refs are in-cluster pools",
            machine_v2,
            vec![Set(
                devices,
                device(json!({ "ipPoolRef": [pool("IPAddress", Some("ipam.cluster.x-k8s.io"))] })),
            )],
            vec![
                r#"spec.network.networkDevices[0].ipPoolRef[0]: Invalid value: "object": ipPoolRef allows either InClusterIPPool or GlobalInClusterIPPool"#,
            ],
        ),
        case(
            "a device with pools",
            machine_v2,
            vec![Set(
                devices,
                device(
                    json!({ "ipPoolRef": [pool("InClusterIPPool", Some("ipam.cluster.x-k8s.io")), pool("GlobalInClusterIPPool", Some("ipam.cluster.x-k8s.io"))] }),
                ),
            )],
            vec![],
        ),
        case(
            "template devices follow the same rules",
            machine_template_v2,
            vec![Set(
                "/spec/template/spec/network/networkDevices/0/mtu",
                json!(100),
            )],
            vec![
                "spec.template.spec.network.networkDevices[0].mtu: Invalid value: \"integer\": invalid MTU value",
            ],
        ),
    ]);
}

#[test]
fn machine_v1alpha1_value_rules() {
    let additional = |device: Value| vec![Set("/spec/network/additionalDevices", json!([device]))];
    run_create_cases(vec![
        case(
            "additional devices are not net0",
            machine_v1,
            additional(
                json!({ "name": "net0", "bridge": "vmbr1", "ipv4PoolRef": pool("InClusterIPPool", Some("ipam.cluster.x-k8s.io")) }),
            ),
            vec![
                r#"spec.network.additionalDevices[0].name: Invalid value: "string": additional network devices doesn't allow net0"#,
            ],
        ),
        case(
            "additional devices need a pool",
            machine_v1,
            additional(json!({ "name": "net1", "bridge": "vmbr1" })),
            vec![
                r#"spec.network.additionalDevices[0]: Invalid value: "object": no such key: ipv4PoolRef evaluating rule: at least one pool reference must be set, either ipv4PoolRef or ipv6PoolRef"#,
            ],
        ),
        case(
            "an additional device with an IPv6 pool",
            machine_v1,
            additional(
                json!({ "name": "net1", "bridge": "vmbr1", "ipv6PoolRef": pool("InClusterIPPool", Some("ipam.cluster.x-k8s.io")) }),
            ),
            vec![],
        ),
        case(
            "ipv4PoolRef is an IPAM pool",
            machine_v1,
            vec![Set(
                "/spec/network/default/ipv4PoolRef",
                pool("InClusterIPPool", Some("example.com")),
            )],
            vec![
                r#"spec.network.default.ipv4PoolRef: Invalid value: "object": ipv4PoolRef allows only IPAM apiGroup ipam.cluster.x-k8s.io"#,
            ],
        ),
        case(
            "ipv6PoolRef is an in-cluster pool",
            machine_v1,
            vec![Set(
                "/spec/network/default/ipv6PoolRef",
                pool("Secret", Some("ipam.cluster.x-k8s.io")),
            )],
            vec![
                r#"spec.network.default.ipv6PoolRef: Invalid value: "object": ipv6PoolRef allows either InClusterIPPool or GlobalInClusterIPPool"#,
            ],
        ),
        case(
            "mtu rule (v1alpha1 spelling)",
            machine_v1,
            vec![Set("/spec/network/default/mtu", json!(500))],
            vec!["spec.network.default.mtu: Invalid value: \"integer\": invalid MTU value"],
        ),
        case(
            "vrf table 255 is the kernel's",
            machine_v1,
            vec![Set(
                "/spec/network/vrfs",
                json!([{ "name": "vrf-a", "table": 255 }]),
            )],
            vec![
                "spec.network.vrfs[0].table: Invalid value: \"integer\": Cowardly refusing to insert l3mdev rules into kernel tables",
            ],
        ),
        case(
            "v1alpha1 vrf table 0 is refused by the rule",
            machine_v1,
            vec![Set(
                "/spec/network/vrfs",
                json!([{ "name": "vrf-a", "table": 0 }]),
            )],
            vec![
                "spec.network.vrfs[0].table: Invalid value: \"integer\": Cowardly refusing to insert l3mdev rules into kernel tables",
            ],
        ),
        case(
            "vmIDRange end is not before start",
            machine_v1,
            vec![Set("/spec/vmIDRange", json!({ "start": 300, "end": 299 }))],
            vec![
                r#"spec.vmIDRange: Invalid value: "object": end should be greater than or equal to start"#,
            ],
        ),
    ]);
}

#[test]
fn boot_volume_is_immutable() {
    let boot = "/spec/disks/bootVolume";
    run_update_cases(vec![
        case(
            "unchanged",
            machine_v2,
            vec![Set("/spec/numCores", json!(8))],
            vec![],
        ),
        case(
            "resized",
            machine_v2,
            vec![Set(boot, json!({ "disk": "scsi0", "sizeGb": 120 }))],
            vec![r#"spec.disks.bootVolume: Invalid value: "object": Value is immutable"#],
        ),
        case(
            "other disk",
            machine_v2,
            vec![Set("/spec/disks/bootVolume/disk", json!("scsi1"))],
            vec![r#"spec.disks.bootVolume: Invalid value: "object": Value is immutable"#],
        ),
        case("removed", machine_v2, vec![Remove(boot)], vec![]),
        case(
            "v1alpha1 resized",
            machine_v1_with_boot,
            vec![Set(boot, json!({ "disk": "scsi0", "sizeGb": 50 }))],
            vec![r#"spec.disks.bootVolume: Invalid value: "object": Value is immutable"#],
        ),
        case("v1alpha1 unchanged", machine_v1_with_boot, vec![], vec![]),
    ]);
    // Added where there was none: nothing to compare with.
    run_update_cases(vec![case(
        "added",
        machine_without_boot,
        vec![Set(
            "/spec/disks",
            json!({ "bootVolume": { "disk": "scsi0", "sizeGb": 40 } }),
        )],
        vec![],
    )]);
}

fn machine_v1_with_boot() -> Value {
    let mut m = machine_v1();
    m["spec"]["disks"] = json!({ "bootVolume": { "disk": "scsi0", "sizeGb": 40 } });
    m
}

fn machine_without_boot() -> Value {
    let mut m = machine_v2();
    if let Some(spec) = m["spec"].as_object_mut() {
        spec.remove("disks");
    }
    m
}

#[test]
fn every_rule_in_the_schemas_has_an_implementation() {
    use capmox_apiserver::api::schema::{Structural, structural};
    use capmox_apiserver::api::validation::rules::is_implemented;
    use capmox_apiserver::api::{Kind, Version};
    fn walk(s: &Structural, found: &mut Vec<String>) {
        found.extend(s.rules.iter().map(|r| r.rule.clone()));
        s.properties.values().for_each(|p| walk(p, found));
        for child in [&s.items, &s.additional_properties].into_iter().flatten() {
            walk(child, found);
        }
    }
    let mut rules = Vec::new();
    for version in Version::ALL {
        for kind in Kind::served_in(version) {
            walk(structural(version, kind), &mut rules);
        }
    }
    assert!(rules.len() > 30, "the schemas carry their rules");
    let missing: Vec<&String> = rules.iter().filter(|r| !is_implemented(r)).collect();
    assert!(
        missing.is_empty(),
        "rules without implementation: {missing:?}"
    );
}

#[test]
fn pci_device_rules() {
    run_create_cases(vec![
        case(
            "a GPU by mapping and a NIC by address",
            machine_v2,
            vec![Set(
                "/spec/pciDevices",
                json!([
                    {"mapping": "a100", "pcie": true, "primaryGPU": true},
                    {"deviceIDs": ["0000:81:00.0", "81:00.1"], "rombar": false},
                ]),
            )],
            vec![],
        ),
        case(
            "neither mapping nor deviceIDs",
            machine_v2,
            vec![Set("/spec/pciDevices", json!([{"pcie": true}]))],
            vec![
                r#"spec.pciDevices[0]: Invalid value: "object": exactly one of mapping and deviceIDs must be set"#,
            ],
        ),
        case(
            "both",
            machine_v2,
            vec![Set(
                "/spec/pciDevices",
                json!([{"mapping": "a100", "deviceIDs": ["01:00"]}]),
            )],
            vec![
                r#"spec.pciDevices[0]: Invalid value: "object": exactly one of mapping and deviceIDs must be set"#,
            ],
        ),
        case(
            "two primary GPUs",
            machine_v2,
            vec![Set(
                "/spec/pciDevices",
                json!([
                    {"mapping": "a100", "primaryGPU": true},
                    {"mapping": "l4", "primaryGPU": true},
                ]),
            )],
            vec![
                r#"spec.pciDevices: Invalid value: "array": at most one device may be the primary GPU"#,
            ],
        ),
        case(
            "not a PCI address",
            machine_v2,
            vec![Set(
                "/spec/pciDevices",
                json!([{"deviceIDs": ["0000:01:00.0,x-vga=1"]}]),
            )],
            vec![
                r#"spec.pciDevices[0].deviceIDs[0]: Invalid value: "0000:01:00.0,x-vga=1": spec.pciDevices[0].deviceIDs[0] in body should match '^([a-fA-F0-9]{4,}:)?[a-fA-F0-9]{2}:[a-fA-F0-9]{2}(\.[a-fA-F0-9])?$'"#,
            ],
        ),
    ]);
}

#[test]
fn cpu_type_and_cloud_init_drive_rules() {
    run_create_cases(vec![
        case(
            "a CPU model",
            machine_v2,
            vec![Set("/spec/cpuType", json!("x86-64-v2-AES"))],
            vec![],
        ),
        case(
            "a custom CPU model",
            machine_v2,
            vec![Set("/spec/cpuType", json!("custom-avx512"))],
            vec![],
        ),
        case(
            "not a CPU model",
            machine_v2,
            vec![Set("/spec/cpuType", json!("host,flags=+aes"))],
            vec![
                r#"spec.cpuType: Invalid value: "host,flags=+aes": spec.cpuType in body should match '^(custom-)?[a-zA-Z0-9][a-zA-Z0-9_.+-]*$'"#,
            ],
        ),
        case(
            "the seed on SCSI, as ARM64 virt machines need",
            machine_v2,
            vec![Set(
                "/spec/cloudInitDrive",
                json!({ "bus": "scsi", "slot": 30 }),
            )],
            vec![],
        ),
        case(
            "a slot beyond the bus",
            machine_v2,
            vec![Set(
                "/spec/cloudInitDrive",
                json!({ "bus": "sata", "slot": 6 }),
            )],
            vec![
                r#"spec.cloudInitDrive: Invalid value: "object": slot must be 0-3 on ide, 0-5 on sata and 0-30 on scsi"#,
            ],
        ),
        case(
            "a slot beyond IDE, the default bus",
            machine_v2,
            vec![Set("/spec/cloudInitDrive", json!({ "slot": 4 }))],
            vec![
                r#"spec.cloudInitDrive: Invalid value: "object": slot must be 0-3 on ide, 0-5 on sata and 0-30 on scsi"#,
            ],
        ),
        case(
            "no such bus",
            machine_v2,
            vec![Set("/spec/cloudInitDrive", json!({ "bus": "virtio" }))],
            vec![
                r#"spec.cloudInitDrive.bus: Unsupported value: "virtio": supported values: "ide", "sata", "scsi""#,
                NOT_CHECKED,
            ],
        ),
        case(
            "the boot volume's drive",
            machine_v2,
            vec![Set("/spec/cloudInitDrive", json!({ "bus": "scsi" }))],
            vec![r#"spec.cloudInitDrive: Invalid value: "scsi0": the boot volume is scsi0"#],
        ),
    ]);
}
