//! The documented conversion rules (docs/conversion.md), one example each,
//! written as the JSON a client sends or gets.

use capmox_apiserver::api::conversion::{ConversionError, Spoke, UPSTREAM_CONVERSION_DATA};
use capmox_apiserver::api::{v1alpha1 as v1, v1alpha2 as v2};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn decode<T: DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("decodes")
}

fn encode(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).expect("encodes")
}

fn pool(name: &str) -> Value {
    json!({"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": name})
}

/// A stored machine using what v1alpha1 cannot express.
fn rich_machine() -> v2::ProxmoxMachine {
    decode(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
        "kind": "ProxmoxMachine",
        "metadata": {"name": "m", "namespace": "ns"},
        "spec": {
            "sourceNode": "pve1",
            "templateID": 100,
            "network": {
                "zone": "zone-a",
                "networkDevices": [
                    {"name": "net0", "bridge": "vmbr0", "defaultIPv4": true, "defaultIPv6": true,
                     "queues": 4, "ipPoolRef": [pool("extra")], "linkMtu": 9000,
                     "routes": [{"to": "10.9.0.0/16", "via": "10.0.0.1"}]},
                    {"name": "net1", "bridge": "vmbr1", "dhcp4": true, "queues": 2,
                     "ipPoolRef": [pool("a"), pool("b"), pool("c-v6-icip")],
                     "routes": [{"to": "default", "is6": true, "metric": 0}]},
                    {"name": "net2", "bridge": "vmbr2", "queues": 8, "ipPoolRef": [pool("d")]}
                ]
            }
        },
        "status": {
            "ipAddresses": [{"net": "net1", "ipv4": ["10.0.0.5", "10.0.0.6"], "ipv6": ["fd00::5"]}],
            "conditions": [{"type": "Ready", "status": "True", "reason": "Provisioned", "message": "",
                            "lastTransitionTime": "2024-01-01T00:00:00Z", "observedGeneration": 3}]
        }
    }))
}

#[test]
fn a_v1alpha1_read_modify_write_keeps_what_v1alpha1_cannot_express() {
    let stored = rich_machine();
    let mut seen = v1::ProxmoxMachine::from_hub(&stored).unwrap();
    assert!(
        seen.metadata.annotations.is_none(),
        "served objects carry no conversion annotation"
    );

    seen.spec.num_cores = 4;
    let written = seen.to_hub(Some(&stored)).unwrap();
    let mut expected = stored.clone();
    expected.spec.num_cores = Some(4);
    assert_eq!(written, expected);
}

#[test]
fn net0_pools_are_shown_only_as_v1alpha1_understands_them() {
    let seen = encode(&v1::ProxmoxMachine::from_hub(&rich_machine()).unwrap());
    let network = &seen["spec"]["network"];
    // net0 takes the cluster's pools (defaultIPv4/6): in v1alpha1 that is a
    // default device without pool references; the additive "extra" pool
    // stays in the hub.
    assert_eq!(network["default"], json!({"bridge": "vmbr0"}));
    // Other devices show pools whose names tell the family.
    assert_eq!(network["additionalDevices"][0]["ipv4PoolRef"], pool("a"));
    assert_eq!(
        network["additionalDevices"][0]["ipv6PoolRef"],
        pool("c-v6-icip")
    );
    assert_eq!(
        seen["status"]["ipAddresses"],
        json!({"net1": {"ipv4": "10.0.0.5", "ipv6": "fd00::5"}})
    );
}

#[test]
fn a_v1alpha1_pool_reference_on_net0_replaces_the_cluster_pool() {
    let object: v1::ProxmoxMachine = decode(json!({
        "spec": {"network": {"default": {"bridge": "vmbr0", "ipv6PoolRef": pool("six")}}}
    }));
    let hub = encode(&object.clone().to_hub(None).unwrap());
    assert_eq!(
        hub["spec"]["network"]["networkDevices"],
        json!([{"name": "net0", "bridge": "vmbr0", "defaultIPv4": true, "defaultIPv6": false,
                "ipPoolRef": [pool("six")]}])
    );
    // The family comes back whatever the pool is called.
    let back = v1::ProxmoxMachine::from_hub(&decode(hub)).unwrap();
    assert_eq!(back.spec.network, object.spec.network);
}

