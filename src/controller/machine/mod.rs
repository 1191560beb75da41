//! The ProxmoxMachine reconciler: an explicit state machine over [`phase::Phase`],
//! persisted as the reason of the `VirtualMachineProvisioned` condition.
//!
//! One `reconcile` call is a pass: resolve the owners (Machine, Cluster, ProxmoxCluster),
//! honour pause and deletion, then run phase steps in order until one has to wait. Every
//! step is idempotent: it looks at Proxmox and the management cluster and only does what
//! is missing, so a pass abandoned at any await point is simply repeated. The one write
//! that must precede a side effect is the VMID, recorded in `spec.virtualMachineID`
//! before the clone is requested; a VM found under that id (by its name) is adopted,
//! never cloned again. docs/controller.md has the diagram and the argument per step.

mod addresses;
mod bootstrap;
mod configure;
mod create;
mod delete;
mod guest;
mod ha;
pub mod phase;
mod release;
mod tasks;
mod vm;
mod volumes;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;

use self::phase::Phase;
use super::action::{Action, ErrorPolicy};
use super::clients::{self, ClientFactory, Connection, CredentialsError};
use super::clock::Clock;
use super::error::ReconcileError;
use super::failure_domains;
use super::handle::{Handle, add_finalizer, remove_finalizer};
use super::names::{DEFAULT_ZONE, MACHINE_FINALIZER, ZONE_LABEL};
use super::observe::{ControllerObserver, NoObserver};
use super::placements::Placements;
use super::seams::{InfraStore, Management, ManagementError, StoreError};
use crate::api::v1alpha2::{ProxmoxCluster, ProxmoxMachine, vm_state};
use crate::management::types::{
    CAPI_GROUP, CLUSTER_NAME_LABEL, Cluster, Machine, PAUSED_ANNOTATION, has_annotation, owner_name,
};
use crate::proxmox::client::{WaitOptions, WriteFence};
use crate::proxmox::types::VmConfig;
use crate::proxmox::{self, Client};

/// Timings of the machine reconciler.
#[derive(Clone, Debug)]
pub struct MachineConfig {
    /// How long a pass waits inline for a Proxmox task before persisting its UPID and
    /// requeueing.
    pub task_wait: Duration,
    /// Requeue while a task runs or a VM is locked.
    pub poll: Duration,
    /// Requeue while IPAM has not answered a claim.
    pub address_poll: Duration,
    /// Requeue while the guest agent or cloud-init is not done.
    pub guest_poll: Duration,
    /// Retry after a condition that needs someone else to act (template missing, no
    /// free VMID, not enough memory).
    pub blocked_retry: Duration,
    /// Back-off after failed Proxmox tasks (persisted as `status.retryAfter`).
    pub task_retry: ErrorPolicy,
    /// How long the list of ISO storages of a node is reused.
    pub storage_cache_ttl: Duration,
    /// Retry while the machine's Proxmox VE cluster does not answer (no back-off: it is
    /// refused without being asked until its next probe, and should be back on time).
    pub unanswered_retry: Duration,
}

impl Default for MachineConfig {
    fn default() -> Self {
        Self {
            task_wait: Duration::from_secs(3),
            poll: Duration::from_secs(5),
            address_poll: Duration::from_secs(5),
            guest_poll: Duration::from_secs(10),
            blocked_retry: Duration::from_secs(300),
            task_retry: ErrorPolicy {
                base: Duration::from_secs(15),
                max: Duration::from_secs(600),
                jitter: 0.25,
                conflict: Duration::from_millis(200),
            },
            storage_cache_ttl: Duration::from_secs(300),
            unanswered_retry: Duration::from_secs(10),
        }
    }
}

impl MachineConfig {
    fn wait_options(&self) -> WaitOptions {
        WaitOptions {
            timeout: self.task_wait,
            initial_interval: Duration::from_millis(100),
            max_interval: Duration::from_secs(1),
        }
    }
}

