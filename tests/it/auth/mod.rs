//! Delegated authentication and authorization of `serve` against stand-ins for the management
//! cluster: a fake kube-apiserver (ConfigMap, TokenReview, SubjectAccessReview) reached through
//! `--authentication-kubeconfig`/`--authorization-kubeconfig`, and a front proxy playing the
//! aggregator with a front-proxy client certificate. The fake also keeps the management
//! objects the controller reads and writes (`fake_objects`, driven through the real
//! management seam in `management_objects`).

mod admission;
mod authentication;
mod authorization;
mod cotenants;
pub mod fake_kube;
pub mod fake_objects;
mod front_proxy;
mod kubectl;
mod management_objects;
mod namespaces;
mod rotation;

use std::time::Duration;

use capmox_apiserver::server::Status;
use capmox_apiserver::server::app::Server;
use capmox_apiserver::server::pki::CertificateAuthority;
use capmox_apiserver::server::serve::{self, DelegationOptions, ServeOptions, StorageOptions};
use capmox_apiserver::server::tls::{self, PemPair};
use serde_json::{Value, json};
use tempfile::TempDir;

use fake_kube::FakeKube;
use front_proxy::{FrontProxy, ProxiedUser};

pub const FRONT_PROXY_CN: &str = "front-proxy-client";

/// The ConfigMap data kubeadm clusters publish, for these CAs and allowed names.
pub fn configmap_data(
    client_ca: &CertificateAuthority,
    proxy_ca: &CertificateAuthority,
    allowed_names: &[&str],
) -> Value {
    json!({
        "client-ca-file": client_ca.pair.cert_pem,
        "requestheader-client-ca-file": proxy_ca.pair.cert_pem,
        "requestheader-allowed-names": serde_json::to_string(allowed_names).expect("json"),
        "requestheader-username-headers": "[\"X-Remote-User\"]",
        "requestheader-uid-headers": "[\"X-Remote-Uid\"]",
        "requestheader-group-headers": "[\"X-Remote-Group\"]",
        "requestheader-extra-headers-prefix": "[\"X-Remote-Extra-\"]",
    })
}

/// A management cluster stand-in and a `serve` server delegating to it.
pub struct Setup {
    pub dir: TempDir,
    pub client_ca: CertificateAuthority,
    pub proxy_ca: CertificateAuthority,
    pub serving_ca: CertificateAuthority,
    pub kube: FakeKube,
    pub server: Server,
}

impl Setup {
    /// Starts both; `tweak` adjusts the `serve` options.
    pub async fn start(tweak: impl FnOnce(&mut ServeOptions)) -> Self {
        Self::start_with(true, |_| {}, tweak).await
    }

    /// Starts both, the cluster prepared by `prepare` before the server starts.
    pub async fn start_after(prepare: impl FnOnce(&FakeKube)) -> Self {
        Self::start_with(true, prepare, |_| {}).await
    }

    /// Starts both, the cluster without the authentication ConfigMap.
    pub async fn start_without_configmap() -> Self {
        Self::start_with(false, |_| {}, |_| {}).await
    }

    async fn start_with(
        with_configmap: bool,
        prepare: impl FnOnce(&FakeKube),
        tweak: impl FnOnce(&mut ServeOptions),
    ) -> Self {
        tls::install_default_provider();
        let dir = tempfile::tempdir().expect("tempdir");
        let authority = |name| CertificateAuthority::generate(name).expect("CA");
        let (client_ca, proxy_ca, serving_ca) = (
            authority("kubernetes"),
            authority("front-proxy-ca"),
            authority("capmox-serving-ca"),
        );
        let data = with_configmap.then(|| configmap_data(&client_ca, &proxy_ca, &[FRONT_PROXY_CN]));
        let kube = FakeKube::start(dir.path(), data).await;
        prepare(&kube);
        let serving = serving_ca
            .serving(&["capmox-apiserver.capmox-system.svc".to_owned()])
            .expect("serving");
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        std::fs::write(&cert, &serving.cert_pem).expect("cert");
        std::fs::write(&key, &serving.key_pem).expect("key");
        let mut options = ServeOptions {
            bind_address: [127, 0, 0, 1].into(),
            secure_port: 0,
            tls_cert_file: Some(cert),
            tls_private_key_file: Some(key),
            tls_dns_names: vec![],
            client_ca_file: None,
            delegation: DelegationOptions {
                authentication_kubeconfig: Some(kube.kubeconfig.clone()),
                authorization_kubeconfig: Some(kube.kubeconfig.clone()),
                ..DelegationOptions::default()
            },
            storage: StorageOptions::embedded(dir.path().join("data")),
            rest: Default::default(),
        };
        tweak(&mut options);
        let server = serve::start(&options, |r| r).await.expect("serve starts");
        Self {
            dir,
            client_ca,
            proxy_ca,
            serving_ca,
            kube,
            server,
        }
    }

