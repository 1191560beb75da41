//! [`Controller::start`]: the reconcilers running inside the server.
//!
//! A supervisor task campaigns for leadership (always granted on the embedded store), and
//! for each term of leadership starts a fresh work queue, the feed (reflectors, resync) and
//! the workers with fresh reconcilers. Losing leadership ends the term — in-flight passes
//! are dropped — and the supervisor campaigns again. Triggers sent through the handle go
//! to the current term (none while not leading: a new term lists everything anyway).

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use capmox_storage::{Fence, Store};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};

use super::feed::Feed;
use super::key::{ObjectKey, ReconcileKind, Trigger};
use super::queue::WorkQueue;
use super::store::{MissingKind, RegistryInfraStore, resource};
use super::workers::{Reconcilers, work};
use crate::controller::action::{ErrorPolicy, spread};
use crate::controller::clients::ClientFactory;
use crate::controller::clock::{Clock, SystemClock};
use crate::controller::cluster::{ClusterConfig, ClusterReconciler};
use crate::controller::machine::{MachineConfig, MachineReconciler};
use crate::controller::observe::{ControllerObserver, NoObserver};
use crate::controller::seams::Management;
use crate::proxmox::client::WriteFence;
use crate::registry::catalog::Catalog;
use crate::registry::rest::ResourceRest;
use crate::task::TaskGuard;

/// How triggers wait for the feed before senders are slowed down.
const TRIGGER_BUFFER: usize = 4096;

/// Leader election settings (used on etcd; the embedded store always leads).
#[derive(Clone, Debug)]
pub struct ElectionOptions {
    /// The key under the store's prefix that names the leader.
    pub key: String,
    /// This process's identity (unique per process).
    pub identity: String,
    /// Lease TTL: how long a dead leader blocks the others at most.
    pub ttl: Duration,
    /// Pause after a failed campaign (store unreachable).
    pub retry: Duration,
}

impl Default for ElectionOptions {
    fn default() -> Self {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "capmox-apiserver".to_owned());
        Self {
            key: "/capmox-elections/controller".to_owned(),
            identity: format!("{host}_{}", uuid::Uuid::new_v4()),
            ttl: Duration::from_secs(10),
            retry: Duration::from_secs(2),
        }
    }
}

/// Settings of the runtime.
#[derive(Clone)]
pub struct ControllerOptions {
    /// Concurrent passes (default 8).
    pub workers: usize,
    /// Every object is reconciled again this often (±10 %), default 10 min.
    pub resync: Duration,
    /// Back-off after failed passes.
    pub error_policy: ErrorPolicy,
    pub machine: MachineConfig,
    pub cluster: ClusterConfig,
    pub election: ElectionOptions,
    /// Where measurements go (the server's `Metrics`).
    pub observer: Arc<dyn ControllerObserver>,
    /// "Now" for the reconcilers.
    pub clock: Arc<dyn Clock>,
}

impl Default for ControllerOptions {
    fn default() -> Self {
        Self {
            workers: 8,
            resync: Duration::from_secs(600),
            error_policy: ErrorPolicy::default(),
            machine: MachineConfig::default(),
            cluster: ClusterConfig::default(),
            election: ElectionOptions::default(),
            observer: Arc::new(NoObserver),
            clock: Arc::new(SystemClock),
        }
    }
}

