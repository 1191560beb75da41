//! The controller's test bench: the real Proxmox simulator, the in-memory store and
//! management cluster, objects admitted through the API layer (so they are defaulted and
//! validated like stored ones), a stand-in for CAPI core, and a driver that runs the
//! reconcilers to quiescence on a virtual clock — optionally killing passes at random
//! await points and restarting the controller with empty caches.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use capmox_apiserver::api::Version;
use capmox_apiserver::api::decode::FieldValidation;
use capmox_apiserver::api::resource::{
    ClusterKind, KubernetesReleaseKind, MachineKind, Operation, admit,
};
use capmox_apiserver::api::v1alpha2::{ProxmoxCluster, ProxmoxKubernetesRelease, ProxmoxMachine};
use capmox_apiserver::controller::InfraStore;
use capmox_apiserver::controller::action::Action;
use capmox_apiserver::controller::clients::{ClientFactory, Credentials, FactoryOptions};
use capmox_apiserver::controller::cluster::{ClusterConfig, ClusterReconciler};
use capmox_apiserver::controller::machine::{MachineConfig, MachineReconciler};
use capmox_apiserver::controller::memory::{Faults, MemoryInfraStore, MemoryManagement};
use capmox_apiserver::controller::{Clock, ErrorPolicy, ManualClock, ReconcileError};
use capmox_apiserver::management::types::{
    Bootstrap, CAPI_API_VERSION, Cluster, ClusterInitialization, ClusterSpec, Endpoint,
    GroupKindName, IpPool, IpPoolSpec, Machine, MachineSpec, NameRef, PoolKind,
};
use capmox_apiserver::proxmox::client::HealthOptions;
use capmox_apiserver::proxmox::sim::{self, RunningSim, SimConfig};
use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, OwnerReference, Time};
use serde_json::{Value, json};

pub const NS: &str = "default";

type Machines = MachineReconciler<MemoryInfraStore, MemoryManagement>;
type Clusters = ClusterReconciler<MemoryInfraStore, MemoryManagement>;

/// Everything a controller test needs.
pub struct Env {
    pub pve: RunningSim,
    pub store: MemoryInfraStore,
    pub mgmt: MemoryManagement,
    pub clock: ManualClock,
    pub factory: Arc<ClientFactory>,
    machines: Arc<Machines>,
    clusters: Arc<Clusters>,
    /// Names of the CAPI Clusters (the stand-in for CAPI core walks them).
    pub cluster_names: Vec<String>,
    /// Names of the Machines.
    pub machine_names: Vec<String>,
    /// Whether the CAPI stand-in marks provisioned machines' nodes as joined.
    pub join_nodes: bool,
    /// Proxmox requests sent by controllers that were restarted.
    retired_requests: u64,
    /// The controller's global credentials.
    global: Option<Credentials>,
    /// How long passes wait inline for a task.
    task_wait: Duration,
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(NS.to_string()),
        ..ObjectMeta::default()
    }
}

fn machine_config(task_wait: Duration) -> MachineConfig {
    MachineConfig {
        task_wait,
        ..MachineConfig::default()
    }
}

/// The instant profile finishes tasks at the next request; half a second is plenty.
const TASK_WAIT: Duration = Duration::from_millis(500);

impl Env {
    /// A simulator with `config` and empty stores.
    pub async fn start(config: SimConfig) -> Self {
        let pve = sim::start(config).await.expect("simulator starts");
        let store = MemoryInfraStore::new();
        let mgmt = MemoryManagement::new();
        let clock = ManualClock::new();
        let (factory, machines, clusters) =
            Self::controller(&store, &mgmt, &clock, None, TASK_WAIT);
        Self {
            pve,
            store,
            mgmt,
            clock,
            factory,
            machines,
            clusters,
            cluster_names: Vec::new(),
            machine_names: Vec::new(),
            join_nodes: true,
            retired_requests: 0,
            global: None,
            task_wait: TASK_WAIT,
        }
    }

    /// Makes passes wait at most `wait` for a task before recording it (a restart).
    pub fn set_task_wait(&mut self, wait: Duration) {
        self.task_wait = wait;
        self.restart();
    }

    /// A simulator with `config`, the endpoint pool `vip-pool` and the cluster `c1` with
    /// `spec` (see [`cluster_spec`]).
    pub async fn with_cluster(config: SimConfig, spec: Value) -> Self {
        let mut env = Self::start(config).await;
        env.add_pool(
            PoolKind::InCluster,
            "vip-pool",
            &["10.0.0.200-10.0.0.210"],
            24,
            Some("10.0.0.1"),
        );
        env.add_cluster("c1", spec);
        env
    }

