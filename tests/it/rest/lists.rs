//! Lists: namespaced and cluster-wide, label and field selectors, pages with continue tokens
//! read at one revision, resourceVersion semantics, and the representations (Table with the
//! version's columns, PartialObjectMetadataList, YAML).

use serde_json::{Value, json};

use super::{Api, GROUP, collection, item, labelled, machine};

const MACHINES: &str = "proxmoxmachines";

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items: {list}"))
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_owned))
        .collect()
}

async fn seed(api: &Api) {
    for (ns, name, tier) in [
        ("default", "a", "web"),
        ("default", "b", "db"),
        ("default", "c", "web"),
        ("other", "d", "web"),
        ("other", "e", "cache"),
    ] {
        let mut object = labelled(machine(name), &[("tier", tier)]);
        object["metadata"]["namespace"] = json!(ns);
        api.create(&object).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn selectors_and_scopes() {
    let api = Api::start().await;
    seed(&api).await;
    let all = format!("/apis/{GROUP}/v1alpha2/{MACHINES}");
    let list = api.get(&all).send().await.json();
    assert_eq!(list["kind"], "ProxmoxMachineList");
    assert_eq!(list["apiVersion"], format!("{GROUP}/v1alpha2"));
    assert_eq!(names(&list), ["a", "b", "c", "d", "e"]);
    assert!(list["metadata"]["resourceVersion"].is_string());
    let ns = collection("v1alpha2", "other", MACHINES);
    assert_eq!(names(&api.get(&ns).send().await.json()), ["d", "e"]);
    let empty = api
        .get(&collection("v1alpha2", "empty", MACHINES))
        .send()
        .await
        .json();
    assert_eq!(empty["items"], json!([]));

    let cases = [
        ("labelSelector=tier%3Dweb", vec!["a", "c", "d"]),
        ("labelSelector=tier%21%3Dweb", vec!["b", "e"]),
        ("labelSelector=tier%20in%20(db,cache)", vec!["b", "e"]),
        ("labelSelector=tier%20notin%20(web)", vec!["b", "e"]),
        ("labelSelector=tier", vec!["a", "b", "c", "d", "e"]),
        ("labelSelector=%21tier", vec![]),
        ("fieldSelector=metadata.name%3Dd", vec!["d"]),
        ("fieldSelector=metadata.namespace%3Dother", vec!["d", "e"]),
        (
            "fieldSelector=metadata.namespace%21%3Dother&labelSelector=tier%3Dweb",
            vec!["a", "c"],
        ),
    ];
    for (query, want) in cases {
        let list = api.get(&format!("{all}?{query}")).send().await;
        assert_eq!(list.status, 200, "{query}: {}", list.text);
        assert_eq!(names(&list.json()), want, "{query}");
    }
    let bad_field = api
        .get(&format!("{all}?fieldSelector=spec.providerID%3Dx"))
        .send()
        .await;
    assert_eq!(bad_field.status, 400);
    assert_eq!(
        bad_field.message(),
        "field label not supported: spec.providerID"
    );
    let bad_label = api
        .get(&format!("{all}?labelSelector=a%20in%20b"))
        .send()
        .await;
    assert_eq!(bad_label.status, 400);
}

/// Plain JSON lists reuse each object's encoding per revision and version: after an update, a
/// delete and a re-create, each version's list shows the objects as they are now.
#[tokio::test(flavor = "multi_thread")]
async fn lists_show_every_write_in_every_version() {
    let api = Api::start().await;
    seed(&api).await;
    let listed = |version: &'static str| {
        let api = &api;
        async move {
            let list = api
                .get(&collection(version, "default", MACHINES))
                .send()
                .await
                .json();
            let text = |item: &Value, pointer: &str| {
                item.pointer(pointer)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            list["items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|i| {
                    (
                        text(i, "/metadata/name"),
                        text(i, "/metadata/labels/tier"),
                        text(i, "/metadata/resourceVersion"),
                    )
                })
                .collect::<Vec<_>>()
        }
    };
    let before = [listed("v1alpha2").await, listed("v1alpha1").await];
    assert_eq!(before[0], before[1], "both versions list the same objects");
    let patched = api
        .patch(&item("v1alpha1", "default", MACHINES, "a"))
        .merge_patch(&json!({"metadata": {"labels": {"tier": "edge"}}}))
        .send()
        .await;
    assert_eq!(patched.status, 200, "{}", patched.text);
    let deleted = api
        .delete(&item("v1alpha2", "default", MACHINES, "b"))
        .send()
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.text);
    let mut again = labelled(machine("c"), &[("tier", "db")]);
    again["metadata"]["namespace"] = json!("default");
    let removed = api
        .delete(&item("v1alpha2", "default", MACHINES, "c"))
        .send()
        .await;
    assert_eq!(removed.status, 200, "{}", removed.text);
    let recreated = api.create(&again).await;
    for version in ["v1alpha2", "v1alpha1"] {
        let after = listed(version).await;
        let summary: Vec<_> = after
            .iter()
            .map(|(n, t, _)| (n.as_str(), t.as_str()))
            .collect();
        assert_eq!(summary, [("a", "edge"), ("c", "db")], "{version}");
        assert_eq!(
            after[0].2,
            patched.json()["metadata"]["resourceVersion"],
            "{version}"
        );
        assert_eq!(
            after[1].2, recreated["metadata"]["resourceVersion"],
            "{version}"
        );
        assert_ne!(after[0].2, before[0][0].2, "{version}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn pages_are_consistent_and_counted() {
    let api = Api::start().await;
    seed(&api).await;
    let all = format!("/apis/{GROUP}/v1alpha2/{MACHINES}");
    let first = api.get(&format!("{all}?limit=2")).send().await.json();
    assert_eq!(names(&first), ["a", "b"]);
    assert_eq!(first["metadata"]["remainingItemCount"], 3);
    let rv = first["metadata"]["resourceVersion"].clone();
    let token = first["metadata"]["continue"]
        .as_str()
        .expect("continue")
        .to_owned();
    // A write between pages does not show: pages are read at the first page's revision.
    let mut late = machine("bb");
    late["metadata"]["namespace"] = json!("default");
    api.create(&late).await;
    let second = api
        .get(&format!("{all}?limit=2&continue={token}"))
        .send()
        .await
        .json();
    assert_eq!(names(&second), ["c", "d"]);
    assert_eq!(second["metadata"]["resourceVersion"], rv);
    let token = second["metadata"]["continue"]
        .as_str()
        .expect("continue")
        .to_owned();
    let last = api
        .get(&format!("{all}?limit=2&continue={token}"))
        .send()
        .await
        .json();
    assert_eq!(names(&last), ["e"]);
    assert!(last["metadata"].get("continue").is_none());
    assert!(last["metadata"].get("remainingItemCount").is_none());

    // With a selector pages still fill up, and no count is given.
    let web = api
        .get(&format!("{all}?limit=2&labelSelector=tier%3Dweb"))
        .send()
        .await
        .json();
    assert_eq!(names(&web), ["a", "c"]);
    assert!(web["metadata"].get("remainingItemCount").is_none());
    assert!(web["metadata"]["continue"].is_string());

    let bad = api.get(&format!("{all}?continue=garbage")).send().await;
    assert_eq!(bad.status, 400);
}

#[tokio::test(flavor = "multi_thread")]
async fn resource_version_semantics() {
    let api = Api::start().await;
    let created = api.create(&machine("a")).await;
    let rv: u64 = created["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .expect("rv");
    api.create(&machine("b")).await;
    let ns = collection("v1alpha2", "default", MACHINES);
    let exact = api
        .get(&format!(
            "{ns}?resourceVersion={rv}&resourceVersionMatch=Exact"
        ))
        .send()
        .await
        .json();
    assert_eq!(names(&exact), ["a"], "the state at that revision");
    let newer = api
        .get(&format!(
            "{ns}?resourceVersion={rv}&resourceVersionMatch=NotOlderThan"
        ))
        .send()
        .await
        .json();
    assert_eq!(names(&newer), ["a", "b"]);
    let any = api.get(&format!("{ns}?resourceVersion=0")).send().await;
    assert_eq!(any.status, 200);
    let future = api
        .get(&format!("{ns}?resourceVersion=999999"))
        .send()
        .await;
    assert_eq!(future.status, 504);
    assert_eq!(
        future.json()["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
    let invalid = api
        .get(&format!("{ns}?resourceVersionMatch=Exact"))
        .send()
        .await;
    assert_eq!(invalid.status, 422);
    let not_number = api.get(&format!("{ns}?resourceVersion=abc")).send().await;
    assert_eq!(not_number.status, 400);

    // After compaction an exact read of the past is gone.
    api.dev
        .server
        .store
        .compact(i64::try_from(rv).expect("rv") + 1)
        .await
        .expect("compact");
    let expired = api
        .get(&format!(
            "{ns}?resourceVersion={rv}&resourceVersionMatch=Exact"
        ))
        .send()
        .await;
    assert_eq!(
        (expired.status, expired.reason().as_str()),
        (410, "Expired")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn tables_metadata_and_yaml() {
    let api = Api::start().await;
    let mut object = labelled(machine("t"), &[("cluster.x-k8s.io/cluster-name", "demo")]);
    object["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine", "name": "demo-m",
        "uid": "6b0f8ef2-0000-4000-8000-000000000001"
    }]);
    api.create(&object).await;
    let ns = collection("v1alpha2", "default", MACHINES);
    let table = api
        .get(&ns)
        .accept("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json")
        .send()
        .await;
    assert_eq!(
        table.header("content-type"),
        "application/json;as=Table;v=v1;g=meta.k8s.io"
    );
    let table = table.json();
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        columns,
        ["Name", "Cluster", "Ready", "Node", "Provider_ID", "Machine"]
    );
    let row = &table["rows"][0];
    assert_eq!(row["cells"][0], "t");
    assert_eq!(row["cells"][1], "demo");
    assert_eq!(row["cells"][5], "demo-m");
    assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(row["object"]["metadata"]["namespace"], "default");
    let none = api
        .get(&format!("{ns}?includeObject=None"))
        .accept("application/json;as=Table;v=v1;g=meta.k8s.io")
        .send()
        .await
        .json();
    assert_eq!(none["rows"][0]["object"], Value::Null);
    // The v1alpha1 table has v1alpha1's columns (Ready reads .status.ready).
    let v1 = api
        .get(&super::item("v1alpha1", "default", MACHINES, "t"))
        .accept("application/json;as=Table;v=v1;g=meta.k8s.io")
        .send()
        .await
        .json();
    assert_eq!(v1["columnDefinitions"][2]["name"], "Ready");
    assert_eq!(v1["rows"].as_array().map(Vec::len), Some(1));

    let metadata = api
        .get(&ns)
        .accept("application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json")
        .send()
        .await
        .json();
    assert_eq!(metadata["kind"], "PartialObjectMetadataList");
    assert_eq!(metadata["items"][0]["kind"], "PartialObjectMetadata");
    assert!(metadata["items"][0].get("spec").is_none());
    let wrong = api
        .get(&ns)
        .accept("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
        .send()
        .await;
    assert_eq!(wrong.status, 406);
    let single = api
        .get(&super::item("v1alpha2", "default", MACHINES, "t"))
        .accept("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json")
        .send()
        .await;
    assert_eq!(
        single.header("content-type"),
        "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
    );
    let single = single.json();
    assert_eq!(single["kind"], "PartialObjectMetadata");
    assert_eq!(single["metadata"]["name"], "t");
    assert!(single.get("spec").is_none());

    let yaml = api.get(&ns).accept("application/yaml").send().await;
    assert_eq!(yaml.header("content-type"), "application/yaml");
    assert!(
        yaml.text.contains("kind: ProxmoxMachineList"),
        "{}",
        yaml.text
    );
    let yaml_body = format!(
        "apiVersion: {GROUP}/v1alpha2\nkind: ProxmoxMachine\nmetadata:\n  name: from-yaml\nspec:\n  sourceNode: pve1\n  templateID: 100\n  network:\n    networkDevices:\n    - name: net0\n      bridge: vmbr0\n"
    );
    let created = api
        .post(&ns)
        .raw("application/yaml", yaml_body)
        .send()
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
    let pretty = api.get(&format!("{ns}?pretty=true")).send().await;
    assert!(pretty.text.contains("\n  \""), "{}", pretty.text);
    // A list's items and a single object are indented too, though served from their cached
    // compact encoding otherwise.
    assert!(
        pretty.text.contains("\n        \"name\": \"from-yaml\""),
        "{}",
        pretty.text
    );
    let object = api.get(&format!("{ns}/from-yaml?pretty=true")).send().await;
    assert!(
        object.text.contains("\n    \"name\": \"from-yaml\""),
        "{}",
        object.text
    );
    let compact = api.get(&format!("{ns}/from-yaml")).send().await;
    assert!(!compact.text.contains('\n'), "{}", compact.text);
    assert_eq!(compact.json(), object.json());
}
