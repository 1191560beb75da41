//! A running API server: TLS material, listener and router tied together with a graceful
//! shutdown that first fails readiness, then drains connections.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use futures::future::BoxFuture;
use rustls::server::danger::ClientCertVerifier;
use rustls::sign::CertifiedKey;
use tokio::net::TcpListener;

use super::listener::{self, ListenerOptions, RunningServer};
use super::router::ServerState;
use super::tls::{self, KeyPairFiles, ReloadTask, ReloadingCertResolver, TlsError};

/// Where the serving certificate comes from.
#[derive(Debug, Clone)]
pub enum TlsSource {
    /// PEM files, reloaded when they change.
    Files(KeyPairFiles),
    /// A fresh self-signed certificate for loopback and these DNS names.
    SelfSigned { dns_names: Vec<String> },
    /// A certificate already in memory (e.g. issued by the dev CA).
    Key(Arc<CertifiedKey>),
}

/// Everything needed to start listening.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub bind: SocketAddr,
    pub tls: TlsSource,
    /// Checks client certificates (see `authn::trust`); none are asked for without it.
    pub client_verifier: Option<Arc<dyn ClientCertVerifier>>,
    pub listener: ListenerOptions,
    /// How often certificate files are checked for changes.
    pub reload_interval: Duration,
}

impl ServerConfig {
    pub fn new(bind: SocketAddr, tls: TlsSource) -> Self {
        Self {
            bind,
            tls,
            client_verifier: None,
            listener: ListenerOptions::default(),
            reload_interval: Duration::from_secs(10),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("listening on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Assembly(#[from] super::assembly::AssemblyError),
}

/// Work to finish after the server drained (e.g. closing the store).
type ShutdownHook = Box<dyn FnOnce() -> BoxFuture<'static, ()> + Send>;

/// A started server.
pub struct Server {
    running: RunningServer,
    state: ServerState,
    _reload: Option<ReloadTask>,
    /// Helpers that live as long as the server (e.g. the authentication ConfigMap watch).
    companions: Vec<Box<dyn Send + Sync>>,
    hooks: Vec<ShutdownHook>,
}

impl Server {
    /// Binds, loads the certificate and starts serving `router`, which must have been built
    /// from `state` (so watches see the same shutdown signal).
    pub async fn start(
        config: ServerConfig,
        state: ServerState,
        router: Router,
    ) -> Result<Self, StartError> {
        let (key, files) = match &config.tls {
            TlsSource::Files(files) => (files.load()?, Some(files.clone())),
            TlsSource::SelfSigned { dns_names } => {
                (tls::self_signed(dns_names)?.certified_key()?, None)
            }
            TlsSource::Key(key) => (Arc::clone(key), None),
        };
        let resolver = Arc::new(ReloadingCertResolver::new(key));
        let reload = files.map(|files| resolver.watch(files, config.reload_interval));
        let tls_config = tls::server_config(resolver, config.client_verifier.clone())?;
        let listener = TcpListener::bind(config.bind)
            .await
            .map_err(|source| StartError::Bind {
                addr: config.bind,
                source,
            })?;
        let running = listener::serve(
            listener,
            tls_config,
            router,
            config.listener,
            state.shutdown.clone(),
        )
        .map_err(|source| StartError::Bind {
            addr: config.bind,
            source,
        })?;
        tracing::info!(address = %running.local_addr(), "serving HTTPS (h2, http/1.1)");
        Ok(Self {
            running,
            state,
            _reload: reload,
            companions: Vec::new(),
            hooks: Vec::new(),
        })
    }

    /// Keeps `companion` alive (and drops it) together with the server.
    pub fn keep_alive(&mut self, companion: impl Send + Sync + 'static) {
        self.companions.push(Box::new(companion));
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.running.local_addr()
    }

    pub fn state(&self) -> &ServerState {
        &self.state
    }

    /// Runs `hook` once the server has drained, in the order hooks were added.
    pub fn on_shutdown<F>(&mut self, hook: impl FnOnce() -> F + Send + 'static)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.hooks.push(Box::new(move || Box::pin(hook())));
    }

    /// Runs `hook` once the server has drained, before every hook added so far (work that
    /// must end while the store is still open, e.g. the controller).
    pub fn on_shutdown_first<F>(&mut self, hook: impl FnOnce() -> F + Send + 'static)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.hooks.insert(0, Box::new(move || Box::pin(hook())));
    }

    /// Fails readiness, stops accepting, drains in-flight requests, then runs the hooks.
    pub async fn shutdown(self) {
        self.state.health.mark_shutting_down();
        self.running.shutdown().await;
        for hook in self.hooks {
            hook().await;
        }
    }

    /// Runs until SIGINT/SIGTERM or until the state's shutdown signal fires, then shuts down.
    pub async fn run_until_stopped(self) {
        let signal = self.state.shutdown.clone();
        tokio::select! {
            () = listener::termination_signal() => {}
            () = signal.wait() => {}
        }
        self.shutdown().await;
    }
}
