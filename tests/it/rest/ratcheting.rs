//! Validation ratcheting through the server: an update may keep what the
//! stored object already has, even where today's rules (or the other
//! version's) refuse it, through every write of both versions; what it
//! changes, and every create, meets the rules.

use serde_json::{Value, json};

use super::{Api, GROUP, Reply, collection, item, machine};

const MACHINES: &str = "proxmoxmachines";
const APPLY: &str = "application/apply-patch+yaml";

/// v1alpha1's rule on additional devices, failing on a bridge-only device.
const NO_POOL: &str = r#"spec.network.additionalDevices[0]: Invalid value: "object": no such key: ipv4PoolRef evaluating rule: at least one pool reference must be set, either ipv4PoolRef or ipv6PoolRef"#;

/// The `field` of every cause of a 422 Status.
fn cause_fields(reply: &Reply) -> Vec<String> {
    assert_eq!(reply.status, 422, "{}", reply.text);
    reply.json()["details"]["causes"]
        .as_array()
        .expect("causes")
        .iter()
        .map(|c| c["field"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn assert_ok(reply: &Reply, what: &str) {
    assert_eq!(reply.status, 200, "{what}: {}", reply.text);
}

/// Rewrites a stored machine directly in the store, bypassing validation:
/// a value written before a rule tightened.
async fn inject(api: &Api, name: &str, edit: impl FnOnce(&mut Value)) {
    let store = &api.dev.server.store;
    let key = format!("/{GROUP}/{MACHINES}/default/{name}");
    let stored = store.get(&key).await.expect("stored");
    let mut object: Value = serde_json::from_slice(&stored.value).expect("stored JSON");
    edit(&mut object);
    store
        .update(&key, object.to_string().into_bytes(), stored.revision)
        .await
        .expect("rewritten");
}

#[tokio::test(flavor = "multi_thread")]
async fn v1alpha1_clients_update_machines_with_bridge_only_devices() {
    let api = Api::start().await;
    let mut created = machine("names");
    if let Some(devices) = created["spec"]["network"]["networkDevices"].as_array_mut() {
        devices.push(json!({ "name": "net1", "bridge": "vmbr1" }));
    }
    let created = api.create(&created).await;
    let bridge_only = created["spec"]["network"]["networkDevices"][1].clone();
    let path = item("v1alpha1", "default", MACHINES, "names");

    let merged = api
        .patch(&path)
        .merge_patch(&json!({ "spec": { "numCores": 6 } }))
        .send()
        .await;
    assert_ok(&merged, "merge patch");
    assert!(
        merged.warnings().iter().any(|w| w == NO_POOL),
        "the unchanged device's failed rule is a warning: {:?}",
        merged.warnings()
    );
    let patched = api
        .patch(&path)
        .json_patch(&json!([{ "op": "replace", "path": "/spec/numSockets", "value": 3 }]))
        .send()
        .await;
    assert_ok(&patched, "JSON patch");
    let applied = api
        .patch(&format!("{path}?fieldManager=tuner&force=true"))
        .raw(
            APPLY,
            json!({
                "apiVersion": format!("{GROUP}/v1alpha1"),
                "kind": "ProxmoxMachine",
                "metadata": { "name": "names", "namespace": "default" },
                "spec": { "numCores": 7 }
            })
            .to_string(),
        )
        .send()
        .await;
    assert_ok(&applied, "apply");
    let mut read = api.get(&path).send().await.json();
    read["spec"]["memoryMiB"] = json!(8192);
    assert_ok(&api.put(&path).json(&read).send().await, "PUT");
    let status = api
        .patch(&format!("{path}/status"))
        .merge_patch(&json!({ "status": { "ready": true } }))
        .send()
        .await;
    assert_ok(&status, "status patch");

    let hub = api
        .get(&item("v1alpha2", "default", MACHINES, "names"))
        .send()
        .await
        .json();
    assert_eq!(hub["spec"]["numCores"], 7);
    assert_eq!(hub["spec"]["numSockets"], 3);
    assert_eq!(hub["spec"]["memoryMiB"], 8192);
    assert_eq!(hub["status"]["initialization"]["provisioned"], true);
    assert_eq!(hub["spec"]["network"]["networkDevices"][1], bridge_only);

    // Editing the device itself through v1alpha1 meets v1alpha1's rule.
    let edited = api
        .patch(&path)
        .json_patch(&json!([{
            "op": "add", "path": "/spec/network/additionalDevices/0/mtu", "value": 1500
        }]))
        .send()
        .await;
    assert_eq!(cause_fields(&edited), ["spec.network.additionalDevices[0]"]);
    assert!(
        edited.message().contains("no such key: ipv4PoolRef"),
        "{}",
        edited.text
    );

    // Giving it a pool reference meets the rule; removing it needs none.
    let pool = json!({ "apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "storage" });
    let pooled = api
        .patch(&path)
        .json_patch(&json!([{
            "op": "add", "path": "/spec/network/additionalDevices/0/ipv4PoolRef", "value": pool
        }]))
        .send()
        .await;
    assert_ok(&pooled, "pool reference added");
    assert!(pooled.warnings().is_empty(), "{:?}", pooled.warnings());
    let removed = api
        .patch(&path)
        .json_patch(&json!([{ "op": "remove", "path": "/spec/network/additionalDevices/0" }]))
        .send()
        .await;
    assert_ok(&removed, "device removed");
    let hub = api
        .get(&item("v1alpha2", "default", MACHINES, "names"))
        .send()
        .await
        .json();
    let names: Vec<&Value> = hub["spec"]["network"]["networkDevices"]
        .as_array()
        .expect("devices")
        .iter()
        .map(|d| &d["name"])
        .collect();
    assert_eq!(names, [&json!("net0")]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stored_value_out_of_todays_range_is_kept_but_not_changed_to_another() {
    let api = Api::start().await;
    let v2 = item("v1alpha2", "default", MACHINES, "old");
    api.create(&machine("old")).await;
    inject(&api, "old", |m| {
        m["spec"]["network"]["networkDevices"][0]["vlan"] = json!(5000);
    })
    .await;

    let unrelated = api
        .patch(&v2)
        .merge_patch(&json!({ "spec": { "numCores": 6 } }))
        .send()
        .await;
    assert_ok(&unrelated, "v1alpha2 edit elsewhere");
    let through_v1 = api
        .patch(&item("v1alpha1", "default", MACHINES, "old"))
        .merge_patch(&json!({ "spec": { "numCores": 8 } }))
        .send()
        .await;
    assert_ok(&through_v1, "v1alpha1 edit elsewhere");

    let vlan = |value: u32| json!([{ "op": "replace", "path": "/spec/network/networkDevices/0/vlan", "value": value }]);
    let other_invalid = api.patch(&v2).json_patch(&vlan(5001)).send().await;
    assert_eq!(
        cause_fields(&other_invalid),
        ["spec.network.networkDevices[0].vlan"]
    );
    assert!(
        other_invalid
            .message()
            .contains("should be less than or equal to 4094"),
        "{}",
        other_invalid.text
    );

    // The transition rule on the boot volume still runs beside a ratcheted value.
    let resized = api
        .patch(&v2)
        .json_patch(
            &json!([{ "op": "replace", "path": "/spec/disks/bootVolume/sizeGb", "value": 200 }]),
        )
        .send()
        .await;
    assert_eq!(cause_fields(&resized), ["spec.disks.bootVolume"]);
    assert!(
        resized.message().contains("Value is immutable"),
        "{}",
        resized.text
    );

    // A create is validated whole, even a copy of the stored object.
    let mut copy = api.get(&v2).send().await.json();
    copy["metadata"] = json!({ "name": "copy", "namespace": "default" });
    let created = api
        .post(&collection("v1alpha2", "default", MACHINES))
        .json(&copy)
        .send()
        .await;
    assert_eq!(
        cause_fields(&created),
        ["spec.network.networkDevices[0].vlan"]
    );

    assert_ok(&api.patch(&v2).json_patch(&vlan(100)).send().await, "fixed");
    let fixed = api.get(&v2).send().await.json();
    assert_eq!(fixed["spec"]["network"]["networkDevices"][0]["vlan"], 100);
    assert_eq!(fixed["spec"]["numCores"], 8);
}