/// A node's ISO storage (if any) and when it was listed.
type StorageEntry = (std::time::Instant, Option<String>);

/// Reconciles ProxmoxMachines.
pub struct MachineReconciler<S, M> {
    store: S,
    mgmt: M,
    clients: Arc<ClientFactory>,
    clock: Arc<dyn Clock>,
    config: MachineConfig,
    /// Consecutive task failures per machine uid (for the back-off; not persisted).
    failures: Mutex<HashMap<String, u32>>,
    /// VMIDs chosen by passes of this process, per machine uid, so concurrent creations
    /// do not pick the same id (Proxmox has no reservation).
    vmids: Mutex<HashMap<String, u32>>,
    /// Recent placements per Proxmox VE cluster, so machines scheduled together spread
    /// (see [`Placements`]).
    placements: Mutex<HashMap<String, Arc<Placements>>>,
    /// A guest command still running, per machine uid: (vmid, pid).
    execs: Mutex<HashMap<String, (u32, u64)>>,
    /// ISO-capable storage per (endpoint, node) with the time it was listed.
    iso_storages: Mutex<HashMap<(String, String), StorageEntry>>,
    /// Where phases, provisioning times and task durations go (the server's metrics).
    observer: Arc<dyn ControllerObserver>,
    /// Checks each Proxmox write against the leadership (none: always allowed).
    fence: Option<WriteFence>,
}

/// How a step ended.
pub(super) enum Flow {
    /// Go on with this phase in the same pass.
    Next(Phase),
    /// Persist and return this action.
    Wait(Action),
}

/// Why a step could not go on.
pub(super) enum Failure {
    /// Only a change of the spec (or the bootstrap data) can fix it.
    Terminal(String),
    /// Someone else has to act (or a task failed): keep the phase, say why, retry later.
    Blocked(String, Duration),
    /// A transient error: the caller retries with back-off.
    Error(ReconcileError),
}

impl<E: Into<ReconcileError>> From<E> for Failure {
    fn from(e: E) -> Self {
        Self::Error(e.into())
    }
}

impl From<CredentialsError> for ReconcileError {
    fn from(e: CredentialsError) -> Self {
        match e {
            CredentialsError::Management(m) => Self::Management(m),
            CredentialsError::Unreachable(p) => Self::Proxmox(p),
            other => Self::Credentials(other.to_string()),
        }
    }
}

pub(super) type Step = Result<Flow, Failure>;

/// What one pass works with.
pub(super) struct Pass<'a, S, M> {
    r: &'a MachineReconciler<S, M>,
    h: Handle<ProxmoxMachine>,
    /// The owning Machine (absent only while deleting after it vanished).
    machine: Option<Machine>,
    cluster_name: String,
    pc: ProxmoxCluster,
    client: Option<Client>,
    /// The Proxmox VE cluster the client reaches (set with it).
    pve: Option<String>,
    /// The VM's config as read in this pass (None: not read yet).
    vm: Option<VmConfig>,
    /// Resolved addresses of this pass.
    resolved: Option<Vec<addresses::Resolved>>,
    /// A note for the next phase's condition message.
    note: Option<String>,
    /// The object lost its status (a restore): an existing VM may already run.
    adopting: bool,
    /// The phase the pass found the machine in (before its steps ran).
    found_in: Phase,
    /// The type of a recorded task this pass found finished (`imgcopy`, `qmstart`...):
    /// the step that started it goes on after it instead of starting it again.
    finished: Option<String>,
    now: Timestamp,
}

impl<S: InfraStore, M: Management> MachineReconciler<S, M> {
    /// A reconciler over the given seams.
    pub fn new(
        store: S,
        mgmt: M,
        clients: Arc<ClientFactory>,
        clock: Arc<dyn Clock>,
        config: MachineConfig,
    ) -> Self {
        Self {
            store,
            mgmt,
            clients,
            clock,
            config,
            failures: Mutex::new(HashMap::new()),
            vmids: Mutex::new(HashMap::new()),
            placements: Mutex::new(HashMap::new()),
            execs: Mutex::new(HashMap::new()),
            iso_storages: Mutex::new(HashMap::new()),
            observer: Arc::new(NoObserver),
            fence: None,
        }
    }

