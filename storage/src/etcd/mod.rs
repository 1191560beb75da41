//! The etcd backend: kube-apiserver's layout and semantics over etcd-client.

mod election;
mod errors;
mod keys;
mod members;
mod progress;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use etcd_client::{
    Certificate, CompactionOptions, Compare, CompareOp, ConnectOptions, DeleteOptions, GetOptions,
    GetResponse, Identity, TlsOptions, Txn, TxnOp, TxnOpResponse, TxnResponse,
};

use self::keys::{Keys, prefix_end};
use self::members::{Idempotent, Members};
use self::progress::ProgressTrust;
use crate::config::EtcdConfig;
use crate::error::{Error, Result};
use crate::types::{Deleted, KeyValue, ListPage, ListQuery, Listed, Revision};
use crate::watch::WatchStream;

/// HTTP/2 keep-alive: notices a dead connection under a long-running watch.
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(10);
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone)]
pub(crate) struct EtcdStore {
    members: Arc<Members>,
    keys: Keys,
    settings: Arc<Settings>,
    connect: Arc<ConnectSettings>,
}

/// What a new client identity is combined with to connect again.
struct ConnectSettings {
    /// How clients connect, but for TLS.
    plain: ConnectOptions,
    /// The CA bundle etcd's certificates are checked against, when TLS is on.
    ca: Option<Vec<u8>>,
}

struct Settings {
    progress_trust: ProgressTrust,
    request_timeout: Duration,
    watch_retry_timeout: Duration,
    progress_interval: Option<Duration>,
}

impl EtcdStore {
    pub(crate) async fn connect(config: EtcdConfig) -> Result<Self> {
        let plain = ConnectOptions::new()
            .with_connect_timeout(config.connect_timeout)
            .with_keep_alive(KEEP_ALIVE_INTERVAL, KEEP_ALIVE_TIMEOUT)
            // A member cut off from the leader fails requests instead of serving stale data.
            .with_require_leader(true);
        let mut options = plain.clone();
        let mut ca = None;
        if let Some(tls) = &config.tls {
            let pem = read_pem(&tls.ca).await?;
            let mut tls_options = TlsOptions::new().ca_certificate(Certificate::from_pem(&pem));
            if let Some(client) = &tls.client {
                let cert = read_pem(&client.cert).await?;
                let key = read_pem(&client.key).await?;
                tls_options = tls_options.identity(Identity::from_pem(cert, key));
            }
            options = options.with_tls(tls_options);
            ca = Some(pem);
        }
        let members = Members::connect(&config.endpoints, options, config.request_timeout).await?;
        // Also the check that etcd answers at all: connecting is lazy.
        let version = members.server_version().await?;
        let store = Self {
            members: Arc::new(members),
            keys: Keys::new(&config.prefix),
            settings: Arc::new(Settings {
                progress_trust: ProgressTrust::of_version(&version),
                request_timeout: config.request_timeout,
                watch_retry_timeout: config.watch_retry_timeout,
                progress_interval: config.progress_interval,
            }),
            connect: Arc::new(ConnectSettings { plain, ca }),
        };
        tracing::debug!(%version, "connected to etcd");
        Ok(store)
    }

    /// A range read of `key` (with `options`); reads are safe to retry on another endpoint.
    async fn range(
        &self,
        key: String,
        options: Option<GetOptions>,
        at: Option<Revision>,
    ) -> Result<GetResponse> {
        self.members
            .request(at, Idempotent::Yes, |mut kv| {
                let (key, options) = (key.clone(), options.clone());
                async move { kv.get(key, options).await }
            })
            .await
    }

    /// A write transaction; sent again only if it never reached etcd.
    async fn txn(&self, txn: Txn) -> Result<TxnResponse> {
        self.members
            .request(None, Idempotent::No, |mut kv| {
                let txn = txn.clone();
                async move { kv.txn(txn).await }
            })
            .await
    }

    pub(crate) async fn get(&self, key: &str) -> Result<KeyValue> {
        let mut answer = self.range(self.keys.full(key), None, None).await?;
        match answer.take_kvs().into_iter().next() {
            Some(found) => self.keys.key_value(found),
            None => Err(Error::NotFound {
                key: key.to_owned(),
            }),
        }
    }

    pub(crate) async fn create(&self, key: &str, value: Bytes) -> Result<Revision> {
        let full = self.keys.full(key);
        let answer = self
            .txn(
                Txn::new()
                    .when([Compare::create_revision(full.clone(), CompareOp::Equal, 0)])
                    .and_then([TxnOp::put(full, Vec::from(value), None)]),
            )
            .await?;
        if answer.succeeded() {
            header_revision(answer.header())
        } else {
            Err(Error::AlreadyExists {
                key: key.to_owned(),
            })
        }
    }

