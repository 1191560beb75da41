//! `serve`: the production server with the built-in controller. The controller reaches the
//! management cluster through `--management-kubeconfig` (else the authentication
//! kubeconfig, else the pod's service account) and Proxmox through per-cluster
//! `credentialsRef` Secrets or the global `PROXMOX_URL`/`PROXMOX_TOKEN`/`PROXMOX_SECRET`.
//!
//! [`start`] is `server::serve::start_parts` plus `run::controller::attach` when
//! `--controller` is on (the default). Its other flags: `--proxmox-root-cert-file` (the CA
//! of the global credentials when `PROXMOX_INSECURE=false`), `--controller-workers`
//! (concurrent reconciles) and `--proxmox-qps` / `--proxmox-burst` (the rate limit per
//! Proxmox endpoint).

use std::path::PathBuf;

use crate::controller::clients::{ClientFactory, Credentials, CredentialsError, FactoryOptions};
use crate::controller::runtime::{ControllerOptions, MissingKind};
use crate::management::client::{self, ClientError};
use crate::server::app::Server;
use crate::server::serve::{self, ServeError, ServeOptions};
use crate::server::tls;

use super::controller;

/// The controller's settings in `serve`.
#[derive(Debug, Clone, Default)]
pub struct ControllerSettings {
    /// Run the built-in controller (one replica leads; see docs/controller.md).
    pub enabled: bool,
    /// Kubeconfig of the management cluster for the controller.
    pub management_kubeconfig: Option<PathBuf>,
    /// CA bundle (PEM) verifying Proxmox with the global credentials when
    /// `PROXMOX_INSECURE=false`.
    pub proxmox_root_cert_file: Option<PathBuf>,
    /// Concurrent reconciles.
    pub workers: usize,
    /// Proxmox requests per second and burst, per endpoint.
    pub proxmox: FactoryOptions,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeStackError {
    #[error(transparent)]
    Serve(#[from] ServeError),
    #[error("the controller's management cluster: {0}")]
    Management(#[from] ClientError),
    #[error("--proxmox-root-cert-file: {0}")]
    RootCert(#[from] tls::TlsError),
    #[error("global Proxmox credentials (PROXMOX_URL, PROXMOX_TOKEN, PROXMOX_SECRET): {0}")]
    Credentials(#[from] CredentialsError),
    #[error(transparent)]
    Controller(#[from] MissingKind),
}

/// Starts `serve`, with the controller when enabled.
pub async fn start(
    options: &ServeOptions,
    settings: &ControllerSettings,
) -> Result<Server, ServeStackError> {
    let started = serve::start_parts(options, |router| router).await?;
    let mut server = started.server;
    if !settings.enabled {
        tracing::info!("the built-in controller is disabled");
        return Ok(server);
    }
    let kubeconfig = settings
        .management_kubeconfig
        .as_deref()
        .or(options.delegation.authentication_kubeconfig.as_deref());
    let management = client::client(kubeconfig).await?;
    let root_ca = match &settings.proxmox_root_cert_file {
        Some(path) => Some(String::from_utf8_lossy(&tls::read_file(path)?).into_owned()),
        None => None,
    };
    let global = Credentials::from_env(root_ca).transpose()?;
    if global.is_none() {
        tracing::info!(
            "no global Proxmox credentials: only ProxmoxClusters with a credentialsRef are reconciled"
        );
    }
    controller::attach(
        &mut server,
        started.catalog,
        started.store,
        management,
        ClientFactory::new(global, settings.proxmox.clone()),
        ControllerOptions {
            workers: settings.workers,
            ..ControllerOptions::default()
        },
    )?;
    Ok(server)
}
