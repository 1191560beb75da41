//! Co-tenant kinds kube-apiserver keeps, on ours: their CRD is stored or also served in a
//! version outside our group-versions, so kube-apiserver keeps the objects and serves that
//! version, while our server serves ours through it. Both paths must see one object: one
//! uid, one resourceVersion sequence, the same status, finalizers and deletion, watches of
//! one seeing writes through the other, and kube's errors (404 of an object, 410 of an old
//! watch) as kube gives them.
//!
//! Two kinds: CAPZ's AzureASOManagedCluster as its module ships it (v1alpha1 beside the
//! v1beta1 kube stores, `None` conversion; `tests/e2e/run differential` installs it on both
//! sides), and a kind converted by a webhook this test serves (SampleDisk, stored in v1beta1).

use std::time::Duration;

use futures::StreamExt;
use reqwest::Method;
use serde_json::{Value, json};

use crate::peer::side::{Answer, Request, Side};
use crate::rest::GROUP;
use crate::standins::conversion_webhook::Webhook;

const NAMESPACE: &str = "default";

fn collection(version: &str, plural: &str) -> String {
    format!("/apis/{GROUP}/{version}/namespaces/{NAMESPACE}/{plural}")
}

/// Waits until `path` answers 200 (a CRD established and its kind listed by our server).
async fn until_served(side: &Side, path: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let answer = side.send(&Request::new(Method::GET, path.to_owned())).await;
        if answer.ok() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{path} not served after 60 s: {} {}",
            answer.status,
            answer.body
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn ok(side: &Side, request: Request) -> Value {
    let answer = side.send(&request).await;
    assert!(
        answer.ok(),
        "{} {}: {} {}",
        request.method,
        request.path,
        answer.status,
        answer.body
    );
    answer.body
}

/// The events of a watch of `path` until it ends (its `timeoutSeconds`).
async fn watch(side: &Side, path: &str) -> Vec<Value> {
    let response = side.request(Method::GET, path).send().await.expect("watch");
    assert_eq!(response.status(), 200, "watch {path}");
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        body.extend_from_slice(&chunk.expect("watch chunk"));
    }
    body.split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).expect("a watch event"))
        .collect()
}

fn meta<'a>(object: &'a Value, field: &str) -> &'a Value {
    &object["metadata"][field]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the pair with CAPZ's CRDs: run `tests/e2e/run differential`"]