    pub(crate) async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected: Revision,
    ) -> Result<Revision> {
        let full = self.keys.full(key);
        let answer = self
            .txn(
                Txn::new()
                    .when([Compare::mod_revision(
                        full.clone(),
                        CompareOp::Equal,
                        expected,
                    )])
                    .and_then([TxnOp::put(full.clone(), Vec::from(value), None)])
                    .or_else([TxnOp::get(full, None)]),
            )
            .await?;
        if answer.succeeded() {
            header_revision(answer.header())
        } else {
            Err(self.precondition_failed(key, expected, &answer))
        }
    }

    pub(crate) async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<Deleted> {
        let full = self.keys.full(key);
        let delete = TxnOp::delete(full.clone(), Some(DeleteOptions::new().with_prev_key()));
        let txn = match expected {
            None => Txn::new().and_then([delete]),
            Some(expected) => Txn::new()
                .when([Compare::mod_revision(
                    full.clone(),
                    CompareOp::Equal,
                    expected,
                )])
                .and_then([delete])
                .or_else([TxnOp::get(full, None)]),
        };
        let answer = self.txn(txn).await?;
        if !answer.succeeded() {
            return Err(self.precondition_failed(key, expected.unwrap_or_default(), &answer));
        }
        let prev = answer.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Delete(mut deleted) => deleted.take_prev_kvs().into_iter().next(),
            _ => None,
        });
        match prev {
            Some(prev) => Ok(Deleted {
                prev: self.keys.key_value(prev)?,
                revision: header_revision(answer.header())?,
            }),
            None => Err(Error::NotFound {
                key: key.to_owned(),
            }),
        }
    }

    /// The error for a failed revision compare: the else branch read the key as it is now.
    fn precondition_failed(&self, key: &str, expected: Revision, answer: &TxnResponse) -> Error {
        let current = answer.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Get(mut read) => read.take_kvs().into_iter().next(),
            _ => None,
        });
        let Some(current) = current else {
            return Error::NotFound {
                key: key.to_owned(),
            };
        };
        match self.keys.key_value(current) {
            Ok(current) => Error::Conflict {
                key: key.to_owned(),
                expected,
                current_revision: current.revision,
                current: Some(Box::new(current)),
            },
            Err(error) => error,
        }
    }

    pub(crate) async fn list<T>(
        &self,
        query: ListQuery,
        mut read: impl FnMut(Listed<'_>) -> T,
    ) -> Result<ListPage<T>> {
        let full_prefix = self.keys.full(&query.prefix);
        let start = match query.continue_after() {
            Some(after) => self.keys.after(after),
            None => full_prefix.clone(),
        };
        let at = query.at;
        let mut options = GetOptions::new().with_range(prefix_end(full_prefix.as_bytes()));
        if let Some(limit) = query.limit {
            options = options.with_limit(i64::try_from(limit).unwrap_or(i64::MAX));
        }
        if let Some(at) = at {
            options = options.with_revision(at);
        }
        let mut answer = self.range(start, Some(options), at).await?;
        let revision = match at {
            Some(at) => at,
            None => header_revision(answer.header())?,
        };
        let (count, more) = (answer.count(), answer.more());
        let items = answer
            .take_kvs()
            .into_iter()
            .map(|kv| Ok(read(self.keys.key_value(kv)?.listed())))
            .collect::<Result<Vec<_>>>()?;
        let returned = i64::try_from(items.len()).unwrap_or(i64::MAX);
        Ok(ListPage {
            items,
            revision,
            more,
            remaining: Some(count.saturating_sub(returned).max(0)),
        })
    }

    pub(crate) async fn watch(&self, prefix: &str, after: Revision) -> Result<WatchStream> {
        watch::watch(self, prefix, after).await
    }

    pub(crate) async fn current_revision(&self) -> Result<Revision> {
        let options = GetOptions::new().with_count_only();
        let answer = self.range(self.keys.full("/"), Some(options), None).await?;
        header_revision(answer.header())
    }

    /// Fails with `Expired` if a read at `revision` is no longer possible (a revision in the
    /// future is fine: nothing before it is lost).
    async fn check_readable(&self, revision: Revision) -> Result<()> {
        let options = GetOptions::new().with_count_only().with_revision(revision);
        match self
            .range(self.keys.full("/"), Some(options), Some(revision))
            .await
        {
            Ok(_) | Err(Error::FutureRevision { .. }) => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Connects with this client certificate and key from now on (a renewed certificate): new
    /// requests and watches use it, those in flight finish on their connections.
    pub(crate) async fn use_client_identity(&self, cert_pem: &[u8], key_pem: &[u8]) -> Result<()> {
        let ConnectSettings { plain, ca } = &*self.connect;
        let Some(ca) = ca else {
            return Err(Error::InvalidArgument(
                "a client certificate needs TLS to etcd (--etcd-cafile)".into(),
            ));
        };
        let tls = TlsOptions::new()
            .ca_certificate(Certificate::from_pem(ca))
            .identity(Identity::from_pem(cert_pem, key_pem));
        self.members.reconnect(plain.clone().with_tls(tls)).await
    }

    pub(crate) async fn compact(&self, revision: Revision) -> Result<()> {
        // Compacting twice to the same revision is harmless, so a retry is fine.
        self.members
            .request(Some(revision), Idempotent::Yes, |mut kv| async move {
                let options = CompactionOptions::new().with_physical();
                kv.compact(revision, Some(options)).await
            })
            .await?;
        Ok(())
    }
}

fn header_revision(header: Option<&etcd_client::ResponseHeader>) -> Result<Revision> {
    header
        .map(|header| header.revision())
        .ok_or_else(|| Error::Internal("etcd answered without a response header".into()))
}

async fn read_pem(path: &std::path::Path) -> Result<Vec<u8>> {
    tokio::fs::read(path)
        .await
        .map_err(|error| Error::InvalidArgument(format!("cannot read {}: {error}", path.display())))
}
