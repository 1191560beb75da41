//! The clients: each one, over HTTPS to a replica chosen at random per request, creates,
//! reads, lists, compare-and-swap updates (PUT with the resourceVersion it read), patches and
//! deletes ProxmoxMachines of a small set of names, recording every operation with its call
//! and return times for the linearizability check. The objects have no CAPI owner, so the
//! controller reads them but never writes them: every change comes from the history.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

use capmox_apiserver::proxmox::sim::rng::Rng;

use super::linearizability::{Input, Operation, Output};
use super::system::{GROUP_VERSION, NAMESPACE, machine_spec};

/// The label that selects the register objects (lists and watches use it).
pub const REGISTER_SELECTOR: &str = "labelSelector=chaos%3Dregister";
const VALUE_ANNOTATION: &str = "chaos/value";

/// A uniform pick below `n` from the simulator's seeded generator (runs repeat by seed).
pub fn below(rng: &mut Rng, n: usize) -> usize {
    rng.range(0, n as u64 - 1) as usize
}

/// What the clients share.
pub struct Workload {
    pub replicas: Vec<String>,
    pub keys: Vec<String>,
    pub client: reqwest::Client,
    pub start: Instant,
    pub history: Mutex<Vec<Operation>>,
    /// Answers the checks do not expect (4xx other than 404/409): each is a failure.
    pub unexpected: Mutex<Vec<String>>,
}

/// An answer, or none (timeout, reset, 5xx, 429: the write may or may not have happened).
enum Answer {
    Ok(Value),
    NotFound,
    AlreadyExists,
    Conflict,
    None,
}

