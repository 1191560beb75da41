//! Conversion through the server: an object written in one version reads in the other and
//! back unchanged, and a read-modify-write through v1alpha1 keeps what only v1alpha2 can say.

use serde_json::{Value, json};

use super::{Api, GROUP, collection, item, machine, machine_v1};

const MACHINES: &str = "proxmoxmachines";

/// The object without what the server changes on every write.
fn content(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(meta) = object["metadata"].as_object_mut() {
        meta.remove("resourceVersion");
    }
    object
}

#[tokio::test(flavor = "multi_thread")]
async fn v1alpha1_round_trips_through_the_hub() {
    let api = Api::start().await;
    let created = api.create(&machine_v1("v1")).await;
    assert_eq!(created["apiVersion"], format!("{GROUP}/v1alpha1"));
    assert_eq!(created["spec"]["network"]["default"]["bridge"], "vmbr0");

    let hub = api
        .get(&item("v1alpha2", "default", MACHINES, "v1"))
        .send()
        .await
        .json();
    assert_eq!(hub["apiVersion"], format!("{GROUP}/v1alpha2"));
    assert_eq!(hub["metadata"]["uid"], created["metadata"]["uid"]);
    assert_eq!(
        hub["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    // v1alpha1's default device is v1alpha2's net0.
    let devices = hub["spec"]["network"]["networkDevices"]
        .as_array()
        .expect("devices");
    assert_eq!(devices[0]["name"], "net0");
    assert_eq!(devices[0]["bridge"], "vmbr0");

    let back = api
        .get(&item("v1alpha1", "default", MACHINES, "v1"))
        .send()
        .await
        .json();
    assert_eq!(back, created, "v1alpha1 → hub → v1alpha1 is the identity");

    // Both versions list the same objects.
    let list = api
        .get(&collection("v1alpha1", "default", MACHINES))
        .send()
        .await
        .json();
    assert_eq!(list["kind"], "ProxmoxMachineList");
    assert_eq!(list["apiVersion"], format!("{GROUP}/v1alpha1"));
    assert_eq!(list["items"][0]["apiVersion"], format!("{GROUP}/v1alpha1"));
}

#[tokio::test(flavor = "multi_thread")]
async fn writes_through_v1alpha1_keep_hub_only_fields() {
    let api = Api::start().await;
    let mut hub = machine("h");
    hub["spec"]["network"]["networkDevices"][0]["dhcp4"] = json!(true);
    let stored = api.create(&hub).await;
    assert_eq!(
        stored["spec"]["network"]["networkDevices"][0]["dhcp4"],
        true
    );

    // Read as v1alpha1, change a label, write back (PUT and merge patch).
    let path_v1 = item("v1alpha1", "default", MACHINES, "h");
    let mut spoke = api.get(&path_v1).send().await.json();
    spoke["metadata"]["labels"] = json!({"edited": "put"});
    let put = api.put(&path_v1).json(&spoke).send().await;
    assert_eq!(put.status, 200, "{}", put.text);
    let patched = api
        .patch(&path_v1)
        .merge_patch(&json!({"metadata": {"labels": {"patched": "yes"}}}))
        .send()
        .await;
    assert_eq!(patched.status, 200, "{}", patched.text);

    let after = api
        .get(&item("v1alpha2", "default", MACHINES, "h"))
        .send()
        .await
        .json();
    assert_eq!(
        after["spec"], stored["spec"],
        "nothing v1alpha1 cannot say was lost"
    );
    assert_eq!(
        after["metadata"]["generation"], 1,
        "a label edit is not a spec change"
    );
    assert_eq!(after["metadata"]["labels"]["patched"], "yes");

    // Writing the v1alpha1 object back unchanged changes nothing at all.
    let unchanged = api.get(&path_v1).send().await.json();
    let again = api.put(&path_v1).json(&unchanged).send().await.json();
    assert_eq!(content(&again), content(&unchanged));
    assert_eq!(
        again["metadata"]["resourceVersion"], unchanged["metadata"]["resourceVersion"],
        "no write happened"
    );
}
