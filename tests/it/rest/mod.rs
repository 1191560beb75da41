//! The resource API end to end: the dev server (embedded store, temp dir, free port) driven
//! over HTTPS by raw requests (exact status codes, headers and bodies), kubectl 1.27–1.33,
//! the Python `kubernetes` client and kube-rs.

mod apply;
mod bad_input;
mod conversion;
mod crud;
mod deprecation;
mod discovery;
// The storage tests' etcd helper, shared rather than copied.
#[allow(dead_code)]
#[path = "../../../storage/tests/conformance/support/etcd.rs"]
pub mod etcd;
#[allow(dead_code)]
#[path = "../../../storage/tests/conformance/support/proxy.rs"]
pub mod etcd_proxy;
mod kube_rs;
pub(crate) mod kubectl;
mod lists;
mod python;
mod ratcheting;
mod releases;
mod serve;

mod watch;

use std::time::Duration;

use capmox_apiserver::registry::rest::RestConfig;
use capmox_apiserver::server::dev::DevOptions;
use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::api::support;
use crate::server::Dev;

pub const GROUP: &str = "infrastructure.cluster.x-k8s.io";

/// A running dev server and an admin client for it.
pub struct Api {
    pub dev: Dev,
    pub client: reqwest::Client,
}

/// One answer.
pub struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub text: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }

    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    /// The texts of the `Warning` headers, unquoted.
    pub fn warnings(&self) -> Vec<String> {
        self.headers
            .get_all("warning")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(|v| {
                let quoted = v.trim_start_matches("299 - ");
                let inner = quoted
                    .strip_prefix('"')
                    .and_then(|q| q.strip_suffix('"'))
                    .unwrap_or(quoted);
                inner.replace("\\\"", "\"")
            })
            .collect()
    }

    /// `reason` of a Status body.
    pub fn reason(&self) -> String {
        self.json()["reason"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    pub fn message(&self) -> String {
        self.json()["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

/// A request being built.
pub struct Call<'a> {
    api: &'a Api,
    method: Method,
    path: String,
    headers: Vec<(&'static str, String)>,
    body: Option<Vec<u8>>,
}

impl Call<'_> {
    pub fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.to_owned()));
        self
    }

    pub fn accept(self, value: &str) -> Self {
        self.header("accept", value)
    }

    pub fn json(mut self, body: &Value) -> Self {
        self.body = Some(body.to_string().into_bytes());
        self.header("content-type", "application/json")
    }

    /// A raw body with its content type.
    pub fn raw(mut self, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        self.body = Some(body.into());
        self.header("content-type", content_type)
    }

    pub fn merge_patch(self, body: &Value) -> Self {
        self.raw("application/merge-patch+json", body.to_string())
    }

    pub fn json_patch(self, body: &Value) -> Self {
        self.raw("application/json-patch+json", body.to_string())
    }

    fn request(self) -> reqwest::RequestBuilder {
        let mut request = self
            .api
            .client
            .request(self.method, self.api.dev.url(&self.path));
        for (name, value) in self.headers {
            request = request.header(name, value);
        }
        if let Some(body) = self.body {
            request = request.body(body);
        }
        request
    }

    pub async fn send(self) -> Reply {
        let response = self.request().send().await.expect("request");
        Reply {
            status: response.status().as_u16(),
            headers: response.headers().clone(),
            text: response.text().await.expect("body"),
        }
    }

    /// Sends a watch and returns its event stream.
    pub async fn watch(self) -> Events {
        let response = self.request().send().await.expect("watch");
        Events {
            status: response.status().as_u16(),
            response,
            buffer: Vec::new(),
        }
    }
}

/// The events of a watch response, one JSON document per line.
pub struct Events {
    pub status: u16,
    response: reqwest::Response,
    buffer: Vec<u8>,
}

impl Events {
    /// The next event; `None` when the stream ended or nothing came within 10 s.
    pub async fn next(&mut self) -> Option<Value> {
        self.next_within(Duration::from_secs(10)).await
    }

