//! The client's TLS modes against the simulator's generated certificate.

use capmox_apiserver::proxmox::sim::SimConfig;
use capmox_apiserver::proxmox::{Client, ClientConfig, TlsMode};

use super::start;

fn client(url: &str, pve: &capmox_apiserver::proxmox::sim::RunningSim, tls: TlsMode) -> Client {
    Client::new(ClientConfig::new(url, pve.token().clone(), tls)).expect("client builds")
}

#[tokio::test]
async fn custom_ca_fingerprint_and_insecure_connect() {
    let (pve, by_ca) = start(SimConfig::default()).await;
    by_ca.version().await.expect("custom CA");
    let pinned = client(
        pve.url(),
        &pve,
        TlsMode::Fingerprint(pve.fingerprint().to_string()),
    );
    pinned.version().await.expect("pinned fingerprint");
    let lower = pve.fingerprint().replace(':', "").to_lowercase();
    client(pve.url(), &pve, TlsMode::Fingerprint(lower))
        .version()
        .await
        .expect("fingerprint without colons");
    client(pve.url(), &pve, TlsMode::Insecure)
        .version()
        .await
        .expect("insecure");
    // The fingerprint PVE publishes per node is the one to pin.
    let nodes = by_ca.nodes().await.expect("nodes");
    assert!(
        nodes
            .iter()
            .all(|n| n.ssl_fingerprint.as_deref() == Some(pve.fingerprint()))
    );
}

#[tokio::test]
async fn wrong_trust_fails_the_handshake() {
    let (pve, _) = start(SimConfig::default()).await;
    let system = client(pve.url(), &pve, TlsMode::System);
    assert!(
        system.version().await.is_err(),
        "self-signed CA is not a system root"
    );
    let other = "AA:".repeat(31) + "AA";
    let wrong = client(pve.url(), &pve, TlsMode::Fingerprint(other));
    let err = wrong.version().await.expect_err("wrong pin");
    assert!(
        matches!(err, capmox_apiserver::proxmox::Error::Transport { .. }),
        "{err}"
    );
    let (other_sim, _) = start(SimConfig::default()).await;
    let foreign_ca = client(
        pve.url(),
        &pve,
        TlsMode::CustomCa(other_sim.ca_pem().to_string()),
    );
    assert!(
        foreign_ca.version().await.is_err(),
        "another simulator's CA"
    );
}

#[test]
fn invalid_tls_settings_are_config_errors() {
    let token = capmox_apiserver::proxmox::ApiToken::new("a@pve!t", "s");
    for tls in [
        TlsMode::Fingerprint("not hex".into()),
        TlsMode::CustomCa("no PEM here".into()),
    ] {
        let err = Client::new(ClientConfig::new("https://127.0.0.1:1", token.clone(), tls))
            .expect_err("invalid");
        assert_eq!(err.kind(), capmox_apiserver::proxmox::ErrorKind::Config);
    }
}

#[tokio::test]
async fn plain_http_is_optional() {
    let (pve, _) = start(SimConfig {
        http_port: Some(0),
        ..SimConfig::default()
    })
    .await;
    let url = pve.http_url().expect("plain HTTP served").to_string();
    assert!(url.starts_with("http://127.0.0.1:"));
    client(&url, &pve, TlsMode::System)
        .version()
        .await
        .expect("plain HTTP");
    let (no_http, _) = start(SimConfig::default()).await;
    assert!(no_http.http_url().is_none());
}

#[tokio::test]
async fn another_address_is_bound_and_named_in_the_certificate() {
    // 127.0.0.2 is loopback on Linux, but not among the default names: the leaf must name
    // it for the custom CA's verification to pass.
    let address: std::net::IpAddr = "127.0.0.2".parse().expect("address");
    let (pve, by_ca) = start(SimConfig {
        address,
        http_port: Some(0),
        ..SimConfig::default()
    })
    .await;
    assert!(pve.url().starts_with("https://127.0.0.2:"), "{}", pve.url());
    assert!(
        pve.http_url()
            .is_some_and(|u| u.starts_with("http://127.0.0.2:")),
        "{:?}",
        pve.http_url()
    );
    by_ca.version().await.expect("custom CA verifies 127.0.0.2");
}
