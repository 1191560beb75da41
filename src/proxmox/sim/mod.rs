//! A Proxmox VE simulator: an HTTPS (and optionally HTTP) server on loopback that speaks
//! the same API paths, shapes and reason phrases as PVE for the calls in
//! `reference/proxmox-api.md`, with asynchronous tasks, locks, a simulated guest, timing
//! profiles and fault injection.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use capmox_apiserver::proxmox::{Client, sim};
//! let pve = sim::start(sim::SimConfig::default()).await?;
//! let client = Client::new(pve.client_config())?;
//! println!("{:?}", client.version().await?);
//! pve.stop().await;
//! # Ok(()) }
//! ```
//!
//! Layout: [`world`] holds the state and its rules, [`tasks`] runs PVE workers in
//! simulated time, [`api`] has one handler per endpoint, [`http`] is the request
//! pipeline and the admin endpoint, [`faults`] and [`profile`] are the knobs.

mod api;
pub mod cli;
pub mod clock;
pub mod error;
pub mod faults;
pub mod http;
pub mod locks;
pub mod profile;
pub mod rng;
pub mod seed;
pub mod tasks;
pub mod world;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

pub use clock::ClockMode;
pub use error::{PveError, SimError};
pub use faults::{CloudInitResult, FaultPlan, HttpFault, OfflineMode, ResponseDelay, TaskFault};
pub use profile::Profile;
pub use seed::Seed;

use super::client::{ApiToken, ClientConfig, TlsMode};
use http::Shared;
use locks::{LockKey, LockMode};
use tasks::{Step, TaskSpec};
use world::{Power, TokenDef, World, WorldOptions};

/// An extra API token.
#[derive(Clone, Debug)]
pub struct SimToken {
    /// `user@realm!name`.
    pub id: String,
    /// Secret.
    pub secret: String,
    /// Only GET requests are allowed.
    pub read_only: bool,
}

/// How to run the simulator.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Timing profile.
    pub profile: Profile,
    /// Real or manual clock.
    pub clock: ClockMode,
    /// Initial cluster.
    pub seed: Seed,
    /// Initial faults.
    pub faults: FaultPlan,
    /// The address both listeners bind (default 127.0.0.1); the serving certificate names
    /// it besides the loopback names.
    pub address: IpAddr,
    /// HTTPS port on `address` (0 = any free port).
    pub https_port: u16,
    /// Also serve plain HTTP on this port (0 = any free port).
    pub http_port: Option<u16>,
    /// The main token's id.
    pub token_id: String,
    /// The main token's secret (random when absent).
    pub token_secret: Option<String>,
    /// More tokens.
    pub extra_tokens: Vec<SimToken>,
    /// Seed of the random generator (MACs, jitter, error rates).
    pub rng_seed: u64,
    /// Largest accepted upload in bytes.
    pub max_upload_bytes: usize,
    /// Append one JSON line per answered API request to this file
    /// (format: `http::request_log`, docs/proxmox.md "Request log").
    pub request_log: Option<PathBuf>,
}

impl Default for SimConfig {
    /// Instant profile, real clock, default seed, HTTPS on a free port.
    fn default() -> Self {
        Self {
            profile: Profile::Instant,
            clock: ClockMode::Real,
            seed: Seed::default(),
            faults: FaultPlan::default(),
            address: IpAddr::V4(Ipv4Addr::LOCALHOST),
            https_port: 0,
            http_port: None,
            token_id: "capmox@pve!capi".to_string(),
            token_secret: None,
            extra_tokens: Vec::new(),
            rng_seed: 1,
            max_upload_bytes: 64 << 20,
            request_log: None,
        }
    }
}

/// In-process control of a running simulator (what the admin endpoint offers).
#[derive(Clone)]
pub struct SimControl {
    shared: Arc<Shared>,
}

impl SimControl {
    fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Runs `f` on the world, advanced to now. For tests and the `dev` mode's wiring.
    pub fn with_world<R>(&self, f: impl FnOnce(&mut World) -> R) -> R {
        let mut world = self.shared.world();
        f(&mut world)
    }

    /// The current fault plan.
    pub fn faults(&self) -> FaultPlan {
        self.with_world(|w| w.faults.clone())
    }

    /// Replaces the fault plan.
    pub fn set_faults(&self, plan: FaultPlan) {
        self.with_world(|w| w.faults = plan);
    }

    /// Changes the fault plan in place.
    pub fn update_faults(&self, f: impl FnOnce(&mut FaultPlan)) {
        self.with_world(|w| f(&mut w.faults));
    }

    /// Simulated time since start.
    pub fn now(&self) -> Duration {
        self.shared.clock.now()
    }

    /// Moves simulated time forward (and runs whatever became due).
    pub fn advance(&self, by: Duration) {
        self.shared.clock.advance(by);
        self.with_world(|_| ());
    }

    /// Holds a storage's allocation lock for `duration` (another process allocating),
    /// so clones on it queue and may time out. `node` picks the node for local storages.
    pub fn hold_storage_lock(
        &self,
        storage: &str,
        node: Option<&str>,
        duration: Duration,
    ) -> Result<(), String> {
        self.with_world(|w| {
            let s = w
                .storages
                .get(storage)
                .ok_or_else(|| format!("no storage {storage}"))?;
            let node = match node {
                Some(n) if w.nodes.contains_key(n) => n.to_string(),
                Some(n) => return Err(format!("no node {n}")),
                None => w.nodes.keys().next().cloned().unwrap_or_default(),
            };
            let key = LockKey::Storage {
                id: s.id.clone(),
                scope: s.scope(&node),
            };
            w.spawn_task(
                TaskSpec {
                    node,
                    task_type: "lockhold",
                    id: storage.to_string(),
                    vmid: None,
                    program: vec![
                        Step::Lock {
                            key,
                            mode: LockMode::Exclusive,
                            timeout: Duration::from_secs(86_400),
                            message: None,
                        },
                        Step::Sleep(duration),
                    ],
                    on_failure: None,
                },
                true,
            );
            Ok(())
        })
    }

