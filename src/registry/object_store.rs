//! One kind's objects in the revisioned store: kube-apiserver's key layout
//! (`/<group>/<plural>/<namespace>/<name>` below the store's prefix; cluster-scoped kinds
//! `/<group>/<plural>/<name>`, the core group `/<plural>/…`), JSON values without a
//! `resourceVersion` (the revision is the resourceVersion and is set on read), storage errors
//! mapped to registry errors (`rest/` maps only an expired list or watch start itself), and
//! every call timed for the metrics through [`StorageObserver`] (the server's `Metrics`
//! implements it).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use capmox_storage::{
    Deleted, Error as StorageError, KeyValue, ListPage, Listed, Revision, Store, WatchStream,
};
use serde_json::Value;

use super::error::RegistryError;

/// Receives the latency of every storage call (the server's metrics implement it).
pub trait StorageObserver: Send + Sync {
    fn observe(&self, operation: &str, resource: &str, elapsed: Duration);
}

/// An observer that records nothing.
pub struct NoObserver;

impl StorageObserver for NoObserver {
    fn observe(&self, _: &str, _: &str, _: Duration) {}
}

/// A stored object: its key, JSON bytes and the revision that last wrote it.
pub type Stored = KeyValue;

/// Why a compare-and-swap write did not happen.
#[derive(Debug)]
pub enum WriteConflict {
    /// The key is gone.
    NotFound,
    /// `create` of an existing key.
    AlreadyExists,
    /// The revision moved on; the current value when the store returned it.
    Modified(Option<Box<Stored>>),
    /// Anything else.
    Failed(RegistryError),
}

/// One kind's slice of the store.
#[derive(Clone)]
pub struct ObjectStore {
    store: Store,
    /// `/<group>/<plural>/`
    prefix: String,
    resource: &'static str,
    observer: Arc<dyn StorageObserver>,
}

/// Whether a `/`-free, non-empty segment (names and namespaces are validated before they
/// reach a key, but keys must never be ambiguous whatever arrives).
fn segment_ok(segment: &str) -> bool {
    !segment.is_empty() && !segment.contains('/') && segment != "." && segment != ".."
}

impl ObjectStore {
    pub fn new(
        store: Store,
        group: &str,
        resource: &'static str,
        observer: Arc<dyn StorageObserver>,
    ) -> Self {
        // kube's layout: core kinds (group "") directly below the prefix.
        let prefix = if group.is_empty() {
            format!("/{resource}/")
        } else {
            format!("/{group}/{resource}/")
        };
        Self {
            store,
            prefix,
            resource,
            observer,
        }
    }

    /// The store underneath (for readiness checks).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The key of an object; `None` for names that cannot be keys (they also fail validation).
    /// Cluster-scoped objects (`namespace` "") are keyed by name alone, as kube keys them.
    pub fn key(&self, namespace: &str, name: &str) -> Option<String> {
        if namespace.is_empty() {
            return segment_ok(name).then(|| format!("{}{name}", self.prefix));
        }
        (segment_ok(namespace) && segment_ok(name))
            .then(|| format!("{}{namespace}/{name}", self.prefix))
    }

    /// The prefix of a namespace's objects, or of all objects.
    pub fn list_prefix(&self, namespace: Option<&str>) -> Option<String> {
        match namespace {
            None => Some(self.prefix.clone()),
            Some(ns) if segment_ok(ns) => Some(format!("{}{ns}/", self.prefix)),
            Some(_) => None,
        }
    }

