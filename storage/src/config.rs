//! How to open a store: one config per backend, with builder-style setters.

use std::path::PathBuf;
use std::time::Duration;

/// Which backend to open, and how.
#[derive(Debug, Clone)]
pub enum StoreConfig {
    Etcd(EtcdConfig),
    Embedded(EmbeddedConfig),
}

impl From<EtcdConfig> for StoreConfig {
    fn from(config: EtcdConfig) -> Self {
        StoreConfig::Etcd(config)
    }
}

impl From<EmbeddedConfig> for StoreConfig {
    fn from(config: EmbeddedConfig) -> Self {
        StoreConfig::Embedded(config)
    }
}

/// Default etcd key prefix, the same as kube-apiserver's `--etcd-prefix`.
pub const DEFAULT_ETCD_PREFIX: &str = "/registry";

/// An etcd cluster (production, HA).
#[derive(Debug, Clone)]
pub struct EtcdConfig {
    /// Client URLs, e.g. `https://10.0.0.1:2379`; requests are balanced over all of them.
    pub endpoints: Vec<String>,
    /// Prefix put in front of every key (default `/registry`); a trailing `/` is ignored.
    pub prefix: String,
    /// TLS material; `None` for plain-text `http://` endpoints.
    pub tls: Option<TlsFiles>,
    /// Time to establish a connection to one endpoint.
    pub connect_timeout: Duration,
    /// Upper bound for one unary request (get, txn, range, compact).
    pub request_timeout: Duration,
    /// How long a watch keeps trying to reconnect before it ends with `Unavailable`.
    pub watch_retry_timeout: Duration,
    /// How often a watch asks for a progress mark; `None` only on request.
    pub progress_interval: Option<Duration>,
}

/// PEM files for TLS to etcd.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// CA bundle that signed the etcd server certificates.
    pub ca: PathBuf,
    /// Client certificate and key, when etcd requires client authentication.
    pub client: Option<ClientCertFiles>,
}

/// A client certificate and its private key (PEM).
#[derive(Debug, Clone)]
pub struct ClientCertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl EtcdConfig {
    pub fn new<S: Into<String>>(endpoints: impl IntoIterator<Item = S>) -> Self {
        Self {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            prefix: DEFAULT_ETCD_PREFIX.to_owned(),
            tls: None,
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            watch_retry_timeout: Duration::from_secs(60),
            progress_interval: Some(Duration::from_secs(10)),
        }
    }

    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    pub fn with_tls(mut self, tls: TlsFiles) -> Self {
        self.tls = Some(tls);
        self
    }

    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    pub fn with_watch_retry_timeout(mut self, timeout: Duration) -> Self {
        self.watch_retry_timeout = timeout;
        self
    }

    pub fn with_progress_interval(mut self, interval: Option<Duration>) -> Self {
        self.progress_interval = interval;
        self
    }
}

/// Default number of revisions the embedded store keeps for watches and reads in the past.
pub const DEFAULT_HISTORY: u64 = 10_000;

/// How long a commit waits, at most, for the writers of the previous batch: about one fsync
/// on a virtual disk, so a write's latency at most doubles while concurrent writers share it.
pub const DEFAULT_COMMIT_DELAY: Duration = Duration::from_millis(1);

/// The embedded single-node store: one redb file in `data_dir`.
#[derive(Debug, Clone)]
pub struct EmbeddedConfig {
    /// Directory holding the database file; created if missing.
    pub data_dir: PathBuf,
    /// Revisions kept in the change log; older ones are compacted automatically.
    pub history: u64,
    /// How often a watch emits a progress mark; `None` only on request.
    pub progress_interval: Option<Duration>,
    /// Committed batches buffered per watcher before it falls back to reading the log.
    pub watch_buffer: usize,
    /// Most writes folded into one durable commit.
    pub max_batch: usize,
    /// Longest a commit waits for as many writers as the previous batch had (zero: never).
    pub commit_delay: Duration,
}

impl EmbeddedConfig {
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            history: DEFAULT_HISTORY,
            progress_interval: Some(Duration::from_secs(10)),
            watch_buffer: 1024,
            max_batch: 1024,
            commit_delay: DEFAULT_COMMIT_DELAY,
        }
    }

    pub fn with_history(mut self, revisions: u64) -> Self {
        self.history = revisions;
        self
    }

    pub fn with_progress_interval(mut self, interval: Option<Duration>) -> Self {
        self.progress_interval = interval;
        self
    }

    pub fn with_watch_buffer(mut self, batches: usize) -> Self {
        self.watch_buffer = batches;
        self
    }

    pub fn with_max_batch(mut self, writes: usize) -> Self {
        self.max_batch = writes;
        self
    }

    pub fn with_commit_delay(mut self, delay: Duration) -> Self {
        self.commit_delay = delay;
        self
    }
}
