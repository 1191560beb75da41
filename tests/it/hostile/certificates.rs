//! TLS client certificates: one from a CA nobody trusts, or expired, completes the handshake
//! and gets kube-apiserver's 401 Status (forged identity headers: `tests/it/auth/`).

use capmox_apiserver::server::pki::CertificateAuthority;
use capmox_apiserver::server::tls;
use reqwest::Method;

use super::{Case, Fixture, check, machines};

fn client(fixture: &Fixture, identity: Option<&tls::PemPair>) -> reqwest::Client {
    crate::server::pki_client(&fixture.api.dev.server.pki, identity)
}

#[tokio::test(flavor = "multi_thread")]
async fn untrusted_and_expired_certificates_are_401() {
    let fixture = Fixture::start().await;
    let stranger = CertificateAuthority::generate("stranger-ca").expect("ca");
    let eve = stranger
        .client("eve", &["system:masters"])
        .expect("certificate");
    let dev_ca =
        CertificateAuthority::from_pair("capmox-dev-ca", fixture.api.dev.server.pki.ca.clone());
    let mut expired_params = tls::leaf_params(
        "mallory",
        &["system:masters"],
        &[],
        rcgen::ExtendedKeyUsagePurpose::ClientAuth,
    )
    .expect("params");
    expired_params.not_before = rcgen::date_time_ymd(2001, 1, 1);
    expired_params.not_after = rcgen::date_time_ymd(2002, 1, 1);
    let expired = dev_ca.issue(&expired_params).expect("certificate");
    let not_yet = {
        let mut params = expired_params.clone();
        params.not_before = rcgen::date_time_ymd(2090, 1, 1);
        params.not_after = rcgen::date_time_ymd(2091, 1, 1);
        dev_ca.issue(&params).expect("certificate")
    };
    let mut count = 0;
    for (what, identity) in [
        ("a certificate of an untrusted CA", &eve),
        ("an expired certificate of the dev CA", &expired),
        ("a certificate valid only from 2090", &not_yet),
    ] {
        for (method, path) in [
            (Method::GET, machines("v1alpha2")),
            (Method::POST, machines("v1alpha2")),
            (Method::DELETE, super::target("v1alpha2")),
        ] {
            let case = Case::new(
                format!("{method} with {what}"),
                method.clone(),
                path.clone(),
            )
            .status(401, "Unauthorized");
            let response = client(&fixture, Some(identity))
                .request(method, fixture.api.dev.url(&path))
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&crate::rest::machine("x")).expect("json"))
                .send()
                .await
                .expect("the handshake completes");
            let code = response.status().as_u16();
            let text = response.text().await.unwrap_or_default();
            if let Err(problem) = check(case.expect, code, &text) {
                panic!("{}: {problem}", case.what);
            }
            count += 1;
        }
    }
    assert!(fixture.ready().await);
    println!("hostile certificates: {count} requests, 0 5xx, server ready");
}
