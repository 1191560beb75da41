//! The controller's runtime inside the server: the REAL registry over the embedded store
//! (and over a real etcd), the Proxmox simulator and the in-memory management cluster.
//! Objects are created, changed and deleted through the registry like a client's, and
//! converge with no test driver calling `reconcile`: the registry's watches feed the work
//! queue, a CAPI stand-in sends triggers like the management cluster's change streams.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use capmox_apiserver::api::Version;
use capmox_apiserver::api::v1alpha2::{ProxmoxCluster, ProxmoxMachine};
use capmox_apiserver::controller::ErrorPolicy;
use capmox_apiserver::controller::clients::{ClientFactory, FactoryOptions};
use capmox_apiserver::controller::cluster::ClusterConfig;
use capmox_apiserver::controller::machine::MachineConfig;
use capmox_apiserver::controller::memory::MemoryManagement;
use capmox_apiserver::controller::observe::ControllerObserver;
use capmox_apiserver::controller::runtime::{
    Controller, ControllerHandle, ControllerOptions, ElectionOptions, FIELD_MANAGER, Trigger,
};
use capmox_apiserver::management::types::PoolKind;
use capmox_apiserver::proxmox::sim::{self, RunningSim, SimConfig};
use capmox_apiserver::registry::catalog::{self, Catalog};
use capmox_apiserver::registry::delete_options::DeleteOptions;
use capmox_apiserver::registry::list_options::ListOptions;
use capmox_apiserver::registry::object_store::NoObserver;
use capmox_apiserver::registry::patch::Patch;
use capmox_apiserver::registry::request_options::WriteOptions;
use capmox_apiserver::registry::rest::{PatchRequest, ResourceRest, Subresource};
use capmox_storage::{EmbeddedConfig, Store};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::harness::{
    NS, add_pool, assert_invariants, capi_sync, cluster_parts, cluster_spec, condition,
    machine_parts, vms,
};
use super::machine_spec;
use crate::rest::etcd::EtcdProcess;

/// How long a run may take to converge (real time; the instant simulator).
const CONVERGE: Duration = Duration::from_secs(90);

/// Counts passes (the observer the server's metrics implement).
#[derive(Default)]
pub(super) struct Passes(AtomicUsize);

impl ControllerObserver for Passes {
    fn reconciled(&self, _: &str, _: &str, _: Duration) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    fn queue_depth(&self, _: usize) {}
    fn leader(&self, _: bool) {}
    fn task_finished(&self, _: &str, _: &str, _: Duration) {}
    fn machine_phase(&self, _: &str, _: Option<&'static str>) {}
    fn machine_provisioned(&self, _: Duration) {}
}

impl Passes {
    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// The registry over a store, the simulator, the management cluster and a CAPI stand-in.
pub(super) struct Rig {
    pub(super) pve: RunningSim,
    pub(super) mgmt: MemoryManagement,
    store: Store,
    catalog: Arc<Catalog>,
    /// Workers of the controllers it starts.
    pub(super) workers: usize,
    pub(super) clients: Arc<ClientFactory>,
    /// Where the CAPI stand-in sends its triggers (every started controller).
    triggers: Arc<Mutex<Vec<mpsc::Sender<Trigger>>>>,
    capi: JoinHandle<()>,
    _dir: Option<tempfile::TempDir>,
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.capi.abort();
    }
}

fn rest<'a>(catalog: &'a Catalog, plural: &str) -> &'a Arc<ResourceRest> {
    catalog
        .resource("infrastructure.cluster.x-k8s.io", plural)
        .expect("served kind")
}

