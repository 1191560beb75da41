//! The bad-input suite: hundreds of hostile requests, each with the status code and reason
//! kube-apiserver gives for a custom resource, against a dev server holding a machine and a
//! cluster. After every request the server must still be ready and every stored object
//! unchanged (same names, same resourceVersions), so a refused request provably changed
//! nothing and an accepted one wrote nothing it should not have. Each category prints how
//! many requests it sent; `memory` runs the worst of them against a server process under an
//! address-space limit.

mod bodies;
mod certificates;
pub mod fuzz;
mod memory;
mod metadata;
mod patches;
mod queries;
mod wire;

use reqwest::Method;
use serde_json::{Value, json};

use crate::rest::{Api, GROUP, collection, item, machine};

/// The object every case may aim at.
pub const TARGET: &str = "target";

/// One hostile request and what kube-apiserver answers to it.
pub struct Case {
    pub what: String,
    pub method: Method,
    pub path: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Option<Vec<u8>>,
    pub expect: Expect,
}

/// The answer a case expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// A `Status` with this code and reason.
    Status(u16, &'static str),
    /// A success with this code: the input is odd but kube accepts it too.
    Accepted(u16),
}

impl Case {
    pub fn new(what: impl Into<String>, method: Method, path: impl Into<String>) -> Self {
        Self {
            what: what.into(),
            method,
            path: path.into(),
            headers: Vec::new(),
            body: None,
            expect: Expect::Accepted(200),
        }
    }

    pub fn body(mut self, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        self.headers.push(("content-type", content_type.to_owned()));
        self.body = Some(body.into());
        self
    }

    pub fn json(self, body: &Value) -> Self {
        self.body("application/json", body.to_string())
    }

    pub fn status(mut self, code: u16, reason: &'static str) -> Self {
        self.expect = Expect::Status(code, reason);
        self
    }

    pub fn accepted(mut self, code: u16) -> Self {
        self.expect = Expect::Accepted(code);
        self
    }
}

/// A dev server with the objects the cases aim at.
pub struct Fixture {
    pub api: Api,
}

impl Fixture {
    pub async fn start() -> Self {
        let api = Api::start().await;
        api.create(&machine(TARGET)).await;
        let mut cluster = crate::api::support::cluster_v2();
        cluster["metadata"]["name"] = json!(TARGET);
        api.create(&cluster).await;
        Self { api }
    }

    /// Every stored object of our kinds, with its resourceVersion.
    async fn snapshot(&self) -> Vec<(String, String, String)> {
        let mut all = Vec::new();
        for plural in [
            "proxmoxmachines",
            "proxmoxclusters",
            "proxmoxmachinetemplates",
            "proxmoxclustertemplates",
        ] {
            let reply = self
                .api
                .get(&format!("/apis/{GROUP}/v1alpha2/{plural}"))
                .send()
                .await;
            assert_eq!(reply.status, 200, "list {plural}: {}", reply.text);
            for object in reply.json()["items"].as_array().into_iter().flatten() {
                let meta = &object["metadata"];
                all.push((
                    plural.to_owned(),
                    format!("{}/{}", meta["namespace"], meta["name"]),
                    meta["resourceVersion"].to_string(),
                ));
            }
        }
        all
    }

    /// Sends every case, checking its answer, readiness and the stored objects after each;
    /// fails listing every case answered otherwise; returns how many were sent.
    pub async fn run(&self, category: &str, cases: Vec<Case>) -> usize {
        let before = self.snapshot().await;
        let count = cases.len();
        let mut wrong = Vec::new();
        for case in cases {
            let mut request = self
                .api
                .client
                .request(case.method.clone(), self.api.dev.url(&case.path));
            for (name, value) in &case.headers {
                request = request.header(*name, value);
            }
            if let Some(body) = case.body {
                request = request.body(body);
            }
            let response = request.send().await.unwrap_or_else(|e| {
                panic!("{category}: {}: no answer: {e}", case.what);
            });
            let code = response.status().as_u16();
            let text = response.text().await.unwrap_or_default();
            if let Err(problem) = check(case.expect, code, &text) {
                wrong.push(format!("{}: {problem}", case.what));
            }
            assert!(
                self.ready().await,
                "{category}: not ready after {}",
                case.what
            );
            assert_eq!(
                self.snapshot().await,
                before,
                "{category}: {} changed what is stored",
                case.what
            );
        }
        assert!(
            wrong.is_empty(),
            "{category}: {} of {count} answered otherwise:\n{}",
            wrong.len(),
            wrong.join("\n")
        );
        println!("hostile {category}: {count} requests, 0 5xx, server ready, nothing changed");
        count
    }

    pub async fn ready(&self) -> bool {
        self.api.get("/readyz").send().await.status == 200
    }
}

/// Checks one answer against what kube-apiserver gives.
pub fn check(expect: Expect, code: u16, text: &str) -> Result<(), String> {
    let short: String = text.chars().take(300).collect();
    // The one 5xx kube answers to a client's input: an exact read of a future revision
    // ("Too large resource version", which clients retry).
    let retry_later = expect == Expect::Status(504, "Timeout");
    if code >= 500 && !retry_later {
        return Err(format!("a server error {code}: {short}"));
    }
    match expect {
        Expect::Accepted(want) if code == want => Ok(()),
        Expect::Accepted(want) => Err(format!("{code} instead of {want}: {short}")),
        Expect::Status(want, reason) => {
            let status: Value = serde_json::from_str(text)
                .map_err(|e| format!("{code}, not a Status ({e}): {short}"))?;
            let got = (code, status["reason"].as_str().unwrap_or_default());
            if got != (want, reason) || status["kind"] != "Status" {
                return Err(format!("{got:?} instead of ({want}, {reason:?}): {short}"));
            }
            let message = status["message"].as_str().unwrap_or_default();
            match [
                "serde",
                "budget",
                "from_str",
                "json_patch",
                "jsonptr",
                "panicked",
            ]
            .into_iter()
            .find(|internal| message.contains(internal))
            {
                Some(internal) => Err(format!("library internals ({internal}) in {message}")),
                None => Ok(()),
            }
        }
    }
}

/// Paths the cases use.
pub fn machines(version: &str) -> String {
    collection(version, "default", "proxmoxmachines")
}

pub fn target(version: &str) -> String {
    item(version, "default", "proxmoxmachines", TARGET)
}

/// The stored target as a version reads it (for updates that start from it).
pub async fn read_target(api: &Api, version: &str) -> Value {
    let reply = api.get(&target(version)).send().await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.json()
}