async fn a_kind_kube_keeps_is_one_object_on_both_paths() {
    let pair = crate::peer::side::Pair::from_env();
    let ours = &pair.ours;
    let plural = "azureasomanagedclusters";
    let (alpha, beta) = (
        collection("v1alpha1", plural),
        collection("v1beta1", plural),
    );
    until_served(ours, &alpha).await;

    // Discovery lists it in v1alpha1 with every verb and kube's storage version hash.
    let resource = |list: &Value| -> Value {
        list["resources"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["name"] == plural).cloned())
            .unwrap_or(Value::Null)
    };
    let in_alpha = ok(
        ours,
        Request::new(Method::GET, format!("/apis/{GROUP}/v1alpha1")),
    )
    .await;
    let in_beta = ok(
        ours,
        Request::new(Method::GET, format!("/apis/{GROUP}/v1beta1")),
    )
    .await;
    assert_eq!(
        resource(&in_alpha)["storageVersionHash"],
        resource(&in_beta)["storageVersionHash"]
    );
    assert!(
        resource(&in_alpha)["verbs"]
            .as_array()
            .is_some_and(|v| v.len() == 8),
        "{}",
        resource(&in_alpha)
    );

    // Created in v1alpha1 (deprecated, with CAPZ's warning), read in v1beta1: one object.
    let object = json!({
        "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "AzureASOManagedCluster",
        "metadata": {"name": "kept", "labels": {"tier": "gold"}}, "spec": {},
    });
    let created = ours
        .send(&Request::new(Method::POST, alpha.clone()).json(object))
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert!(
        created
            .warnings
            .iter()
            .any(|w| w.contains("v1beta1 is equivalent")),
        "{:?}",
        created.warnings
    );
    let created = created.body;
    assert_eq!(created["apiVersion"], format!("{GROUP}/v1alpha1"));
    let stored = ok(ours, Request::new(Method::GET, format!("{beta}/kept"))).await;
    assert_eq!(stored["apiVersion"], format!("{GROUP}/v1beta1"));
    assert_eq!(meta(&stored, "uid"), meta(&created, "uid"));
    assert_eq!(
        meta(&stored, "resourceVersion"),
        meta(&created, "resourceVersion")
    );

    // A write through kube's path is the next event of a watch through ours.
    let from = meta(&created, "resourceVersion")
        .as_str()
        .unwrap_or_default();
    let watched = tokio::spawn({
        let pair = crate::peer::side::Pair::from_env();
        let path = format!("{alpha}?watch=true&resourceVersion={from}&timeoutSeconds=3");
        async move { watch(&pair.ours, &path).await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let labelled = ok(
        ours,
        Request::new(Method::PATCH, format!("{beta}/kept"))
            .merge_patch(json!({"metadata": {"labels": {"tier": "silver"}}})),
    )
    .await;
    let events = watched.await.expect("watch task");
    let event = events.first().expect("an event");
    assert_eq!(event["type"], "MODIFIED", "{events:?}");
    assert_eq!(event["object"]["apiVersion"], format!("{GROUP}/v1alpha1"));
    assert_eq!(meta(&event["object"], "labels")["tier"], "silver");
    assert_eq!(
        meta(&event["object"], "resourceVersion"),
        meta(&labelled, "resourceVersion")
    );

    // Status through ours' subresource; a finalizer holds a deletion through ours, which
    // kube's path sees, until it is taken off there.
    ok(
        ours,
        Request::new(Method::PATCH, format!("{alpha}/kept/status"))
            .merge_patch(json!({"status": {"ready": true}})),
    )
    .await;
    ok(
        ours,
        Request::new(Method::PATCH, format!("{alpha}/kept"))
            .merge_patch(json!({"metadata": {"finalizers": ["test.capmox.dev/hold"]}})),
    )
    .await;
    let deleting = ok(ours, Request::new(Method::DELETE, format!("{alpha}/kept"))).await;
    assert!(
        meta(&deleting, "deletionTimestamp").is_string(),
        "{deleting}"
    );
    let stored = ok(ours, Request::new(Method::GET, format!("{beta}/kept"))).await;
    assert_eq!(stored["status"]["ready"], true);
    assert!(meta(&stored, "deletionTimestamp").is_string());
    ok(
        ours,
        Request::new(Method::PATCH, format!("{beta}/kept"))
            .merge_patch(json!({"metadata": {"finalizers": null}})),
    )
    .await;
    let gone = ours
        .send(&Request::new(Method::GET, format!("{alpha}/kept")))
        .await;
    assert_eq!(gone.status, 404, "{}", gone.body);
    assert_eq!(gone.body["details"]["name"], "kept", "{}", gone.body);

    // A watch from a resourceVersion kube no longer has: kube's 410, as an ERROR event.
    let expired = watch(
        ours,
        &format!("{alpha}?watch=true&resourceVersion=1&timeoutSeconds=3"),
    )
    .await;
    let last = expired.last().expect("an event");
    assert_eq!(last["type"], "ERROR", "{expired:?}");
    assert_eq!(last["object"]["code"], 410, "{expired:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the pair: run `tests/e2e/run differential`"]
async fn a_kind_kube_keeps_converts_through_its_webhook() {
    let pair = crate::peer::side::Pair::from_env();
    let ours = &pair.ours;
    let webhook = Webhook::start().await;
    let crd = serde_saphyr::from_str::<Value>(&webhook.crd_stored_in("v1beta1")).expect("CRD");
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let name = "sampledisks.infrastructure.cluster.x-k8s.io";
    ours.send(&Request::new(Method::DELETE, format!("{crds}/{name}")))
        .await;
    until_gone(ours, &format!("{crds}/{name}")).await;
    ok(ours, Request::new(Method::POST, crds.to_owned()).json(crd)).await;
    let (alpha, beta) = (
        collection("v1alpha1", "sampledisks"),
        collection("v1beta1", "sampledisks"),
    );
    until_served(ours, &alpha).await;
    until_served(ours, &beta).await;

    // Written in v1alpha1, stored by kube in v1beta1 as the webhook converts it.
    let disk = json!({"apiVersion": format!("{GROUP}/v1alpha1"), "kind": "SampleDisk",
                      "metadata": {"name": "d1"}, "spec": {"size": "10Gi"}});
    let created = ok(ours, Request::new(Method::POST, alpha.clone()).json(disk)).await;
    assert_eq!(created["spec"], json!({"size": "10Gi"}));
    let stored = ok(ours, Request::new(Method::GET, format!("{beta}/d1"))).await;
    assert_eq!(stored["spec"], json!({"sizeGiB": 10}));
    assert_eq!(meta(&stored, "uid"), meta(&created, "uid"));

    // A merge patch in v1alpha1's terms, applied here and written back on the
    // resourceVersion read.
    let patched = ok(
        ours,
        Request::new(Method::PATCH, format!("{alpha}/d1"))
            .merge_patch(json!({"spec": {"size": "20Gi"}})),
    )
    .await;
    assert_eq!(patched["spec"], json!({"size": "20Gi"}));
    let stored = ok(ours, Request::new(Method::GET, format!("{beta}/d1"))).await;
    assert_eq!(stored["spec"], json!({"sizeGiB": 20}));

    // A stale resourceVersion in the patch is kube's 409, not retried.
    let stale = ours
        .send(
            &Request::new(Method::PATCH, format!("{alpha}/d1")).merge_patch(json!({
                "metadata": {"resourceVersion": meta(&created, "resourceVersion")},
                "spec": {"size": "30Gi"},
            })),
        )
        .await;
    assert_eq!(stale.status, 409, "{}", stale.body);

    // Lists and server-side apply go the same way; the webhook saw every conversion.
    let listed = ok(ours, Request::new(Method::GET, alpha.clone())).await;
    assert_eq!(listed["items"][0]["spec"], json!({"size": "20Gi"}));
    let applied = ok(
        ours,
        Request::new(
            Method::PATCH,
            format!("{alpha}/d1?fieldManager=sizer&force=true"),
        )
        .apply_patch(json!({
            "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "SampleDisk",
            "metadata": {"name": "d1"}, "spec": {"size": "40Gi"},
        })),
    )
    .await;
    assert_eq!(applied["spec"], json!({"size": "40Gi"}));
    let desired: Vec<String> = webhook
        .reviews()
        .iter()
        .map(|r| {
            r["request"]["desiredAPIVersion"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert!(desired.contains(&format!("{GROUP}/v1beta1")), "{desired:?}");
    assert!(
        desired.contains(&format!("{GROUP}/v1alpha1")),
        "{desired:?}"
    );

    ours.send(&Request::new(Method::DELETE, format!("{crds}/{name}")))
        .await;
}

async fn until_gone(side: &Side, path: &str) {
    for _ in 0..240 {
        let answer: Answer = side.send(&Request::new(Method::GET, path.to_owned())).await;
        if answer.status == 404 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("{path} still there after 60 s");
}
