//! OpenAPI value validations (required, bounds, lengths, patterns, enums,
//! item and property counts, formats, types) and list-type invariants: one
//! accepted and one refused case per rule, with kube-apiserver's exact
//! paths and messages.

use serde_json::json;

use super::support::Edit::{Remove, Set};
use super::support::{
    NOT_CHECKED, case, cluster_template_v1, cluster_template_v2, cluster_v1, cluster_v2,
    machine_template_v1, machine_template_v2, machine_v1, machine_v2, run_create_cases,
};

#[test]
fn cluster_v1alpha2_schema_rules() {
    run_create_cases(vec![
        case("valid cluster", cluster_v2, vec![], vec![]),
        case(
            "spec is required",
            cluster_v2,
            vec![Remove("/spec")],
            vec!["spec: Required value", NOT_CHECKED],
        ),
        case(
            "dnsServers is required",
            cluster_v2,
            vec![Remove("/spec/dnsServers")],
            vec!["spec.dnsServers: Required value", NOT_CHECKED],
        ),
        case(
            "dnsServers needs an item",
            cluster_v2,
            vec![Set("/spec/dnsServers", json!([]))],
            vec![
                "spec.dnsServers: Invalid value: 0: spec.dnsServers in body should have at least 1 items",
            ],
        ),
        case(
            "dnsServers is a set",
            cluster_v2,
            vec![Set(
                "/spec/dnsServers",
                json!(["8.8.8.8", "1.1.1.1", "8.8.8.8"]),
            )],
            vec![r#"spec.dnsServers[2]: Duplicate value: "8.8.8.8""#],
        ),
        case(
            "allowedNodes is a set",
            cluster_v2,
            vec![Set("/spec/allowedNodes", json!(["pve1", "pve1"]))],
            vec![r#"spec.allowedNodes[1]: Duplicate value: "pve1""#],
        ),
        case(
            "distinct allowedNodes",
            cluster_v2,
            vec![Set("/spec/allowedNodes", json!(["pve1", "pve2"]))],
            vec![],
        ),
        case(
            "the endpoint needs a property",
            cluster_v2,
            vec![Set("/spec/controlPlaneEndpoint", json!({}))],
            vec![
                "spec.controlPlaneEndpoint: Invalid value: 0: spec.controlPlaneEndpoint in body should have at least 1 properties",
                r#"spec.controlPlaneEndpoint: Invalid value: "object": no such key: port evaluating rule: port must be within 1-65535"#,
            ],
        ),
        case(
            "host is at most 512 characters",
            cluster_v2,
            vec![Set(
                "/spec/controlPlaneEndpoint/host",
                json!(format!("{}.example.com", "a".repeat(501))),
            )],
            vec![
                "spec.controlPlaneEndpoint.host: Too long: may not be more than 512 bytes",
                NOT_CHECKED,
            ],
        ),
        case(
            "host is not empty",
            cluster_v2,
            vec![Set("/spec/controlPlaneEndpoint/host", json!(""))],
            vec![
                r#"spec.controlPlaneEndpoint.host: Invalid value: "": spec.controlPlaneEndpoint.host in body should be at least 1 chars long"#,
            ],
        ),
        case(
            "port is at most 65535",
            cluster_v2,
            vec![Set("/spec/controlPlaneEndpoint/port", json!(65536))],
            vec![
                "spec.controlPlaneEndpoint.port: Invalid value: 65536: spec.controlPlaneEndpoint.port in body should be less than or equal to 65535",
                r#"spec.controlPlaneEndpoint: Invalid value: "object": port must be within 1-65535"#,
            ],
        ),
        case(
            "port is at least 1",
            cluster_v2,
            vec![Set("/spec/controlPlaneEndpoint/port", json!(0))],
            vec![
                "spec.controlPlaneEndpoint.port: Invalid value: 0: spec.controlPlaneEndpoint.port in body should be greater than or equal to 1",
                r#"spec.controlPlaneEndpoint: Invalid value: "object": port must be within 1-65535"#,
            ],
        ),
        case(
            "port 65535 is fine",
            cluster_v2,
            vec![Set("/spec/controlPlaneEndpoint/port", json!(65535))],
            vec![],
        ),
        case(
            "port is an integer",
            cluster_v2,
            vec![Set("/spec/controlPlaneEndpoint/port", json!("6443"))],
            vec![
                r#"spec.controlPlaneEndpoint.port: Invalid value: "string": spec.controlPlaneEndpoint.port in body must be of type integer: "string""#,
                NOT_CHECKED,
            ],
        ),
        case(
            // kube-apiserver strips the numeric formats before validating (the live peer
            // answers so, tests/it/peer).
            "port is not fractional",
            cluster_v2,
            vec![Set("/spec/controlPlaneEndpoint/port", json!(6443.5))],
            vec![
                r#"spec.controlPlaneEndpoint.port: Invalid value: "number": spec.controlPlaneEndpoint.port in body must be of type integer: "number""#,
                NOT_CHECKED,
            ],
        ),
        case(
            "a whole float is an integer",
            cluster_v2,
            vec![Set("/spec/controlPlaneEndpoint/port", json!(6443.0))],
            vec![],
        ),
        case(
            "prefix is required",
            cluster_v2,
            vec![Remove("/spec/ipv4Config/prefix")],
            vec!["spec.ipv4Config.prefix: Required value", NOT_CHECKED],
        ),
        case(
            "gateway is required",
            cluster_v2,
            vec![Remove("/spec/ipv4Config/gateway")],
            vec!["spec.ipv4Config.gateway: Required value", NOT_CHECKED],
        ),
        case(
            "addresses are required",
            cluster_v2,
            vec![Remove("/spec/ipv4Config/addresses")],
            vec!["spec.ipv4Config.addresses: Required value", NOT_CHECKED],
        ),
        case(
            "prefix is at most 128",
            cluster_v2,
            vec![Set("/spec/ipv4Config/prefix", json!(129))],
            vec![
                "spec.ipv4Config.prefix: Invalid value: 129: spec.ipv4Config.prefix in body should be less than or equal to 128",
            ],
        ),
        case(
            "prefix is at least 1",
            cluster_v2,
            vec![Set("/spec/ipv4Config/prefix", json!(0))],
            vec![
                "spec.ipv4Config.prefix: Invalid value: 0: spec.ipv4Config.prefix in body should be greater than or equal to 1",
            ],
        ),
        case(
            "gateway is not empty",
            cluster_v2,
            vec![Set("/spec/ipv4Config/gateway", json!(""))],
            vec![
                r#"spec.ipv4Config.gateway: Invalid value: "": spec.ipv4Config.gateway in body should be at least 1 chars long"#,
            ],
        ),
        case(
            "metric is not negative",
            cluster_v2,
            vec![Set("/spec/ipv4Config/metric", json!(-1))],
            vec![
                "spec.ipv4Config.metric: Invalid value: -1: spec.ipv4Config.metric in body should be greater than or equal to 0",
            ],
        ),
        case(
            "metric 0 is fine",
            cluster_v2,
            vec![Set("/spec/ipv4Config/metric", json!(0))],
            vec![],
        ),
        case(
            "addresses are a set",
            cluster_v2,
            vec![Set(
                "/spec/ipv4Config/addresses",
                json!(["10.10.10.20", "10.10.10.20"]),
            )],
            vec![r#"spec.ipv4Config.addresses[1]: Duplicate value: "10.10.10.20""#],
        ),
        case(
            "memoryAdjustment is not negative",
            cluster_v2,
            vec![Set(
                "/spec/schedulerHints",
                json!({ "memoryAdjustment": -5 }),
            )],
            vec![
                "spec.schedulerHints.memoryAdjustment: Invalid value: -5: spec.schedulerHints.memoryAdjustment in body should be greater than or equal to 0",
            ],
        ),
        case(
            "memoryAdjustment 0 disables the check",
            cluster_v2,
            vec![Set(
                "/spec/schedulerHints",
                json!({ "memoryAdjustment": 0 }),
            )],
            vec![],
        ),
        case(
            "zones are keyed by zone",
            cluster_v2,
            vec![Set(
                "/spec/zoneConfig",
                json!([
                    { "zone": "a", "dnsServers": ["1.1.1.1"] },
                    { "zone": "a", "dnsServers": ["1.1.1.1"] }
                ]),
            )],
            vec![r#"spec.zoneConfig[1]: Duplicate value: {"zone":"a"}"#],
        ),
        case(
            "zone names follow the label pattern",
            cluster_v2,
            vec![Set(
                "/spec/zoneConfig",
                json!([{ "zone": "-a", "dnsServers": ["1.1.1.1"] }]),
            )],
            vec![
                r#"spec.zoneConfig[0].zone: Invalid value: "-a": spec.zoneConfig[0].zone in body should match '^[a-z0-9A-Z](?:[a-z0-9A-Z-_.]{0,61}[a-z0-9A-Z])?$'"#,
            ],
        ),
        case(
            "zone names may hold - _ .",
            cluster_v2,
            vec![Set(
                "/spec/zoneConfig",
                json!([{ "zone": "zone-a_1.x", "dnsServers": ["1.1.1.1"] }]),
            )],
            vec![],
        ),
        case(
            "a zone needs dnsServers",
            cluster_v2,
            vec![Set("/spec/zoneConfig", json!([{ "zone": "a" }]))],
            vec!["spec.zoneConfig[0].dnsServers: Required value", NOT_CHECKED],
        ),
        case(
            "credentialsRef is an object",
            cluster_v2,
            vec![Set("/spec/credentialsRef", json!("my-secret"))],
            vec![
                r#"spec.credentialsRef: Invalid value: "string": spec.credentialsRef in body must be of type object: "string""#,
                NOT_CHECKED,
            ],
        ),
        case(
            "externalManagedControlPlane is a boolean",
            cluster_v2,
            vec![Set("/spec/externalManagedControlPlane", json!("yes"))],
            vec![
                r#"spec.externalManagedControlPlane: Invalid value: "string": spec.externalManagedControlPlane in body must be of type boolean: "string""#,
                NOT_CHECKED,
            ],
        ),
    ]);
}

#[test]
fn cluster_status_v1alpha2_schema_rules() {
    let condition = json!({
        "type": "Ready", "status": "True", "reason": "Provisioned", "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z"
    });
    let mut many = Vec::new();
    for i in 0..33 {
        let mut c = condition.clone();
        c["type"] = json!(format!("Type{i}"));
        many.push(c);
    }
    run_create_cases(vec![
        case(
            "a valid condition",
            cluster_v2,
            vec![Set("/status", json!({ "conditions": [condition.clone()] }))],
            vec![],
        ),
        case(
            "condition status is True, False or Unknown",
            cluster_v2,
            vec![
                Set("/status", json!({ "conditions": [condition.clone()] })),
                Set("/status/conditions/0/status", json!("Maybe")),
            ],
            vec![
                r#"status.conditions[0].status: Unsupported value: "Maybe": supported values: "True", "False", "Unknown""#,
                NOT_CHECKED,
            ],
        ),
        case(
            "condition reason follows the pattern",
            cluster_v2,
            vec![
                Set("/status", json!({ "conditions": [condition.clone()] })),
                Set("/status/conditions/0/reason", json!("no spaces")),
            ],
            vec![
                r#"status.conditions[0].reason: Invalid value: "no spaces": status.conditions[0].reason in body should match '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$'"#,
            ],
        ),
        case(
            "condition needs lastTransitionTime",
            cluster_v2,
            vec![
                Set("/status", json!({ "conditions": [condition.clone()] })),
                Remove("/status/conditions/0/lastTransitionTime"),
            ],
            vec![
                "status.conditions[0].lastTransitionTime: Required value",
                NOT_CHECKED,
            ],
        ),
        case(
            "lastTransitionTime is a date-time",
            cluster_v2,
            vec![
                Set("/status", json!({ "conditions": [condition.clone()] })),
                Set(
                    "/status/conditions/0/lastTransitionTime",
                    json!("yesterday"),
                ),
            ],
            vec![
                r#"status.conditions[0].lastTransitionTime: Invalid value: "yesterday": status.conditions[0].lastTransitionTime in body must be of type date-time: "yesterday""#,
                NOT_CHECKED,
            ],
        ),
        case(
            "conditions are keyed by type",
            cluster_v2,
            vec![Set(
                "/status",
                json!({ "conditions": [condition.clone(), condition.clone()] }),
            )],
            vec![r#"status.conditions[1]: Duplicate value: {"type":"Ready"}"#],
        ),
        case(
            "at most 32 conditions",
            cluster_v2,
            vec![Set("/status", json!({ "conditions": many }))],
            vec![
                "status.conditions: Too many: 33: must have at most 32 items",
                NOT_CHECKED,
            ],
        ),
        case(
            "initialization needs a property",
            cluster_v2,
            vec![Set("/status", json!({ "initialization": {} }))],
            vec![
                "status.initialization: Invalid value: 0: status.initialization in body should have at least 1 properties",
            ],
        ),
        case(
            "a node location needs a node",
            cluster_v2,
            vec![Set(
                "/status",
                json!({ "nodeLocations": { "workers": [{ "machine": { "name": "m" }, "node": "" }] } }),
            )],
            vec![
                r#"status.nodeLocations.workers[0].node: Invalid value: "": status.nodeLocations.workers[0].node in body should be at least 1 chars long"#,
            ],
        ),
        case(
            "zone refs are keyed by zone (defaulted to default)",
            cluster_v2,
            vec![Set(
                "/status",
                json!({ "inClusterZoneRef": [{}, { "zone": "default" }] }),
            )],
            vec![r#"status.inClusterZoneRef[1]: Duplicate value: {"zone":"default"}"#],
        ),
    ]);
}

#[test]
fn cluster_template_schema_rules() {
    run_create_cases(vec![
        case("valid template", cluster_template_v2, vec![], vec![]),
        case(
            "template is required",
            cluster_template_v2,
            vec![Remove("/spec/template")],
            vec!["spec.template: Required value", NOT_CHECKED],
        ),
        case(
            "template spec is required",
            cluster_template_v2,
            vec![Remove("/spec/template/spec")],
            vec!["spec.template.spec: Required value", NOT_CHECKED],
        ),
        case(
            "template metadata needs a property",
            cluster_template_v2,
            vec![Set("/spec/template/metadata", json!({}))],
            vec![
                "spec.template.metadata: Invalid value: 0: spec.template.metadata in body should have at least 1 properties",
            ],
        ),
        case(
            "template metadata labels are strings",
            cluster_template_v2,
            vec![Set(
                "/spec/template/metadata",
                json!({ "labels": { "a": 1 } }),
            )],
            vec![
                r#"spec.template.metadata.labels.a: Invalid value: "integer": spec.template.metadata.labels.a in body must be of type string: "integer""#,
                NOT_CHECKED,
            ],
        ),
        case(
            "template metadata with labels",
            cluster_template_v2,
            vec![Set(
                "/spec/template/metadata",
                json!({ "labels": { "a": "b" } }),
            )],
            vec![],
        ),
        case(
            "valid v1alpha1 template",
            cluster_template_v1,
            vec![],
            vec![],
        ),
        case(
            "v1alpha1 template metadata may be empty",
            cluster_template_v1,
            vec![Set("/spec/template/metadata", json!({}))],
            vec![],
        ),
    ]);
}

#[test]
fn machine_v1alpha2_schema_rules() {
    let device = "/spec/network/networkDevices/0";
    run_create_cases(vec![
        case("valid machine", machine_v2, vec![], vec![]),
        case(
            "network is required",
            machine_v2,
            vec![Remove("/spec/network")],
            vec!["spec.network: Required value", NOT_CHECKED],
        ),
        case(
            "networkDevices are required",
            machine_v2,
            vec![Set("/spec/network", json!({}))],
            vec!["spec.network.networkDevices: Required value", NOT_CHECKED],
        ),
        case(
            "devices are keyed by name",
            machine_v2,
            vec![Set(
                "/spec/network/networkDevices/1",
                json!({ "name": "net0", "bridge": "vmbr1" }),
            )],
            vec![r#"spec.network.networkDevices[1]: Duplicate value: {"name":"net0"}"#],
        ),
        case(
            "device names are netN",
            machine_v2,
            vec![Set("/spec/network/networkDevices/0/name", json!("eth0"))],
            vec![
                r#"spec.network.networkDevices[0].name: Invalid value: "eth0": spec.network.networkDevices[0].name in body should match '^net[0-9]+$'"#,
            ],
        ),
        case(
            // The first failing string check only, as kube-openapi reports it.
            "device names have at least 4 characters",
            machine_v2,
            vec![Set("/spec/network/networkDevices/0/name", json!("net"))],
            vec![
                r#"spec.network.networkDevices[0].name: Invalid value: "net": spec.network.networkDevices[0].name in body should be at least 4 chars long"#,
            ],
        ),
        case(
            "model is one of the emulated cards",
            machine_v2,
            vec![Set("/spec/network/networkDevices/0/model", json!("foo"))],
            vec![
                r#"spec.network.networkDevices[0].model: Unsupported value: "foo": supported values: "e1000", "virtio", "rtl8139", "vmxnet3""#,
                NOT_CHECKED,
            ],
        ),
        case(
            "model e1000",
            machine_v2,
            vec![Set("/spec/network/networkDevices/0/model", json!("e1000"))],
            vec![],
        ),
        case(
            "bridge is not empty",
            machine_v2,
            vec![Set("/spec/network/networkDevices/0/bridge", json!(""))],
            vec![
                r#"spec.network.networkDevices[0].bridge: Invalid value: "": spec.network.networkDevices[0].bridge in body should be at least 1 chars long"#,
            ],
        ),
        case(
            "vlan is at least 1",
            machine_v2,
            vec![Set("/spec/network/networkDevices/0/vlan", json!(0))],
            vec![
                "spec.network.networkDevices[0].vlan: Invalid value: 0: spec.network.networkDevices[0].vlan in body should be greater than or equal to 1",
            ],
        ),
        case(
            "vlan is at most 4094",
            machine_v2,
            vec![Set("/spec/network/networkDevices/0/vlan", json!(4095))],
            vec![
                "spec.network.networkDevices[0].vlan: Invalid value: 4095: spec.network.networkDevices[0].vlan in body should be less than or equal to 4094",
            ],
        ),
        case(
            "vlan 4094",
            machine_v2,
            vec![Set("/spec/network/networkDevices/0/vlan", json!(4094))],
            vec![],
        ),
        case(
            "queues are at least 1",
            machine_v2,
            vec![Set("/spec/network/networkDevices/0/queues", json!(0))],
            vec![
                "spec.network.networkDevices[0].queues: Invalid value: 0: spec.network.networkDevices[0].queues in body should be greater than or equal to 1",
            ],
        ),
        case(
            "queues are at most 65535",
            machine_v2,
            vec![Set("/spec/network/networkDevices/0/queues", json!(65536))],
            vec![
                "spec.network.networkDevices[0].queues: Invalid value: 65536: spec.network.networkDevices[0].queues in body should be less than or equal to 65535",
            ],
        ),
        case(
            "device dnsServers need an item",
            machine_v2,
            vec![Set("/spec/network/networkDevices/0/dnsServers", json!([]))],
            vec![
                "spec.network.networkDevices[0].dnsServers: Invalid value: 0: spec.network.networkDevices[0].dnsServers in body should have at least 1 items",
            ],
        ),
        case(
            "device dnsServers are a set",
            machine_v2,
            vec![Set(
                "/spec/network/networkDevices/0/dnsServers",
                json!(["1.1.1.1", "1.1.1.1"]),
            )],
            vec![r#"spec.network.networkDevices[0].dnsServers[1]: Duplicate value: "1.1.1.1""#],
        ),
        case(
            "pool refs need kind and name",
            machine_v2,
            vec![Set(
                "/spec/network/networkDevices/0/ipPoolRef",
                json!([{ "apiGroup": "ipam.cluster.x-k8s.io" }]),
            )],
            vec![
                "spec.network.networkDevices[0].ipPoolRef[0].kind: Required value",
                "spec.network.networkDevices[0].ipPoolRef[0].name: Required value",
                NOT_CHECKED,
            ],
        ),
        case(
            "routes need an item",
            machine_v2,
            vec![Set("/spec/network/networkDevices/0/routes", json!([]))],
            vec![
                "spec.network.networkDevices[0].routes: Invalid value: 0: spec.network.networkDevices[0].routes in body should have at least 1 items",
            ],
        ),
        case(
            "route metric is not negative",
            machine_v2,
            vec![Set(
                "/spec/network/networkDevices/0/routes",
                json!([{ "to": "10.0.0.0/8", "via": "10.10.10.1", "metric": -1 }]),
            )],
            vec![
                "spec.network.networkDevices[0].routes[0].metric: Invalid value: -1: spec.network.networkDevices[0].routes[0].metric in body should be greater than or equal to 0",
            ],
        ),
        case(
            "routing policies need an item",
            machine_v2,
            vec![Set(
                "/spec/network/networkDevices/0/routingPolicy",
                json!([]),
            )],
            vec![
                "spec.network.networkDevices[0].routingPolicy: Invalid value: 0: spec.network.networkDevices[0].routingPolicy in body should have at least 1 items",
            ],
        ),
        case(
            "policy priority is at most 2^32-1",
            machine_v2,
            vec![Set(
                "/spec/network/networkDevices/0/routingPolicy",
                json!([{ "table": 100, "priority": 4_294_967_296_i64 }]),
            )],
            vec![
                "spec.network.networkDevices[0].routingPolicy[0].priority: Invalid value: 4294967296: spec.network.networkDevices[0].routingPolicy[0].priority in body should be less than or equal to 4.294967295e+09",
            ],
        ),
        case(
            "vrfs are keyed by name",
            machine_v2,
            vec![Set(
                "/spec/network/vrfs",
                json!([{ "name": "vrf-a", "table": 100 }, { "name": "vrf-a", "table": 101 }]),
            )],
            vec![r#"spec.network.vrfs[1]: Duplicate value: {"name":"vrf-a"}"#],
        ),
        case(
            "vrf names have at least 3 characters",
            machine_v2,
            vec![Set(
                "/spec/network/vrfs",
                json!([{ "name": "ab", "table": 100 }]),
            )],
            vec![
                r#"spec.network.vrfs[0].name: Invalid value: "ab": spec.network.vrfs[0].name in body should be at least 3 chars long"#,
            ],
        ),
        case(
            "vrf table is at least 1",
            machine_v2,
            vec![Set(
                "/spec/network/vrfs",
                json!([{ "name": "vrf-a", "table": -3 }]),
            )],
            vec![
                "spec.network.vrfs[0].table: Invalid value: -3: spec.network.vrfs[0].table in body should be greater than or equal to 1",
                "spec.network.vrfs[0].table: Invalid value: \"integer\": Cowardly refusing to insert l3mdev rules into kernel tables",
            ],
        ),
        case(
            "vrf needs name and table",
            machine_v2,
            vec![Set(
                "/spec/network/vrfs",
                json!([{ "interfaces": ["net0"] }]),
            )],
            vec![
                "spec.network.vrfs[0].name: Required value",
                "spec.network.vrfs[0].table: Required value",
                NOT_CHECKED,
            ],
        ),
        case(
            "vrf interfaces are netN",
            machine_v2,
            vec![Set(
                "/spec/network/vrfs",
                json!([{ "name": "vrf-a", "table": 100, "interfaces": ["eth1"] }]),
            )],
            vec![
                r#"spec.network.vrfs[0].interfaces[0]: Invalid value: "eth1": spec.network.vrfs[0].interfaces[0] in body should match '^net[0-9]+$'"#,
            ],
        ),
        case(
            "network zone follows the label pattern",
            machine_v2,
            vec![Set("/spec/network/zone", json!("a b"))],
            vec![
                r#"spec.network.zone: Invalid value: "a b": spec.network.zone in body should match '^[a-z0-9A-Z](?:[a-z0-9A-Z-_.]{0,61}[a-z0-9A-Z])?$'"#,
            ],
        ),
        case(
            "providerID is a proxmox:// UUID",
            machine_v2,
            vec![Set("/spec/providerID", json!("proxmox://abc"))],
            vec![
                r#"spec.providerID: Invalid value: "proxmox://abc": spec.providerID in body should be at least 46 chars long"#,
            ],
        ),
        case(
            "providerID is at most 46 characters",
            machine_v2,
            vec![Set(
                "/spec/providerID",
                json!("proxmox://6c3fa683-bef9-4425-b413-eaa45a9d6191x"),
            )],
            vec![
                "spec.providerID: Too long: may not be more than 46 bytes",
                NOT_CHECKED,
            ],
        ),
        case(
            "a valid providerID",
            machine_v2,
            vec![Set(
                "/spec/providerID",
                json!("proxmox://6c3fa683-bef9-4425-b413-eaa45a9d6191"),
            )],
            vec![],
        ),
        case(
            "numSockets is at least 1",
            machine_v2,
            vec![Set("/spec/numSockets", json!(0))],
            vec![
                "spec.numSockets: Invalid value: 0: spec.numSockets in body should be greater than or equal to 1",
            ],
        ),
        case(
            "numCores is at least 1",
            machine_v2,
            vec![Set("/spec/numCores", json!(0))],
            vec![
                "spec.numCores: Invalid value: 0: spec.numCores in body should be greater than or equal to 1",
            ],
        ),
        case(
            "memoryMiB is a multiple of 8",
            machine_v2,
            vec![Set("/spec/memoryMiB", json!(1001))],
            vec![
                "spec.memoryMiB: Invalid value: 1001: spec.memoryMiB in body should be a multiple of 8",
            ],
        ),
        case(
            "memoryMiB is not negative",
            machine_v2,
            vec![Set("/spec/memoryMiB", json!(-8))],
            vec![
                "spec.memoryMiB: Invalid value: -8: spec.memoryMiB in body should be greater than or equal to 0",
            ],
        ),
        case(
            "boot volume is at least 5 GB",
            machine_v2,
            vec![Set("/spec/disks/bootVolume/sizeGb", json!(4))],
            vec![
                "spec.disks.bootVolume.sizeGb: Invalid value: 4: spec.disks.bootVolume.sizeGb in body should be greater than or equal to 5",
            ],
        ),
        case(
            "boot volume needs a disk",
            machine_v2,
            vec![Remove("/spec/disks/bootVolume/disk")],
            vec!["spec.disks.bootVolume.disk: Required value", NOT_CHECKED],
        ),
        case(
            "vmIDRange start is at least 100",
            machine_v2,
            vec![Set("/spec/vmIDRange", json!({ "start": 99, "end": 200 }))],
            vec![
                "spec.vmIDRange.start: Invalid value: 99: spec.vmIDRange.start in body should be greater than or equal to 100",
            ],
        ),
        case(
            "vmIDRange end is at most 999999999",
            machine_v2,
            vec![Set(
                "/spec/vmIDRange",
                json!({ "start": 100, "end": 1_000_000_000 }),
            )],
            vec![
                "spec.vmIDRange.end: Invalid value: 1000000000: spec.vmIDRange.end in body should be less than or equal to 9.99999999e+08",
            ],
        ),
        case(
            "vmIDRange needs both ends",
            machine_v2,
            vec![Set("/spec/vmIDRange", json!({ "start": 100 }))],
            vec!["spec.vmIDRange.end: Required value", NOT_CHECKED],
        ),
        case(
            "tags need an item",
            machine_v2,
            vec![Set("/spec/tags", json!([]))],
            vec!["spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items"],
        ),
        case(
            "tags follow the Proxmox tag pattern",
            machine_v2,
            vec![Set("/spec/tags", json!(["-bad"]))],
            vec![
                r#"spec.tags[0]: Invalid value: "-bad": spec.tags[0] in body should match '^[a-zA-Z0-9_][a-zA-Z0-9_\-\+\.]*$'"#,
            ],
        ),
        case(
            "tags are a set",
            machine_v2,
            vec![Set("/spec/tags", json!(["a", "a"]))],
            vec![r#"spec.tags[1]: Duplicate value: "a""#],
        ),
        case(
            "mixed-case tags",
            machine_v2,
            vec![Set("/spec/tags", json!(["K8s_v1.34+x"]))],
            vec![],
        ),
        case(
            "format is raw, qcow2 or vmdk",
            machine_v2,
            vec![Set("/spec/format", json!("vhd"))],
            vec![
                r#"spec.format: Unsupported value: "vhd": supported values: "raw", "qcow2", "vmdk""#,
                NOT_CHECKED,
            ],
        ),
        case(
            "matchPolicy is exact, uniqueSubset or bestSubset",
            machine_v2,
            vec![
                Remove("/spec/sourceNode"),
                Remove("/spec/templateID"),
                Set(
                    "/spec/templateSelector",
                    json!({ "matchTags": ["ubuntu"], "matchPolicy": "any" }),
                ),
            ],
            vec![
                r#"spec.templateSelector.matchPolicy: Unsupported value: "any": supported values: "exact", "uniqueSubset", "bestSubset""#,
                NOT_CHECKED,
            ],
        ),
        case(
            "matchTags are required",
            machine_v2,
            vec![
                Remove("/spec/sourceNode"),
                Remove("/spec/templateID"),
                Set("/spec/templateSelector", json!({})),
            ],
            vec![
                "spec.templateSelector.matchTags: Required value",
                NOT_CHECKED,
            ],
        ),
        case(
            "providerIDInjection is required in metadataSettings",
            machine_v2,
            vec![Set("/spec/metadataSettings", json!({}))],
            vec![
                "spec.metadataSettings.providerIDInjection: Required value",
                NOT_CHECKED,
            ],
        ),
        case(
            "machine addresses have a known type",
            machine_v2,
            vec![Set(
                "/status",
                json!({ "addresses": [{ "type": "Public", "address": "1.2.3.4" }] }),
            )],
            vec![
                r#"status.addresses[0].type: Unsupported value: "Public": supported values: "Hostname", "ExternalIP", "InternalIP", "ExternalDNS", "InternalDNS""#,
                NOT_CHECKED,
            ],
        ),
        case(
            "status ipAddresses are keyed by net",
            machine_v2,
            vec![Set(
                "/status",
                json!({ "ipAddresses": [{ "net": "default" }, { "net": "nic0" }] }),
            )],
            vec![
                r#"status.ipAddresses[1].net: Invalid value: "nic0": status.ipAddresses[1].net in body should match '^(net[0-9]+|default)$'"#,
            ],
        ),
        case(
            "status network MAC addresses",
            machine_v2,
            vec![Set(
                "/status",
                json!({ "network": [{ "connected": true, "macAddr": "00:11:22:33:44:5G" }] }),
            )],
            vec![
                r#"status.network[0].macAddr: Invalid value: "00:11:22:33:44:5G": status.network[0].macAddr in body should match '^([0-9A-Fa-f]{2}[:]){5}([0-9A-Fa-f]{2})$'"#,
            ],
        ),
        case(
            "status network entries need connected",
            machine_v2,
            vec![Set(
                "/status",
                json!({ "network": [{ "macAddr": "00:11:22:33:44:55" }] }),
            )],
            vec!["status.network[0].connected: Required value", NOT_CHECKED],
        ),
        case(
            "retryAfter is a date-time",
            machine_v2,
            vec![Set(
                "/status",
                json!({ "retryAfter": "2026-01-01T10:00:00Z", "vmStatus": "pending" }),
            )],
            vec![],
        ),
        // kube-openapi checks `enum` after a failed type check too, as kube-apiserver does on a
        // co-tenant's enum field in the co-tenant differential.
        case(
            "a device whose model has the wrong type",
            machine_v2,
            vec![Set(
                device,
                json!({ "name": "net0", "bridge": "vmbr0", "model": 5 }),
            )],
            vec![
                r#"spec.network.networkDevices[0].model: Invalid value: "integer": spec.network.networkDevices[0].model in body must be of type string: "integer""#,
                r#"spec.network.networkDevices[0].model: Unsupported value: 5: supported values: "e1000", "virtio", "rtl8139", "vmxnet3""#,
                NOT_CHECKED,
            ],
        ),
    ]);
}

#[test]
fn machine_template_schema_rules() {
    run_create_cases(vec![
        case("valid template", machine_template_v2, vec![], vec![]),
        case(
            "template spec needs a network",
            machine_template_v2,
            vec![Remove("/spec/template/spec/network")],
            vec!["spec.template.spec.network: Required value", NOT_CHECKED],
        ),
        case(
            "template spec rules hold",
            machine_template_v2,
            vec![Set(
                "/spec/template/spec/network/networkDevices/0/vlan",
                json!(5000),
            )],
            vec![
                "spec.template.spec.network.networkDevices[0].vlan: Invalid value: 5000: spec.template.spec.network.networkDevices[0].vlan in body should be less than or equal to 4094",
            ],
        ),
        case(
            "valid v1alpha1 template",
            machine_template_v1,
            vec![],
            vec![],
        ),
        case(
            "v1alpha1 template is required",
            machine_template_v1,
            vec![Remove("/spec/template")],
            vec!["spec.template: Required value", NOT_CHECKED],
        ),
    ]);
}

#[test]
fn cluster_v1alpha1_schema_rules() {
    run_create_cases(vec![
        case("valid v1alpha1 cluster", cluster_v1, vec![], vec![]),
        case(
            "dnsServers need an item",
            cluster_v1,
            vec![Set("/spec/dnsServers", json!([]))],
            vec![
                "spec.dnsServers: Invalid value: 0: spec.dnsServers in body should have at least 1 items",
            ],
        ),
        case(
            "dnsServers may repeat (not a set in v1alpha1)",
            cluster_v1,
            vec![Set("/spec/dnsServers", json!(["8.8.8.8", "8.8.8.8"]))],
            vec![],
        ),
        case(
            "prefix is at most 128",
            cluster_v1,
            vec![Set("/spec/ipv4Config/prefix", json!(129))],
            vec![
                "spec.ipv4Config.prefix: Invalid value: 129: spec.ipv4Config.prefix in body should be less than or equal to 128",
            ],
        ),
        case(
            "prefix 0 passes the schema",
            cluster_v1,
            vec![Set("/spec/ipv4Config/prefix", json!(0))],
            vec![],
        ),
        case(
            "prefix is required",
            cluster_v1,
            vec![Remove("/spec/ipv4Config/prefix")],
            vec!["spec.ipv4Config.prefix: Required value", NOT_CHECKED],
        ),
        case(
            "gateway is optional",
            cluster_v1,
            vec![Remove("/spec/ipv4Config/gateway")],
            vec![],
        ),
        case(
            "host is at most 512 characters",
            cluster_v1,
            vec![Set(
                "/spec/controlPlaneEndpoint/host",
                json!("h".repeat(513)),
            )],
            vec![
                "spec.controlPlaneEndpoint.host: Too long: may not be more than 512 bytes",
                NOT_CHECKED,
            ],
        ),
        case(
            "cloneSpec needs machineSpec",
            cluster_v1,
            vec![Set(
                "/spec/cloneSpec",
                json!({ "virtualIPNetworkInterface": "" }),
            )],
            vec!["spec.cloneSpec.machineSpec: Required value", NOT_CHECKED],
        ),
        case(
            "cloneSpec machine specs follow the machine schema",
            cluster_v1,
            vec![Set(
                "/spec/cloneSpec",
                json!({ "machineSpec": { "controlPlane": { "sourceNode": "" } } }),
            )],
            vec![
                r#"spec.cloneSpec.machineSpec.controlPlane.sourceNode: Invalid value: "": spec.cloneSpec.machineSpec.controlPlane.sourceNode in body should be at least 1 chars long"#,
            ],
        ),
        case(
            "v1beta1 condition needs a type",
            cluster_v1,
            vec![Set(
                "/status",
                json!({ "conditions": [{ "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z" }] }),
            )],
            vec!["status.conditions[0].type: Required value", NOT_CHECKED],
        ),
        case(
            "v1beta1 condition severity is at most 32 characters",
            cluster_v1,
            vec![Set(
                "/status",
                json!({ "conditions": [{ "type": "Ready", "status": "False", "severity": "s".repeat(33), "lastTransitionTime": "2026-01-01T00:00:00Z" }] }),
            )],
            vec![
                "status.conditions[0].severity: Too long: may not be more than 32 bytes",
                NOT_CHECKED,
            ],
        ),
    ]);
}

#[test]
fn machine_v1alpha1_schema_rules() {
    run_create_cases(vec![
        case("valid v1alpha1 machine", machine_v1, vec![], vec![]),
        case(
            "default device needs a bridge",
            machine_v1,
            vec![Set("/spec/network/default", json!({ "model": "virtio" }))],
            vec!["spec.network.default.bridge: Required value", NOT_CHECKED],
        ),
        case(
            "vlan is at most 4094",
            machine_v1,
            vec![Set("/spec/network/default/vlan", json!(4095))],
            vec![
                "spec.network.default.vlan: Invalid value: 4095: spec.network.default.vlan in body should be less than or equal to 4094",
            ],
        ),
        case(
            "additional devices are keyed by name",
            machine_v1,
            vec![Set(
                "/spec/network/additionalDevices",
                json!([
                    { "name": "net1", "bridge": "vmbr1", "ipv4PoolRef": { "apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "p" } },
                    { "name": "net1", "bridge": "vmbr1", "ipv4PoolRef": { "apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "p" } }
                ]),
            )],
            vec![r#"spec.network.additionalDevices[1]: Duplicate value: {"name":"net1"}"#],
        ),
        case(
            "memoryMiB is a multiple of 8 (no minimum)",
            machine_v1,
            vec![Set("/spec/memoryMiB", json!(12))],
            vec![
                "spec.memoryMiB: Invalid value: 12: spec.memoryMiB in body should be a multiple of 8",
            ],
        ),
        case(
            "route metric is unsigned",
            machine_v1,
            vec![Set(
                "/spec/network/additionalDevices",
                json!([{ "name": "net1", "bridge": "vmbr1", "routes": [{ "metric": -1 }], "ipv4PoolRef": { "apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "p" } }]),
            )],
            vec![
                "spec.network.additionalDevices[0].routes[0].metric: Invalid value: -1: invalid value: integer `-1`, expected u32",
            ],
        ),
        case(
            "providerID has no pattern in v1alpha1",
            machine_v1,
            vec![Set("/spec/providerID", json!("anything"))],
            vec![],
        ),
        case(
            "v1alpha1 status network entries need a MAC",
            machine_v1,
            vec![Set(
                "/status",
                json!({ "ready": true, "network": [{ "connected": true }] }),
            )],
            vec!["status.network[0].macAddr: Required value", NOT_CHECKED],
        ),
        case(
            "v1alpha1 ipAddresses are a map",
            machine_v1,
            vec![Set(
                "/status",
                json!({ "ipAddresses": { "net0": { "ipv4": "10.0.0.2" } } }),
            )],
            vec![],
        ),
    ]);
}