    /// The reconciler reporting to `observer`.
    pub fn observed_by(mut self, observer: Arc<dyn ControllerObserver>) -> Self {
        self.observer = observer;
        self
    }

    /// The reconciler whose Proxmox writes are all checked by `fence` (the runtime's
    /// leadership) right before they are sent.
    pub fn fenced_by(mut self, fence: WriteFence) -> Self {
        self.fence = Some(fence);
        self
    }

    /// One pass over the ProxmoxMachine `namespace/name`.
    pub async fn reconcile(&self, namespace: &str, name: &str) -> Result<Action, ReconcileError> {
        let Some(pm) = self.store.get::<ProxmoxMachine>(namespace, name).await? else {
            self.observer
                .machine_phase(&format!("{namespace}/{name}"), None);
            return Ok(Action::AwaitChange);
        };
        let deleting = pm.metadata.deletion_timestamp.is_some();
        let machine = match owner_name(&pm.metadata, "Machine", CAPI_GROUP) {
            Some(owner) => self.mgmt.machine(namespace, &owner).await?,
            None => None,
        };
        if machine.is_none() && !deleting {
            // CAPI has not linked the Machine yet; its watch brings us back.
            return Ok(Action::AwaitChange);
        }
        let cluster_name = crate::management::types::label(&pm.metadata, CLUSTER_NAME_LABEL)
            .map(str::to_string)
            .or_else(|| {
                machine
                    .as_ref()
                    .and_then(|m| m.cluster_name())
                    .map(str::to_string)
            });
        let Some(cluster_name) = cluster_name else {
            return Ok(Action::AwaitChange);
        };
        let cluster = self.mgmt.cluster(namespace, &cluster_name).await?;
        let Some(pc) = self
            .proxmox_cluster(namespace, &cluster_name, cluster.as_ref())
            .await?
        else {
            if deleting && pm.spec.virtual_machine_id.is_none() {
                return self.release_without_vm(pm).await;
            }
            return Ok(Action::AwaitChange);
        };
        let mut pass = Pass {
            r: self,
            h: Handle::new(pm),
            machine,
            cluster_name,
            pc,
            client: None,
            pve: None,
            vm: None,
            resolved: None,
            note: None,
            adopting: false,
            found_in: Phase::New,
            finished: None,
            now: self.clock.now(),
        };
        let paused = cluster.as_ref().is_some_and(Cluster::is_paused)
            || has_annotation(&pass.h.obj.metadata, PAUSED_ANNOTATION);
        pass.h.set_paused(paused, pass.now);
        if paused {
            pass.save_status().await?;
            return Ok(Action::AwaitChange);
        }
        if deleting {
            let result = delete::run(&mut pass).await;
            return pass.finish(result).await;
        }
        pass.run(cluster.as_ref()).await
    }

    /// The ProxmoxCluster of a cluster: the Cluster's infrastructureRef, else the one
    /// labelled with the cluster's name (the Cluster may already be gone while deleting).
    async fn proxmox_cluster(
        &self,
        namespace: &str,
        cluster_name: &str,
        cluster: Option<&Cluster>,
    ) -> Result<Option<ProxmoxCluster>, StoreError> {
        if let Some(r) = cluster.and_then(|c| c.spec.infrastructure_ref.as_ref()) {
            return self.store.get(namespace, &r.name).await;
        }
        let labels = BTreeMap::from([(CLUSTER_NAME_LABEL.to_string(), cluster_name.to_string())]);
        let found: Vec<ProxmoxCluster> = self.store.list(namespace, &labels).await?;
        Ok(found.into_iter().next())
    }

