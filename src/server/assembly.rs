//! Puts the API together: the store opened from the storage settings, the registry's
//! catalog over it, discovery, OpenAPI and resource routes on the router, and the storage
//! readiness check.

use std::sync::Arc;
use std::time::Duration;

use capmox_storage::{EmbeddedConfig, EtcdConfig, Store, StoreConfig, TlsFiles};

use crate::registry::catalog::{self, Catalog};
use crate::registry::rest::RestConfig;
use crate::registry::strategy::Strategy;
use crate::registry::table::ColumnDefinitionError;

use super::health::FnCheck;
use super::resources::{self, ApiState};
use super::router::ApiRouter;
use super::serve::StorageConfig;

/// Why the API could not be assembled.
#[derive(Debug, thiserror::Error)]
pub enum AssemblyError {
    #[error("opening the store: {0}")]
    Storage(#[from] capmox_storage::Error),
    #[error("--etcd-certfile/--etcd-keyfile need --etcd-cafile")]
    EtcdClientCertWithoutCa,
    #[error(transparent)]
    Columns(#[from] ColumnDefinitionError),
}

/// The store configuration for the storage settings.
pub fn store_config(storage: &StorageConfig) -> Result<StoreConfig, AssemblyError> {
    Ok(match storage {
        StorageConfig::Embedded { data_dir } => EmbeddedConfig::new(data_dir).into(),
        StorageConfig::Etcd {
            servers,
            prefix,
            tls,
        } => {
            let mut config = EtcdConfig::new(servers.iter().cloned()).with_prefix(prefix.clone());
            let client = match (&tls.cert_file, &tls.key_file) {
                (Some(cert), Some(key)) => Some(capmox_storage::ClientCertFiles {
                    cert: cert.clone(),
                    key: key.clone(),
                }),
                _ => None,
            };
            match (&tls.ca_file, client) {
                (Some(ca), client) => {
                    config = config.with_tls(TlsFiles {
                        ca: ca.clone(),
                        client,
                    });
                }
                (None, Some(_)) => return Err(AssemblyError::EtcdClientCertWithoutCa),
                (None, None) => {}
            }
            config.into()
        }
    })
}

/// Opens the store.
pub async fn open_store(storage: &StorageConfig) -> Result<Store, AssemblyError> {
    let store = Store::open(store_config(storage)?).await?;
    tracing::info!(backend = store.backend_name(), "storage opened");
    Ok(store)
}

/// How long `serve` waits for its store to become reachable by default
/// (`--storage-initialization-timeout`, whose default in `cli` says the same). In the HA overlay
/// the replicas start beside etcd's members, whose names resolve only once their pods have
/// addresses; the wait stays under the liveness probe's minute, after which kubelet restarts the
/// container.
pub const STORE_PATIENCE: Duration = Duration::from_secs(50);

/// Opens the store, trying again while it is unavailable (not reachable yet) for at most
/// `patience`; any other error, or the last one, is returned.
pub async fn open_store_waiting(
    storage: &StorageConfig,
    patience: Duration,
) -> Result<Store, AssemblyError> {
    let deadline = tokio::time::Instant::now() + patience;
    let mut pause = Duration::from_millis(250);
    loop {
        match open_store(storage).await {
            Err(AssemblyError::Storage(error))
                if error.is_retryable() && tokio::time::Instant::now() + pause < deadline =>
            {
                tracing::warn!(%error, retry_in = ?pause, "storage not reachable yet; trying again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(4));
            }
            opened => return opened,
        }
    }
}

/// Adds the API (discovery, OpenAPI, every kind's resources) over `store` to `router`, and a
/// `storage` readiness check.
pub fn install(
    router: ApiRouter,
    store: &Store,
    config: &RestConfig,
) -> Result<ApiRouter, AssemblyError> {
    install_with_catalog(router, store, config).map(|(router, _)| router)
}

/// [`install`], also answering the catalog the routes serve (what the built-in controller
/// runs on: `controller::runtime::Controller::start`).
pub fn install_with_catalog(
    router: ApiRouter,
    store: &Store,
    config: &RestConfig,
) -> Result<(ApiRouter, Arc<Catalog>), AssemblyError> {
    install_catalog(router, store, config, catalog::strategies())
}

/// `install` with these kinds (tests serve variations of the descriptors).
pub fn install_kinds(
    router: ApiRouter,
    store: &Store,
    config: &RestConfig,
    strategies: Vec<Arc<dyn Strategy>>,
) -> Result<ApiRouter, AssemblyError> {
    install_catalog(router, store, config, strategies).map(|(router, _)| router)
}

/// [`install_kinds`], also answering the catalog.
pub fn install_catalog(
    router: ApiRouter,
    store: &Store,
    config: &RestConfig,
    strategies: Vec<Arc<dyn Strategy>>,
) -> Result<(ApiRouter, Arc<Catalog>), AssemblyError> {
    let server = router.state().clone();
    let observer: Arc<dyn crate::registry::object_store::StorageObserver> =
        Arc::clone(&server.metrics) as _;
    let catalog = Catalog::new(
        strategies,
        store,
        observer,
        config,
        Arc::clone(&server.admission),
    )?;
    let probe = store.clone();
    server
        .health
        .register_readiness(Arc::new(FnCheck::new("storage", move || {
            let probe = probe.clone();
            async move {
                probe
                    .current_revision()
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }
        })));
    let catalog = Arc::new(catalog);
    if let Some(cotenants) = &server.cotenants {
        super::cotenants::serve_from_crds(
            cotenants,
            &catalog,
            Arc::clone(&server.conversion),
            server.kube.is_some(),
        );
    }
    let state = ApiState::new(Arc::clone(&catalog), server);
    let router = router
        .without_default_discovery()
        .merge(resources::routes(state));
    Ok((router, catalog))
}