    /// The NoCloud seed attached to VM `vmid`, if it exists and has one (admin
    /// `GET /_sim/vms/<vmid>/seed`).
    pub fn seed_of(&self, vmid: u32) -> Option<crate::proxmox::nocloud::NoCloud> {
        self.with_world(|w| w.vms.get(&vmid).and_then(|vm| w.attached_seed(vm)))
    }

    /// A summary of the state (admin `GET /_sim/state`).
    pub fn state(&self) -> Value {
        let mode = self.shared.clock.mode();
        self.with_world(|w| {
            let vms: Vec<Value> = w
                .vms
                .values()
                .map(|vm| {
                    json!({"vmid": vm.vmid, "node": vm.node, "name": vm.name(),
                        "status": if vm.power == Power::Stopped { "stopped" } else { "running" },
                        "template": vm.is_template(), "lock": w.vm_lock(vm.vmid),
                        "tags": vm.config.get("tags")})
                })
                .collect();
            json!({"now": w.now.as_secs_f64(), "clock": mode, "profile": w.profile,
                "nodes": w.nodes.keys().collect::<Vec<_>>(), "vms": vms,
                "tasks_running": w.tasks.running(), "faults": w.faults})
        })
    }
}

/// A running simulator. Dropping it stops the listeners.
pub struct RunningSim {
    url: String,
    http_url: Option<String>,
    ca_pem: String,
    fingerprint: String,
    token: ApiToken,
    control: SimControl,
    shutdown: watch::Sender<bool>,
    servers: Vec<JoinHandle<()>>,
}

impl RunningSim {
    /// `https://<address>:<port>` (`https://127.0.0.1:<port>` by default).
    pub fn url(&self) -> &str {
        &self.url
    }
    /// `http://<address>:<port>` when plain HTTP is served.
    pub fn http_url(&self) -> Option<&str> {
        self.http_url.as_deref()
    }
    /// The CA that signed the serving certificate (PEM).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }
    /// SHA-256 fingerprint of the serving certificate.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }
    /// The main API token.
    pub fn token(&self) -> &ApiToken {
        &self.token
    }
    /// In-process control.
    pub fn control(&self) -> &SimControl {
        &self.control
    }
    /// A client configuration for the HTTPS endpoint trusting the simulator's CA.
    pub fn client_config(&self) -> ClientConfig {
        ClientConfig::new(
            self.url.clone(),
            self.token.clone(),
            TlsMode::CustomCa(self.ca_pem.clone()),
        )
    }
    /// Stops the listeners and waits for them.
    pub async fn stop(mut self) {
        let _ = self.shutdown.send(true);
        for server in std::mem::take(&mut self.servers) {
            let _ = server.await;
        }
    }
}

impl Drop for RunningSim {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
    }
}

async fn bind(address: IpAddr, port: u16) -> Result<TcpListener, SimError> {
    let addr = SocketAddr::from((address, port));
    TcpListener::bind(addr)
        .await
        .map_err(|source| SimError::Bind { addr, source })
}

fn local_url(scheme: &str, address: IpAddr, listener: &TcpListener) -> String {
    let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
    format!("{scheme}://{}", SocketAddr::from((address, port)))
}

/// Starts the simulator on `config.address` (127.0.0.1 by default).
pub async fn start(config: SimConfig) -> Result<RunningSim, SimError> {
    let cert = http::tls::generate(config.address)?;
    let secret = config
        .token_secret
        .clone()
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let token = ApiToken::new(config.token_id.clone(), secret.clone());
    let mut tokens: BTreeMap<String, TokenDef> = config
        .extra_tokens
        .iter()
        .map(|t| {
            (
                t.id.clone(),
                TokenDef {
                    secret: t.secret.clone(),
                    read_only: t.read_only,
                },
            )
        })
        .collect();
    tokens.insert(
        config.token_id.clone(),
        TokenDef {
            secret,
            read_only: false,
        },
    );
    let epoch = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let world = World::from_seed(
        &config.seed,
        WorldOptions {
            profile: config.profile,
            rng_seed: config.rng_seed,
            faults: config.faults.clone(),
            tokens,
            epoch,
            fingerprint: cert.fingerprint.clone(),
        },
    )
    .map_err(SimError::Seed)?;
    let request_log = match &config.request_log {
        Some(path) => Some(http::request_log::RequestLog::open(path).map_err(|source| {
            SimError::RequestLog {
                path: path.clone(),
                source,
            }
        })?),
        None => None,
    };
    let control = SimControl {
        shared: Arc::new(Shared::new(
            world,
            clock::SimClock::new(config.clock),
            config.max_upload_bytes,
            request_log,
        )),
    };
    let (shutdown, watcher) = watch::channel(false);
    let app = http::router(control.clone());
    let https = bind(config.address, config.https_port).await?;
    let url = local_url("https", config.address, &https);
    let mut servers = vec![tokio::spawn(http::serve(
        https,
        Some(TlsAcceptor::from(cert.config.clone())),
        app.clone(),
        watcher.clone(),
    ))];
    let mut http_url = None;
    if let Some(port) = config.http_port {
        let plain = bind(config.address, port).await?;
        http_url = Some(local_url("http", config.address, &plain));
        servers.push(tokio::spawn(http::serve(plain, None, app, watcher)));
    }
    Ok(RunningSim {
        url,
        http_url,
        ca_pem: cert.ca_pem,
        fingerprint: cert.fingerprint,
        token,
        control,
        shutdown,
        servers,
    })
}