    /// Cluster `c1` on a simulator whose tasks take the fast profile's time on a manual
    /// clock (run with [`Self::drive_synced`]), and passes that wait 20 ms inline: clones,
    /// resizes, config changes and starts outlast a pass, so their UPIDs are recorded and
    /// later passes poll them.
    pub async fn with_slow_tasks() -> Self {
        let config = SimConfig {
            profile: sim::Profile::Fast,
            clock: sim::ClockMode::Manual,
            ..SimConfig::default()
        };
        let mut env = Self::with_cluster(config, cluster_spec("c1")).await;
        env.set_task_wait(Duration::from_millis(20));
        env
    }

    /// Gives the controller global credentials for the simulator (a restart).
    pub fn use_global_credentials(&mut self) {
        self.global = Some(Credentials::of_simulator(&self.pve));
        self.restart();
    }

    fn controller(
        store: &MemoryInfraStore,
        mgmt: &MemoryManagement,
        clock: &ManualClock,
        global: Option<Credentials>,
        task_wait: Duration,
    ) -> (Arc<ClientFactory>, Arc<Machines>, Arc<Clusters>) {
        let factory = Arc::new(ClientFactory::new(
            global,
            FactoryOptions {
                rate_limit: None,
                // A silent simulator is given up on (and probed again) quickly.
                health: HealthOptions {
                    stall_after: Duration::from_secs(1),
                    probe_every: Duration::from_millis(200),
                    probe_patience: Duration::from_millis(500),
                },
                ..FactoryOptions::default()
            },
        ));
        let clock: Arc<dyn Clock> = Arc::new(clock.clone());
        let machines = Arc::new(MachineReconciler::new(
            store.clone(),
            mgmt.clone(),
            factory.clone(),
            clock.clone(),
            machine_config(task_wait),
        ));
        let clusters = Arc::new(ClusterReconciler::new(
            store.clone(),
            mgmt.clone(),
            factory.clone(),
            clock,
            ClusterConfig::default(),
        ));
        (factory, machines, clusters)
    }

    /// A controller over this environment's objects, simulator and clock, with fresh caches.
    fn fresh_controller(&self) -> (Arc<ClientFactory>, Arc<Machines>, Arc<Clusters>) {
        Self::controller(
            &self.store,
            &self.mgmt,
            &self.clock,
            self.global.clone(),
            self.task_wait,
        )
    }

    /// A new controller process: empty caches, same persisted objects.
    pub fn restart(&mut self) {
        self.retired_requests += self.factory.requests_sent();
        let (factory, machines, clusters) = self.fresh_controller();
        self.factory = factory;
        self.machines = machines;
        self.clusters = clusters;
    }

    /// A second machine reconciler over the same objects, simulator and clock: another
    /// replica that also believes it leads.
    pub fn twin(&self) -> Arc<Machines> {
        self.fresh_controller().1
    }

    /// Proxmox requests sent by every controller of this environment.
    pub fn requests(&self) -> u64 {
        self.retired_requests + self.factory.requests_sent()
    }

    /// The credentials Secret pointing at the simulator (verified TLS with its CA).
    pub fn credentials_secret(&self, name: &str) -> Secret {
        credentials_secret(&self.pve, name)
    }

    /// A Cluster, its ProxmoxCluster (from `spec`, admitted through the API layer), a
    /// credentials Secret and — when `vip_pool` — an endpoint pool.
    pub fn add_cluster(&mut self, name: &str, spec: Value) -> ProxmoxCluster {
        let body = cluster_parts(&self.mgmt, &self.pve, name, spec);
        let admitted = admit::<ClusterKind>(
            Version::V1alpha2,
            body,
            FieldValidation::Strict,
            Operation::Create,
        )
        .unwrap_or_else(|e| panic!("cluster {name} is admitted: {e}"));
        self.cluster_names.push(name.to_string());
        self.store.create(&admitted.hub).expect("stored")
    }

    /// A user-created pool.
    pub fn add_pool(
        &self,
        kind: PoolKind,
        name: &str,
        addresses: &[&str],
        prefix: i32,
        gateway: Option<&str>,
    ) {
        add_pool(&self.mgmt, kind, name, addresses, prefix, gateway);
    }