    /// A machine being deleted without a cluster and without a VM only needs its
    /// claims released and its finalizer removed.
    async fn release_without_vm(&self, pm: ProxmoxMachine) -> Result<Action, ReconcileError> {
        let mut h = Handle::new(pm);
        delete::release_claims(&self.mgmt, &h).await?;
        h.write_spec(&self.store, |o| {
            remove_finalizer(&mut o.metadata, MACHINE_FINALIZER)
        })
        .await?;
        Ok(Action::AwaitChange)
    }

    fn bump_failures(&self, uid: &str) -> u32 {
        let mut f = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let n = f.entry(uid.to_string()).or_insert(0);
        *n += 1;
        *n
    }

    /// Holds the first of `candidates` no other machine's pass holds.
    fn reserve_first(&self, uid: &str, candidates: impl Iterator<Item = u32>) -> Option<u32> {
        let mut held = self.vmids.lock().unwrap_or_else(|e| e.into_inner());
        let others: std::collections::BTreeSet<u32> = held
            .iter()
            .filter(|(u, _)| *u != uid)
            .map(|(_, id)| *id)
            .collect();
        let id = candidates.take(100_000).find(|id| !others.contains(id))?;
        held.insert(uid.to_string(), id);
        Some(id)
    }

    /// Holds (or with `None` releases) a machine's VMID.
    fn reserve_vmid(&self, uid: &str, vmid: Option<u32>) {
        let mut held = self.vmids.lock().unwrap_or_else(|e| e.into_inner());
        match vmid {
            Some(id) => held.insert(uid.to_string(), id),
            None => held.remove(uid),
        };
    }

    /// The pid of a guest command a pass left running on `vmid`.
    fn exec_of(&self, uid: &str, vmid: u32) -> Option<u64> {
        let execs = self.execs.lock().unwrap_or_else(|e| e.into_inner());
        execs
            .get(uid)
            .filter(|(v, _)| *v == vmid)
            .map(|(_, pid)| *pid)
    }

    /// Remembers (or forgets) a running guest command.
    fn remember_exec(&self, uid: &str, exec: Option<(u32, u64)>) {
        let mut execs = self.execs.lock().unwrap_or_else(|e| e.into_inner());
        match exec {
            Some(e) => execs.insert(uid.to_string(), e),
            None => execs.remove(uid),
        };
    }

    /// The recent placements in Proxmox VE cluster `pve`.
    fn placements_in(&self, pve: &str) -> Arc<Placements> {
        let mut all = self.placements.lock().unwrap_or_else(|e| e.into_inner());
        all.entry(pve.to_string()).or_default().clone()
    }

    /// Forgets machine `uid`'s placement, wherever it was.
    fn forget_placement(&self, uid: &str) {
        let all = self.placements.lock().unwrap_or_else(|e| e.into_inner());
        for placements in all.values() {
            placements.forget(uid);
        }
    }

    fn reset_failures(&self, uid: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
    }
}

