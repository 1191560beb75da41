//! `serve` mode's safe default: public health and version, everything else only for
//! `system:masters` client certificates; client certificates from other CAs are refused.

use capmox_apiserver::server::Status;
use capmox_apiserver::server::pki::DevPki;
use capmox_apiserver::server::serve;
use capmox_apiserver::server::tls;

use super::{pki_client, serve_options};

#[tokio::test(flavor = "multi_thread")]
async fn serve_allows_public_info_and_masters_only() {
    tls::install_default_provider();
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = DevPki::ensure(dir.path(), &[]).expect("pki");
    let server = serve::start(&serve_options(dir.path()), |r| r)
        .await
        .expect("serve starts");
    let url = |path: &str| format!("https://{}{path}", server.local_addr());

    let anonymous = pki_client(&pki, None);
    for path in ["/healthz", "/livez", "/readyz", "/version"] {
        let response = anonymous.get(url(path)).send().await.expect("request");
        assert_eq!(response.status(), 200, "{path}");
    }
    for path in ["/metrics", "/apis"] {
        let response = anonymous.get(url(path)).send().await.expect("request");
        assert_eq!(response.status(), 403, "{path}");
        let status: Status = response.json().await.expect("status");
        assert_eq!(status.reason, "Forbidden");
        assert_eq!(
            status.message,
            format!("forbidden: User \"system:anonymous\" cannot get path \"{path}\"")
        );
    }

    let admin = pki_client(&pki, Some(&pki.admin));
    let metrics = admin.get(url("/metrics")).send().await.expect("request");
    assert_eq!(metrics.status(), 200);
    let text = metrics.text().await.expect("text");
    assert!(
        text.lines()
            .any(|l| l.starts_with("apiserver_request_total{verb=\"GET\"")
                && l.contains("code=\"403\"")),
        "forbidden requests are counted:\n{text}"
    );
    let apis = admin.get(url("/apis")).send().await.expect("request");
    assert_eq!(apis.status(), 200);

    // A certificate from another CA is refused during the handshake.
    let other_dir = tempfile::tempdir().expect("tempdir");
    let other = DevPki::ensure(other_dir.path(), &[]).expect("other pki");
    let stranger = pki_client(&pki, Some(&other.admin));
    assert!(
        stranger.get(url("/version")).send().await.is_err(),
        "foreign client certificate must fail"
    );
    server.shutdown().await;
}