    /// A Machine with its bootstrap secret and a ProxmoxMachine from `spec` (admitted
    /// through the API layer: defaulted and validated).
    pub fn add_machine(
        &mut self,
        cluster: &str,
        name: &str,
        spec: Value,
        format: &str,
        control_plane: bool,
    ) {
        let body = machine_parts(&self.mgmt, cluster, name, spec, format, control_plane);
        let admitted = admit::<MachineKind>(
            Version::V1alpha2,
            body,
            FieldValidation::Strict,
            Operation::Create,
        )
        .unwrap_or_else(|e| panic!("machine {name} is admitted: {e}"));
        self.store.create(&admitted.hub).expect("stored");
        self.machine_names.push(name.to_string());
    }

    /// A ProxmoxKubernetesRelease from `spec`, admitted through the API layer.
    pub fn add_release(&self, name: &str, spec: Value) {
        let body = json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
            "kind": "ProxmoxKubernetesRelease",
            "metadata": {"name": name, "namespace": NS},
            "spec": spec,
        });
        let admitted = admit::<KubernetesReleaseKind>(
            Version::V1alpha2,
            body,
            FieldValidation::Strict,
            Operation::Create,
        )
        .unwrap_or_else(|e| panic!("release {name} is admitted: {e}"));
        self.store.create(&admitted.hub).expect("stored");
    }

    /// Replaces a release's spec as a user would.
    pub async fn edit_release(&self, name: &str, spec: Value) {
        let mut release: ProxmoxKubernetesRelease =
            self.store.peek(NS, name).expect("the release exists");
        release.spec = serde_json::from_value(spec).expect("a release spec");
        self.store.update(&release).await.expect("updated");
    }

    pub fn machine(&self, name: &str) -> ProxmoxMachine {
        self.store
            .peek(NS, name)
            .unwrap_or_else(|| panic!("ProxmoxMachine {name} exists"))
    }

    /// The machine, asserted to be in `phase` (its `VirtualMachineProvisioned` reason); the
    /// failure describes the whole environment.
    pub fn machine_in_phase(&self, name: &str, phase: &str) -> ProxmoxMachine {
        let m = self.machine(name);
        assert_eq!(
            condition(&m.status.conditions, "VirtualMachineProvisioned").1,
            phase,
            "{}",
            self.describe()
        );
        m
    }

    /// Puts the Machine `name` in failure domain `domain`, as Cluster API does.
    pub fn put_failure_domain(&self, name: &str, domain: &str) {
        let mut machine = self
            .mgmt
            .peek_machine(NS, name)
            .expect("the Machine exists");
        machine.spec.failure_domain = Some(domain.to_string());
        self.mgmt.put_machine(&machine);
    }

    /// Replaces a machine's spec as a user would (a new generation).
    pub async fn edit_spec(&self, name: &str, f: impl FnOnce(&mut ProxmoxMachine)) {
        let mut pm = self.machine(name);
        f(&mut pm);
        self.store.update(&pm).await.expect("updated");
    }

    pub fn cluster(&self, name: &str) -> ProxmoxCluster {
        self.store
            .peek(NS, name)
            .unwrap_or_else(|| panic!("ProxmoxCluster {name} exists"))
    }

    /// CAPI core's part (see [`capi_sync`]) over the objects of the memory store.
    fn capi_sync(&self) {
        let clusters: Vec<ProxmoxCluster> = self
            .cluster_names
            .iter()
            .filter_map(|n| self.store.peek(NS, n))
            .collect();
        let machines: Vec<ProxmoxMachine> = self
            .machine_names
            .iter()
            .filter_map(|n| self.store.peek(NS, n))
            .collect();
        capi_sync(&self.mgmt, &clusters, &machines, self.join_nodes);
    }

    /// The combined revision of both stores (changes on every write).
    fn revision(&self) -> (u64, u64) {
        (self.store.revision(), self.mgmt.revision())
    }

    /// Runs both reconcilers until nothing is due and nothing changes.
    pub async fn converge(&mut self) -> Report {
        self.drive(Chaos::none()).await
    }

    /// [`Self::converge`] with chaos.
    pub async fn drive(&mut self, chaos: Chaos) -> Report {
        self.drive_with(chaos, |_, _| {}).await
    }

    /// [`Self::drive`] calling `hook(round, env)` at the start of every round (to change
    /// faults while the controller runs).
    pub async fn drive_with(&mut self, chaos: Chaos, hook: impl FnMut(usize, &Env)) -> Report {
        let report = self.drive_for(20_000, chaos, hook).await;
        assert!(
            report.converged,
            "no convergence after {} rounds: {report:?}\n{}",
            report.rounds,
            self.describe()
        );
        report
    }

    /// [`Self::drive`] for a simulator on a manual clock: the simulator's time follows the
    /// controller's virtual clock, so tasks take their profile's time in both.
    /// `observe` sees the environment at the start of every round.
    pub async fn drive_synced(&mut self, chaos: Chaos, mut observe: impl FnMut(&Env)) -> Report {
        let mut last = self.clock.now();
        self.drive_with(chaos, |_, env| {
            let now = env.clock.now();
            env.pve
                .control()
                .advance(Duration::try_from(now.duration_since(last)).unwrap_or_default());
            last = now;
            observe(env);
        })
        .await
    }

    /// Runs the controller for at most `rounds` rounds (virtual time jumps to the next
    /// due reconcile when nothing is due now); `converged` tells whether it went quiet.
    pub async fn run_for(&mut self, rounds: usize) -> Report {
        self.drive_for(rounds, Chaos::none(), |_, _| {}).await
    }

    async fn drive_for(
        &mut self,
        rounds: usize,
        mut chaos: Chaos,
        mut hook: impl FnMut(usize, &Env),
    ) -> Report {
        let mut due: HashMap<Key, Option<Timestamp>> = HashMap::new();
        let mut attempts: HashMap<Key, u32> = HashMap::new();
        let mut versions: HashMap<Key, String> = HashMap::new();
        let policy = ErrorPolicy::default();
        let mut report = Report::default();
        let mut seen = None;
        let requests_before = self.requests();
        for round in 0..rounds {
            report.rounds = round;
            hook(round, self);
            self.capi_sync();
            self.mgmt.settle_ipam();
            let keys = self.keys();
            for (k, rv) in &keys {
                let entry = due.entry(k.clone()).or_insert(Some(Timestamp::UNIX_EPOCH));
                // A change of the object itself triggers it, as its watch would.
                if versions.get(k) != Some(rv) {
                    *entry = Some(Timestamp::UNIX_EPOCH);
                    versions.insert(k.clone(), rv.clone());
                }
            }
            due.retain(|k, _| keys.contains_key(k));
            let revision = self.revision();
            if seen != Some(revision) {
                // Something changed: everything waiting for a change runs again (a
                // superset of what watches would trigger).
                for d in due.values_mut() {
                    if d.is_none() {
                        *d = Some(Timestamp::UNIX_EPOCH);
                    }
                }
                seen = Some(revision);
            }
            let now = self.clock.now();
            let ready: Vec<Key> = due
                .iter()
                .filter(|(_, d)| d.is_some_and(|d| d <= now))
                .map(|(k, _)| k.clone())
                .collect();
            if ready.is_empty() {
                match due.values().flatten().min() {
                    None => {
                        report.converged = true;
                        report.requests = self.requests() - requests_before;
                        return report;
                    }
                    Some(next) => {
                        let wait = next.duration_since(now);
                        self.clock
                            .advance(Duration::try_from(wait).unwrap_or(Duration::ZERO));
                        report.virtual_time += Duration::try_from(wait).unwrap_or(Duration::ZERO);
                        continue;
                    }
                }
            }
            let kills: Vec<Option<u32>> = ready.iter().map(|_| chaos.kill_point()).collect();
            let results: Vec<(Key, Option<Result<Action, ReconcileError>>)> =
                futures::stream::iter(ready.into_iter().zip(kills).map(|(k, kill)| {
                    let fut = self.run(&k);
                    async move { (k, Killable::new(fut, kill).await) }
                }))
                .buffer_unordered(8)
                .collect()
                .await;
            report.passes += results.len();
            let now = self.clock.now();
            let mut killed = false;
            for (k, result) in results {
                let next = match result {
                    None => {
                        killed = true;
                        report.kills += 1;
                        chaos.killed();
                        Some(now)
                    }
                    Some(Ok(Action::Requeue(d))) => {
                        attempts.remove(&k);
                        Some(capmox_apiserver::controller::clock::after(now, d))
                    }
                    Some(Ok(Action::AwaitChange)) => {
                        attempts.remove(&k);
                        None
                    }
                    Some(Err(e)) => {
                        report.errors += 1;
                        let n = attempts.entry(k.clone()).or_insert(0);
                        *n += 1;
                        Some(capmox_apiserver::controller::clock::after(
                            now,
                            policy.delay(*n, e.is_conflict()),
                        ))
                    }
                };
                due.insert(k, next);
            }
            if killed && chaos.restart_on_kill {
                self.restart();
                report.restarts += 1;
            }
        }
        report.requests = self.requests() - requests_before;
        report
    }

    /// Every object to reconcile with its resourceVersion.
    fn keys(&self) -> BTreeMap<Key, String> {
        let version = |m: &ObjectMeta| m.resource_version.clone().unwrap_or_default();
        let clusters = self.store.all::<ProxmoxCluster>().into_iter().map(|c| {
            let v = version(&c.metadata);
            (Key::Cluster(c.metadata.name.unwrap_or_default()), v)
        });
        let machines = self.store.all::<ProxmoxMachine>().into_iter().map(|m| {
            let v = version(&m.metadata);
            (Key::Machine(m.metadata.name.unwrap_or_default()), v)
        });
        clusters.chain(machines).collect()
    }

    fn run(
        &self,
        key: &Key,
    ) -> Pin<Box<dyn Future<Output = Result<Action, ReconcileError>> + Send>> {
        match key.clone() {
            Key::Machine(name) => {
                let r = self.machines.clone();
                Box::pin(async move { r.reconcile(NS, &name).await })
            }
            Key::Cluster(name) => {
                let r = self.clusters.clone();
                Box::pin(async move { r.reconcile(NS, &name).await })
            }
        }
    }

    /// A summary of every object's state (for failure messages).
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for m in self.store.all::<ProxmoxMachine>() {
            let c = m
                .status
                .conditions
                .iter()
                .find(|c| c.type_ == "VirtualMachineProvisioned");
            out.push_str(&format!(
                "{}: vmid={:?} {:?} {:?}\n",
                m.metadata.name.unwrap_or_default(),
                m.spec.virtual_machine_id,
                c.map(|c| c.reason.clone()),
                c.map(|c| c.message.clone())
            ));
        }
        for c in self.store.all::<ProxmoxCluster>() {
            out.push_str(&format!(
                "cluster {}: {:?}\n",
                c.metadata.name.unwrap_or_default(),
                c.status.conditions
            ));
        }
        out
    }

    /// Non-template VMs in the simulator: (vmid, name, node).
    pub fn vms(&self) -> Vec<(u32, String, String)> {
        vms(&self.pve)
    }

    /// Seed ISOs stored in the simulator.
    pub fn seed_isos(&self) -> Vec<String> {
        self.pve.control().with_world(|w| {
            w.storages
                .values()
                .flat_map(|s| s.volumes.values().flat_map(|v| v.keys().cloned()))
                .filter(|name| name.starts_with("iso/user-data-"))
                .collect()
        })
    }

    /// The invariants every converged state must satisfy: one VM per live machine under
    /// its recorded VMID, no other VM, every claim owned by a live machine or cluster.
    pub fn assert_invariants(&self) {
        self.assert_invariants_besides(&[]);
    }

    /// [`Self::assert_invariants`], tolerating the named VMs created outside the
    /// controller.
    pub fn assert_invariants_besides(&self, foreign: &[&str]) {
        assert_invariants(
            &self.pve,
            &self.mgmt,
            &self.store.all::<ProxmoxMachine>(),
            &self.store.all::<ProxmoxCluster>(),
            foreign,
            &self.describe(),
        );
    }
}