#[test]
fn devices_are_matched_by_name_not_position() {
    let stored = rich_machine();
    let mut seen = v1::ProxmoxMachine::from_hub(&stored).unwrap();
    let network = seen.spec.network.as_mut().unwrap();
    // Remove net1, rename net2 to net3 and add net4.
    let net2 = network.additional_devices.remove(1);
    network.additional_devices[0] = v1::AdditionalNetworkDevice {
        name: "net3".into(),
        ..net2
    };
    network.additional_devices.push(decode(
        json!({"name": "net4", "bridge": "vmbr7", "ipv4PoolRef": pool("n")}),
    ));

    let written = encode(&seen.to_hub(Some(&stored)).unwrap());
    let devices = &written["spec"]["network"]["networkDevices"];
    assert_eq!(devices.as_array().unwrap().len(), 3, "net1 is gone");
    assert_eq!(devices[0]["queues"], 4, "net0 keeps its hub-only data");
    assert_eq!(devices[1]["name"], "net3");
    assert_eq!(devices[1]["bridge"], "vmbr2");
    assert_eq!(
        devices[1].get("queues"),
        None,
        "a renamed device gets no stale data"
    );
    assert_eq!(devices[2]["name"], "net4");
    assert_eq!(
        devices[2].get("queues"),
        None,
        "an added device gets no stale data"
    );
    assert_eq!(devices[2].get("dhcp4"), None);
}

#[test]
fn a_machine_without_network_keeps_its_template_card() {
    let object: v1::ProxmoxMachine =
        decode(json!({"spec": {"sourceNode": "pve1", "templateID": 100}}));
    let hub = object.clone().to_hub(None).unwrap();
    // No fabricated bridge: net0 on the cluster's pools, the card as cloned.
    assert_eq!(
        encode(&hub.spec.network),
        json!({"networkDevices": [{"name": "net0", "defaultIPv4": true, "defaultIPv6": true}]})
    );
    assert_eq!(
        v1::ProxmoxMachine::from_hub(&hub).unwrap().spec,
        object.spec
    );

    // Written without network over a stored one that has hub-only data on
    // net0: v1alpha1 says "no network configuration", net0 keeps the rest.
    let stored = rich_machine();
    let written = object.to_hub(Some(&stored)).unwrap();
    let network = encode(&written.spec.network);
    assert_eq!(network["zone"], "zone-a");
    assert_eq!(network["networkDevices"].as_array().unwrap().len(), 1);
    assert_eq!(network["networkDevices"][0]["queues"], 4);
    assert_eq!(network["networkDevices"][0].get("bridge"), None);
    assert_eq!(
        v1::ProxmoxMachine::from_hub(&written).unwrap().spec.network,
        None
    );
}

#[test]
fn conditions_keep_observed_generation_while_unchanged() {
    let stored = rich_machine();
    let mut seen = v1::ProxmoxMachine::from_hub(&stored).unwrap();
    assert_eq!(seen.status.conditions[0].severity, "");
    let unchanged = seen.clone().to_hub(Some(&stored)).unwrap();
    assert_eq!(unchanged.status.conditions[0].observed_generation, Some(3));

    seen.status.conditions[0].status = "False".into();
    seen.status.conditions[0].severity = "Warning".into();
    let changed = seen.to_hub(Some(&stored)).unwrap();
    assert_eq!(changed.status.conditions[0].observed_generation, None);
    assert_eq!(changed.status.conditions[0].status, "False");
}

