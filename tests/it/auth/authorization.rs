//! What the server lets a user do: SubjectAccessReviews with kube's attributes, cached, and
//! kube's 403 message; health and `system:masters` without asking.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::json;

use super::front_proxy::ProxiedUser;
use super::{Setup, allow_users, get};

const GROUP: &str = "infrastructure.cluster.x-k8s.io";

fn machines(suffix: &str) -> String {
    format!("/apis/{GROUP}/v1alpha2/namespaces/default/proxmoxmachines{suffix}")
}

#[tokio::test(flavor = "multi_thread")]
async fn denied_review_is_403_with_kube_message() {
    let setup = Setup::start(|_| {}).await;
    setup
        .kube
        .set_policy(|_| Ok((false, "no RBAC policy matched".to_owned())));
    let proxy = setup
        .aggregator(ProxiedUser::named("carol", &["system:authenticated"]))
        .await;
    let client = reqwest::Client::new();

    let (code, status) = get(&client, &format!("{}{}", proxy.url, machines(""))).await;
    assert_eq!(code, 403);
    let status = status.expect("status");
    assert_eq!(status.reason, "Forbidden");
    assert_eq!(
        status.message,
        format!(
            "proxmoxmachines.{GROUP} is forbidden: User \"carol\" cannot list resource \"proxmoxmachines\" \
             in API group \"{GROUP}\" in the namespace \"default\": no RBAC policy matched"
        )
    );
    let details = status.details.expect("details");
    assert_eq!(
        (details.group.as_str(), details.kind.as_str()),
        (GROUP, "proxmoxmachines")
    );

    let (code, status) = get(&client, &format!("{}{}", proxy.url, machines("/m1/status"))).await;
    assert_eq!(code, 403);
    assert_eq!(
        status.expect("status").message,
        format!(
            "proxmoxmachines.{GROUP} \"m1\" is forbidden: User \"carol\" cannot get resource \
             \"proxmoxmachines/status\" in API group \"{GROUP}\" in the namespace \"default\": no RBAC policy matched"
        )
    );
    let attributes: Vec<_> = setup
        .kube
        .access_reviews()
        .iter()
        .map(|spec| spec["resourceAttributes"].clone())
        .collect();
    assert_eq!(
        attributes,
        [
            json!({"namespace": "default", "verb": "list", "group": GROUP, "version": "v1alpha2",
                   "resource": "proxmoxmachines"}),
            json!({"namespace": "default", "verb": "get", "group": GROUP, "version": "v1alpha2",
                   "resource": "proxmoxmachines", "subresource": "status", "name": "m1"}),
        ]
    );

    // The denial is cached: asking again does not reach the cluster.
    let (code, _) = get(&client, &format!("{}{}", proxy.url, machines(""))).await;
    assert_eq!(code, 403);
    assert_eq!(setup.kube.access_reviews().len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn masters_and_health_are_decided_locally() {
    let setup = Setup::start(|_| {}).await;
    let aggregator = setup
        .aggregator(ProxiedUser::named(
            "system:kube-aggregator",
            &["system:masters"],
        ))
        .await;
    let client = reqwest::Client::new();
    let (code, _) = get(
        &client,
        &format!("{}/apis/{GROUP}/v1alpha2", aggregator.url),
    )
    .await;
    assert_ne!(code, 403, "system:masters is never forbidden");
    let (code, _) = get(&client, &format!("{}/metrics", aggregator.url)).await;
    assert_eq!(code, 200);
    setup.until_ready().await;
    let anonymous = setup.client(None);
    for path in ["/healthz", "/livez", "/readyz"] {
        let (code, _) = get(&anonymous, &format!("{}{path}", setup.base())).await;
        assert_eq!(code, 200, "{path}");
    }
    assert!(setup.kube.access_reviews().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn failed_review_is_an_internal_error() {
    let setup = Setup::start(|_| {}).await;
    setup
        .kube
        .set_policy(|_| Err(StatusCode::INTERNAL_SERVER_ERROR));
    let (code, status) = get(&setup.client(None), &format!("{}/version", setup.base())).await;
    assert_eq!(code, 500);
    assert_eq!(status.expect("status").reason, "InternalError");
}

#[tokio::test(flavor = "multi_thread")]
async fn denials_expire_after_their_ttl() {
    let ttl = Duration::from_secs(1);
    let setup = Setup::start(|o| o.delegation.unauthorized_cache_ttl = ttl).await;
    setup.kube.set_policy(allow_users(&[]));
    let proxy = setup.aggregator(ProxiedUser::named("erin", &[])).await;
    let client = reqwest::Client::new();
    let url = format!("{}{}", proxy.url, machines("/m1"));
    assert_eq!(get(&client, &url).await.0, 403);
    setup.kube.set_policy(allow_users(&["erin"]));
    assert_eq!(
        get(&client, &url).await.0,
        403,
        "the denial is still cached"
    );
    tokio::time::sleep(ttl + Duration::from_millis(300)).await;
    assert_eq!(
        get(&client, &url).await.0,
        404,
        "allowed now; no such route yet"
    );
    assert_eq!(setup.kube.access_reviews().len(), 2);
}