fn owner(api_version: &str, kind: &str, name: &str, uid: Option<&str>) -> OwnerReference {
    OwnerReference {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        name: name.to_string(),
        uid: uid.unwrap_or_default().to_string(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Key {
    Cluster(String),
    Machine(String),
}

/// What a drive did.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Nothing was due any more and nothing changed.
    pub converged: bool,
    pub rounds: usize,
    pub passes: usize,
    pub errors: usize,
    pub kills: usize,
    pub restarts: usize,
    /// Proxmox requests sent.
    pub requests: u64,
    pub virtual_time: Duration,
}

/// Random kills of reconcile passes.
pub struct Chaos {
    probability: f64,
    max_point: u32,
    remaining: usize,
    restart_on_kill: bool,
    state: u64,
}

impl Chaos {
    pub fn none() -> Self {
        Self {
            probability: 0.0,
            max_point: 1,
            remaining: 0,
            restart_on_kill: false,
            state: 1,
        }
    }

    /// Kill `count` passes (each pass is picked with `probability`) at a random await
    /// point in `1..=max_point`; restart the controller after each kill.
    pub fn kills(count: usize, probability: f64, max_point: u32, seed: u64) -> Self {
        Self {
            probability,
            max_point: max_point.max(1),
            remaining: count,
            restart_on_kill: true,
            state: seed.max(1),
        }
    }

    fn next(&mut self) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }

    /// Whether (and at which await point) to kill the next pass.
    fn kill_point(&mut self) -> Option<u32> {
        if self.remaining == 0 {
            return None;
        }
        let roll = (self.next() % 10_000) as f64 / 10_000.0;
        if roll >= self.probability {
            return None;
        }
        Some(1 + (self.next() % u64::from(self.max_point)) as u32)
    }

    /// Counts a kill that happened.
    fn killed(&mut self) {
        self.remaining = self.remaining.saturating_sub(1);
    }
}

/// A future dropped at its `n`-th pending await point (`None`: never).
struct Killable<F> {
    inner: Pin<Box<F>>,
    left: Option<u32>,
}

impl<F: Future> Killable<F> {
    fn new(inner: F, kill_at: Option<u32>) -> Self {
        Self {
            inner: Box::pin(inner),
            left: kill_at,
        }
    }
}

impl<F: Future> Future for Killable<F> {
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.inner.as_mut().poll(cx) {
            Poll::Ready(v) => Poll::Ready(Some(v)),
            Poll::Pending => match self.left {
                Some(1) => Poll::Ready(None),
                Some(n) => {
                    self.left = Some(n - 1);
                    Poll::Pending
                }
                None => Poll::Pending,
            },
        }
    }
}

