//! Ownership across versions: a manager's fields are recorded in the
//! version it wrote in, and conflicts with it are found and reported in
//! that version — v1alpha1's `network.default` and `additionalDevices` are
//! v1alpha2's `network.networkDevices`.

use serde_json::{Value, json};

use super::support::{API_V1, Store, V1, V2, conflict_lines, machine, named, request};

fn v1_config() -> Value {
    machine(
        V1,
        json!({
            "sourceNode": "pve1",
            "templateID": 100,
            "network": {
                "default": {"bridge": "vmbr0"},
                "additionalDevices": [{"name": "net1", "bridge": "vmbr1"}]
            }
        }),
    )
}

fn net1_bridge(bridge: &str) -> Value {
    machine(
        V2,
        json!({"network": {"networkDevices": [{"name": "net1", "bridge": bridge}]}}),
    )
}

/// A store where `old-tool` applied [`v1_config`] in v1alpha1.
fn applied_in_v1alpha1() -> Store {
    let mut store = Store::default();
    store
        .apply(v1_config(), &request("old-tool", V1, 0), false)
        .unwrap();
    store
}

#[test]
fn fields_are_recorded_in_the_version_of_the_request() {
    let store = applied_in_v1alpha1();
    assert_eq!(
        store.owners(),
        json!({"old-tool/Apply/v1alpha1": {"f:spec": {
            "f:sourceNode": {},
            "f:templateID": {},
            "f:network": {
                "f:default": {"f:bridge": {}},
                "f:additionalDevices": {named("net1"): {".": {}, "f:name": {}, "f:bridge": {}}}
            }
        }}})
    );
    assert_eq!(
        store.hub.as_ref().unwrap()["spec"]["network"]["networkDevices"],
        json!([
            // net0 takes the cluster's default pools: v1alpha1's default device
            // always did, and the defaulting webhook records it.
            {"name": "net0", "bridge": "vmbr0", "defaultIPv4": true, "defaultIPv6": true},
            {"name": "net1", "bridge": "vmbr1"}
        ])
    );
    assert_eq!(store.read(V1).unwrap()["spec"], v1_config()["spec"]);
}

#[test]
fn a_conflict_with_a_manager_of_another_version_names_its_path() {
    let mut store = applied_in_v1alpha1();
    assert_eq!(
        conflict_lines(store.apply(net1_bridge("vmbr9"), &request("new-tool", V2, 1), false)),
        [r#"old-tool .spec.network.additionalDevices[name="net1"].bridge"#]
    );
    let Err(error) = store.apply(net1_bridge("vmbr9"), &request("new-tool", V2, 1), false) else {
        panic!("expected a conflict");
    };
    assert_eq!(
        error.to_string(),
        r#"Apply failed with 1 conflict: conflict with "old-tool": .spec.network.additionalDevices[name="net1"].bridge"#
    );
}

#[test]
fn the_same_value_in_another_version_is_shared() {
    let mut store = applied_in_v1alpha1();
    store
        .apply(net1_bridge("vmbr1"), &request("new-tool", V2, 1), false)
        .unwrap();
    let owners = store.owners();
    assert_eq!(
        owners["new-tool/Apply/v1alpha2"],
        json!({"f:spec": {"f:network": {"f:networkDevices": {
            named("net1"): {".": {}, "f:name": {}, "f:bridge": {}}
        }}}})
    );
    assert_eq!(
        owners["old-tool/Apply/v1alpha1"]["f:spec"]["f:network"]["f:additionalDevices"],
        json!({named("net1"): {".": {}, "f:name": {}, "f:bridge": {}}})
    );
}

#[test]
fn forcing_takes_the_field_from_the_other_version() {
    let mut store = applied_in_v1alpha1();
    store
        .apply(net1_bridge("vmbr9"), &request("new-tool", V2, 1), true)
        .unwrap();
    assert_eq!(
        store.read(V1).unwrap()["spec"]["network"]["additionalDevices"],
        json!([{"name": "net1", "bridge": "vmbr9"}])
    );
    assert_eq!(
        store.owners()["old-tool/Apply/v1alpha1"]["f:spec"]["f:network"]["f:additionalDevices"],
        json!({named("net1"): {".": {}, "f:name": {}}})
    );
}

#[test]
fn an_updater_of_v1alpha1_is_named_with_its_version() {
    let mut store = applied_in_v1alpha1();
    let mut edited = store.read(V1).unwrap();
    edited["spec"]["network"]["default"]["bridge"] = json!("vmbr5");
    store.write(edited, &request("editor", V1, 1));
    assert_eq!(
        store.owners()["editor/Update/v1alpha1"],
        json!({"f:spec": {"f:network": {"f:default": {"f:bridge": {}}}}})
    );
    let net0 = machine(
        V2,
        json!({"network": {"networkDevices": [{"name": "net0", "bridge": "vmbr7"}]}}),
    );
    assert_eq!(
        store
            .apply(net0, &request("new-tool", V2, 2), false)
            .unwrap_err()
            .to_string(),
        format!(
            r#"Apply failed with 1 conflict: conflict with "editor" using {API_V1}: .spec.network.default.bridge"#
        )
    );
}

#[test]
fn an_item_goes_when_its_last_owner_in_either_version_stops_applying_it() {
    let mut store = applied_in_v1alpha1();
    store
        .apply(net1_bridge("vmbr1"), &request("new-tool", V2, 1), false)
        .unwrap();
    let without_net1 = machine(
        V1,
        json!({"sourceNode": "pve1", "templateID": 100, "network": {"default": {"bridge": "vmbr0"}}}),
    );
    store
        .apply(without_net1, &request("old-tool", V1, 2), false)
        .unwrap();
    let devices =
        |store: &Store| store.hub.as_ref().unwrap()["spec"]["network"]["networkDevices"].clone();
    assert_eq!(
        devices(&store),
        json!([
            // net0 takes the cluster's default pools: v1alpha1's default device
            // always did, and the defaulting webhook records it.
            {"name": "net0", "bridge": "vmbr0", "defaultIPv4": true, "defaultIPv6": true},
            {"name": "net1", "bridge": "vmbr1"}
        ]),
        "new-tool still applies net1"
    );
    store
        .apply(machine(V2, json!({})), &request("new-tool", V2, 3), false)
        .unwrap();
    assert_eq!(
        devices(&store),
        json!([{"name": "net0", "bridge": "vmbr0", "defaultIPv4": true, "defaultIPv6": true}])
    );
}
