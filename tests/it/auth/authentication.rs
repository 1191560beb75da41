//! Who the server believes a request comes from: the aggregator's headers only with its
//! certificate, client certificates, bearer tokens through TokenReview, else anonymous.

use std::time::Duration;

use serde_json::json;

use super::front_proxy::ProxiedUser;
use super::{FRONT_PROXY_CN, Setup, allow_users, get};

#[tokio::test(flavor = "multi_thread")]
async fn aggregator_identity_reaches_the_access_review() {
    let setup = Setup::start(|_| {}).await;
    setup.kube.set_policy(allow_users(&["alice"]));
    let alice = ProxiedUser {
        uid: "u-1".into(),
        extra: vec![
            (
                "Authentication.kubernetes.io%2fcredential-id".into(),
                "JTI=1".into(),
            ),
            ("Scopes".into(), "a".into()),
            ("scopes".into(), "b".into()),
        ],
        ..ProxiedUser::named("alice", &["devs", "system:authenticated"])
    };
    let proxy = setup.aggregator(alice).await;
    let client = reqwest::Client::new();
    let response = client
        .get(format!("{}/version", proxy.url))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200);
    assert_eq!(
        setup.kube.access_reviews(),
        [json!({
            "user": "alice",
            "uid": "u-1",
            "groups": ["devs", "system:authenticated"],
            "extra": {
                "authentication.kubernetes.io/credential-id": ["JTI=1"],
                "scopes": ["a", "b"],
            },
            "nonResourceAttributes": {"path": "/version", "verb": "get"},
        })]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn forged_headers_without_the_proxy_certificate_are_ignored() {
    let setup = Setup::start(|_| {}).await;
    setup.kube.set_policy(allow_users(&["admin"]));
    let bob = setup.client_ca.client("bob", &["devs"]).expect("bob");
    for (identity, user) in [(None, "system:anonymous"), (Some(&bob), "bob")] {
        let response = setup
            .client(identity)
            .get(format!("{}/version", setup.base()))
            .header("X-Remote-User", "admin")
            .header("X-Remote-Group", "system:masters")
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), 403, "{user}");
        let status: capmox_apiserver::server::Status = response.json().await.expect("status");
        assert_eq!(
            status.message,
            format!("forbidden: User \"{user}\" cannot get path \"/version\"")
        );
    }
    let reviewed: Vec<_> = setup
        .kube
        .access_reviews()
        .iter()
        .map(|spec| (spec["user"].clone(), spec["groups"].clone()))
        .collect();
    assert_eq!(
        reviewed,
        [
            (json!("system:anonymous"), json!(["system:unauthenticated"])),
            (json!("bob"), json!(["devs", "system:authenticated"])),
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn front_proxy_common_name_must_be_allowed() {
    let setup = Setup::start(|_| {}).await;
    setup.kube.set_policy(allow_users(&["alice"]));
    let client = reqwest::Client::new();

    // The right CA with a name outside requestheader-allowed-names: refused outright.
    let intruder = setup
        .proxy(
            &setup.proxy_ca,
            "intruder",
            ProxiedUser::named("alice", &[]),
        )
        .await;
    let (code, status) = get(&client, &format!("{}/version", intruder.url)).await;
    assert_eq!(code, 401);
    let status = status.expect("status");
    assert_eq!(
        (status.reason.as_str(), status.message.as_str()),
        ("Unauthorized", "Unauthorized")
    );

    // The allowed name from the client CA is an ordinary user; its headers mean nothing.
    let impostor = setup
        .proxy(
            &setup.client_ca,
            FRONT_PROXY_CN,
            ProxiedUser::named("alice", &[]),
        )
        .await;
    let (code, status) = get(&client, &format!("{}/version", impostor.url)).await;
    assert_eq!(code, 403);
    assert_eq!(
        status.expect("status").message,
        "forbidden: User \"front-proxy-client\" cannot get path \"/version\""
    );
    assert!(
        setup
            .kube
            .access_reviews()
            .iter()
            .all(|spec| spec["user"] != "alice"),
        "alice was never believed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bearer_tokens_are_reviewed_and_cached() {
    let ttl = Duration::from_secs(2);
    let setup = Setup::start(|o| o.delegation.token_cache_ttl = ttl).await;
    setup.kube.set_policy(allow_users(&["dave"]));
    setup.kube.add_token(
        "good-token",
        json!({"username": "dave", "uid": "d-1", "groups": ["ops"], "extra": {"k": ["v"]}}),
    );
    let client = setup.client(None);
    let call = |token: &'static str| {
        let request = client
            .get(format!("{}/version", setup.base()))
            .bearer_auth(token);
        async move { request.send().await.expect("request").status().as_u16() }
    };
    assert_eq!(call("good-token").await, 200);
    assert_eq!(call("good-token").await, 200);
    assert_eq!(call("bad-token").await, 401);
    assert_eq!(call("bad-token").await, 401);
    assert_eq!(
        setup.kube.token_reviews(),
        ["good-token", "bad-token"],
        "valid and invalid answers are both cached"
    );
    let spec = setup.kube.access_reviews().remove(0);
    assert_eq!(
        (&spec["user"], &spec["uid"], &spec["groups"], &spec["extra"]),
        (
            &json!("dave"),
            &json!("d-1"),
            &json!(["ops", "system:authenticated"]),
            &json!({"k": ["v"]})
        )
    );

    tokio::time::sleep(ttl + Duration::from_millis(300)).await;
    assert_eq!(call("good-token").await, 200);
    assert_eq!(
        setup.kube.token_reviews().len(),
        3,
        "asked again once the answer expired"
    );
}

/// kube-apiserver sets `Audit-Id` and `Cache-Control` on every answer it writes and adds the
/// backend's headers beside them: answers to the front proxy leave both to it, answers to
/// anyone else carry both.
#[tokio::test(flavor = "multi_thread")]
async fn answers_through_the_front_proxy_leave_audit_id_and_cache_control_to_it() {
    let setup = Setup::start(|_| {}).await;
    setup.kube.set_policy(allow_users(&["alice"]));
    let per_request_headers = |response: &reqwest::Response| {
        ["audit-id", "cache-control"].map(|name| response.headers().get_all(name).iter().count())
    };

    let proxy = setup.aggregator(ProxiedUser::named("alice", &[])).await;
    let proxied = reqwest::Client::new()
        .get(format!("{}/version", proxy.url))
        .header("Audit-Id", "from-kube")
        .send()
        .await
        .expect("request through the front proxy");
    assert_eq!(proxied.status(), 200);
    assert_eq!(per_request_headers(&proxied), [0, 0]);

    let direct = setup
        .admin("bob")
        .get(format!("{}/version", setup.base()))
        .header("Audit-Id", "from-bob")
        .send()
        .await
        .expect("direct request");
    assert_eq!(direct.status(), 200);
    assert_eq!(per_request_headers(&direct), [1, 1]);
    assert_eq!(direct.headers()["audit-id"], "from-bob");
}
