//! `dev`: the dev server (embedded store, generated CA, admin kubeconfig, the
//! management-cluster stand-ins), a simulated Proxmox VE, the dev emulation of Cluster API
//! core and of the in-cluster IPAM provider, and the built-in controller provisioning VMs
//! on the simulator — one process, so that `kubectl apply -f examples/dev/` shows VMs being
//! provisioned end to end.
//!
//! [`DevStack::start`]: `server::dev::DevServer` with the stand-ins, `proxmox::sim` (port
//! 8006 and the `fast` profile by default), `emulation::spawn_ipam` / `spawn_capi` and the
//! controller with the simulator as its global credentials — all over a kube client of the
//! dev server's own admin kubeconfig, so the controller's `Management` seam is the same
//! `KubeManagement` production uses. Further simulated Proxmox VE clusters (one by default,
//! on the next ports) have their credentials in Secrets `default/capmox-sim-<n>`, for
//! failure domains in another Proxmox VE cluster. `tests/it/devstack.rs` runs exactly this.

use std::future::Future;

use crate::controller::clients::{ClientFactory, Credentials, FactoryOptions};
use crate::controller::runtime::{ControllerOptions, MissingKind};
use crate::emulation::{self, EmulationOptions};
use crate::management::client::{self, ClientError};
use crate::proxmox::sim::{self, Profile, SimConfig, SimError};
use crate::server::app::{Server, StartError};
use crate::server::dev::{DevOptions, DevServer};
use crate::server::listener::Shutdown;
use crate::task::TaskGuard;

use super::controller;

/// The default HTTPS port of the simulator (Proxmox VE's).
pub const DEFAULT_SIM_PORT: u16 = 8006;

/// How to run `dev`.
#[derive(Clone)]
pub struct DevStackOptions {
    pub server: DevOptions,
    /// HTTPS port of the simulator on 127.0.0.1 (0 picks a free one).
    pub sim_port: u16,
    /// How fast simulated tasks (clone, start, upload) complete.
    pub sim_profile: Profile,
    /// Simulated Proxmox VE clusters (the first is the controller's global credentials).
    pub sim_clusters: usize,
    pub controller: ControllerOptions,
    pub emulation: EmulationOptions,
}