    pub async fn next_within(&mut self, wait: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                return Some(serde_json::from_slice(&line).expect("event JSON"));
            }
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk()).await;
            match chunk {
                Ok(Ok(Some(bytes))) => self.buffer.extend_from_slice(&bytes),
                _ => return None,
            }
        }
    }

    /// The next event that is not a bookmark.
    pub async fn next_change(&mut self) -> Option<Value> {
        loop {
            let event = self.next().await?;
            if event["type"] != "BOOKMARK" {
                return Some(event);
            }
        }
    }
}

impl Api {
    /// A dev server whose watches ask for bookmarks every 200 ms.
    pub async fn start() -> Self {
        let options = DevOptions {
            rest: RestConfig {
                bookmark_interval: Duration::from_millis(200),
                ..RestConfig::default()
            },
            ..DevOptions::default()
        };
        let dev = Dev::start_with(options, |r| r).await;
        let client = dev.client(true, false);
        Self { dev, client }
    }

    pub fn call(&self, method: Method, path: &str) -> Call<'_> {
        Call {
            api: self,
            method,
            path: path.to_owned(),
            headers: Vec::new(),
            body: None,
        }
    }

    pub fn get(&self, path: &str) -> Call<'_> {
        self.call(Method::GET, path)
    }

    pub fn post(&self, path: &str) -> Call<'_> {
        self.call(Method::POST, path)
    }

    pub fn put(&self, path: &str) -> Call<'_> {
        self.call(Method::PUT, path)
    }

    pub fn patch(&self, path: &str) -> Call<'_> {
        self.call(Method::PATCH, path)
    }

    pub fn delete(&self, path: &str) -> Call<'_> {
        self.call(Method::DELETE, path)
    }

    /// Creates an object (in its body's version) and returns it as the server answered.
    pub async fn create(&self, object: &Value) -> Value {
        let version = version_of(object);
        let plural = plural_of(object);
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default");
        let reply = self
            .post(&collection(version, namespace, plural))
            .json(object)
            .send()
            .await;
        assert_eq!(reply.status, 201, "create: {}", reply.text);
        reply.json()
    }
}

/// `v1alpha1` / `v1alpha2` from an object's `apiVersion`.
pub fn version_of(object: &Value) -> &str {
    object["apiVersion"]
        .as_str()
        .and_then(|v| v.rsplit('/').next())
        .unwrap_or("v1alpha2")
}

/// The plural resource of an object's kind.
pub fn plural_of(object: &Value) -> &'static str {
    match object["kind"].as_str().unwrap_or_default() {
        "ProxmoxCluster" => "proxmoxclusters",
        "ProxmoxClusterTemplate" => "proxmoxclustertemplates",
        "ProxmoxMachineTemplate" => "proxmoxmachinetemplates",
        _ => "proxmoxmachines",
    }
}

/// `/apis/<group>/<version>/namespaces/<ns>/<plural>`.
pub fn collection(version: &str, namespace: &str, plural: &str) -> String {
    format!("/apis/{GROUP}/{version}/namespaces/{namespace}/{plural}")
}

/// `…/<plural>/<name>`.
pub fn item(version: &str, namespace: &str, plural: &str, name: &str) -> String {
    format!("{}/{name}", collection(version, namespace, plural))
}

/// A valid v1alpha2 ProxmoxMachine named `name` in `default`.
pub fn machine(name: &str) -> Value {
    named(support::machine_v2(), name)
}

/// A valid v1alpha1 ProxmoxMachine named `name` in `default`.
pub fn machine_v1(name: &str) -> Value {
    named(support::machine_v1(), name)
}

/// `object` with another name.
pub fn named(mut object: Value, name: &str) -> Value {
    object["metadata"]["name"] = Value::from(name);
    object
}

/// `object` with these labels.
pub fn labelled(mut object: Value, labels: &[(&str, &str)]) -> Value {
    for (k, v) in labels {
        object["metadata"]["labels"][*k] = Value::from(*v);
    }
    object
}
