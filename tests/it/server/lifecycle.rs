//! Certificate reload, graceful shutdown, panics and common headers.

use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use capmox_apiserver::server::app::{Server, ServerConfig, TlsSource};
use capmox_apiserver::server::authn::Authentication;
use capmox_apiserver::server::authz::AlwaysAllow;
use capmox_apiserver::server::pki::DevPki;
use capmox_apiserver::server::tls::{self, KeyPairFiles};
use capmox_apiserver::server::{ApiRouter, ServerState, Status};
use tokio::sync::Notify;

use super::Dev;

/// The DER of the certificate a fresh connection is served.
async fn served_certificate(url: &str, pki: &DevPki) -> Vec<u8> {
    let ca = reqwest::Certificate::from_pem(pki.ca.cert_pem.as_bytes()).expect("ca");
    let client = reqwest::Client::builder()
        .tls_certs_only([ca])
        .tls_info(true)
        .pool_max_idle_per_host(0)
        .build()
        .expect("client");
    let response = client.get(url).send().await.expect("request");
    let info = response
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .expect("tls info");
    info.peer_certificate().expect("peer certificate").to_vec()
}

fn der(pem: &str) -> Vec<u8> {
    tls::parse_certificates(pem.as_bytes(), None).expect("pem")[0].to_vec()
}

#[tokio::test(flavor = "multi_thread")]
async fn serving_certificate_reloads_from_files() {
    tls::install_default_provider();
    let dir = tempfile::tempdir().expect("tempdir");
    let first = DevPki::ensure(dir.path(), &[]).expect("pki");
    let files = KeyPairFiles {
        cert: dir.path().join("serving.crt"),
        key: dir.path().join("serving.key"),
    };
    let state = ServerState::new(Authentication::new(vec![], true), Arc::new(AlwaysAllow));
    let router = ApiRouter::new(state.clone()).build();
    let mut config = ServerConfig::new(([127, 0, 0, 1], 0).into(), TlsSource::Files(files));
    config.reload_interval = Duration::from_millis(50);
    let server = Server::start(config, state, router).await.expect("start");
    let url = format!("https://{}/healthz", server.local_addr());
    assert_eq!(
        served_certificate(&url, &first).await,
        der(&first.serving.cert_pem)
    );

    // Issuing again rewrites serving.crt/serving.key with a new certificate.
    let second = DevPki::ensure(dir.path(), &[]).expect("reissue");
    assert_ne!(second.serving, first.serving);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if served_certificate(&url, &second).await == der(&second.serving.cert_pem) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "new certificate was not picked up"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn graceful_shutdown_finishes_in_flight_requests() {
    let started = Arc::new(Notify::new());
    let notify = Arc::clone(&started);
    let dev = Dev::start(move |router| {
        router.merge(axum::Router::new().route(
            "/slow",
            get(move || {
                let notify = Arc::clone(&notify);
                async move {
                    notify.notify_one();
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    "done"
                }
            }),
        ))
    })
    .await;
    let client = dev.client(true, false);
    let url = dev.url("/slow");
    let request = tokio::spawn({
        let client = client.clone();
        let url = url.clone();
        async move {
            client
                .get(url)
                .send()
                .await
                .expect("request")
                .text()
                .await
                .expect("body")
        }
    });
    started.notified().await;
    let Dev { dir: _dir, server } = dev;
    let addr = server.server.local_addr();
    server.server.shutdown().await;
    assert_eq!(
        request.await.expect("join"),
        "done",
        "in-flight request completed"
    );
    let fresh = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .expect("client");
    assert!(
        fresh
            .get(format!("https://{addr}/healthz"))
            .send()
            .await
            .is_err(),
        "no longer accepting"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn panics_become_500_and_headers_are_kube_like() {
    let dev = Dev::start(|router| {
        router.merge(axum::Router::new().route(
            "/boom",
            get(|| async {
                // An out-of-bounds index, the kind of bug a handler might have.
                let items: Vec<String> = Vec::new();
                items[1].clone()
            }),
        ))
    })
    .await;
    let client = dev.client(true, false);
    let response = client.get(dev.url("/boom")).send().await.expect("request");
    assert_eq!(response.status(), 500);
    let status: Status = response.json().await.expect("status");
    assert_eq!(status.reason, "InternalError");
    assert_eq!(
        status.message,
        "Internal error occurred: the server panicked while handling the request"
    );

    let response = client
        .get(dev.url("/version"))
        .header("Audit-Id", "abc-123")
        .send()
        .await
        .expect("server still serves");
    assert_eq!(response.headers()["audit-id"], "abc-123");
    assert_eq!(response.headers()["cache-control"], "no-cache, private");
    let generated = client
        .get(dev.url("/version"))
        .send()
        .await
        .expect("request");
    assert_eq!(
        generated.headers()["audit-id"].len(),
        36,
        "a UUID when none was sent"
    );

    let wrong_method = client
        .delete(dev.url("/version"))
        .send()
        .await
        .expect("request");
    assert_eq!(wrong_method.status(), 405);
    let status: Status = wrong_method.json().await.expect("status");
    assert_eq!(status.reason, "MethodNotAllowed");
}
