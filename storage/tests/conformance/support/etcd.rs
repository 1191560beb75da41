//! A real etcd process for tests and benchmarks: free loopback ports, a temporary data dir,
//! killed by PID when dropped (also when a test panics).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use capmox_storage::{EtcdConfig, Store, TlsFiles};

/// How long etcd may take to become healthy (it usually needs about a second).
const START_TIMEOUT: Duration = Duration::from_secs(30);

pub struct EtcdProcess {
    child: Child,
    /// Client URLs, one per listening port.
    pub endpoints: Vec<String>,
    pub tls: Option<TlsFiles>,
    dir: tempfile::TempDir,
}

/// TLS files for the server side of a test etcd.
pub struct ServerTls {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Require client certificates signed by `ca`.
    pub client_cert_auth: bool,
}

pub fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl EtcdProcess {
    /// Starts a plain-text etcd with one client URL.
    pub async fn start() -> anyhow::Result<Self> {
        Self::start_with(1, None, None).await
    }

    /// Starts etcd listening on `client_ports` loopback ports, with TLS if given, and waits
    /// until it answers. `client_tls` is what a client needs to reach it.
    pub async fn start_with(
        client_ports: usize,
        server_tls: Option<&ServerTls>,
        client_tls: Option<TlsFiles>,
    ) -> anyhow::Result<Self> {
        let mut last_error = None;
        // A port picked as free can be taken before etcd binds it; try again with new ones.
        for _ in 0..3 {
            match Self::try_start(client_ports, server_tls, client_tls.clone()).await {
                Ok(etcd) => return Ok(etcd),
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("etcd did not start")))
    }

    async fn try_start(
        client_ports: usize,
        server_tls: Option<&ServerTls>,
        client_tls: Option<TlsFiles>,
    ) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let scheme = if server_tls.is_some() {
            "https"
        } else {
            "http"
        };
        let endpoints = (0..client_ports)
            .map(|_| Ok(format!("{scheme}://127.0.0.1:{}", free_port()?)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let peer = format!("http://127.0.0.1:{}", free_port()?);
        let log = std::fs::File::create(dir.path().join("etcd.log"))?;
        let mut command = Command::new("etcd");
        command
            .arg("--name=test")
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--listen-client-urls={}", endpoints.join(",")))
            .arg(format!("--advertise-client-urls={}", endpoints[0]))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=test={peer}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        if let Some(tls) = server_tls {
            command
                .arg(format!("--cert-file={}", tls.cert.display()))
                .arg(format!("--key-file={}", tls.key.display()))
                .arg(format!("--trusted-ca-file={}", tls.ca.display()));
            if tls.client_cert_auth {
                command.arg("--client-cert-auth");
            }
        }
        let child = command
            .spawn()
            .context("cannot start `etcd` (install etcd-server; tests/run does)")?;
        let mut etcd = Self {
            child,
            endpoints,
            tls: client_tls,
            dir,
        };
        etcd.wait_healthy().await?;
        Ok(etcd)
    }

    async fn wait_healthy(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!("etcd exited with {status}: {}", self.log_tail());
            }
            let config = self
                .config("/health-check")
                .with_request_timeout(Duration::from_secs(1));
            if Store::open(config).await.is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("etcd did not become healthy: {}", self.log_tail());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The etcd process's id (to read its CPU time).
    #[allow(
        dead_code,
        reason = "the API benchmark reads etcd's CPU time; the conformance tests do not"
    )]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A store config for this etcd with its own key prefix.
    pub fn config(&self, prefix: &str) -> EtcdConfig {
        let mut config = EtcdConfig::new(self.endpoints.clone()).with_prefix(prefix);
        config.connect_timeout = Duration::from_secs(2);
        if let Some(tls) = &self.tls {
            config = config.with_tls(tls.clone());
        }
        config
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default();
        let start = log.len().saturating_sub(2000);
        log.get(start..).unwrap_or_default().to_owned()
    }
}

impl Drop for EtcdProcess {
    fn drop(&mut self) {
        // SIGKILL by PID, then reap it so no zombie or stray etcd is left behind.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
