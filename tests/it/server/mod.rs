//! The HTTPS server foundation against real clients: kubectl (1.27 and 1.33), the Python
//! `kubernetes` client, and reqwest over HTTP/2 and HTTP/1.1.

mod bodies;
mod kubectl;
mod lifecycle;
mod python;
mod watch;

use std::path::{Path, PathBuf};

use capmox_apiserver::server::ApiRouter;
use capmox_apiserver::server::dev::{DevOptions, DevServer};
use capmox_apiserver::server::pki::DevPki;
use capmox_apiserver::server::tls;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tempfile::TempDir;

/// A dev server on a free port with its own directory.
pub struct Dev {
    pub dir: TempDir,
    pub server: DevServer,
}

impl Dev {
    pub async fn start(routes: impl FnOnce(ApiRouter) -> ApiRouter) -> Self {
        Self::start_with(DevOptions::default(), routes).await
    }

    /// A dev server with these options (the directory and port are always a fresh temp dir
    /// and a free port).
    pub async fn start_with(
        options: DevOptions,
        routes: impl FnOnce(ApiRouter) -> ApiRouter,
    ) -> Self {
        tls::install_default_provider();
        let dir = tempfile::tempdir().expect("tempdir");
        let options = DevOptions {
            dir: dir.path().join("dev"),
            port: 0,
            ..options
        };
        let server = DevServer::start(&options, routes)
            .await
            .expect("dev server starts");
        Self { dir, server }
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.server.server.local_addr())
    }

    pub fn kubeconfig(&self) -> &Path {
        &self.server.kubeconfig
    }

    /// A client trusting the dev CA, presenting the admin certificate when `admin`.
    pub fn client(&self, admin: bool, http1: bool) -> reqwest::Client {
        let pki = &self.server.pki;
        let ca = reqwest::Certificate::from_pem(pki.ca.cert_pem.as_bytes()).expect("ca");
        let mut builder = reqwest::Client::builder()
            .tls_certs_only([ca])
            .tls_info(true)
            .redirect(reqwest::redirect::Policy::none());
        if admin {
            let pem = format!("{}{}", pki.admin.cert_pem, pki.admin.key_pem);
            builder =
                builder.identity(reqwest::Identity::from_pem(pem.as_bytes()).expect("identity"));
        }
        if http1 {
            builder = builder.http1_only();
        }
        builder.build().expect("client")
    }
}

/// A raw TLS client's settings: trusting `pki`'s CA, presenting the admin certificate.
pub fn admin_tls_config(pki: &DevPki) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pki.ca.cert_pem.as_bytes()) {
        roots.add(cert.expect("ca")).expect("root");
    }
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(pki.admin.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .expect("admin certificate");
    let key = PrivateKeyDer::from_pem_slice(pki.admin.key_pem.as_bytes()).expect("admin key");
    rustls::ClientConfig::builder_with_provider(tls::provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .expect("client auth")
}

/// A client trusting `pki`'s CA, presenting `identity` when given.
pub fn pki_client(pki: &DevPki, identity: Option<&tls::PemPair>) -> reqwest::Client {
    pki_client_builder(pki, identity).build().expect("client")
}

/// [`pki_client`] before it is built, for callers that add timeouts.
pub fn pki_client_builder(pki: &DevPki, identity: Option<&tls::PemPair>) -> reqwest::ClientBuilder {
    let ca = reqwest::Certificate::from_pem(pki.ca.cert_pem.as_bytes()).expect("ca");
    let mut builder = reqwest::Client::builder().tls_certs_only([ca]);
    if let Some(id) = identity {
        let pem = format!("{}{}", id.cert_pem, id.key_pem);
        builder = builder.identity(reqwest::Identity::from_pem(pem.as_bytes()).expect("identity"));
    }
    builder
}

/// Finds a versioned kubectl (`kubectl.1.27` …): on PATH, else next to the `kubectl`
/// dispatcher that the Google Cloud SDK package installs.
pub fn kubectl(version: &str) -> PathBuf {
    let name = format!("kubectl.{version}");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    for dir in dirs.clone() {
        if let Ok(real) = std::fs::canonicalize(dir.join("kubectl"))
            && let Some(parent) = real.parent()
        {
            dirs.push(parent.to_owned());
        }
    }
    dirs.into_iter()
        .map(|d| d.join(&name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("{name} not found on PATH or beside kubectl; install the kubectl package")
        })
}

/// The Python with the `kubernetes` package: `$CAPMOX_TEST_PYTHON` (set by tests/run), else the
/// venv tests/run creates.
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("CAPMOX_TEST_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/venv/bin/python");
    assert!(
        venv.is_file(),
        "no Python test environment: run tests/run (or set CAPMOX_TEST_PYTHON)"
    );
    venv
}

/// Runs a command to completion, returning (success, stdout, stderr).
pub async fn run(program: &Path, args: &[&str]) -> (bool, String, String) {
    let output = tokio::process::Command::new(program)
        .args(args)
        .output()
        .await
        .unwrap_or_else(|e| panic!("running {}: {e}", program.display()));
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}