impl Default for DevStackOptions {
    fn default() -> Self {
        Self {
            server: DevOptions::default(),
            sim_port: DEFAULT_SIM_PORT,
            sim_profile: Profile::Fast,
            sim_clusters: 2,
            controller: ControllerOptions::default(),
            emulation: EmulationOptions::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DevStackError {
    #[error(transparent)]
    Server(#[from] StartError),
    #[error("starting the Proxmox VE simulator: {0}")]
    Simulator(#[from] SimError),
    #[error("a kube client for the dev server: {0}")]
    Client(#[from] ClientError),
    #[error("storing the credentials of a simulated Proxmox VE cluster: {0}")]
    Credentials(#[from] kube::Error),
    #[error(transparent)]
    Controller(#[from] MissingKind),
}

/// What the simulator is reachable as (for the instructions and for tests).
#[derive(Debug, Clone)]
pub struct SimEndpoint {
    pub url: String,
    pub token: String,
    /// The simulator's CA (PEM).
    pub ca_pem: String,
}

/// A further simulated Proxmox VE cluster.
pub struct OtherSim {
    pub endpoint: SimEndpoint,
    /// Its name in `/cluster/status`, and the name of its credentials Secret in `default`.
    pub name: String,
    pub control: sim::SimControl,
}

/// Everything `dev` runs.
pub struct DevStack {
    pub dev: DevServer,
    pub sim: SimEndpoint,
    /// In-process control of the simulator (tests inspect and steer it).
    pub sim_control: sim::SimControl,
    /// The further simulated Proxmox VE clusters.
    pub other_sims: Vec<OtherSim>,
}

impl DevStack {
    pub async fn start(options: &DevStackOptions) -> Result<Self, DevStackError> {
        let server_options = DevOptions {
            stand_ins: true,
            ..options.server.clone()
        };
        let mut dev = DevServer::start(&server_options, |router| router).await?;
        let simulator = sim::start(SimConfig {
            profile: options.sim_profile,
            https_port: options.sim_port,
            ..SimConfig::default()
        })
        .await?;
        let endpoint = SimEndpoint {
            url: simulator.url().to_owned(),
            token: simulator.token().header_value(),
            ca_pem: simulator.ca_pem().to_owned(),
        };
        let credentials = Credentials::of_simulator(&simulator);
        let sim_control = simulator.control().clone();
        // The simulator goes after the controller (which stops first).
        dev.server.on_shutdown(move || simulator.stop());

        let kube = client::client(Some(&dev.kubeconfig)).await?;
        let mut other_sims = Vec::new();
        for n in 2..=options.sim_clusters {
            let name = format!("capmox-sim-{n}");
            let port = match options.sim_port {
                0 => 0,
                first => first.saturating_add(u16::try_from(n - 1).unwrap_or(u16::MAX)),
            };
            let other = sim::start(SimConfig {
                profile: options.sim_profile,
                https_port: port,
                seed: sim::Seed {
                    cluster_name: name.clone(),
                    ..sim::Seed::default()
                },
                // Its own MACs and SMBIOS UUIDs (providerIDs), as separate clusters have.
                rng_seed: u64::try_from(n).unwrap_or(u64::MAX),
                ..SimConfig::default()
            })
            .await?;
            store_credentials(&kube, &name, &Credentials::of_simulator(&other)).await?;
            other_sims.push(OtherSim {
                endpoint: SimEndpoint {
                    url: other.url().to_owned(),
                    token: other.token().header_value(),
                    ca_pem: other.ca_pem().to_owned(),
                },
                name,
                control: other.control().clone(),
            });
            dev.server.on_shutdown(move || other.stop());
        }
        start_emulation(&mut dev.server, &kube, &options.emulation);
        controller::attach(
            &mut dev.server,
            dev.catalog.clone(),
            dev.store.clone(),
            kube,
            ClientFactory::new(Some(credentials), FactoryOptions::default()),
            options.controller.clone(),
        )?;
        Ok(Self {
            dev,
            sim: endpoint,
            sim_control,
            other_sims,
        })
    }

    /// The dev server's instructions, with the simulator, the controller and the example.
    pub fn instructions(&self) -> String {
        let others: String = self
            .other_sims
            .iter()
            .map(|o| {
                format!(
                    "- another simulated Proxmox VE cluster, {name}, at {url}\n\
                     \x20 (its credentials: Secret default/{name}; failure domains in it:\n\
                     \x20 kubectl apply -f examples/two-pve-clusters/);\n",
                    name = o.name,
                    url = o.endpoint.url,
                )
            })
            .collect();
        format!(
            "{server}\n\n\
             Also running in this process:\n\
             - the built-in controller, provisioning ProxmoxClusters and ProxmoxMachines;\n\
             - a SIMULATED Proxmox VE (no real VMs) at {url}\n\
             \x20 (token header \"Authorization: {token}\"; its state: GET {url}/_sim/state);\n\
             {others}\
             - a dev EMULATION of Cluster API core (owner references, Cluster/Machine status, a\n\
             \x20 pretend node join once the VM is provisioned, the deletion cascade) and of the\n\
             \x20 in-cluster IPAM provider (addresses for IPAddressClaims) acting on the stand-ins.\n\
             \n\
             Provision 3 control-plane and 2 worker VMs on the simulator:\n\
             \x20 kubectl apply -f examples/dev/\n\
             \x20 kubectl get proxmoxclusters,proxmoxmachines,machines -o wide -w\n\
             and remove them all again:\n\
             \x20 kubectl delete cluster dev",
            server = self.dev.instructions(),
            url = self.sim.url,
            token = self.sim.token,
        )
    }

    pub fn server(&self) -> &Server {
        &self.dev.server
    }

    /// Runs until SIGINT/SIGTERM, then stops the controller, the simulator and the store.
    pub async fn run_until_stopped(self) {
        self.dev.server.run_until_stopped().await;
    }

    /// Stops everything (tests).
    pub async fn shutdown(self) {
        self.dev.server.shutdown().await;
    }
}

/// Stores the credentials Secret `default/<name>` of a simulated Proxmox VE cluster (keys
/// as a ProxmoxCluster's `credentialsRef` reads them; its CA is trusted).
async fn store_credentials(
    kube: &kube::Client,
    name: &str,
    credentials: &Credentials,
) -> Result<(), kube::Error> {
    use k8s_openapi::api::core::v1::Secret;
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        data: credentials.secret_data(),
        ..Secret::default()
    };
    let api: kube::Api<Secret> = kube::Api::namespaced(kube.clone(), "default");
    match api.create(&kube::api::PostParams::default(), &secret).await {
        // A restart over the same directory: the simulator has a new token and CA.
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let patch = kube::api::Patch::Merge(serde_json::json!({ "data": secret.data }));
            api.patch(name, &kube::api::PatchParams::default(), &patch)
                .await
                .map(drop)
        }
        result => result.map(drop),
    }
}

/// The dev emulation of Cluster API core and of the IPAM provider, as server companions.
fn start_emulation(server: &mut Server, kube: &kube::Client, options: &EmulationOptions) {
    let shutdown = server.state().shutdown.clone();
    let ipam = emulation::spawn_ipam(kube.clone(), options.clone(), stopped(&shutdown));
    let capi = emulation::spawn_capi(kube.clone(), options.clone(), stopped(&shutdown));
    server.keep_alive(TaskGuard::new(ipam));
    server.keep_alive(TaskGuard::new(capi));
}

fn stopped(shutdown: &Shutdown) -> impl Future<Output = ()> + Send + 'static {
    let shutdown = shutdown.clone();
    async move { shutdown.wait().await }
}