    fn timed(&self, operation: &'static str) -> Timer<'_> {
        Timer {
            observer: &*self.observer,
            operation,
            resource: self.resource,
            started: Instant::now(),
        }
    }

    /// The current object, `None` if absent.
    pub async fn get(&self, key: &str) -> Result<Option<Stored>, RegistryError> {
        let _t = self.timed("get");
        match self.store.get(key).await {
            Ok(kv) => Ok(Some(kv)),
            Err(StorageError::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.error(e).await),
        }
    }

    /// Creates an object from its JSON (any `metadata.resourceVersion` is dropped).
    pub async fn create(&self, key: &str, object: &Value) -> Result<Revision, WriteConflict> {
        let bytes = encode_bounded(key, object).map_err(WriteConflict::Failed)?;
        let _t = self.timed("create");
        match self.store.create(key, bytes).await {
            Ok(rev) => Ok(rev),
            Err(StorageError::AlreadyExists { .. }) => Err(WriteConflict::AlreadyExists),
            Err(e) => Err(WriteConflict::Failed(self.error(e).await)),
        }
    }

    /// Replaces an object if it is still at `expected`.
    pub async fn update(
        &self,
        key: &str,
        object: &Value,
        expected: Revision,
    ) -> Result<Revision, WriteConflict> {
        let bytes = encode_bounded(key, object).map_err(WriteConflict::Failed)?;
        let _t = self.timed("update");
        match self.store.update(key, bytes, expected).await {
            Ok(rev) => Ok(rev),
            Err(e) => Err(self.conflict(e).await),
        }
    }

    /// Deletes an object if it is still at `expected`.
    pub async fn delete(&self, key: &str, expected: Revision) -> Result<Deleted, WriteConflict> {
        let _t = self.timed("delete");
        match self.store.delete(key, Some(expected)).await {
            Ok(deleted) => Ok(deleted),
            Err(e) => Err(self.conflict(e).await),
        }
    }

    async fn conflict(&self, e: StorageError) -> WriteConflict {
        match e {
            StorageError::NotFound { .. } => WriteConflict::NotFound,
            StorageError::AlreadyExists { .. } => WriteConflict::AlreadyExists,
            StorageError::Conflict { current, .. } => WriteConflict::Modified(current),
            other => WriteConflict::Failed(self.error(other).await),
        }
    }

    /// One page of keys under `prefix` after `start_after`, read at `at`: what `read` makes of
    /// each stored object (`Store::list_with`).
    pub async fn list_with<T: Send + 'static>(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: Option<usize>,
        at: Option<Revision>,
        read: impl FnMut(Listed<'_>) -> T + Send + 'static,
    ) -> Result<ListPage<T>, StorageError> {
        let _t = self.timed("list");
        self.store
            .list_with(prefix, start_after, limit, at, read)
            .await
    }

    /// Changes under `prefix` after `after`.
    pub async fn watch(&self, prefix: &str, after: Revision) -> Result<WatchStream, StorageError> {
        let _t = self.timed("watch");
        self.store.watch(prefix, after).await
    }

    /// The store's latest revision.
    pub async fn current_revision(&self) -> Result<Revision, RegistryError> {
        let _t = self.timed("current_revision");
        match self.store.current_revision().await {
            Ok(rev) => Ok(rev),
            Err(e) => Err(map_error(e, None)),
        }
    }

    /// Maps a storage error that has no resource-specific meaning.
    pub async fn error(&self, e: StorageError) -> RegistryError {
        let current = match &e {
            StorageError::FutureRevision { .. } => self.store.current_revision().await.ok(),
            _ => None,
        };
        map_error(e, current)
    }
}

/// The generic mapping of storage errors (`current` is the store's revision for the
/// "too large resource version" answer).
pub fn map_error(e: StorageError, current: Option<Revision>) -> RegistryError {
    match e {
        StorageError::Expired { .. } => RegistryError::Expired {
            message: "The resourceVersion for the provided list is too old.".to_owned(),
            continue_token: None,
        },
        StorageError::FutureRevision { requested } => RegistryError::TooLargeResourceVersion {
            requested: u64::try_from(requested).unwrap_or(0),
            current: current.and_then(|c| u64::try_from(c).ok()).unwrap_or(0),
        },
        StorageError::Unavailable(message) => RegistryError::Unavailable(message),
        other => RegistryError::Internal(other.to_string()),
    }
}

/// The bytes stored for an object: compact JSON without `metadata.resourceVersion`.
/// The largest write etcd takes by default (`--max-request-bytes`, 1.5 MiB), counted as key
/// and value: kube-apiserver's objects are bounded by it, and so are ours on either backend.
pub const MAX_STORED_BYTES: usize = 3 << 19;

/// [`encode`], refused where etcd would refuse the write: a 413 naming the bound, as kube answers
/// etcd's refusal (docs/hardening.md), on the embedded store as on etcd.
fn encode_bounded(key: &str, object: &Value) -> Result<Bytes, RegistryError> {
    let bytes = encode(object)?;
    let size = key.len() + bytes.len();
    if size > MAX_STORED_BYTES {
        return Err(RegistryError::TooLarge(format!(
            "the object takes {size} bytes stored, over the {MAX_STORED_BYTES} etcd stores by \
             default (etcdserver: request is too large)"
        )));
    }
    Ok(bytes)
}

pub fn encode(object: &Value) -> Result<Bytes, RegistryError> {
    let bytes = if object.pointer("/metadata/resourceVersion").is_some() {
        let mut object = object.clone();
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
        }
        serde_json::to_vec(&object)
    } else {
        serde_json::to_vec(object)
    };
    bytes
        .map(Bytes::from)
        .map_err(|e| RegistryError::Internal(format!("encoding the object: {e}")))
}

/// Sets `metadata.resourceVersion` of an object read from the store.
pub fn set_resource_version(object: &mut Value, revision: Revision) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert(
            "resourceVersion".to_owned(),
            Value::String(revision.to_string()),
        );
    }
}

struct Timer<'a> {
    observer: &'a dyn StorageObserver,
    operation: &'static str,
    resource: &'static str,
    started: Instant,
}

impl Drop for Timer<'_> {
    fn drop(&mut self) {
        self.observer
            .observe(self.operation, self.resource, self.started.elapsed());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stored_bytes_carry_no_resource_version() {
        let bytes =
            encode(&json!({"metadata": {"name": "a", "resourceVersion": "5"}})).expect("encode");
        assert_eq!(&bytes[..], br#"{"metadata":{"name":"a"}}"#);
        let mut object = json!({"metadata": {"name": "a"}});
        set_resource_version(&mut object, 7);
        assert_eq!(object["metadata"]["resourceVersion"], "7");
    }
}
