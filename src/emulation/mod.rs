//! `dev`-mode emulation of the management cluster's other controllers: an in-cluster IPAM
//! provider ([`ipam`]) and a tiny Cluster API core ([`capi`]), so the controller can run
//! end to end without a real management cluster.
//!
//! Everything goes through a `kube::Client`, so the same loops run against the `dev`
//! server's stand-ins or any cluster. Each loop watches the kinds it cares about
//! (kube-rs watchers with back-off), relists periodically, and reconciles one object at a
//! time from a fresh read; every write carries the resourceVersion it was computed from,
//! and a lost race is retried from a new read ([`driver`]). Nothing lives only in memory,
//! so a loop may be stopped and restarted at any point.
//!
//! Entry points (`run::dev` starts both; `serve` never does, a real management cluster runs
//! the real controllers):
//!
//! ```ignore
//! let ipam = emulation::spawn_ipam(client.clone(), EmulationOptions::default(), shutdown_a);
//! let capi = emulation::spawn_capi(client, EmulationOptions::default(), shutdown_b);
//! // each handle ends once its shutdown future resolves
//! ```

pub mod capi;
pub mod driver;
pub mod error;
pub mod ipam;
pub mod meta;
pub mod triggers;

use std::future::Future;
use std::time::Duration;

use futures::FutureExt;
use tokio::task::JoinHandle;

use self::capi::cluster::{Clusters, machine_cluster, owning_clusters};
use self::capi::machine::Machines;
use self::driver::{Wake, run};
use self::ipam::Ipam;
use self::triggers::{everything, itself, merge, named_or_all, namespace, watch};
use crate::management::kube::kinds::Kind;
use crate::management::kube::objects::Objects;
use crate::management::types::CAPI_GROUP;

pub use self::error::EmulationError;

/// Tunables of the loops.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmulationOptions {
    /// How often every object is looked at again without a watch event (missed events,
    /// objects waiting for something unwatched).
    pub relist_interval: Duration,
}

impl Default for EmulationOptions {
    fn default() -> Self {
        Self {
            relist_interval: Duration::from_secs(60),
        }
    }
}

/// Starts the in-cluster IPAM provider ([`ipam`]); the task ends when `shutdown`
/// resolves. Triggers: claims and addresses (by key), pools and Clusters (everything:
/// capacity or pause changed).
pub fn spawn_ipam(
    client: kube::Client,
    options: EmulationOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> JoinHandle<()> {
    let triggers = merge(vec![
        watch(&client, Kind::IpAddressClaim, itself),
        watch(&client, Kind::IpAddress, itself),
        watch(&client, Kind::InClusterIpPool, everything),
        watch(&client, Kind::GlobalInClusterIpPool, everything),
        watch(&client, Kind::Cluster, everything),
    ]);
    let ipam = Ipam::new(Objects::new(client));
    tokio::spawn(run(ipam, triggers, options.relist_interval, shutdown))
}

/// Starts the Cluster API emulation ([`capi`]): the Cluster and the Machine loop in one
/// task, which ends when `shutdown` resolves.
pub fn spawn_capi(
    client: kube::Client,
    options: EmulationOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> JoinHandle<()> {
    let shutdown = shutdown.boxed().shared();
    let cluster_triggers = merge(vec![
        watch(&client, Kind::Cluster, itself),
        watch(&client, Kind::ProxmoxCluster, |pc| {
            named_or_all(
                pc,
                owning_clusters(&serde_json::to_value(pc).unwrap_or_default()),
            )
        }),
        // A deleted Cluster waits for its Machines to go.
        watch(&client, Kind::Machine, |machine| {
            let value = serde_json::to_value(machine).unwrap_or_default();
            machine_cluster(&value)
                .map(|cluster| Wake::Key((namespace(machine), cluster.to_string())))
                .into_iter()
                .collect()
        }),
    ]);
    let machine_triggers = merge(vec![
        watch(&client, Kind::Machine, itself),
        watch(&client, Kind::ProxmoxMachine, |pm| {
            let value = serde_json::to_value(pm).unwrap_or_default();
            named_or_all(pm, meta::owner_names(&value, "Machine", CAPI_GROUP))
        }),
    ]);
    let objects = Objects::new(client);
    let clusters = run(
        Clusters::new(objects.clone()),
        cluster_triggers,
        options.relist_interval,
        shutdown.clone(),
    );
    let machines = run(
        Machines::new(objects),
        machine_triggers,
        options.relist_interval,
        shutdown,
    );
    tokio::spawn(async move {
        futures::join!(clusters, machines);
    })
}