/// A condition's status, reason and message (empty when absent).
pub fn condition(conditions: &[Condition], type_: &str) -> (String, String, String) {
    conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
        .unwrap_or_default()
}

/// Store and management faults for fault runs.
pub fn seam_faults(error_rate: f64, lost_write_rate: f64) -> Faults {
    Faults {
        error_rate,
        lost_write_rate,
    }
}

/// The usual cluster spec: node pools, DNS, endpoint claimed from `vip-pool`.
/// The default simulator with a template on local storage copied to pve1 (9501) and pve2
/// (9502), tags `capmox, local-copy`, and pve3 the roomiest node, which has no copy.
pub fn seed_with_local_copies() -> sim::seed::Seed {
    let mut seed = sim::seed::Seed::default();
    seed.nodes[2].memory_gib = 256;
    let base = seed.templates[0].clone();
    let copy = |vmid, node: &str| sim::seed::SeedVm {
        vmid,
        node: node.into(),
        name: format!("local-copy-{node}"),
        tags: vec!["capmox".into(), "local-copy".into()],
        storage: "local-lvm".into(),
        ..base.clone()
    };
    seed.templates.push(copy(9501, "pve1"));
    seed.templates.push(copy(9502, "pve2"));
    seed
}

/// The default simulator with a PCI mapping `id` of one device (`0000:41:00.0`) on each of
/// `nodes`.
pub fn seed_with_gpus(id: &str, nodes: &[&str]) -> sim::seed::Seed {
    let mut seed = sim::seed::Seed::default();
    seed.pci_mappings = vec![sim::seed::SeedPciMapping {
        id: id.into(),
        description: String::new(),
        map: nodes
            .iter()
            .map(|node| sim::seed::SeedPciDevice {
                node: (*node).into(),
                path: "0000:41:00.0".into(),
                id: "10de:20b5".into(),
            })
            .collect(),
    }];
    seed
}

