//! The HTTPS listener: TLS via tokio-rustls, HTTP/1.1 and HTTP/2 via hyper-util's auto
//! builder, the axum router as the service, per-connection timeouts, and graceful shutdown
//! (stop accepting, let in-flight requests finish within a grace period).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use super::authn::ConnectionInfo;

/// A shutdown signal shared by the listener and long-running handlers.
#[derive(Clone, Debug)]
pub struct Shutdown {
    tx: Arc<watch::Sender<bool>>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Self::new()
    }
}

impl Shutdown {
    pub fn new() -> Self {
        let (tx, _) = watch::channel(false);
        Self { tx: Arc::new(tx) }
    }

    /// Starts the shutdown (idempotent).
    pub fn trigger(&self) {
        self.tx.send_replace(true);
    }

    pub fn is_triggered(&self) -> bool {
        *self.tx.borrow()
    }

    /// Resolves once the shutdown has been triggered.
    pub async fn wait(&self) {
        let mut rx = self.tx.subscribe();
        // The sender lives as long as `self`, so this only ends by the value turning true.
        let _ = rx.wait_for(|triggered| *triggered).await;
    }
}

/// Connection-level limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenerOptions {
    /// A TLS handshake must finish within this time.
    pub tls_handshake_timeout: Duration,
    /// HTTP/1 request headers must arrive within this time; it also closes idle keep-alive
    /// connections (kube-apiserver's ReadHeaderTimeout is 32 s).
    pub header_read_timeout: Duration,
    /// HTTP/2 keep-alive pings detect dead peers.
    pub http2_keepalive_interval: Duration,
    pub http2_keepalive_timeout: Duration,
    /// Concurrent HTTP/2 streams per connection (the aggregator multiplexes many requests).
    pub http2_max_concurrent_streams: u32,
    /// How long in-flight requests may run after shutdown starts.
    pub shutdown_grace: Duration,
}

impl Default for ListenerOptions {
    fn default() -> Self {
        Self {
            tls_handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(32),
            http2_keepalive_interval: Duration::from_secs(30),
            http2_keepalive_timeout: Duration::from_secs(20),
            http2_max_concurrent_streams: 1000,
            shutdown_grace: Duration::from_secs(30),
        }
    }
}

/// A server accepting connections in the background.
pub struct RunningServer {
    local_addr: SocketAddr,
    shutdown: Shutdown,
    task: tokio::task::JoinHandle<()>,
}

impl RunningServer {
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn shutdown_signal(&self) -> Shutdown {
        self.shutdown.clone()
    }

    /// Waits until the server has shut down (after `shutdown` was triggered).
    pub async fn wait(self) {
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "server task failed");
        }
    }

    /// Triggers the shutdown and waits for the drain to finish.
    pub async fn shutdown(self) {
        self.shutdown.trigger();
        self.wait().await;
    }
}

/// Request headers may take up to Go's `DefaultMaxHeaderBytes` (1 MiB, plus the 4 KiB slack
/// Go's server allows): the aggregator forwards a client's headers, so a request kube-apiserver
/// accepted must not fail here with 431.
const MAX_HEADER_BYTES: usize = (1 << 20) + 4096;
/// HTTP/1.1 header lines per request. Go counts bytes only; hyper also counts lines (100 by
/// default) and allocates room for this many on every HTTP/1.1 request (64 KiB at 1,024), so
/// the count is generous without making every request pay for the 1 MiB worst case. HTTP/2,
/// which the aggregator speaks, has no line count, only the 1 MiB list.
const MAX_HTTP1_HEADERS: usize = 1024;

fn http_builder(options: &ListenerOptions) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout)
        .max_buf_size(MAX_HEADER_BYTES)
        .max_headers(MAX_HTTP1_HEADERS);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(MAX_HEADER_BYTES as u32)
        .keep_alive_interval(options.http2_keepalive_interval)
        .keep_alive_timeout(options.http2_keepalive_timeout)
        .max_concurrent_streams(options.http2_max_concurrent_streams);
    builder
}

/// Serves `router` over TLS on `listener` until `shutdown` fires.
pub fn serve(
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    router: Router,
    options: ListenerOptions,
    shutdown: Shutdown,
) -> std::io::Result<RunningServer> {
    let local_addr = listener.local_addr()?;
    let acceptor = TlsAcceptor::from(tls);
    let builder = Arc::new(http_builder(&options));
    let signal = shutdown.clone();
    let task = tokio::spawn(async move {
        let graceful = GracefulShutdown::new();
        loop {
            let (tcp, remote_addr) = tokio::select! {
                () = signal.wait() => break,
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Usually descriptor exhaustion; back off instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            let _ = tcp.set_nodelay(true);
            let acceptor = acceptor.clone();
            let router = router.clone();
            let builder = Arc::clone(&builder);
            let watcher = graceful.watcher();
            tokio::spawn(async move {
                let tls =
                    match tokio::time::timeout(options.tls_handshake_timeout, acceptor.accept(tcp))
                        .await
                    {
                        Ok(Ok(tls)) => tls,
                        Ok(Err(e)) => {
                            tracing::debug!(%remote_addr, error = %e, "TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(%remote_addr, "TLS handshake timed out");
                            return;
                        }
                    };
                let connection = ConnectionInfo {
                    remote_addr: Some(remote_addr),
                    peer_certificates: tls
                        .get_ref()
                        .1
                        .peer_certificates()
                        .map(|chain| Arc::new(chain.to_vec())),
                };
                let service = router.map_request(move |mut request: Request<Incoming>| {
                    request.extensions_mut().insert(connection.clone());
                    request
                });
                let conn = builder
                    .serve_connection_with_upgrades(
                        TokioIo::new(tls),
                        TowerToHyperService::new(service),
                    )
                    .into_owned();
                if let Err(e) = watcher.watch(conn).await {
                    tracing::debug!(%remote_addr, error = %e, "connection ended with an error");
                }
            });
        }
        drop(listener);
        tokio::select! {
            () = graceful.shutdown() => tracing::info!("all connections closed"),
            () = tokio::time::sleep(options.shutdown_grace) => {
                tracing::warn!(grace = ?options.shutdown_grace, "connections still open after the shutdown grace period");
            }
        }
    });
    Ok(RunningServer {
        local_addr,
        shutdown,
        task,
    })
}

/// Resolves on SIGINT or SIGTERM.
pub async fn termination_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut sigterm) => {
                sigterm.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("received interrupt, shutting down"),
        () = term => tracing::info!("received SIGTERM, shutting down"),
    }
}