#[test]
fn the_vip_pool_and_zones_of_a_cluster_survive_v1alpha1() {
    let stored: v2::ProxmoxCluster = decode(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
        "kind": "ProxmoxCluster",
        "metadata": {"name": "c"},
        "spec": {
            "controlPlaneEndpointIPPoolRef": pool("vip"),
            "ipv4Config": {"addresses": ["10.0.0.10-10.0.0.20"], "prefix": 24, "gateway": "10.0.0.1"},
            "dnsServers": ["1.1.1.1"],
            "zoneConfig": [{"zone": "zone-a", "dnsServers": ["9.9.9.9"]}]
        },
        "status": {
            "inClusterZoneRef": [{"zone": "zone-a"}],
            "nodeLocations": {"workers": [{"machine": {"name": "m1"}, "node": "pve1", "zone": "zone-a"}]}
        }
    }));
    let mut seen = v1::ProxmoxCluster::from_hub(&stored).unwrap();
    seen.spec.dns_servers.push("8.8.8.8".into());
    seen.status.node_locations.as_mut().unwrap().workers[0].node = "pve2".into();
    let written = seen.to_hub(Some(&stored)).unwrap();

    let mut expected = stored.clone();
    expected.spec.dns_servers.push("8.8.8.8".into());
    expected.status.node_locations.as_mut().unwrap().workers[0].node = "pve2".into();
    assert_eq!(written, expected);
}

/// `rich_machine` as an upstream install serves it in v1alpha1: its own
/// field mapping (first pool as IPv4 when no name contains "inet", "API
/// Conversion" for an empty message) plus the conversion-data annotation.
fn from_upstream(stored: &v2::ProxmoxMachine) -> v1::ProxmoxMachine {
    let mut data = encode(stored);
    data.as_object_mut().unwrap().remove("metadata");
    decode(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
        "kind": "ProxmoxMachine",
        "metadata": {"name": "m", "namespace": "ns",
                     "annotations": {UPSTREAM_CONVERSION_DATA: data.to_string()}},
        "spec": {
            "sourceNode": "pve1",
            "templateID": 100,
            "network": {
                "default": {"bridge": "vmbr0", "ipv4PoolRef": pool("extra")},
                "additionalDevices": [
                    {"name": "net1", "bridge": "vmbr1", "ipv4PoolRef": pool("a"),
                     "routes": [{"to": "default"}]},
                    {"name": "net2", "bridge": "vmbr2", "ipv4PoolRef": pool("d")}
                ]
            }
        },
        "status": {
            "ipAddresses": {"net1": {"ipv4": "10.0.0.5", "ipv6": "fd00::5"}},
            "conditions": [{"type": "Ready", "status": "True", "reason": "Provisioned",
                            "message": "API Conversion", "lastTransitionTime": "2024-01-01T00:00:00Z"}]
        }
    }))
}

#[test]
fn an_object_moved_from_upstream_converts_to_the_object_upstream_stored() {
    let upstream = rich_machine();
    let written = from_upstream(&upstream).to_hub(None).unwrap();
    assert_eq!(written, upstream, "all of it, the annotation dropped");
}

#[test]
fn upstreams_annotation_is_applied_by_name() {
    let upstream = rich_machine();
    let mut moved = from_upstream(&upstream);
    moved
        .spec
        .network
        .as_mut()
        .unwrap()
        .additional_devices
        .remove(0);

    let written = moved.to_hub(None).unwrap();
    let devices = &written.spec.network.as_ref().unwrap().network_devices;
    assert_eq!(devices.len(), 2);
    // Upstream restores by index and would give net2 the queues of net1.
    assert_eq!(
        (devices[1].name.as_str(), devices[1].queues),
        ("net2", Some(8))
    );
    assert_eq!(
        written.spec.network.as_ref().unwrap().zone.as_deref(),
        Some("zone-a")
    );
}

#[test]
fn the_stored_object_takes_precedence_over_the_annotation() {
    let upstream = rich_machine();
    let moved = from_upstream(&upstream);
    let mut stored = upstream.clone();
    stored.spec.network.as_mut().unwrap().zone = Some("zone-b".into());

    let written = moved.to_hub(Some(&stored)).unwrap();
    assert_eq!(
        written.spec.network.unwrap().zone.as_deref(),
        Some("zone-b")
    );
    assert_eq!(written.metadata.annotations, None);
}