pub fn cluster_spec(name: &str) -> Value {
    json!({
        "controlPlaneEndpointIPPoolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "vip-pool"},
        "ipv4Config": {"addresses": ["10.0.0.10-10.0.0.90"], "prefix": 24, "gateway": "10.0.0.1", "metric": 100},
        "ipv6Config": {"addresses": ["fd00:10::10-fd00:10::ff"], "prefix": 64, "gateway": "fd00:10::1"},
        "dnsServers": ["10.0.0.53"],
        "credentialsRef": {"name": format!("{name}-proxmox-credentials")},
    })
}

/// The credentials Secret pointing at the simulator (verified TLS with its CA).
pub fn credentials_secret(pve: &RunningSim, name: &str) -> Secret {
    Secret {
        metadata: meta(name),
        data: Credentials::of_simulator(pve).secret_data(),
        ..Secret::default()
    }
}

/// A CAPI Cluster and a credentials Secret in `mgmt`; the body of its ProxmoxCluster (from
/// `spec`, owned by the Cluster), to be created through the API layer.
pub fn cluster_parts(mgmt: &MemoryManagement, pve: &RunningSim, name: &str, spec: Value) -> Value {
    let cluster = mgmt.put_cluster(&Cluster {
        metadata: meta(name),
        spec: ClusterSpec {
            infrastructure_ref: Some(GroupKindName {
                api_group: "infrastructure.cluster.x-k8s.io".into(),
                kind: "ProxmoxCluster".into(),
                name: name.to_string(),
            }),
            ..ClusterSpec::default()
        },
        ..Cluster::default()
    });
    mgmt.put_secret(&credentials_secret(
        pve,
        &format!("{name}-proxmox-credentials"),
    ));
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
        "kind": "ProxmoxCluster",
        "metadata": {
            "name": name, "namespace": NS,
            "labels": {"cluster.x-k8s.io/cluster-name": name},
            "ownerReferences": [owner(CAPI_API_VERSION, "Cluster", name, cluster.metadata.uid.as_deref())]
        },
        "spec": spec,
    })
}

