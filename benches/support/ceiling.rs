//! The aggregator's ceiling: a minimal aggregated API server registered behind the same
//! kube-apiserver as ours, with ours' listener, TLS and HTTP/2 stack, answering fixed bytes taken
//! from ours (one object, one list) without authenticating, authorizing, storing or encoding
//! anything. What kube-apiserver's proxy reaches with it is the most any aggregated server
//! behind that kube-apiserver could reach on this machine.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::http::{Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use bytes::Bytes;
use capmox_apiserver::server::listener::{self, ListenerOptions, Shutdown};
use capmox_apiserver::server::pki::CertificateAuthority;
use capmox_apiserver::server::tls;
use serde_json::{Value, json};

/// The ceiling's API group; its one version is ours' storage version, so paths match ours.
pub const GROUP: &str = "ceiling.capmox-bench.example.com";
pub const VERSION: &str = "v1alpha2";
/// The namespace and name of its Service (an ExternalName of 127.0.0.1, as the harness
/// registers ours): kube-apiserver dials `<name>.<namespace>.svc`.
const NAMESPACE: &str = "capmox-bench-ceiling";
const SERVICE: &str = "ceiling";
/// Thread name of its runtime (two threads, as `serve` runs on two cores).
const THREAD: &str = "ceiling-https";

/// What it answers: every POST with `object` (201), every GET of a collection with `list`,
/// every other GET with `object`.
#[derive(Default)]
struct Answers {
    object: Bytes,
    list: Bytes,
}

pub struct Ceiling {
    runtime: Option<tokio::runtime::Runtime>,
    answers: Arc<RwLock<Answers>>,
}

impl Ceiling {
    /// Starts it answering `object` for `plural`, registers it as the APIService
    /// `VERSION.GROUP` of the kube-apiserver at `kube_apiserver` (through `admin`, a client of
    /// it), and waits until that APIService is Available.
    pub async fn start(
        admin: &reqwest::Client,
        kube_apiserver: &str,
        plural: &'static str,
        kind: &'static str,
        object: Bytes,
    ) -> Self {
        let ca = CertificateAuthority::generate("capmox-bench-ceiling-ca").expect("CA");
        let serving = ca
            .serving(&[format!("{SERVICE}.{NAMESPACE}.svc")])
            .expect("serving certificate");
        let resolver = Arc::new(tls::ReloadingCertResolver::new(
            serving.certified_key().expect("serving key"),
        ));
        let config = tls::server_config(resolver, None).expect("TLS config");
        let answers = Arc::new(RwLock::new(Answers {
            object,
            list: Bytes::new(),
        }));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(THREAD)
            .enable_all()
            .build()
            .expect("runtime");
        let router = {
            let answers = Arc::clone(&answers);
            // The body is read before answering, as a server does: a request answered with
            // its body unread costs the connection (kube-apiserver's proxy then fails the
            // requests it had in flight on it with 503 "cannot rewind body").
            axum::Router::new().fallback(move |method: Method, uri: Uri, _body: Bytes| {
                let answers = Arc::clone(&answers);
                async move { answer(&answers, &method, uri.path(), plural, kind) }
            })
        };
        let (address_tx, address_rx) = tokio::sync::oneshot::channel();
        runtime.spawn(async move {
            let socket = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let server = listener::serve(
                socket,
                config,
                router,
                ListenerOptions::default(),
                Shutdown::default(),
            )
            .expect("serve");
            let _ = address_tx.send(server.local_addr());
            // Serves until the runtime is shut down.
            server.wait().await;
        });
        let port = address_rx.await.expect("ceiling address").port();
        register(admin, kube_apiserver, port, &ca.pair.cert_pem).await;
        Self {
            runtime: Some(runtime),
            answers,
        }
    }

    /// From now on, a GET of a collection answers `list`.
    pub fn set_list(&self, list: Bytes) {
        if let Ok(mut answers) = self.answers.write() {
            answers.list = list;
        }
    }
}

impl Drop for Ceiling {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

fn answer(
    answers: &RwLock<Answers>,
    method: &Method,
    path: &str,
    plural: &str,
    kind: &str,
) -> Response {
    let json = |code: StatusCode, body: Bytes| {
        (code, [(header::CONTENT_TYPE, "application/json")], body).into_response()
    };
    if path == format!("/apis/{GROUP}/{VERSION}") {
        return json(
            StatusCode::OK,
            Bytes::from(discovery(plural, kind).to_string()),
        );
    }
    let Ok(answers) = answers.read() else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    match *method {
        Method::POST => json(StatusCode::CREATED, answers.object.clone()),
        Method::GET if path.ends_with(&format!("/{plural}")) => {
            json(StatusCode::OK, answers.list.clone())
        }
        Method::GET => json(StatusCode::OK, answers.object.clone()),
        _ => StatusCode::METHOD_NOT_ALLOWED.into_response(),
    }
}

/// The APIResourceList kube-aggregator's availability check reads.
fn discovery(plural: &str, kind: &str) -> Value {
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": format!("{GROUP}/{VERSION}"),
        "resources": [{
            "name": plural, "singularName": "", "namespaced": true, "kind": kind,
            "verbs": ["create", "get", "list"]
        }]
    })
}

/// The Namespace, the ExternalName Service and the APIService, then a wait (60 s at most)
/// for the APIService's Available condition.
async fn register(admin: &reqwest::Client, kube_apiserver: &str, port: u16, ca_pem: &str) {
    let objects = [
        (
            "/api/v1/namespaces".to_owned(),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        ),
        (
            format!("/api/v1/namespaces/{NAMESPACE}/services"),
            json!({"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": SERVICE, "namespace": NAMESPACE},
                   "spec": {"type": "ExternalName", "externalName": "127.0.0.1"}}),
        ),
        (
            "/apis/apiregistration.k8s.io/v1/apiservices".to_owned(),
            json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                   "metadata": {"name": format!("{VERSION}.{GROUP}")},
                   "spec": {"group": GROUP, "version": VERSION,
                            "groupPriorityMinimum": 1000, "versionPriority": 15,
                            "service": {"namespace": NAMESPACE, "name": SERVICE, "port": port},
                            "caBundle": base64::engine::general_purpose::STANDARD.encode(ca_pem)}}),
        ),
    ];
    for (path, object) in objects {
        let reply = admin
            .post(format!("{kube_apiserver}{path}"))
            .json(&object)
            .send()
            .await
            .expect("register the ceiling");
        let status = reply.status();
        assert!(
            status.is_success() || status == StatusCode::CONFLICT,
            "registering the ceiling, POST {path}: {status}: {}",
            reply.text().await.unwrap_or_default()
        );
    }
    let url =
        format!("{kube_apiserver}/apis/apiregistration.k8s.io/v1/apiservices/{VERSION}.{GROUP}");
    for _ in 0..120 {
        let service: Value = admin
            .get(&url)
            .send()
            .await
            .expect("APIService")
            .json()
            .await
            .expect("APIService JSON");
        let available = service["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Available" && c["status"] == "True");
        if available {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("the ceiling's APIService {VERSION}.{GROUP} did not become Available in 60 s");
}