    pub fn base(&self) -> String {
        format!("https://{}", self.server.local_addr())
    }

    /// `/readyz?verbose` asked anonymously: the status code and the text.
    pub async fn readyz_verbose(&self) -> (u16, String) {
        let response = self
            .client(None)
            .get(format!("{}/readyz?verbose", self.base()))
            .send()
            .await
            .expect("readyz");
        let code = response.status().as_u16();
        (code, response.text().await.expect("text"))
    }

    /// Waits (up to 10 s) for readyz to pass: the informers have listed what they follow.
    pub async fn until_ready(&self) {
        for _ in 0..100 {
            if self.readyz_verbose().await.0 == 200 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!("not ready in 10 s: {}", self.readyz_verbose().await.1);
    }

    /// A direct client of `user` in `system:masters` (no SubjectAccessReviews involved).
    pub fn admin(&self, user: &str) -> reqwest::Client {
        let identity = self
            .client_ca
            .client(user, &["system:masters"])
            .expect("admin certificate");
        self.client(Some(&identity))
    }

    /// A direct client trusting the serving CA, presenting `identity` if given.
    pub fn client(&self, identity: Option<&PemPair>) -> reqwest::Client {
        let ca =
            reqwest::Certificate::from_pem(self.serving_ca.pair.cert_pem.as_bytes()).expect("ca");
        let mut builder = reqwest::Client::builder().tls_certs_only([ca]);
        if let Some(id) = identity {
            let pem = format!("{}{}", id.cert_pem, id.key_pem);
            builder =
                builder.identity(reqwest::Identity::from_pem(pem.as_bytes()).expect("identity"));
        }
        builder.build().expect("client")
    }

    /// A front proxy presenting a certificate from `ca` with common name `cn`.
    pub async fn proxy(
        &self,
        ca: &CertificateAuthority,
        cn: &str,
        user: ProxiedUser,
    ) -> FrontProxy {
        let identity = ca.client(cn, &[]).expect("proxy certificate");
        FrontProxy::start(
            &self.base(),
            &self.serving_ca.pair.cert_pem,
            &identity,
            user,
        )
        .await
    }

    /// The proper aggregator stand-in for `user`.
    pub async fn aggregator(&self, user: ProxiedUser) -> FrontProxy {
        self.proxy(&self.proxy_ca, FRONT_PROXY_CN, user).await
    }
}

/// Grants everything to the named users and denies everyone else with kube RBAC's reason.
pub fn allow_users(
    users: &'static [&'static str],
) -> impl Fn(&Value) -> Result<(bool, String), axum::http::StatusCode> {
    move |spec: &Value| {
        let user = spec["user"].as_str().unwrap_or_default();
        if users.contains(&user) {
            Ok((true, "RBAC: allowed".to_owned()))
        } else {
            Ok((false, String::new()))
        }
    }
}

/// GET `url` and return the status code and the body as a kube `Status` if it is one.
pub async fn get(client: &reqwest::Client, url: &str) -> (u16, Option<Status>) {
    let response = client.get(url).send().await.expect("request");
    let code = response.status().as_u16();
    let status = response.json::<Status>().await.ok();
    (code, status)
}

/// Polls `check` every 100 ms until it holds, for at most `limit`.
pub async fn eventually<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
