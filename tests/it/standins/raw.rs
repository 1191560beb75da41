//! Raw requests: every stand-in kind through create/get/list/patch/status/delete with exact
//! codes, discovery of their groups (legacy and aggregated, `/api` and `/api/v1`), bad input
//! answered with a 4xx Status and nothing changed, table output, and no stand-ins when `dev`
//! is started without them (`serve` never has them: `rest::serve`).

use capmox_apiserver::server::dev::DevOptions;
use serde_json::{Value, json};

use super::{KINDS, KindCase};
use crate::rest::Api;
use crate::server::Dev;

const AGGREGATED: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";

async fn create(api: &Api, case: &KindCase, name: &str) -> Value {
    let reply = api
        .post(&case.collection("ns"))
        .json(&case.object(name, "ns"))
        .send()
        .await;
    assert_eq!(reply.status, 201, "{}: {}", case.kind, reply.text);
    reply.json()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_kind_round_trips() {
    let api = Api::start().await;
    for case in &KINDS {
        let created = create(&api, case, "one").await;
        assert_eq!(created["kind"], case.kind);
        assert_eq!(created["metadata"]["generation"], 1, "{}", case.kind);
        let item = format!("{}/one", case.collection("ns"));
        if case.kind == "Secret" {
            assert_eq!(created["data"]["token"], "czNjcmV0");
            assert!(created.get("stringData").is_none());
            assert_eq!(created["type"], "Opaque");
        } else {
            assert_eq!(created["spec"]["anything"]["goes"], json!([1, "two"]));
        }
        let got = api.get(&item).send().await;
        assert_eq!(got.status, 200);
        assert_eq!(got.json(), created);

        let listed = api.get(&case.collection("ns")).send().await.json();
        assert_eq!(listed["kind"], format!("{}List", case.kind));
        assert_eq!(listed["apiVersion"], case.api_version);
        assert_eq!(listed["items"].as_array().map(Vec::len), Some(1));

        let patched = api
            .patch(&item)
            .merge_patch(&json!({"metadata": {"labels": {"x": "y"}}}))
            .send()
            .await;
        assert_eq!(patched.status, 200, "{}", patched.text);
        assert_eq!(
            patched.json()["metadata"]["generation"],
            1,
            "labels keep generation"
        );

        let status = api
            .patch(&format!("{item}/status"))
            .merge_patch(&json!({"status": {"ready": true}}))
            .send()
            .await;
        if case.status {
            assert_eq!(status.status, 200, "{}: {}", case.kind, status.text);
            assert_eq!(status.json()["status"]["ready"], true);
            // The main resource does not write status.
            let main = api
                .patch(&item)
                .merge_patch(&json!({"status": {"ready": false}}))
                .send()
                .await
                .json();
            assert_eq!(main["status"]["ready"], true, "{}", case.kind);
        } else {
            assert_eq!(status.status, 404, "{}", case.kind);
        }

        let table = api
            .get(&case.collection("ns"))
            .accept("application/json;as=Table;v=v1;g=meta.k8s.io")
            .send()
            .await
            .json();
        let columns: Vec<&str> = table["columnDefinitions"]
            .as_array()
            .expect("columns")
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(columns, ["Name", "Age"], "{}", case.kind);

        let deleted = api.delete(&item).send().await;
        assert_eq!(deleted.status, 200);
        assert_eq!(deleted.json()["status"], "Success");
        assert_eq!(api.get(&item).send().await.status, 404);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn discovery_lists_the_stand_in_groups() {
    let api = Api::start().await;
    let instructions = api.dev.server.instructions();
    assert!(
        instructions.contains("This is NOT a management cluster")
            && instructions.contains("Secret (v1)"),
        "{instructions}"
    );
    let groups = api.get("/apis").send().await.json();
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "infrastructure.cluster.x-k8s.io",
            "cluster.x-k8s.io",
            "ipam.cluster.x-k8s.io",
            "apiextensions.k8s.io"
        ]
    );
    let ipam = api.get("/apis/ipam.cluster.x-k8s.io").send().await.json();
    assert_eq!(ipam["preferredVersion"]["version"], "v1beta2");
    let aggregated = api.get("/apis").accept(AGGREGATED).send().await;
    assert!(
        aggregated
            .header("content-type")
            .contains("as=APIGroupDiscoveryList")
    );
    assert_eq!(aggregated.json()["items"].as_array().map(Vec::len), Some(4));

    let core = api.get("/api").send().await.json();
    assert_eq!(core["kind"], "APIVersions");
    assert_eq!(core["versions"], json!(["v1"]));
    let core_aggregated = api.get("/api").accept(AGGREGATED).send().await.json();
    assert_eq!(
        core_aggregated["items"][0]["versions"][0]["resources"][0]["resource"],
        "secrets"
    );
    // Namespaces are not kept: every valid name is an active namespace.
    let namespace = api.get("/api/v1/namespaces/anything").send().await.json();
    assert_eq!(namespace["status"]["phase"], "Active");
    let invalid = api.get("/api/v1/namespaces/Not_A_Label").send().await;
    assert_eq!(invalid.status, 404);
    assert_eq!(invalid.message(), r#"namespaces "Not_A_Label" not found"#);
    let v1 = api.get("/api/v1").send().await.json();
    assert_eq!(v1["groupVersion"], "v1");
    assert_eq!(v1["resources"][0]["name"], "secrets");

    let capi = api
        .get("/apis/cluster.x-k8s.io/v1beta2")
        .send()
        .await
        .json();
    let resources: Vec<(&str, Value)> = capi["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap_or_default(),
                r["shortNames"].clone(),
            )
        })
        .collect();
    assert_eq!(
        resources,
        [
            ("clusters", json!(["cl"])),
            ("clusters/status", Value::Null),
            ("machines", json!(["ma"])),
            ("machines/status", Value::Null),
        ]
    );
    assert_eq!(capi["resources"][0]["categories"], json!(["cluster-api"]));
    let pools = api
        .get("/apis/ipam.cluster.x-k8s.io/v1alpha2")
        .send()
        .await
        .json();
    assert_eq!(pools["resources"][2]["name"], "globalinclusterippools");
    assert_eq!(pools["resources"][2]["namespaced"], false);
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_is_refused_and_changes_nothing() {
    let api = Api::start().await;
    let secrets = "/api/v1/namespaces/ns/secrets";
    let bad = api
        .post(secrets)
        .json(&json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bad"},
            "data": {"ok": "eA==", "broken": "%%%"},
        }))
        .send()
        .await;
    assert_eq!(bad.status, 422, "{}", bad.text);
    let status = bad.json();
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(status["details"]["causes"][0]["field"], "data[broken]");

    let wrong_kind = api
        .post("/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/clusters")
        .json(&json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "metadata": {"name": "m"}}))
        .send()
        .await;
    assert_eq!(wrong_kind.status, 400);
    assert!(
        wrong_kind
            .message()
            .contains("does not match the expected kind")
    );

    let bad_name = api
        .post("/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/clusters")
        .json(&json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": "Not_Valid"}}))
        .send()
        .await;
    assert_eq!(bad_name.status, 422);
    assert_eq!(
        bad_name.json()["details"]["causes"][0]["field"],
        "metadata.name"
    );

    let created = create(&api, &KINDS[2], "kept").await;
    let apply = api
        .patch(&format!("{secrets}/kept"))
        .raw(
            "application/apply-patch+yaml",
            "apiVersion: v1\nkind: Secret\n",
        )
        .send()
        .await;
    assert_eq!(apply.status, 415);
    assert!(
        apply
            .message()
            .contains("server-side apply is not supported")
    );
    let smp = api
        .patch(&format!("{secrets}/kept"))
        .raw(
            "application/strategic-merge-patch+json",
            r#"{"data": {"extra": "eA=="}}"#,
        )
        .send()
        .await;
    assert_eq!(smp.status, 200, "{}", smp.text);
    let smp_on_cluster = api
        .patch("/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/clusters/x")
        .raw("application/strategic-merge-patch+json", "{}")
        .send()
        .await;
    assert_eq!(smp_on_cluster.status, 415);
    let immutable = api
        .patch(&format!("{secrets}/kept"))
        .merge_patch(&json!({"type": "kubernetes.io/tls", "data": {"more": "!!"}}))
        .send()
        .await;
    assert_eq!(immutable.status, 422);
    let status = immutable.json();
    let fields: Vec<&str> = status["details"]["causes"]
        .as_array()
        .map(|c| c.iter().filter_map(|c| c["field"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        fields.contains(&"type") && fields.contains(&"data[more]"),
        "{fields:?}"
    );
    let after = api.get(&format!("{secrets}/kept")).send().await.json();
    assert_eq!(after["type"], "Opaque");
    assert_eq!(after["data"]["extra"], "eA==");
    assert_eq!(
        after["metadata"]["creationTimestamp"],
        created["metadata"]["creationTimestamp"]
    );
    assert!(after["data"].get("more").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn dev_without_stand_ins_serves_none() {
    let options = DevOptions {
        stand_ins: false,
        ..DevOptions::default()
    };
    let dev = Dev::start_with(options, |r| r).await;
    assert!(!dev.server.instructions().contains("stand-ins"));
    let client = dev.client(true, false);
    let get = |path: &str| client.get(dev.url(path)).send();
    let groups: Value = get("/apis")
        .await
        .expect("apis")
        .json()
        .await
        .expect("json");
    assert_eq!(groups["groups"].as_array().map(Vec::len), Some(1));
    let core: Value = get("/api").await.expect("api").json().await.expect("json");
    assert_eq!(core["versions"], json!([]));
    for path in [
        "/api/v1/namespaces/ns",
        "/api/v1/namespaces/ns/secrets",
        "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/clusters",
    ] {
        assert_eq!(get(path).await.expect("get").status(), 404, "{path}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn pages_watches_and_deletecollection() {
    let api = Api::start().await;
    let claims = &KINDS[3];
    for (namespace, name) in [("a", "c1"), ("a", "c2"), ("b", "c3")] {
        let reply = api
            .post(&claims.collection(namespace))
            .json(&claims.object(name, namespace))
            .send()
            .await;
        assert_eq!(reply.status, 201, "{}", reply.text);
    }
    let all = "/apis/ipam.cluster.x-k8s.io/v1beta2/ipaddressclaims";
    let first = api.get(&format!("{all}?limit=2")).send().await.json();
    assert_eq!(first["items"].as_array().map(Vec::len), Some(2));
    assert_eq!(first["metadata"]["remainingItemCount"], 1);
    let token = first["metadata"]["continue"].as_str().expect("continue");
    let rest = api
        .get(&format!("{all}?limit=2&continue={token}"))
        .send()
        .await
        .json();
    assert_eq!(rest["items"][0]["metadata"]["name"], "c3");

    let rv = first["metadata"]["resourceVersion"].as_str().expect("rv");
    let mut events = api
        .get(&format!(
            "{all}?watch=true&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=3"
        ))
        .watch()
        .await;
    assert_eq!(events.status, 200);
    let deleted = api.delete(&claims.collection("a")).send().await;
    assert_eq!(deleted.status, 200, "{}", deleted.text);
    assert_eq!(deleted.json()["items"].as_array().map(Vec::len), Some(2));
    let (mut seen, mut bookmarks) = (Vec::new(), 0);
    while let Some(event) = events.next().await {
        if event["type"] == "BOOKMARK" {
            bookmarks += 1;
            assert_eq!(event["object"]["kind"], "IPAddressClaim");
            assert_eq!(
                event["object"]["apiVersion"],
                "ipam.cluster.x-k8s.io/v1beta2"
            );
            continue;
        }
        seen.push((
            event["type"].as_str().unwrap_or_default().to_owned(),
            event["object"]["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        ));
    }
    // Both deletions, then the stream ended on its own (timeoutSeconds).
    assert_eq!(
        seen,
        [
            ("DELETED".to_owned(), "c1".to_owned()),
            ("DELETED".to_owned(), "c2".to_owned())
        ]
    );
    assert!(bookmarks > 0, "bookmarks every 200 ms");
    let left = api.get(all).send().await.json();
    assert_eq!(left["items"].as_array().map(Vec::len), Some(1));
}
