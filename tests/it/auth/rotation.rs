//! The watched ConfigMap: a rotated front-proxy CA takes effect without a restart, and a
//! missing ConfigMap is picked up when it appears.

use std::time::Duration;

use capmox_apiserver::server::pki::CertificateAuthority;

use super::front_proxy::ProxiedUser;
use super::{FRONT_PROXY_CN, Setup, allow_users, configmap_data, eventually, get};

async fn status_via(proxy_url: &str) -> u16 {
    get(&reqwest::Client::new(), &format!("{proxy_url}/version"))
        .await
        .0
}

#[tokio::test(flavor = "multi_thread")]
async fn rotated_front_proxy_ca_is_picked_up() {
    let setup = Setup::start(|_| {}).await;
    setup.kube.set_policy(allow_users(&["alice"]));
    let alice = || ProxiedUser::named("alice", &[]);
    let old = setup.aggregator(alice()).await;
    assert_eq!(status_via(&old.url).await, 200);

    let new_ca = CertificateAuthority::generate("front-proxy-ca-2").expect("CA");
    let new = setup.proxy(&new_ca, FRONT_PROXY_CN, alice()).await;
    assert_ne!(status_via(&new.url).await, 200, "not trusted yet");

    setup
        .kube
        .update_configmap(configmap_data(&setup.client_ca, &new_ca, &[FRONT_PROXY_CN]));
    eventually(Duration::from_secs(20), "the new CA is trusted", || async {
        status_via(&new.url).await == 200
    })
    .await;
    // The old proxy certificate completes the handshake and is refused with a 401, as
    // kube-apiserver refuses a certificate of no trusted CA.
    assert_eq!(status_via(&old.url).await, 401);
}

#[tokio::test(flavor = "multi_thread")]
async fn configmap_that_appears_later_is_used() {
    let setup = Setup::start_without_configmap().await;
    setup.kube.set_policy(allow_users(&["alice"]));
    let proxy = setup.aggregator(ProxiedUser::named("alice", &[])).await;
    // No CA is trusted yet: the proxy's certificate names nobody, and the anonymous request
    // its headers arrive with is refused by the authorizer.
    assert_eq!(status_via(&proxy.url).await, 403);
    let (code, _) = get(&setup.client(None), &format!("{}/healthz", setup.base())).await;
    assert_eq!(code, 200, "clients without certificates are served");
    setup.kube.update_configmap(configmap_data(
        &setup.client_ca,
        &setup.proxy_ca,
        &[FRONT_PROXY_CN],
    ));
    eventually(
        Duration::from_secs(20),
        "the ConfigMap is loaded",
        || async { status_via(&proxy.url).await == 200 },
    )
    .await;
}

/// Client certificates are verified once and then remembered (per set of trusted CAs): after
/// the client CA rotates, a certificate of the old CA is refused even on a connection that
/// stays open, where no new handshake checks it, and the new CA's certificates are accepted.
#[tokio::test(flavor = "multi_thread")]
async fn rotated_client_ca_refuses_remembered_certificates() {
    let setup = Setup::start(|_| {}).await;
    setup.kube.set_policy(allow_users(&["bob", "carol"]));
    let url = format!("{}/version", setup.base());
    let status = |client: &reqwest::Client| {
        let request = client.get(&url);
        async move { request.send().await.expect("request").status().as_u16() }
    };
    let bob = setup.client(Some(&setup.client_ca.client("bob", &[]).expect("bob")));
    for _ in 0..3 {
        assert_eq!(status(&bob).await, 200);
    }

    let new_ca = CertificateAuthority::generate("kubernetes-2").expect("CA");
    let carol = setup.client(Some(&new_ca.client("carol", &[]).expect("carol")));
    setup
        .kube
        .update_configmap(configmap_data(&new_ca, &setup.proxy_ca, &[FRONT_PROXY_CN]));
    eventually(
        Duration::from_secs(20),
        "the new client CA is trusted",
        || async {
            carol
                .get(&url)
                .send()
                .await
                .is_ok_and(|r| r.status() == 200)
        },
    )
    .await;
    // bob's HTTP/2 connection is still open: the request reaches the server and is refused.
    assert_eq!(status(&bob).await, 401);
}