/// A user-created pool in `mgmt`.
pub fn add_pool(
    mgmt: &MemoryManagement,
    kind: PoolKind,
    name: &str,
    addresses: &[&str],
    prefix: i32,
    gateway: Option<&str>,
) {
    let mut metadata = meta(name);
    if kind == PoolKind::GlobalInCluster {
        metadata.namespace = None;
    }
    mgmt.put_pool(&IpPool {
        kind: kind.as_str().into(),
        metadata,
        spec: IpPoolSpec {
            addresses: addresses.iter().map(|s| s.to_string()).collect(),
            prefix,
            gateway: gateway.map(str::to_string),
            ..IpPoolSpec::default()
        },
    });
}

/// A Machine with its bootstrap secret in `mgmt`; the body of its ProxmoxMachine (from
/// `spec`, owned by the Machine), to be created through the API layer.
pub fn machine_parts(
    mgmt: &MemoryManagement,
    cluster: &str,
    name: &str,
    spec: Value,
    format: &str,
    control_plane: bool,
) -> Value {
    let secret_name = format!("{name}-bootstrap");
    let value = match format {
        "ignition" => {
            json!({"ignition": {"version": "2.3.0"}, "passwd": {"users": [{"name": "core"}]}})
                .to_string()
        }
        _ => "#cloud-config\nruncmd:\n  - kubeadm join\n".to_string(),
    };
    let data: BTreeMap<String, ByteString> = [("value", value), ("format", format.to_string())]
        .into_iter()
        .map(|(k, v)| (k.to_string(), ByteString(v.into_bytes())))
        .collect();
    mgmt.put_secret(&Secret {
        metadata: meta(&secret_name),
        data: Some(data),
        ..Secret::default()
    });
    let mut labels = BTreeMap::from([(
        "cluster.x-k8s.io/cluster-name".to_string(),
        cluster.to_string(),
    )]);
    if control_plane {
        labels.insert("cluster.x-k8s.io/control-plane".into(), String::new());
    }
    let machine = mgmt.put_machine(&Machine {
        metadata: ObjectMeta {
            labels: Some(labels.clone()),
            ..meta(name)
        },
        spec: MachineSpec {
            cluster_name: cluster.to_string(),
            bootstrap: Bootstrap {
                data_secret_name: Some(secret_name),
            },
            version: Some("v1.32.3".into()),
            infrastructure_ref: Some(GroupKindName {
                api_group: "infrastructure.cluster.x-k8s.io".into(),
                kind: "ProxmoxMachine".into(),
                name: name.to_string(),
            }),
            failure_domain: None,
        },
        ..Machine::default()
    });
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
        "kind": "ProxmoxMachine",
        "metadata": {
            "name": name, "namespace": NS, "labels": labels,
            "ownerReferences": [owner(CAPI_API_VERSION, "Machine", name, machine.metadata.uid.as_deref())]
        },
        "spec": spec,
    })
}

/// CAPI core's part: mark infrastructure provisioned, copy the endpoint, and (when
/// `join_nodes`) give provisioned machines a node and `Available`.
pub fn capi_sync(
    mgmt: &MemoryManagement,
    clusters: &[ProxmoxCluster],
    machines: &[ProxmoxMachine],
    join_nodes: bool,
) {
    for pc in clusters {
        if pc.status.initialization.provisioned != Some(true) {
            continue;
        }
        let name = pc.metadata.name.clone().unwrap_or_default();
        let endpoint = pc.spec.control_plane_endpoint.clone();
        mgmt.edit_cluster(NS, &name, |c| {
            c.status.initialization = Some(ClusterInitialization {
                infrastructure_provisioned: Some(true),
                ..ClusterInitialization::default()
            });
            c.spec.control_plane_endpoint = Some(Endpoint {
                host: endpoint.host.clone(),
                port: endpoint.port,
            })
            .filter(|e| !e.host.is_empty());
        });
    }
    if !join_nodes {
        return;
    }
    for pm in machines {
        if pm.status.initialization.provisioned != Some(true)
            || pm.metadata.deletion_timestamp.is_some()
        {
            continue;
        }
        let name = pm.metadata.name.clone().unwrap_or_default();
        mgmt.edit_machine(NS, &name, |m| {
            m.status.node_ref = Some(NameRef { name: name.clone() });
            if !m.status.conditions.iter().any(|c| c.type_ == "Available") {
                m.status.conditions.push(Condition {
                    type_: "Available".into(),
                    status: "True".into(),
                    reason: "Available".into(),
                    message: String::new(),
                    observed_generation: None,
                    last_transition_time: Time(Timestamp::UNIX_EPOCH),
                });
            }
        });
    }
}

