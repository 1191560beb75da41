//! A stand-in for the kube-apiserver aggregator: a plain-HTTP listener on 127.0.0.1 that
//! forwards every request to the server under test over TLS with a front-proxy client
//! certificate, dropping the caller's credentials and `X-Remote-*` headers and naming its own
//! fixed user in `X-Remote-*` headers, as the aggregator does for the user it authenticated.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use capmox_apiserver::server::tls::PemPair;
use futures::TryStreamExt;

/// The identity the proxy asserts.
#[derive(Clone, Debug, Default)]
pub struct ProxiedUser {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    /// Extra keys as the aggregator sends them (already %-escaped where needed).
    pub extra: Vec<(String, String)>,
}

impl ProxiedUser {
    pub fn named(name: &str, groups: &[&str]) -> Self {
        Self {
            name: name.to_owned(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            ..Self::default()
        }
    }
}

struct Upstream {
    base: String,
    client: reqwest::Client,
    user: ProxiedUser,
}

/// A running proxy.
pub struct FrontProxy {
    pub url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FrontProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn dropped(name: &HeaderName) -> bool {
    let name = name.as_str();
    name == "authorization"
        || name == "host"
        || name == "connection"
        || name == "transfer-encoding"
        || name.starts_with("x-remote-")
        || name.starts_with("impersonate-")
}

async fn forward(State(upstream): State<Arc<Upstream>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map(|pq| pq.as_str().to_owned())
        .unwrap_or_default();
    let mut outgoing = upstream
        .client
        .request(parts.method.clone(), format!("{}{path}", upstream.base));
    for (name, value) in parts.headers.iter().filter(|(n, _)| !dropped(n)) {
        outgoing = outgoing.header(name, value);
    }
    let user = &upstream.user;
    outgoing = outgoing.header("X-Remote-User", &user.name);
    if !user.uid.is_empty() {
        outgoing = outgoing.header("X-Remote-Uid", &user.uid);
    }
    for group in &user.groups {
        outgoing = outgoing.header("X-Remote-Group", group);
    }
    for (key, value) in &user.extra {
        outgoing = outgoing.header(format!("X-Remote-Extra-{key}"), value);
    }
    let body = match axum::body::to_bytes(body, 16 << 20).await {
        Ok(bytes) => bytes,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    match outgoing.body(body).send().await {
        Ok(response) => {
            let mut builder = Response::builder().status(response.status());
            for (name, value) in response.headers() {
                if !matches!(name.as_str(), "connection" | "transfer-encoding") {
                    builder = builder.header(name, value);
                }
            }
            let stream = response.bytes_stream().map_err(std::io::Error::other);
            builder
                .body(Body::from_stream(stream))
                .unwrap_or_else(|e| (StatusCode::BAD_GATEWAY, e.to_string()).into_response())
        }
        // Like the aggregator when the backend refuses it.
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            [(
                axum::http::header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain"),
            )],
            format!("error trying to reach service: {e:?}"),
        )
            .into_response(),
    }
}

impl FrontProxy {
    /// Proxies to `base` (https://host:port), trusting `server_ca` and presenting `identity`.
    pub async fn start(base: &str, server_ca: &str, identity: &PemPair, user: ProxiedUser) -> Self {
        let ca = reqwest::Certificate::from_pem(server_ca.as_bytes()).expect("server CA");
        let pem = format!("{}{}", identity.cert_pem, identity.key_pem);
        let client = reqwest::Client::builder()
            .tls_certs_only([ca])
            .identity(reqwest::Identity::from_pem(pem.as_bytes()).expect("identity"))
            .build()
            .expect("client");
        let upstream = Arc::new(Upstream {
            base: base.trim_end_matches('/').to_owned(),
            client,
            user,
        });
        let router = Router::new().fallback(forward).with_state(upstream);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, router).await {
                eprintln!("front proxy stopped: {e}");
            }
        });
        Self { url, task }
    }
}