#[test]
fn a_malformed_annotation_is_an_error() {
    let mut object = v1::ProxmoxMachine::default();
    object.metadata.annotations =
        Some([(UPSTREAM_CONVERSION_DATA.to_string(), "[1,".to_string())].into());
    assert!(matches!(
        object.clone().to_hub(None),
        Err(ConversionError::InvalidConversionData { .. })
    ));
    // With a stored object the annotation is not used, only dropped.
    let stored = object
        .clone()
        .to_hub(Some(&v2::ProxmoxMachine::default()))
        .unwrap();
    assert_eq!(stored.metadata.annotations, None);
}

#[test]
fn integers_that_do_not_fit_are_errors_naming_the_field() {
    let hub: v2::ProxmoxMachine = decode(json!({
        "spec": {"network": {"networkDevices": [{"name": "net0"}, {"name": "net1", "mtu": -1}]}}
    }));
    assert_eq!(
        v1::ProxmoxMachine::from_hub(&hub).unwrap_err().to_string(),
        "spec.network.networkDevices[1].mtu: -1 is out of range for this API version (0 to 65535)"
    );

    let spoke: v1::ProxmoxMachine = decode(json!({
        "spec": {"network": {"additionalDevices": [{"name": "net1", "bridge": "b",
            "routes": [{"to": "default", "metric": 3_000_000_000u32}]}]}}
    }));
    assert_eq!(
        spoke.to_hub(None).unwrap_err(),
        ConversionError::OutOfRange {
            path: "spec.network.additionalDevices[0].routes[0].metric".into(),
            value: 3_000_000_000,
            min: i128::from(i32::MIN),
            max: i128::from(i32::MAX),
        }
    );

    let list: v2::ProxmoxClusterList = decode(json!({
        "items": [{}, {"spec": {"schedulerHints": {"memoryAdjustment": -5}}}]
    }));
    assert_eq!(
        v1::ProxmoxClusterList::from_hub(&list)
            .unwrap_err()
            .to_string(),
        "items[1].spec.schedulerHints.memoryAdjustment: -5 is out of range for this API version (0 to 18446744073709551615)"
    );
}

#[test]
fn target_becomes_allowed_nodes() {
    let object: v1::ProxmoxMachine =
        decode(json!({"spec": {"target": "pve3", "allowedNodes": ["pve1"]}}));
    let hub = object.to_hub(None).unwrap();
    assert_eq!(hub.spec.allowed_nodes, vec!["pve3".to_string()]);
}

#[test]
fn old_cluster_class_patches_apply_to_served_cluster_templates() {
    let stored: v2::ProxmoxClusterTemplate = decode(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
        "kind": "ProxmoxClusterTemplate",
        "metadata": {"name": "t"},
        "spec": {"template": {"spec": {"dnsServers": ["1.1.1.1"],
            "ipv4Config": {"addresses": ["10.0.0.10-10.0.0.20"], "prefix": 24, "gateway": "10.0.0.1"}}}}
    }));
    let served = encode(&v1::ProxmoxClusterTemplate::from_hub(&stored).unwrap());
    assert_eq!(
        served["spec"]["template"]["spec"]["cloneSpec"],
        json!({"machineSpec": {}, "sshAuthorizedKeys": [], "virtualIPNetworkInterface": ""})
    );

    // What upstream's v1alpha1 ClusterClasses (v0.4 to v0.7) apply.
    let patch = capmox_apiserver::registry::patch::Patch::json(
        json!([
            {"op": "replace", "path": "/spec/template/spec/cloneSpec/sshAuthorizedKeys", "value": ["ssh-ed25519 AAAA"]},
            {"op": "replace", "path": "/spec/template/spec/cloneSpec/virtualIPNetworkInterface", "value": "eth0"}
        ])
        .to_string()
        .as_bytes(),
    )
    .unwrap();
    let served = patch.apply(&served).expect("the patch paths exist");

    // cloneSpec has no function: writing it back changes nothing.
    let written = decode::<v1::ProxmoxClusterTemplate>(served)
        .to_hub(Some(&stored))
        .unwrap();
    assert_eq!(written, stored);
}
