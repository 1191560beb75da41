//! Namespace lifecycle in `serve`: creates (POST and create-by-apply) in a namespace the
//! management cluster does not have answer 404, in a terminating one 403 with the
//! `NamespaceTerminating` cause; a namespace the watch has not delivered yet is looked up;
//! updates of existing objects are not affected; readiness waits for the namespace list.

use std::time::Duration;

use capmox_apiserver::server::Status;
use serde_json::{Value, json};

use super::{Setup, get};
use crate::rest::{collection, item, machine};

const MACHINES: &str = "proxmoxmachines";

fn in_namespace(name: &str, namespace: &str) -> Value {
    let mut object = machine(name);
    object["metadata"]["namespace"] = json!(namespace);
    object
}

/// The status code and JSON body of a request.
async fn answer(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.expect("request");
    let code = response.status().as_u16();
    (code, response.json().await.expect("json"))
}

async fn create(
    client: &reqwest::Client,
    setup: &Setup,
    namespace: &str,
    name: &str,
) -> (u16, Value) {
    let url = format!(
        "{}{}",
        setup.base(),
        collection("v1alpha2", namespace, MACHINES)
    );
    answer(client.post(url).json(&in_namespace(name, namespace))).await
}

async fn apply(
    client: &reqwest::Client,
    setup: &Setup,
    namespace: &str,
    name: &str,
) -> (u16, Value) {
    let url = format!(
        "{}{}?fieldManager=test",
        setup.base(),
        item("v1alpha2", namespace, MACHINES, name)
    );
    let body = in_namespace(name, namespace).to_string();
    answer(
        client
            .patch(url)
            .header("Content-Type", "application/apply-patch+yaml")
            .body(body),
    )
    .await
}

async fn exists(client: &reqwest::Client, setup: &Setup, namespace: &str, name: &str) -> bool {
    let url = format!(
        "{}{}",
        setup.base(),
        item("v1alpha2", namespace, MACHINES, name)
    );
    get(client, &url).await.0 == 200
}

#[tokio::test(flavor = "multi_thread")]
async fn creates_need_an_existing_namespace() {
    let setup = Setup::start(|_| {}).await;
    let client = setup.admin("admin");

    let (code, _) = create(&client, &setup, "default", "m1").await;
    assert_eq!(code, 201, "default exists");

    let (code, body) = create(&client, &setup, "nowhere", "m1").await;
    assert_eq!(code, 404);
    let status: Status = serde_json::from_value(body).expect("status");
    assert_eq!(status.reason, "NotFound");
    assert_eq!(status.message, "namespaces \"nowhere\" not found");
    let details = status.details.expect("details");
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        ("nowhere", "namespaces")
    );
    assert!(
        !exists(&client, &setup, "nowhere", "m1").await,
        "nothing stored"
    );

    let (code, body) = apply(&client, &setup, "nowhere", "m2").await;
    assert_eq!(code, 404, "create by apply is a create: {body}");
    assert!(!exists(&client, &setup, "nowhere", "m2").await);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_namespace_the_watch_has_not_delivered_is_looked_up() {
    let setup = Setup::start(|_| {}).await;
    let client = setup.admin("admin");
    // Created in the cluster, but the watch event never arrives: the live lookup finds it.
    setup.kube.set_namespace("fresh", Some(false), false);
    let (code, body) = create(&client, &setup, "fresh", "m1").await;
    assert_eq!(code, 201, "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn terminating_namespaces_take_no_new_objects() {
    let setup = Setup::start(|_| {}).await;
    let client = setup.admin("admin");
    setup.kube.set_namespace("ending", Some(false), true);
    let (code, _) = create(&client, &setup, "ending", "kept").await;
    assert_eq!(code, 201);

    setup.kube.set_namespace("ending", Some(true), true);
    // The watch delivers the change; until then creates still pass.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let refused = loop {
        let (code, body) = create(&client, &setup, "ending", "late").await;
        if code == 403 {
            break body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the terminating namespace is never seen: {code} {body}"
        );
        let url = format!(
            "{}{}",
            setup.base(),
            item("v1alpha2", "ending", MACHINES, "late")
        );
        client.delete(url).send().await.expect("delete");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let status: Status = serde_json::from_value(refused).expect("status");
    assert_eq!(status.reason, "Forbidden");
    assert_eq!(
        status.message,
        "proxmoxmachines.infrastructure.cluster.x-k8s.io \"late\" is forbidden: unable to create \
         new content in namespace ending because it is being terminated"
    );
    let cause = &status.details.expect("details").causes[0];
    assert_eq!(
        (
            cause.reason.as_str(),
            cause.message.as_str(),
            cause.field.as_str()
        ),
        (
            "NamespaceTerminating",
            "namespace ending is being terminated",
            "metadata.namespace"
        )
    );

    // The object already there can still be changed (and its finalizers removed).
    let (code, body) = apply(&client, &setup, "ending", "kept").await;
    assert_eq!(
        code, 200,
        "an apply to an existing object is an update: {body}"
    );
    let (code, _) = apply(&client, &setup, "ending", "late").await;
    assert_eq!(code, 403);
}

#[tokio::test(flavor = "multi_thread")]
async fn readiness_reports_the_namespace_informer() {
    let setup = Setup::start(|_| {}).await;
    let (code, text) = setup.readyz_verbose().await;
    assert_eq!(code, 200);
    assert!(text.contains("[+]informer-sync-namespaces ok"), "{text}");
}
