//! The management seam over kube-rs (`KubeManagement`, the change streams) and the `dev`
//! emulation loops (in-cluster IPAM, tiny CAPI core), all against a real `dev` server
//! serving the management stand-ins and our own ProxmoxCluster/ProxmoxMachine.

mod capi;
mod ipam;
mod seam;

use std::future::Future;
use std::time::Duration;

use capmox_apiserver::emulation::EmulationOptions;
use capmox_apiserver::management::kube::kinds::Kind;
use capmox_apiserver::management::kube::objects::Objects;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::rest::Api;

/// A dev server and a kube client for it.
pub struct Env {
    /// Keeps the server running.
    _server: Api,
    pub client: kube::Client,
    pub objects: Objects,
}

impl Env {
    pub async fn start() -> Self {
        let api = Api::start().await;
        let client = crate::standins::client(&api).await;
        Self {
            _server: api,
            objects: Objects::new(client.clone()),
            client,
        }
    }

    pub async fn create(&self, kind: Kind, object: Value) -> Value {
        self.objects
            .create(kind, &object)
            .await
            .unwrap_or_else(|e| panic!("creating {}: {e}", kind.name()))
    }

    pub async fn get(&self, kind: Kind, namespace: &str, name: &str) -> Option<Value> {
        self.objects
            .get(kind, namespace, name)
            .await
            .unwrap_or_else(|e| panic!("reading {}: {e}", kind.describe(namespace, name)))
    }

    /// Reads, edits and writes an object (main resource or `/status`), retrying conflicts
    /// with the loops under test.
    pub async fn edit(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        status: bool,
        edit: impl Fn(&mut Value),
    ) -> Value {
        for _ in 0..50 {
            let mut object = self
                .get(kind, namespace, name)
                .await
                .unwrap_or_else(|| panic!("{} exists", kind.describe(namespace, name)));
            edit(&mut object);
            let written = if status {
                self.objects.replace_status(kind, &object).await
            } else {
                self.objects.replace(kind, &object).await
            };
            match written {
                Ok(written) => return written,
                Err(e) if e.to_string().contains("conflict") => continue,
                Err(e) => panic!("writing {}: {e}", kind.describe(namespace, name)),
            }
        }
        panic!("{} kept conflicting", kind.describe(namespace, name))
    }

    pub async fn delete(&self, kind: Kind, namespace: &str, name: &str) {
        self.objects
            .delete(kind, namespace, name, None)
            .await
            .unwrap_or_else(|e| panic!("deleting {}: {e}", kind.describe(namespace, name)));
    }
}

/// The shape of `emulation::spawn_ipam` and `spawn_capi` with a boxed shutdown future.
type Spawn = fn(
    kube::Client,
    EmulationOptions,
    std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
) -> JoinHandle<()>;

/// A running emulation loop and the switch that stops it.
pub struct Running {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Running {
    /// Starts a loop through `spawn` (`emulation::spawn_ipam` or `spawn_capi`).
    pub fn start(client: &kube::Client, spawn: Spawn) -> Self {
        let (stop, stopped) = oneshot::channel::<()>();
        let options = EmulationOptions {
            relist_interval: Duration::from_secs(2),
        };
        let task = spawn(
            client.clone(),
            options,
            Box::pin(async move {
                let _ = stopped.await;
            }),
        );
        Self {
            stop: Some(stop),
            task,
        }
    }

    /// Stops the loop and waits for its task to end.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(Duration::from_secs(10), &mut self.task)
            .await
            .expect("the loop stops on its shutdown signal")
            .expect("the loop task ends cleanly");
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Polls `probe` until it answers `Some`, for at most 30 s.
pub async fn eventually<T, F>(what: &str, probe: impl Fn() -> F) -> T
where
    F: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(found) = probe().await {
            return found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Asserts that `probe` keeps answering `false` for a while (something must not happen).
pub async fn never(what: &str, wait: Duration, probe: impl AsyncFn() -> bool) {
    let deadline = tokio::time::Instant::now() + wait;
    while tokio::time::Instant::now() < deadline {
        assert!(!probe().await, "unexpectedly: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A Cluster API object as JSON.
pub fn capi_object(kind: &str, namespace: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    })
}

/// A Cluster whose infrastructure is the ProxmoxCluster of the same name.
pub fn proxmox_backed_cluster(namespace: &str, name: &str) -> Value {
    capi_object(
        "Cluster",
        namespace,
        name,
        json!({"infrastructureRef": infra_ref("ProxmoxCluster", name)}),
    )
}

/// An `infrastructureRef` to one of our kinds.
pub fn infra_ref(kind: &str, name: &str) -> Value {
    json!({"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": kind, "name": name})
}