impl Workload {
    pub fn nanos(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn collection(&self, replica: &str) -> String {
        format!("{replica}/apis/{GROUP_VERSION}/namespaces/{NAMESPACE}/proxmoxmachines")
    }

    async fn send(&self, request: reqwest::RequestBuilder, what: &str) -> Answer {
        let Ok(response) = request.send().await else {
            return Answer::None;
        };
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        match status {
            s if s.is_success() => Answer::Ok(body),
            StatusCode::NOT_FOUND => Answer::NotFound,
            StatusCode::CONFLICT if body["reason"] == "AlreadyExists" => Answer::AlreadyExists,
            StatusCode::CONFLICT => Answer::Conflict,
            s if s.is_server_error() || s == StatusCode::TOO_MANY_REQUESTS => Answer::None,
            // A replica whose admission informers have not synced since its restart refuses
            // writes as kube-apiserver does; nothing changed.
            StatusCode::FORBIDDEN
                if body["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("not yet ready")) =>
            {
                Answer::None
            }
            s => {
                self.unexpected
                    .lock()
                    .expect("unexpected")
                    .push(format!("{what}: {s} {body}"));
                Answer::None
            }
        }
    }

    fn record(&self, client: usize, call: u64, key: &str, input: Input, output: Output) {
        let ret = (output != Output::Unknown).then(|| self.nanos());
        self.history.lock().expect("history").push(Operation {
            client,
            call,
            ret,
            key: key.to_owned(),
            input,
            output,
        });
    }

    /// Runs client `id` until `stop` turns true.
    pub async fn run_client(self: Arc<Self>, id: usize, seed: u64, stop: watch::Receiver<bool>) {
        let mut rng = Rng::new(seed);
        let mut seq = 0u64;
        while !*stop.borrow() {
            let replica = self.replicas[below(&mut rng, self.replicas.len())].clone();
            let key = self.keys[below(&mut rng, self.keys.len())].clone();
            seq += 1;
            let value = format!("c{id}-{seq}");
            let op = below(&mut rng, 100);
            let work = async {
                match op {
                    0..20 => self.create(id, &replica, &key, &value).await,
                    20..40 => {
                        self.get(id, &replica, &key).await;
                    }
                    40..50 => self.list(id, &replica).await,
                    50..75 => self.compare_and_swap(id, &replica, &key, &value).await,
                    75..90 => self.patch(id, &replica, &key, &value).await,
                    _ => self.delete(id, &replica, &key).await,
                }
            };
            // Not cut short at the stop: a request dropped in flight may still be applied,
            // and the history must hold every write that can have happened.
            work.await;
            // A little think time keeps 2 cores from saturating, so faults, not load, decide.
            tokio::time::sleep(Duration::from_millis(5 + below(&mut rng, 20) as u64)).await;
        }
    }

    pub fn object(key: &str, value: &str) -> Value {
        json!({
            "apiVersion": GROUP_VERSION, "kind": "ProxmoxMachine",
            "metadata": {
                "name": key, "namespace": NAMESPACE,
                "labels": {"chaos": "register"},
                "annotations": {VALUE_ANNOTATION: value},
            },
            "spec": machine_spec(),
        })
    }

    async fn create(&self, id: usize, replica: &str, key: &str, value: &str) {
        let call = self.nanos();
        let request = self
            .client
            .post(self.collection(replica))
            .json(&Self::object(key, value));
        let output = match self.send(request, "create").await {
            Answer::Ok(body) => written(&body),
            Answer::AlreadyExists => Output::AlreadyExists,
            _ => Output::Unknown,
        };
        let input = Input::Create {
            value: value.to_owned(),
        };
        self.record(id, call, key, input, output);
    }

    /// A read: the object or its absence, `None` without an answer.
    pub async fn get(&self, id: usize, replica: &str, key: &str) -> Option<Option<Value>> {
        let call = self.nanos();
        let request = self
            .client
            .get(format!("{}/{key}", self.collection(replica)));
        let (output, object) = match self.send(request, "get").await {
            Answer::Ok(body) => (Output::Read(Some(register(&body))), Some(body)),
            Answer::NotFound => (Output::Read(None), None),
            // A read without an answer changed nothing: it is left out.
            _ => return None,
        };
        self.record(id, call, key, Input::Get, output);
        Some(object)
    }

    /// A list is one read of every key at the list's revision.
    async fn list(&self, id: usize, replica: &str) {
        let call = self.nanos();
        let request = self
            .client
            .get(format!("{}?{REGISTER_SELECTOR}", self.collection(replica)));
        let Answer::Ok(list) = self.send(request, "list").await else {
            return;
        };
        let ret = self.nanos();
        let items = list["items"].as_array().cloned().unwrap_or_default();
        let mut history = self.history.lock().expect("history");
        for key in &self.keys {
            let found = items
                .iter()
                .find(|o| o["metadata"]["name"] == key.as_str())
                .map(register);
            history.push(Operation {
                client: id,
                call,
                ret: Some(ret),
                key: key.clone(),
                input: Input::Get,
                output: Output::Read(found),
            });
        }
    }

    /// Reads, then PUTs with the resourceVersion read: a compare-and-swap.
    async fn compare_and_swap(&self, id: usize, replica: &str, key: &str, value: &str) {
        let Some(Some(mut object)) = self.get(id, replica, key).await else {
            return;
        };
        let expected = resource_version(&object);
        object["metadata"]["annotations"][VALUE_ANNOTATION] = json!(value);
        let call = self.nanos();
        let request = self
            .client
            .put(format!("{}/{key}", self.collection(replica)))
            .json(&object);
        let output = match self.send(request, "update").await {
            Answer::Ok(body) => written(&body),
            Answer::NotFound => Output::NotFound,
            Answer::Conflict => Output::Conflict,
            _ => Output::Unknown,
        };
        let input = Input::Update {
            expected,
            value: value.to_owned(),
        };
        self.record(id, call, key, input, output);
    }

    async fn patch(&self, id: usize, replica: &str, key: &str, value: &str) {
        let call = self.nanos();
        let request = self
            .client
            .patch(format!("{}/{key}", self.collection(replica)))
            .header("Content-Type", "application/merge-patch+json")
            .body(json!({"metadata": {"annotations": {VALUE_ANNOTATION: value}}}).to_string());
        let output = match self.send(request, "patch").await {
            Answer::Ok(body) => written(&body),
            Answer::NotFound => Output::NotFound,
            _ => Output::Unknown,
        };
        let input = Input::Patch {
            value: value.to_owned(),
        };
        self.record(id, call, key, input, output);
    }

    async fn delete(&self, id: usize, replica: &str, key: &str) {
        let call = self.nanos();
        let request = self
            .client
            .delete(format!("{}/{key}", self.collection(replica)));
        let output = match self.send(request, "delete").await {
            Answer::Ok(_) => Output::Deleted,
            Answer::NotFound => Output::NotFound,
            _ => Output::Unknown,
        };
        self.record(id, call, key, Input::Delete, output);
    }

    /// Operations recorded, and how many were acknowledged writes.
    pub fn counts(&self) -> (usize, usize) {
        let history = self.history.lock().expect("history");
        let writes = history
            .iter()
            .filter(|o| matches!(o.output, Output::Written { .. } | Output::Deleted))
            .count();
        (history.len(), writes)
    }
}

pub fn resource_version(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .expect("numeric resourceVersion")
}

/// The register an object holds: its resourceVersion and value.
pub fn register(object: &Value) -> (u64, String) {
    let value = object["metadata"]["annotations"][VALUE_ANNOTATION]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (resource_version(object), value)
}

fn written(body: &Value) -> Output {
    Output::Written {
        rv: resource_version(body),
    }
}