impl<S: InfraStore, M: Management> Pass<'_, S, M> {
    fn ns(&self) -> String {
        self.h.namespace().to_string()
    }

    fn name(&self) -> String {
        self.h.name().to_string()
    }

    /// The machine's deployment zone.
    fn zone(&self) -> String {
        self.h
            .obj
            .spec
            .network
            .as_ref()
            .and_then(|n| n.zone.clone())
            .unwrap_or_else(|| DEFAULT_ZONE.to_string())
    }

    /// The failure domain Cluster API put the Machine in.
    fn failure_domain(&self) -> Option<&str> {
        self.machine.as_ref()?.spec.failure_domain.as_deref()
    }

    /// The recorded VMID, if any (a value Proxmox cannot have is a terminal problem).
    fn vmid(&self) -> Result<Option<u32>, Failure> {
        match self.h.obj.spec.virtual_machine_id {
            None => Ok(None),
            Some(id) => u32::try_from(id)
                .ok()
                .filter(|id| *id >= 100)
                .map(Some)
                .ok_or_else(|| Failure::Terminal(format!("vm with id {id} does not exist"))),
        }
    }

    /// The node the VM lives on, as recorded.
    fn node(&self) -> Option<String> {
        self.h.status.proxmox_node.clone().filter(|n| !n.is_empty())
    }

    /// Writes the status and reports the phase it leaves the machine in, and how long
    /// the machine took from creation to provisioned when this write made it so.
    async fn save_status(&mut self) -> Result<(), StoreError> {
        self.h.status.failure_domain = self.node().and_then(|node| {
            failure_domains::of_node(&node, self.failure_domain(), &self.pc.spec.failure_domains)
        });
        let key = format!("{}/{}", self.h.namespace(), self.h.name());
        let was_provisioned = self.h.stored_phase().provisioned();
        if let Err(e) = self.h.save_status(&self.r.store).await {
            if matches!(e, StoreError::NotFound(_)) {
                self.r.observer.machine_phase(&key, None);
            }
            return Err(e);
        }
        let phase = self.h.phase();
        self.r.observer.machine_phase(&key, Some(phase.reason()));
        let created = self.h.obj.metadata.creation_timestamp.as_ref();
        if let (false, true, Some(created)) = (was_provisioned, phase.provisioned(), created) {
            let elapsed = self.r.clock.now().duration_since(created.0);
            self.r
                .observer
                .machine_provisioned(Duration::try_from(elapsed).unwrap_or_default());
        }
        Ok(())
    }

    /// The client of the Proxmox VE cluster the machine lives in: its failure domain's.
    /// A VM recorded in another Proxmox VE cluster than the domain's credentials reach
    /// now (the domain was pointed elsewhere) is never looked for there: the machine
    /// waits with a message, and its deletion uses whichever of the cluster's credentials
    /// still reach the VM, so no VM is stranded.
    async fn client(&mut self) -> Result<Client, Failure> {
        if let Some(c) = &self.client {
            return Ok(c.clone());
        }
        let factory = &self.r.clients;
        let credentials = factory
            .domain_credentials(&self.pc, self.failure_domain(), &self.r.mgmt)
            .await
            .map_err(|e| Failure::Error(e.into()))?;
        let mut connection = factory
            .connect(&credentials)
            .await
            .map_err(|e| Failure::Error(e.into()))?;
        let recorded = self.h.status.pve_cluster.clone().filter(|r| !r.is_empty());
        match recorded {
            Some(recorded)
                if recorded != connection.cluster
                    && self.h.obj.spec.virtual_machine_id.is_some() =>
            {
                let (whose, what) = match self.failure_domain() {
                    Some(domain) => (format!("failure domain {domain}'s"), "the domain"),
                    None => ("the ProxmoxCluster's".to_string(), "the credentials"),
                };
                connection = self.connection_to(&recorded).await.ok_or_else(|| {
                    Failure::Blocked(
                        format!(
                            "the VM lives in Proxmox VE cluster {recorded}, but {whose} credentials now reach {}: point {what} back at {recorded}, or delete the machine to replace it",
                            connection.cluster
                        ),
                        self.r.config.blocked_retry,
                    )
                })?;
            }
            _ => self.h.status.pve_cluster = Some(connection.cluster.clone()),
        }
        let c = match &self.r.fence {
            Some(fence) => connection.client.fenced(fence.clone()),
            None => connection.client,
        };
        self.client = Some(c.clone());
        self.pve = Some(connection.cluster);
        Ok(c)
    }

    /// While deleting, a connection through any of the cluster's credentials to Proxmox
    /// VE cluster `name`.
    async fn connection_to(&self, name: &str) -> Option<Connection> {
        self.h.obj.metadata.deletion_timestamp.as_ref()?;
        let factory = &self.r.clients;
        for source in clients::sources(&self.pc) {
            let Ok(credentials) = factory
                .source_credentials(&self.pc, source.secret.as_ref(), &self.r.mgmt)
                .await
            else {
                continue;
            };
            if let Ok(connection) = factory.connect(&credentials).await
                && connection.cluster == name
            {
                return Some(connection);
            }
        }
        None
    }

    /// The recent placements in the machine's Proxmox VE cluster (call after
    /// [`Self::client`]).
    fn placements(&self) -> Arc<Placements> {
        self.r
            .placements_in(self.pve.as_deref().unwrap_or_default())
    }

    /// Pre-creation gates, the finalizer and the zone label, then the phase loop.
    async fn run(mut self, cluster: Option<&Cluster>) -> Result<Action, ReconcileError> {
        let start = self.h.phase();
        if start == Phase::Failed {
            if self.h.failed_generation() == self.h.obj.metadata.generation {
                return Ok(Action::AwaitChange);
            }
            // The spec changed: replay from the start; every step is idempotent.
            let resume = if self.h.obj.spec.virtual_machine_id.is_some() {
                Phase::Cloning
            } else {
                Phase::New
            };
            self.h.set_phase(resume, "", self.now);
        }
        if self.h.phase().before_creation() {
            self.adopting = self.h.obj.spec.virtual_machine_id.is_some();
            let gate = if !cluster.is_some_and(Cluster::infrastructure_provisioned) {
                Some(Phase::WaitingForClusterInfrastructure)
            } else if self
                .machine
                .as_ref()
                .and_then(|m| m.spec.bootstrap.data_secret_name.as_ref())
                .is_none()
            {
                Some(Phase::WaitingForBootstrapData)
            } else {
                None
            };
            if let Some(gate) = gate {
                self.h.set_phase(gate, "", self.now);
                self.h.status.vm_status = Some(vm_state::PENDING.to_string());
                self.save_status().await?;
                return Ok(Action::AwaitChange);
            }
            let zone = self.zone();
            self.h
                .write_spec(&self.r.store, |o| {
                    add_finalizer(&mut o.metadata, MACHINE_FINALIZER);
                    o.metadata
                        .labels
                        .get_or_insert_with(BTreeMap::new)
                        .insert(ZONE_LABEL.to_string(), zone);
                })
                .await?;
            self.h.status.vm_status = Some(vm_state::PENDING.to_string());
            self.h.set_phase(Phase::Cloning, "", self.now);
        }
        let result = self.steps().await;
        self.finish(result).await
    }

    /// Runs phase steps until one waits.
    async fn steps(&mut self) -> Step {
        self.found_in = self.h.phase();
        if let Some(action) = self.track_task().await? {
            return Ok(Flow::Wait(action));
        }
        // Each phase advances at most once per pass; the cap is a guard against a bug
        // turning into a hot loop.
        for _ in 0..24 {
            let phase = self.h.phase();
            let flow = match phase {
                Phase::Cloning => self.step_cloning().await?,
                Phase::ReconcilingDisks => self.step_disks().await?,
                Phase::AllocatingAddresses => self.step_addresses().await?,
                Phase::InjectingBootstrapData => self.step_bootstrap().await?,
                Phase::PoweringOn => self.step_power().await?,
                Phase::RegisteringHaResource => self.step_ha_resource().await?,
                Phase::PublishingAddresses => self.step_publish().await?,
                Phase::WaitingForCloudInit => self.step_cloud_init().await?,
                Phase::WaitingForBootstrapReady => self.step_node_join().await?,
                Phase::Provisioned => self.step_provisioned().await?,
                _ => Flow::Wait(Action::AwaitChange),
            };
            match flow {
                Flow::Next(next) => {
                    let note = self.note.take().unwrap_or_default();
                    if next != phase {
                        self.r.reset_failures(self.h.uid());
                    }
                    if next.provisioned() {
                        self.h.status.initialization.provisioned = Some(true);
                        self.h.status.vm_status = Some(vm_state::READY.to_string());
                    }
                    self.h.set_phase(next, &note, self.now);
                }
                Flow::Wait(action) => return Ok(Flow::Wait(action)),
            }
        }
        Ok(Flow::Wait(Action::Requeue(self.r.config.poll)))
    }

    /// Persists the outcome of a pass and turns it into the reconcile result.
    async fn finish(mut self, result: Step) -> Result<Action, ReconcileError> {
        let action = match result {
            Ok(Flow::Wait(action)) => Ok(action),
            Ok(Flow::Next(_)) => Ok(Action::Requeue(Duration::ZERO)),
            Err(Failure::Terminal(message)) => {
                tracing::warn!(machine = %self.h.name(), %message, "provisioning failed");
                self.h.set_phase(Phase::Failed, &message, self.now);
                Ok(Action::AwaitChange)
            }
            Err(Failure::Blocked(message, retry)) => {
                tracing::info!(machine = %self.h.name(), %message, "blocked");
                self.h.set_message(&message, self.now);
                Ok(Action::Requeue(retry))
            }
            Err(Failure::Error(e)) if unanswered(&e) => {
                let message = self.told_where(&e);
                tracing::info!(machine = %self.h.name(), %message, "Proxmox VE not answering");
                self.h.set_message(&message, self.now);
                Ok(Action::Requeue(self.r.config.unanswered_retry))
            }
            Err(Failure::Error(e)) if permanent(&e) => {
                // Retrying soon will not help (a refused parameter, a missing privilege):
                // say so and retry slowly.
                tracing::warn!(machine = %self.h.name(), error = %e, "refused by Proxmox");
                self.h.set_message(&e.to_string(), self.now);
                Ok(Action::Requeue(self.r.config.blocked_retry))
            }
            Err(Failure::Error(e)) => {
                let message = self.told_where(&e);
                self.h.set_message(&message, self.now);
                // Best effort: the error itself is what the caller acts on.
                if !e.is_conflict() {
                    let _ = self.save_status().await;
                }
                return Err(e);
            }
        };
        match self.save_status().await {
            Ok(()) => action,
            // The object is gone (its finalizer was just removed): nothing to record.
            Err(StoreError::NotFound(_)) => action,
            Err(e) => Err(e.into()),
        }
    }
}

