//! The store handle the registry uses: one API over both backends, arguments checked once here.

use bytes::Bytes;

use std::time::Duration;

use crate::config::StoreConfig;
use crate::election::Leadership;
use crate::embedded::EmbeddedStore;
use crate::error::{Error, Result};
use crate::etcd::EtcdStore;
use crate::types::{Deleted, KeyValue, ListPage, ListQuery, Listed, Revision};
use crate::watch::WatchStream;

/// A revisioned key-value store; cheap to clone and share between tasks.
///
/// Keys start with `/` and are relative to the backend's prefix (etcd: `/registry` by default), so
/// the same key names an object in both backends.
#[derive(Clone)]
pub struct Store(Backend);

#[derive(Clone)]
enum Backend {
    Etcd(EtcdStore),
    Embedded(EmbeddedStore),
}

/// Runs the same call on whichever backend this store is.
macro_rules! dispatch {
    ($self:ident, $backend:ident => $call:expr) => {
        match &$self.0 {
            Backend::Etcd($backend) => $call,
            Backend::Embedded($backend) => $call,
        }
    };
}

impl Store {
    /// Opens the configured backend. For etcd this also checks that the cluster answers.
    pub async fn open(config: impl Into<StoreConfig>) -> Result<Self> {
        Ok(Self(match config.into() {
            StoreConfig::Etcd(config) => Backend::Etcd(EtcdStore::connect(config).await?),
            StoreConfig::Embedded(config) => Backend::Embedded(EmbeddedStore::open(config).await?),
        }))
    }

    /// `"etcd"` or `"embedded"`, for logs and metrics.
    pub fn backend_name(&self) -> &'static str {
        match self.0 {
            Backend::Etcd(_) => "etcd",
            Backend::Embedded(_) => "embedded",
        }
    }

    /// Connects to etcd with this client certificate and key from now on (PEM), for a renewed
    /// certificate; `InvalidArgument` for the embedded store, or without TLS to etcd.
    pub async fn use_etcd_client_identity(&self, cert_pem: &[u8], key_pem: &[u8]) -> Result<()> {
        match &self.0 {
            Backend::Etcd(etcd) => etcd.use_client_identity(cert_pem, key_pem).await,
            Backend::Embedded(_) => Err(Error::InvalidArgument(
                "the embedded store has no etcd client certificate".into(),
            )),
        }
    }

    /// The current value of `key`, or `NotFound`.
    pub async fn get(&self, key: &str) -> Result<KeyValue> {
        check_key(key)?;
        dispatch!(self, b => b.get(key).await)
    }

    /// Creates `key`; `AlreadyExists` if it is present. Returns the new revision.
    pub async fn create(&self, key: &str, value: impl Into<Bytes>) -> Result<Revision> {
        check_key(key)?;
        let value = value.into();
        dispatch!(self, b => b.create(key, value).await)
    }

    /// Replaces the value of `key` if its revision is still `expected` (compare-and-swap).
    /// `Conflict` carries the current object; `NotFound` if the key is gone.
    pub async fn update(
        &self,
        key: &str,
        value: impl Into<Bytes>,
        expected: Revision,
    ) -> Result<Revision> {
        check_key(key)?;
        check_revision("expected revision", expected)?;
        let value = value.into();
        dispatch!(self, b => b.update(key, value, expected).await)
    }

    /// Deletes `key`, if its revision is `expected` when given. Returns the old object and the
    /// revision of the delete.
    pub async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<Deleted> {
        check_key(key)?;
        if let Some(expected) = expected {
            check_revision("expected revision", expected)?;
        }
        dispatch!(self, b => b.delete(key, expected).await)
    }

    /// Keys starting with `prefix` and sorting after `start_after`, at most `limit` of them
    /// (`None` or `0`: all), all read at revision `at` (`None`: the current revision).
    ///
    /// To page, pass the last key of a page as `start_after` and the page's revision as `at`:
    /// every page then shows the store as it was when the first page was read.
    pub async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: Option<usize>,
        at: Option<Revision>,
    ) -> Result<ListPage> {
        self.list_with(prefix, start_after, limit, at, |listed| {
            listed.to_key_value()
        })
        .await
    }

    /// [`Self::list`], handing each key to `read` as the store holds it and keeping what
    /// `read` makes of it: for a caller that needs only some of the values (the embedded store
    /// then copies no others out of its pages).
    pub async fn list_with<T: Send + 'static>(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: Option<usize>,
        at: Option<Revision>,
        read: impl FnMut(Listed<'_>) -> T + Send + 'static,
    ) -> Result<ListPage<T>> {
        check_key(prefix)?;
        if let Some(at) = at {
            check_revision("list revision", at)?;
        }
        let query = ListQuery {
            prefix: prefix.to_owned(),
            start_after: start_after.map(str::to_owned),
            limit: limit.filter(|&limit| limit > 0),
            at,
        };
        dispatch!(self, b => b.list(query, read).await)
    }

    /// Changes to keys starting with `prefix` with revisions above `after`, in order, each with
    /// the previous value. `Expired` if `after` is older than the retained history.
    pub async fn watch(&self, prefix: &str, after: Revision) -> Result<WatchStream> {
        check_key(prefix)?;
        if after < 0 {
            return Err(Error::InvalidArgument(format!(
                "watch revision {after} is negative"
            )));
        }
        dispatch!(self, b => b.watch(prefix, after).await)
    }

    /// The revision of the latest write.
    pub async fn current_revision(&self) -> Result<Revision> {
        dispatch!(self, b => b.current_revision().await)
    }

    /// Forgets history before `revision`: reads below it and watches starting before it answer
    /// `Expired` from now on.
    pub async fn compact(&self, revision: Revision) -> Result<()> {
        check_revision("compaction revision", revision)?;
        dispatch!(self, b => b.compact(revision).await)
    }

    /// Campaigns for the leadership named by `key` as `candidate` (a unique identity) and
    /// returns once this candidate leads; see [`Leadership`]. On etcd the key holds the
    /// leader's identity on a lease of `ttl` (at least [`crate::MIN_LEASE_TTL`]); the
    /// embedded store's single process always leads.
    pub async fn campaign(&self, key: &str, candidate: &str, ttl: Duration) -> Result<Leadership> {
        check_key(key)?;
        match &self.0 {
            Backend::Etcd(b) => b.campaign(key, candidate, ttl).await,
            Backend::Embedded(_) => Ok(Leadership::always()),
        }
    }

    /// Finishes pending writes and stops the backend's background work. The embedded store's file
    /// is released once every clone and watch of this store is dropped too.
    pub async fn close(self) {
        if let Backend::Embedded(store) = self.0 {
            store.close().await;
        }
    }
}

fn check_key(key: &str) -> Result<()> {
    if key.starts_with('/') {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "key {key:?} must start with '/'"
        )))
    }
}

fn check_revision(what: &str, revision: Revision) -> Result<()> {
    if revision >= 1 {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "{what} {revision} must be at least 1"
        )))
    }
}
