//! The built-in controller attached to a running server: the runtime over the server's
//! registry and store, the management cluster through kube-rs, and the management
//! cluster's CAPI Machine/Cluster changes turned into requeues.

use std::sync::Arc;

use capmox_storage::Store;
use futures::StreamExt;
use tokio::sync::mpsc;

use crate::controller::clients::ClientFactory;
use crate::controller::runtime::{Controller, ControllerOptions, MissingKind, ObjectKey, Trigger};
use crate::management::kube::KubeManagement;
use crate::management::kube::changes::{capi_cluster_changes, proxmox_machine_changes};
use crate::proxmox::client::{ApiObserver, CallObserver};
use crate::registry::catalog::Catalog;
use crate::server::app::Server;
use crate::server::metrics::Metrics;
use crate::task::TaskGuard;

/// Starts the controller inside `server`: it stops before the server's store closes and
/// follows the management cluster reached by `management`.
pub fn attach(
    server: &mut Server,
    catalog: Arc<Catalog>,
    store: Store,
    management: kube::Client,
    clients: ClientFactory,
    mut options: ControllerOptions,
) -> Result<(), MissingKind> {
    let metrics = Arc::clone(&server.state().metrics);
    options.observer = Arc::clone(&metrics) as _;
    let clients = clients.observed_by(ApiObserver::new(Arc::new(ProxmoxRequests(metrics))));
    let shutdown = server.state().shutdown.clone();
    let controller = Controller::start(
        catalog,
        store,
        KubeManagement::new(management.clone()),
        Arc::new(clients),
        options,
        async move { shutdown.wait().await },
    )?;
    let changes = tokio::spawn(forward_changes(management, controller.triggers()));
    server.keep_alive(TaskGuard::new(changes));
    server.on_shutdown_first(move || controller.stop());
    Ok(())
}

/// The Proxmox clients' requests into the server's metrics.
struct ProxmoxRequests(Arc<Metrics>);

impl CallObserver for ProxmoxRequests {
    fn call(&self, endpoint: &str, operation: &str, result: &str, elapsed: std::time::Duration) {
        self.0
            .observe_proxmox_request(endpoint, operation, result, elapsed);
    }
}

/// Requeues the ProxmoxMachine of every changed Machine, and the ProxmoxCluster and
/// machines of every changed Cluster.
async fn forward_changes(client: kube::Client, triggers: mpsc::Sender<Trigger>) {
    let machines = proxmox_machine_changes(client.clone())
        .map(|(namespace, name)| Trigger::Object(ObjectKey::machine(namespace, name)));
    let clusters =
        capi_cluster_changes(client).map(|(namespace, name)| Trigger::Cluster { namespace, name });
    let mut changes = std::pin::pin!(futures::stream::select(machines, clusters));
    while let Some(trigger) = changes.next().await {
        if triggers.send(trigger).await.is_err() {
            return;
        }
    }
}