impl<S: InfraStore, M: Management> Pass<'_, S, M> {
    /// An error's text, saying which Proxmox VE cluster failed and since when when the
    /// machine's cluster is failing (machines of other Proxmox VE clusters go on).
    fn told_where(&self, e: &ReconcileError) -> String {
        let ReconcileError::Proxmox(p) = e else {
            return e.to_string();
        };
        let Some(pve) = self.pve.as_ref().or(self.h.status.pve_cluster.as_ref()) else {
            return match self.failure_domain() {
                // Not connected yet: the domain tells which one.
                Some(domain) => format!("Proxmox VE cluster of failure domain {domain}: {e}"),
                None => e.to_string(),
            };
        };
        match self.client.as_ref().and_then(Client::failing) {
            Some(f) if !matches!(p, proxmox::Error::Unanswered { .. }) => {
                format!("Proxmox VE cluster {pve} failing since {}: {e}", f.since)
            }
            _ => format!("Proxmox VE cluster {pve}: {e}"),
        }
    }
}

/// A Proxmox VE cluster that does not answer.
fn unanswered(e: &ReconcileError) -> bool {
    matches!(
        e,
        ReconcileError::Proxmox(proxmox::Error::Unanswered { .. })
    )
}

/// Proxmox refusals that need someone to change something.
fn permanent(e: &ReconcileError) -> bool {
    use proxmox::ErrorKind::*;
    matches!(e, ReconcileError::Proxmox(p) if matches!(p.kind(), Rejected | InvalidParameter | Permission | Unsupported))
}

/// Proxmox errors that mean "no such object".
fn not_found(e: &proxmox::Error) -> bool {
    e.kind() == proxmox::ErrorKind::NotFound
}

/// Management errors are transient unless they say otherwise.
fn mgmt_failure(e: ManagementError) -> Failure {
    Failure::Error(e.into())
}