/// The running controller.
pub struct ControllerHandle {
    triggers: mpsc::Sender<Trigger>,
    leading: watch::Receiver<bool>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl ControllerHandle {
    /// Where other code sends keys to reconcile (e.g. the management cluster's CAPI
    /// Machine and Cluster change streams).
    pub fn triggers(&self) -> mpsc::Sender<Trigger> {
        self.triggers.clone()
    }

    /// Whether this process currently leads and reconciles.
    pub fn is_leader(&self) -> bool {
        *self.leading.borrow()
    }

    /// Follows leadership changes.
    pub fn leadership(&self) -> watch::Receiver<bool> {
        self.leading.clone()
    }

    /// Stops: workers end (in-flight passes are dropped), leadership is resigned so another
    /// replica takes over at once. Returns when done.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }

    /// Stops at once, like a killed process: passes are dropped and leadership is not
    /// resigned (on etcd it expires with its lease).
    pub fn abort(self) {
        self.task.abort();
    }
}

impl Drop for ControllerHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What a term needs, shared by every term.
struct Parts<M> {
    machines_rest: Arc<ResourceRest>,
    clusters_rest: Arc<ResourceRest>,
    infra: RegistryInfraStore,
    management: M,
    clients: Arc<ClientFactory>,
    options: ControllerOptions,
    /// The feed of the current term, for triggers.
    current: Arc<Mutex<Option<Arc<Feed>>>>,
}

/// Entry point of the runtime.
pub struct Controller;

impl Controller {
    /// Starts the controller over the registry's `catalog` and its `store` (for leader
    /// election), with the management cluster `management` and Proxmox clients from
    /// `clients`. It runs until `shutdown` resolves or the handle stops it.
    pub fn start<M: Management + Clone>(
        catalog: Arc<Catalog>,
        store: Store,
        management: M,
        clients: Arc<ClientFactory>,
        options: ControllerOptions,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<ControllerHandle, MissingKind> {
        let parts = Arc::new(Parts {
            machines_rest: Arc::clone(resource(&catalog, ReconcileKind::ProxmoxMachine.kind())?),
            clusters_rest: Arc::clone(resource(&catalog, ReconcileKind::ProxmoxCluster.kind())?),
            infra: RegistryInfraStore::new(catalog)?,
            management,
            clients,
            options,
            current: Arc::new(Mutex::new(None)),
        });
        let (triggers, received) = mpsc::channel(TRIGGER_BUFFER);
        let (leading_tx, leading) = watch::channel(false);
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(supervise(
            parts, store, received, leading_tx, stopped, shutdown,
        ));
        Ok(ControllerHandle {
            triggers,
            leading,
            stop: Some(stop),
            task,
        })
    }
}

/// Campaigns, runs a term while leading, and again after losing; ends on stop/shutdown.
async fn supervise<M: Management + Clone>(
    parts: Arc<Parts<M>>,
    store: Store,
    triggers: mpsc::Receiver<Trigger>,
    leading: watch::Sender<bool>,
    stopped: oneshot::Receiver<()>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let forwarder = tokio::spawn(forward(triggers, Arc::clone(&parts.current)));
    let _forwarder = TaskGuard::new(forwarder);
    let ending = async move {
        tokio::select! {
            _ = stopped => {}
            _ = shutdown => {}
        }
    };
    tokio::pin!(ending);
    let election = parts.options.election.clone();
    let observer = Arc::clone(&parts.options.observer);
    loop {
        let campaign = store.campaign(&election.key, &election.identity, election.ttl);
        let mut leadership = tokio::select! {
            _ = &mut ending => return,
            result = campaign => match result {
                Ok(leadership) => leadership,
                Err(error) => {
                    tracing::warn!(%error, "campaigning for the controller's leadership failed");
                    tokio::select! {
                        _ = &mut ending => return,
                        _ = tokio::time::sleep(spread(election.retry, 0.2)) => continue,
                    }
                }
            },
        };
        tracing::info!(identity = %election.identity, "leading: the controller starts");
        leading.send_replace(true);
        observer.leader(true);
        let term = Term::start(&parts, leadership.fence());
        let end = tokio::select! {
            _ = &mut ending => true,
            _ = leadership.lost() => false,
        };
        term.stop(&parts);
        leading.send_replace(false);
        observer.leader(false);
        observer.queue_depth(0);
        if end {
            leadership.resign().await;
            tracing::info!("the controller stopped");
            return;
        }
        tracing::warn!("leadership lost: the controller stopped, campaigning again");
    }
}

/// The check of every Proxmox write of a term: the lease must hold for a fifth of its TTL
/// more (2 s of the default 10 s), time for the request to reach Proxmox VE before anyone
/// else could lead. Renewals every third of the TTL keep it well clear of that while etcd
/// answers.
fn write_fence(fence: Fence, ttl: Duration) -> WriteFence {
    let margin = ttl / 5;
    WriteFence::new(move || {
        if fence.holds_for(margin) {
            Ok(())
        } else {
            Err(format!(
                "this replica no longer holds the controller's lease for the next {margin:?}"
            ))
        }
    })
}

/// Hands triggers to the current term's feed.
async fn forward(mut triggers: mpsc::Receiver<Trigger>, current: Arc<Mutex<Option<Arc<Feed>>>>) {
    while let Some(trigger) = triggers.recv().await {
        let feed = current.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(feed) = feed {
            feed.trigger(trigger);
        }
    }
}

/// One term of leadership: its queue and tasks (dropping it aborts them).
struct Term {
    queue: Arc<WorkQueue<ObjectKey>>,
    tasks: JoinSet<()>,
}

impl Term {
    fn start<M: Management + Clone>(parts: &Parts<M>, fence: Fence) -> Self {
        let options = &parts.options;
        let queue = Arc::new(WorkQueue::new(options.error_policy));
        let feed = Arc::new(Feed::new(Arc::clone(&queue)));
        let mut tasks = JoinSet::new();
        tasks.spawn(Arc::clone(&feed).reflect(
            ReconcileKind::ProxmoxCluster,
            Arc::clone(&parts.clusters_rest),
        ));
        tasks.spawn(Arc::clone(&feed).reflect(
            ReconcileKind::ProxmoxMachine,
            Arc::clone(&parts.machines_rest),
        ));
        tasks.spawn(Arc::clone(&feed).resync_every(options.resync));
        let reconcilers = Arc::new(Reconcilers {
            machines: MachineReconciler::new(
                parts.infra.clone(),
                parts.management.clone(),
                Arc::clone(&parts.clients),
                Arc::clone(&options.clock),
                options.machine.clone(),
            )
            .observed_by(Arc::clone(&options.observer))
            .fenced_by(write_fence(fence, options.election.ttl)),
            clusters: ClusterReconciler::new(
                parts.infra.clone(),
                parts.management.clone(),
                Arc::clone(&parts.clients),
                Arc::clone(&options.clock),
                options.cluster.clone(),
            ),
        });
        for _ in 0..options.workers.max(1) {
            tasks.spawn(work(
                Arc::clone(&queue),
                Arc::clone(&reconcilers),
                Arc::clone(&options.observer),
            ));
        }
        tasks.spawn(sample_depth(
            Arc::clone(&queue),
            Arc::clone(&options.observer),
        ));
        *parts.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(feed);
        Self { queue, tasks }
    }

    fn stop<M>(mut self, parts: &Parts<M>) {
        *parts.current.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.queue.shutdown();
        self.tasks.abort_all();
    }
}

/// Reports the queue depth every second.
async fn sample_depth(queue: Arc<WorkQueue<ObjectKey>>, observer: Arc<dyn ControllerObserver>) {
    loop {
        observer.queue_depth(queue.depth());
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

// The server keeps the handle with its companions (`Server::keep_alive`) or stops it in a
// shutdown hook; both need it to be shareable across threads.
const _: fn() = || {
    fn shareable<T: Send + Sync + 'static>() {}
    shareable::<ControllerHandle>();
};