/// Non-template VMs in the simulator: (vmid, name, node).
pub fn vms(pve: &RunningSim) -> Vec<(u32, String, String)> {
    pve.control().with_world(|w| {
        w.vms
            .values()
            .filter(|vm| !vm.is_template())
            .map(|vm| (vm.vmid, vm.name(), vm.node.clone()))
            .collect()
    })
}

/// Disk volumes (`images` content) that no VM has on a drive: a volume whose VM is gone,
/// or one a VM keeps only as `unusedN` (what PVE does with a disk replaced by a second
/// creation on its drive).
pub fn stray_disks(pve: &RunningSim) -> Vec<String> {
    pve.control().with_world(|w| {
        let attached: BTreeSet<String> = w
            .vms
            .values()
            .flat_map(|vm| vm.effective_config())
            .filter(|(key, _)| !key.starts_with("unused"))
            .filter_map(|(_, value)| value.split(',').next().map(str::to_string))
            .collect();
        w.storages
            .values()
            .flat_map(|s| {
                s.volumes
                    .values()
                    .flat_map(|vols| vols.iter())
                    .filter(|(_, v)| v.content == "images")
                    .map(move |(name, _)| format!("{}:{name}", s.id))
            })
            .filter(|volid| !attached.contains(volid))
            .collect()
    })
}

/// The invariants every converged state must satisfy, over the given objects: one VM per
/// live machine under its recorded VMID, no other VM (besides `foreign`), every claim
/// owned by a live machine or cluster. `describe` goes into failure messages.
pub fn assert_invariants(
    pve: &RunningSim,
    mgmt: &MemoryManagement,
    machines: &[ProxmoxMachine],
    clusters: &[ProxmoxCluster],
    foreign: &[&str],
    describe: &str,
) {
    let vms = vms(pve);
    let names: BTreeSet<String> = machines
        .iter()
        .filter_map(|m| m.metadata.name.clone())
        .collect();
    for (vmid, name, _) in vms
        .iter()
        .filter(|(_, n, _)| !foreign.contains(&n.as_str()))
    {
        assert!(
            names.contains(name),
            "orphan VM {vmid} ({name})\n{describe}"
        );
    }
    for m in machines {
        let name = m.metadata.name.clone().unwrap_or_default();
        let matching: Vec<_> = vms.iter().filter(|(_, n, _)| *n == name).collect();
        assert!(
            matching.len() <= 1,
            "duplicate VMs for {name}: {matching:?}"
        );
        if let Some((vmid, _, _)) = matching.first() {
            assert_eq!(
                m.spec.virtual_machine_id,
                Some(i64::from(*vmid)),
                "{name} records its VM"
            );
        }
    }
    // An HA resource outlives no VM (deletion purges it with the VM).
    let leaked: Vec<String> = pve.control().with_world(|w| {
        w.ha_resources
            .keys()
            .filter(|sid| {
                sid.strip_prefix("vm:")
                    .and_then(|id| id.parse::<u32>().ok())
                    .is_none_or(|vmid| !w.vms.contains_key(&vmid))
            })
            .cloned()
            .collect()
    });
    assert!(
        leaked.is_empty(),
        "leaked HA resources {leaked:?}\n{describe}"
    );
    let stray = stray_disks(pve);
    assert!(
        stray.is_empty(),
        "disks no VM uses (created twice, or left behind) {stray:?}\n{describe}"
    );
    let uids: BTreeSet<String> = machines
        .iter()
        .filter_map(|m| m.metadata.uid.clone())
        .chain(clusters.iter().filter_map(|c| c.metadata.uid.clone()))
        .collect();
    for claim in mgmt.claims() {
        let owner = claim
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .map(|o| o.uid.clone());
        assert!(
            owner.as_ref().is_some_and(|u| uids.contains(u)),
            "leaked claim {:?}",
            claim.metadata.name
        );
    }
}