async fn list<T: serde::de::DeserializeOwned>(catalog: &Catalog, plural: &str) -> Vec<T> {
    rest(catalog, plural)
        .list(Version::V1alpha2.into(), None, &ListOptions::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .map(|v| serde_json::from_value(v).expect("decodes"))
        .collect()
}

impl Rig {
    async fn embedded() -> Self {
        Self::embedded_with(SimConfig::default()).await
    }

    /// Over the embedded store, with a simulator started from `config`.
    pub(super) async fn embedded_with(config: SimConfig) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(EmbeddedConfig::new(dir.path().join("data")))
            .await
            .expect("embedded store");
        Self::over_with(store, Some(dir), config).await
    }

    async fn over(store: Store, dir: Option<tempfile::TempDir>) -> Self {
        Self::over_with(store, dir, SimConfig::default()).await
    }

    async fn over_with(store: Store, dir: Option<tempfile::TempDir>, config: SimConfig) -> Self {
        let pve = sim::start(config).await.expect("simulator");
        let mgmt = MemoryManagement::new();
        mgmt.allocate_on_create(true);
        add_pool(
            &mgmt,
            PoolKind::InCluster,
            "vip-pool",
            &["10.0.0.200-10.0.0.210"],
            24,
            Some("10.0.0.1"),
        );
        let catalog = Arc::new(
            Catalog::new(
                catalog::strategies(),
                &store,
                Arc::new(NoObserver),
                &capmox_apiserver::registry::rest::RestConfig {
                    bookmark_interval: Duration::from_millis(200),
                    ..Default::default()
                },
                Arc::new(capmox_apiserver::registry::admission::NoAdmission),
            )
            .expect("catalog"),
        );
        let triggers = Arc::new(Mutex::new(Vec::new()));
        let capi = tokio::spawn(capi_stand_in(
            Arc::clone(&catalog),
            mgmt.clone(),
            Arc::clone(&triggers),
        ));
        Self {
            pve,
            mgmt,
            store,
            catalog,
            clients: Arc::new(ClientFactory::new(
                None,
                FactoryOptions {
                    rate_limit: None,
                    ..FactoryOptions::default()
                },
            )),
            workers: 4,
            triggers,
            capi,
            _dir: dir,
        }
    }

    /// A controller with fast polls; `identity` names it in the election.
    pub(super) fn start(&self, identity: &str, passes: Arc<Passes>) -> ControllerHandle {
        self.start_until(identity, passes, std::future::pending())
    }

    /// [`Self::start`], running until `shutdown` resolves.
    fn start_until(
        &self,
        identity: &str,
        passes: Arc<Passes>,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> ControllerHandle {
        let options = ControllerOptions {
            workers: self.workers,
            error_policy: ErrorPolicy {
                base: Duration::from_millis(100),
                max: Duration::from_secs(2),
                jitter: 0.2,
                conflict: Duration::from_millis(50),
            },
            machine: MachineConfig {
                task_wait: Duration::from_millis(500),
                poll: Duration::from_millis(200),
                address_poll: Duration::from_millis(200),
                guest_poll: Duration::from_millis(200),
                // Only a change (or the hourly resync) unblocks a blocked machine here.
                blocked_retry: Duration::from_secs(3600),
                ..MachineConfig::default()
            },
            cluster: ClusterConfig {
                machines_poll: Duration::from_millis(200),
                endpoint_poll: Duration::from_millis(200),
                credentials_retry: Duration::from_secs(1),
                release_poll: Duration::from_millis(200),
            },
            resync: Duration::from_secs(3600),
            election: ElectionOptions {
                identity: identity.to_owned(),
                ttl: Duration::from_secs(2),
                retry: Duration::from_millis(200),
                ..ElectionOptions::default()
            },
            observer: passes,
            ..ControllerOptions::default()
        };
        let handle = Controller::start(
            Arc::clone(&self.catalog),
            self.store.clone(),
            self.mgmt.clone(),
            Arc::clone(&self.clients),
            options,
            shutdown,
        )
        .expect("controller starts");
        self.triggers
            .lock()
            .expect("triggers")
            .push(handle.triggers());
        handle
    }

    pub(super) async fn create(&self, plural: &str, body: Value) {
        rest(&self.catalog, plural)
            .create(
                Version::V1alpha2.into(),
                NS,
                body,
                &[],
                &WriteOptions::default(),
            )
            .await
            .unwrap_or_else(|e| panic!("created: {:?}", e.error));
    }

    async fn add_cluster(&self, name: &str) {
        let body = cluster_parts(&self.mgmt, &self.pve, name, cluster_spec(name));
        self.create("proxmoxclusters", body).await;
    }

    async fn add_machine(&self, cluster: &str, name: &str, spec: Value) {
        let body = machine_parts(&self.mgmt, cluster, name, spec, "cloud-config", false);
        self.create("proxmoxmachines", body).await;
    }

    pub(super) async fn delete(&self, plural: &str, name: &str) {
        rest(&self.catalog, plural)
            .delete(
                Version::V1alpha2.into(),
                NS,
                name,
                &DeleteOptions::default(),
            )
            .await
            .unwrap_or_else(|e| panic!("deleted: {:?}", e.error));
    }

    pub(super) async fn machines(&self) -> Vec<ProxmoxMachine> {
        list(&self.catalog, "proxmoxmachines").await
    }

    pub(super) async fn clusters(&self) -> Vec<ProxmoxCluster> {
        list(&self.catalog, "proxmoxclusters").await
    }

    pub(super) async fn describe(&self) -> String {
        let mut out = String::new();
        for m in self.machines().await {
            let (status, reason, message) =
                condition(&m.status.conditions, "VirtualMachineProvisioned");
            out.push_str(&format!(
                "{:?}: vmid={:?} {status} {reason} {message}\n",
                m.metadata.name, m.spec.virtual_machine_id
            ));
        }
        out
    }

    /// Waits until `done` holds for the stored machines (and clusters).
    pub(super) async fn wait_for(
        &self,
        what: &str,
        done: impl Fn(&[ProxmoxMachine], &[ProxmoxCluster]) -> bool,
    ) {
        let deadline = tokio::time::Instant::now() + CONVERGE;
        loop {
            let (machines, clusters) = (self.machines().await, self.clusters().await);
            if done(&machines, &clusters) {
                return;
            }
            if tokio::time::Instant::now() > deadline {
                panic!("{what}: not reached\n{}", self.describe().await);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until every named machine is provisioned with its seed removed.
    async fn wait_provisioned(&self, names: &[&str]) {
        self.wait_for("provisioned", |machines, _| {
            names.iter().all(|n| {
                machines.iter().any(|m| {
                    m.metadata.name.as_deref() == Some(*n)
                        && condition(&m.status.conditions, "VirtualMachineProvisioned").1
                            == "Provisioned"
                })
            })
        })
        .await;
    }

    async fn assert_invariants(&self) {
        let describe = self.describe().await;
        assert_invariants(
            &self.pve,
            &self.mgmt,
            &self.machines().await,
            &self.clusters().await,
            &[],
            &describe,
        );
    }
}

/// CAPI core's part, from the registry's objects, and the triggers its change streams
/// would send to the controller.
async fn capi_stand_in(
    catalog: Arc<Catalog>,
    mgmt: MemoryManagement,
    triggers: Arc<Mutex<Vec<mpsc::Sender<Trigger>>>>,
) {
    let mut seen = None;
    loop {
        let clusters: Vec<ProxmoxCluster> = list(&catalog, "proxmoxclusters").await;
        let machines: Vec<ProxmoxMachine> = list(&catalog, "proxmoxmachines").await;
        capi_sync(&mgmt, &clusters, &machines, true);
        // Any change of the management cluster (ours or a test's) is announced.
        if seen != Some(mgmt.revision()) {
            seen = Some(mgmt.revision());
            let senders = triggers.lock().expect("triggers").clone();
            for c in &clusters {
                for sender in &senders {
                    let _ = sender.try_send(Trigger::Cluster {
                        namespace: NS.to_owned(),
                        name: c.metadata.name.clone().unwrap_or_default(),
                    });
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn status_managers(object: &ProxmoxMachine) -> Vec<(String, String, String)> {
    object
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|m| {
            (
                m.manager.clone().unwrap_or_default(),
                m.operation.clone().unwrap_or_default(),
                m.subresource.clone().unwrap_or_default(),
            )
        })
        .collect()
}

#[tokio::test]
async fn objects_created_through_the_registry_converge_and_are_deleted() {
    let rig = Rig::embedded().await;
    let passes = Arc::new(Passes::default());
    let controller = rig.start("solo", Arc::clone(&passes));
    rig.add_cluster("c1").await;
    rig.add_machine("c1", "c1-md-0", machine_spec(json!({})))
        .await;
    rig.add_machine("c1", "c1-md-1", machine_spec(json!({})))
        .await;
    rig.wait_provisioned(&["c1-md-0", "c1-md-1"]).await;
    assert!(controller.is_leader(), "the embedded store's process leads");
    rig.assert_invariants().await;
    // Converged means quiet: the controller's own writes do not feed a loop of passes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let settled = passes.count();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let extra = passes.count() - settled;
    assert!(extra < 20, "{extra} passes in 2 s after convergence");
    assert_eq!(vms(&rig.pve).len(), 2);

    // Status went through /status, recorded for the controller's field manager.
    for m in rig.machines().await {
        let managers = status_managers(&m);
        assert!(
            managers.contains(&(FIELD_MANAGER.into(), "Update".into(), "status".into())),
            "{managers:?}"
        );
        assert!(
            managers.contains(&(FIELD_MANAGER.into(), "Update".into(), String::new())),
            "finalizer and VMID written on the main resource: {managers:?}"
        );
        assert_eq!(m.status.initialization.provisioned, Some(true));
    }
    let cluster = rig.clusters().await.pop().expect("cluster");
    assert_eq!(cluster.status.initialization.provisioned, Some(true));
    assert!(!cluster.spec.control_plane_endpoint.host.is_empty());

    // Deletion: VMs destroyed, finalizers removed, objects gone, nothing leaked.
    for name in ["c1-md-0", "c1-md-1"] {
        rig.delete("proxmoxmachines", name).await;
    }
    rig.delete("proxmoxclusters", "c1").await;
    // The owning Cluster goes too; its change stream triggers the ProxmoxCluster.
    rig.mgmt.delete_object("Cluster", NS, "c1");
    rig.wait_for("deleted", |machines, clusters| {
        machines.is_empty() && clusters.is_empty()
    })
    .await;
    assert!(vms(&rig.pve).is_empty(), "{:?}", vms(&rig.pve));
    assert!(rig.mgmt.claims().is_empty(), "{:?}", rig.mgmt.claims());
    assert!(passes.count() > 0);
    controller.stop().await;
}

#[tokio::test]
async fn a_spec_change_requeues_a_blocked_machine() {
    let rig = Rig::embedded().await;
    let controller = rig.start("solo", Arc::new(Passes::default()));
    rig.add_cluster("c1").await;
    let missing = json!({"sourceNode": null, "templateID": null,
        "templateSelector": {"matchTags": ["nope"]}});
    rig.add_machine("c1", "m0", machine_spec(missing)).await;
    // Blocked: no template has the tags; the retry is an hour away.
    rig.wait_for("blocked on the template", |machines, _| {
        machines.iter().any(|m| {
            condition(&m.status.conditions, "VirtualMachineProvisioned")
                .2
                .starts_with("VM template not found")
        })
    })
    .await;
    assert!(vms(&rig.pve).is_empty());
    rest(&rig.catalog, "proxmoxmachines")
        .patch(
            Version::V1alpha2.into(),
            NS,
            "m0",
            &PatchRequest {
                patch: Patch::Merge(
                    json!({"spec": {"templateSelector": {"matchTags": ["debian"]}}}),
                ),
                duplicates: Vec::new(),
            },
            &WriteOptions::default(),
            Subresource::Main,
        )
        .await
        .unwrap_or_else(|e| panic!("patched: {:?}", e.error));
    rig.wait_provisioned(&["m0"]).await;
    rig.assert_invariants().await;
    controller.stop().await;
}

#[tokio::test]
async fn a_controller_aborted_mid_run_is_replaced_and_the_invariants_hold() {
    let rig = Rig::embedded().await;
    rig.add_cluster("c1").await;
    let names: Vec<String> = (0..4).map(|i| format!("c1-md-{i}")).collect();
    for name in &names {
        rig.add_machine("c1", name, machine_spec(json!({}))).await;
    }
    // Killed at different moments of provisioning, then a new process takes over.
    for (round, after) in [150u64, 400, 900].into_iter().enumerate() {
        let controller = rig.start(&format!("run-{round}"), Arc::new(Passes::default()));
        tokio::time::sleep(Duration::from_millis(after)).await;
        controller.abort();
    }
    let controller = rig.start("final", Arc::new(Passes::default()));
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    rig.wait_provisioned(&refs).await;
    rig.assert_invariants().await;
    assert_eq!(vms(&rig.pve).len(), names.len());

    // Deleting, aborted too.
    for name in &names {
        rig.delete("proxmoxmachines", name).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    controller.abort();
    let controller = rig.start("after-delete", Arc::new(Passes::default()));
    rig.wait_for("machines deleted", |machines, _| machines.is_empty())
        .await;
    assert!(vms(&rig.pve).is_empty(), "{:?}", vms(&rig.pve));
    rig.assert_invariants().await;
    controller.stop().await;
}

/// Waits until exactly one of `handles` leads; its index.
async fn one_leader(handles: &[&ControllerHandle]) -> usize {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let leaders: Vec<usize> = (0..handles.len())
            .filter(|&i| handles[i].is_leader())
            .collect();
        assert!(leaders.len() <= 1, "two leaders at once: {leaders:?}");
        if let [one] = leaders[..] {
            return one;
        }
        assert!(tokio::time::Instant::now() < deadline, "no leader");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn two_controllers_on_one_etcd_one_reconciles_and_the_other_takes_over() {
    let etcd = EtcdProcess::start().await.expect("etcd starts");
    let store = Store::open(etcd.config("/capmox-runtime"))
        .await
        .expect("etcd store");
    let rig = Rig::over(store, None).await;
    let passes = [Arc::new(Passes::default()), Arc::new(Passes::default())];
    let a = rig.start("a", Arc::clone(&passes[0]));
    let b = rig.start("b", Arc::clone(&passes[1]));
    let first = one_leader(&[&a, &b]).await;
    let follower = 1 - first;
    rig.add_cluster("c1").await;
    rig.add_machine("c1", "c1-md-0", machine_spec(json!({})))
        .await;
    rig.wait_provisioned(&["c1-md-0"]).await;
    assert!(passes[first].count() > 0);
    assert_eq!(
        passes[follower].count(),
        0,
        "the follower reconciles nothing"
    );
    one_leader(&[&a, &b]).await;

    // The leader stops (resigning); the other takes over and reconciles new objects.
    let (leader, other) = if first == 0 { (a, b) } else { (b, a) };
    leader.stop().await;
    let mut leading = other.leadership();
    tokio::time::timeout(Duration::from_secs(10), leading.wait_for(|l| *l))
        .await
        .expect("the other takes over")
        .expect("leadership");
    rig.add_machine("c1", "c1-md-1", machine_spec(json!({})))
        .await;
    rig.wait_provisioned(&["c1-md-0", "c1-md-1"]).await;
    assert!(passes[follower].count() > 0, "the new leader reconciles");

    // A leader that dies without resigning is replaced once its lease expires.
    let third_passes = Arc::new(Passes::default());
    let third = rig.start("c", Arc::clone(&third_passes));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!third.is_leader(), "the current leader keeps leading");
    other.abort();
    let mut leading = third.leadership();
    tokio::time::timeout(Duration::from_secs(15), leading.wait_for(|l| *l))
        .await
        .expect("taken over after the lease expired")
        .expect("leadership");
    rig.delete("proxmoxmachines", "c1-md-0").await;
    rig.wait_for("machine deleted", |machines, _| machines.len() == 1)
        .await;
    rig.assert_invariants().await;
    assert!(third_passes.count() > 0);
    third.stop().await;
}

#[tokio::test]
async fn the_shutdown_signal_stops_reconciling() {
    let rig = Rig::embedded().await;
    let (shutdown, signal) = tokio::sync::oneshot::channel::<()>();
    let passes = Arc::new(Passes::default());
    let controller = rig.start_until("solo", Arc::clone(&passes), async move {
        let _ = signal.await;
    });
    rig.add_cluster("c1").await;
    rig.add_machine("c1", "m0", machine_spec(json!({}))).await;
    rig.wait_provisioned(&["m0"]).await;
    let _ = shutdown.send(());
    let mut leading = controller.leadership();
    tokio::time::timeout(Duration::from_secs(5), leading.wait_for(|l| !*l))
        .await
        .expect("stopped")
        .expect("leadership");
    let before = passes.count();
    rig.add_machine("c1", "m1", machine_spec(json!({}))).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(passes.count(), before, "no pass after the shutdown");
    assert_eq!(vms(&rig.pve).len(), 1, "m1 is not provisioned");
}
