//! The two sides, as `tests/e2e/run pair` describes them in pair.env.

use std::time::Duration;

use capmox_apiserver::api::{Kind, Version};
use reqwest::Method;
use serde_json::Value;

use crate::rest::GROUP;

/// One side's answer to a request.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
    /// The `Warning` headers' texts, in order.
    pub warnings: Vec<String>,
}

impl Answer {
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// A kube-apiserver and an admin client for it.
pub struct Side {
    pub name: &'static str,
    base: String,
    client: reqwest::Client,
}

/// What a request carries: a method, a path below the server, a body and its content type, and
/// the media type it accepts.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: Method,
    pub path: String,
    pub body: Option<(&'static str, Value)>,
    pub accept: Option<&'static str>,
}

impl Request {
    pub fn new(method: Method, path: String) -> Self {
        Self {
            method,
            path,
            body: None,
            accept: None,
        }
    }

    pub fn json(mut self, body: Value) -> Self {
        self.body = Some(("application/json", body));
        self
    }

    pub fn merge_patch(mut self, body: Value) -> Self {
        self.body = Some(("application/merge-patch+json", body));
        self
    }

    /// A server-side apply of `body` (JSON is YAML too).
    pub fn apply_patch(mut self, body: Value) -> Self {
        self.body = Some(("application/apply-patch+yaml", body));
        self
    }

    pub fn accept(mut self, media_type: &'static str) -> Self {
        self.accept = Some(media_type);
        self
    }
}

/// The path of a kind's collection in a namespace, or of one object (and a subresource).
pub fn path(kind: Kind, version: Version, namespace: &str, name: Option<&str>) -> String {
    let plural = kind.descriptor().plural;
    let collection = format!("/apis/{GROUP}/{version}/namespaces/{namespace}/{plural}");
    match name {
        Some(name) => format!("{collection}/{name}"),
        None => collection,
    }
}

impl Side {
    fn from_env(name: &'static str, url_var: &str) -> Self {
        let var = |name: &str| {
            std::env::var(name).unwrap_or_else(|_| {
                panic!("{name} is not set: run the differential with `tests/e2e/run differential`")
            })
        };
        let read = |name: &str| {
            let path = var(name);
            std::fs::read(&path).unwrap_or_else(|e| panic!("{name}={path}: {e}"))
        };
        let ca = reqwest::Certificate::from_pem(&read("PAIR_CA")).expect("PAIR_CA");
        let mut identity = read("PAIR_CLIENT_CERT");
        identity.extend(read("PAIR_CLIENT_KEY"));
        let client = reqwest::Client::builder()
            .tls_certs_only([ca])
            .identity(reqwest::Identity::from_pem(&identity).expect("client identity"))
            .timeout(Duration::from_secs(60))
            .build()
            .expect("client");
        Self {
            name,
            base: var(url_var),
            client,
        }
    }

    /// A request to `path` below the server, to be completed and sent by the caller.
    pub fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.client.request(method, format!("{}{path}", self.base))
    }

    pub async fn send(&self, request: &Request) -> Answer {
        let mut call = self.request(request.method.clone(), &request.path);
        if let Some((content_type, body)) = &request.body {
            call = call
                .header("content-type", *content_type)
                .body(body.to_string());
        }
        if let Some(accept) = request.accept {
            call = call.header("accept", accept);
        }
        let response = call
            .send()
            .await
            .unwrap_or_else(|e| panic!("{}: {} {}: {e}", self.name, request.method, request.path));
        let status = response.status().as_u16();
        let warnings = response
            .headers()
            .get_all("warning")
            .iter()
            .map(|v| v.to_str().unwrap_or_default().to_owned())
            .collect();
        let text = response.text().await.expect("body");
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Answer {
            status,
            body,
            warnings,
        }
    }
}

/// Ours and the peer.
pub struct Pair {
    pub ours: Side,
    pub peer: Side,
}

impl Pair {
    pub fn from_env() -> Self {
        capmox_apiserver::server::tls::install_default_provider();
        Self {
            ours: Side::from_env("ours", "PAIR_OURS_URL"),
            peer: Side::from_env("peer", "PAIR_PEER_URL"),
        }
    }

    /// The same request to both, at the same time.
    pub async fn send(&self, request: &Request) -> (Answer, Answer) {
        self.send_each(request, request).await
    }

    /// Each side its own request (a write of the copy that side read back), at the same time.
    pub async fn send_each(&self, ours: &Request, peer: &Request) -> (Answer, Answer) {
        tokio::join!(self.ours.send(ours), self.peer.send(peer))
    }

    /// Whether both accepted a create; where only one did, the object at `path` is deleted
    /// there again, so that the two stores stay alike.
    pub async fn both_created(&self, path: String, ours: &Answer, peer: &Answer) -> bool {
        if ours.ok() && peer.ok() {
            return true;
        }
        let delete = Request::new(Method::DELETE, path);
        if ours.ok() {
            self.ours.send(&delete).await;
        }
        if peer.ok() {
            self.peer.send(&delete).await;
        }
        false
    }
}
