//! Defaulting: the schema defaults of each version while decoding, the
//! positional device names of v1alpha2, and upstream's machine defaulting
//! webhook (fixed to target the device named net0).

use capmox_apiserver::api::decode::{FieldValidation, decode};
use capmox_apiserver::api::resource::{MachineKind, Resource};
use capmox_apiserver::api::{v1alpha1, v1alpha2};
use serde_json::{Value, json};

use super::support::Edit::{Remove, Set};
use super::support::{cluster_v1, cluster_v2, create, edited, machine_v1, machine_v2};

fn decoded_v2_machine(body: Value) -> v1alpha2::ProxmoxMachine {
    decode::<v1alpha2::ProxmoxMachine>(body, FieldValidation::Strict)
        .expect("decodes")
        .object
}

#[test]
fn v1alpha2_schema_defaults() {
    let machine = decoded_v2_machine(edited(
        machine_v2(),
        &[
            Remove("/spec/network/networkDevices/0/model"),
            Remove("/spec/sourceNode"),
            Remove("/spec/templateID"),
            Set("/spec/templateSelector", json!({ "matchTags": ["ubuntu"] })),
        ],
    ));
    assert_eq!(machine.spec.full, Some(true));
    let device = &machine
        .spec
        .network
        .as_ref()
        .expect("network")
        .network_devices[0];
    assert_eq!(device.model.as_deref(), Some("virtio"));
    assert_eq!(
        machine
            .spec
            .template_selector
            .expect("selector")
            .match_policy,
        "exact"
    );

    let cluster = decode::<v1alpha2::ProxmoxCluster>(
        edited(
            cluster_v2(),
            &[Set("/status", json!({ "inClusterZoneRef": [{}] }))],
        ),
        FieldValidation::Strict,
    )
    .expect("decodes")
    .object;
    assert_eq!(cluster.spec.ipv4_config.expect("ipv4").metric, Some(100));
    assert_eq!(cluster.spec.external_managed_control_plane, Some(false));
    assert_eq!(
        cluster.status.in_cluster_zone_ref[0].zone.as_deref(),
        Some("default")
    );
}

#[test]
fn v1alpha1_schema_defaults() {
    let machine = decode::<v1alpha1::ProxmoxMachine>(machine_v1(), FieldValidation::Strict)
        .expect("decodes")
        .object;
    assert_eq!(machine.spec.full, Some(true));
    assert_eq!(
        machine
            .spec
            .network
            .expect("network")
            .default
            .expect("net0")
            .model
            .as_deref(),
        Some("virtio")
    );
    let decoded = decode::<v1alpha1::ProxmoxCluster>(
        edited(cluster_v1(), &[Set("/status", json!({}))]),
        FieldValidation::Strict,
    )
    .expect("decodes");
    assert_eq!(
        decoded.object.spec.ipv4_config.expect("ipv4").metric,
        Some(100)
    );
    assert_eq!(decoded.value["status"], json!({ "ready": false }));
}

#[test]
fn nulls_take_the_default_or_disappear() {
    let decoded = decode::<v1alpha2::ProxmoxMachine>(
        edited(
            machine_v2(),
            &[
                Set("/spec/full", Value::Null),
                Set("/spec/pool", Value::Null),
            ],
        ),
        FieldValidation::Strict,
    )
    .expect("decodes");
    assert_eq!(decoded.value["spec"]["full"], json!(true));
    assert!(decoded.value["spec"].get("pool").is_none());
}

#[test]
fn unnamed_devices_are_named_by_position() {
    let machine = decoded_v2_machine(edited(
        machine_v2(),
        &[Set(
            "/spec/network/networkDevices",
            json!([{ "bridge": "vmbr0" }, { "bridge": "vmbr1" }, { "bridge": "vmbr2", "name": "net2" }]),
        )],
    ));
    let names: Vec<&str> = machine
        .spec
        .network
        .as_ref()
        .expect("network")
        .network_devices
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(names, ["net0", "net1", "net2"]);
    // Two unnamed devices no longer collide on `net0` (upstream's default).
    assert!(
        create::<MachineKind>(edited(
            machine_v2(),
            &[Set(
                "/spec/network/networkDevices",
                json!([{ "bridge": "vmbr0" }, { "bridge": "vmbr1" }])
            )],
        ))
        .is_ok()
    );
}

#[test]
fn webhook_defaults_the_pools_onto_net0() {
    let admitted = create::<MachineKind>(machine_v2()).expect("admitted").hub;
    let net0 = &admitted.spec.network.expect("network").network_devices[0];
    assert_eq!(
        (net0.default_ipv4, net0.default_ipv6),
        (Some(true), Some(true))
    );
}

#[test]
fn webhook_defaults_follow_the_name_not_the_index() {
    let body = edited(
        machine_v2(),
        &[Set(
            "/spec/network/networkDevices",
            json!([{ "name": "net1", "bridge": "vmbr1" }, { "name": "net0", "bridge": "vmbr0" }]),
        )],
    );
    let hub = create::<MachineKind>(body).expect("admitted").hub;
    let devices = hub.spec.network.expect("network").network_devices;
    assert_eq!(devices[0].name, "net1", "the user's order is kept");
    assert_eq!(
        (devices[0].default_ipv4, devices[0].default_ipv6),
        (None, None)
    );
    assert_eq!(
        (devices[1].default_ipv4, devices[1].default_ipv6),
        (Some(true), Some(true))
    );
}

#[test]
fn webhook_leaves_chosen_defaults_and_dhcp_alone() {
    let body = edited(
        machine_v2(),
        &[Set(
            "/spec/network/networkDevices",
            json!([
                { "name": "net0", "bridge": "vmbr0", "dhcp4": true },
                { "name": "net1", "bridge": "vmbr1", "defaultIPv6": true }
            ]),
        )],
    );
    let hub = create::<MachineKind>(body).expect("admitted").hub;
    let devices = hub.spec.network.expect("network").network_devices;
    // IPv4 comes from DHCP, IPv6 already has its device: nothing is added.
    assert_eq!(
        (devices[0].default_ipv4, devices[0].default_ipv6),
        (None, None)
    );
    assert_eq!(devices[1].default_ipv6, Some(true));
}

#[test]
fn webhook_defaulting_without_a_network_does_nothing() {
    let mut machine = v1alpha2::ProxmoxMachine::default();
    MachineKind::default_hub(&mut machine);
    assert_eq!(machine, v1alpha2::ProxmoxMachine::default());
}
