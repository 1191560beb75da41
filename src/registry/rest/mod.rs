//! The REST semantics of one kind over the store, as kube-apiserver's generic registry store
//! and the custom-resource strategies implement them: get, list, watch, create, update,
//! patch, delete, deletecollection, in every served version, converted through the hub.
//!
//! Nothing here knows HTTP: requests arrive as versions, names, JSON bodies and decoded
//! options; answers are JSON objects (in the request's version), warnings and
//! [`RegistryError`]s that the server maps to responses once.

mod admission;
mod apply;
mod delete;
mod read;
mod restore;
mod scale;
mod watch;
mod write;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use capmox_storage::Revision;
use serde_json::Value;

use super::admission::Admission;
use super::descriptor::{GroupVersion, ResourceDescriptor};
use super::encoded_cache::{EncodedCache, ReaderId};
use super::error::RegistryError;
use super::field_error::FieldError;
use super::object_store::{ObjectStore, Stored, set_resource_version};
use super::strategy::Strategy;
use super::table::{ColumnDefinitionError, TableConvertor};

pub use apply::Applied;
pub use delete::DeleteOutcome;
pub use read::ListResult;
pub use restore::Restored;
pub use watch::Event;
pub use write::PatchRequest;

/// Tunables of the REST layer.
#[derive(Debug, Clone)]
pub struct RestConfig {
    /// How often a watch that allows bookmarks asks the store for a progress mark.
    pub bookmark_interval: Duration,
    /// Storage conflicts an unconditional write (PATCH, DELETE, status) retries before
    /// answering 409.
    pub max_conflict_retries: usize,
    /// Bytes of encoded objects kept for LISTs, shared by every kind (see `EncodedCache`).
    pub encoded_cache_bytes: usize,
}

impl Default for RestConfig {
    fn default() -> Self {
        Self {
            bookmark_interval: Duration::from_secs(60),
            max_conflict_retries: 16,
            encoded_cache_bytes: 64 << 20, // as serve's --encoded-cache-mib
        }
    }
}

/// A successful write: the object in the request's version and warnings for the client.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub object: Value,
    pub warnings: Vec<String>,
}

/// A failed write: the error and the warnings gathered before it (sent with the error).
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub error: Box<RegistryError>,
    pub warnings: Vec<String>,
}

impl Failure {
    pub fn new(error: RegistryError, warnings: Vec<String>) -> Self {
        Self {
            error: Box::new(error),
            warnings,
        }
    }
}

impl From<RegistryError> for Failure {
    fn from(error: RegistryError) -> Self {
        Self::new(error, Vec::new())
    }
}

/// Where a write goes: the main resource, its `status`, or its `scale` (the desired
/// replicas of a CRD kind that declares one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    Main,
    Status,
    Scale,
}

/// One kind's REST operations.
pub struct ResourceRest {
    strategy: Arc<dyn Strategy>,
    store: ObjectStore,
    tables: Vec<(GroupVersion, Arc<TableConvertor>)>,
    config: RestConfig,
    encoded: Arc<EncodedCache>,
    /// This instance's entries in `encoded` (unique: see `encoded_cache::ReaderId`).
    reader: ReaderId,
    admission: Arc<dyn Admission>,
}

/// The stored hub object `value` of `key`, serialized as its slot's version reads it at its
/// slot's revision: from `encoded`, else encoded by `strategy` and kept. GETs, LISTs and
/// watches share it.
fn cached_json(
    encoded: &EncodedCache,
    strategy: &dyn Strategy,
    slot: (Revision, GroupVersion, ReaderId),
    key: &str,
    value: &[u8],
) -> Result<Arc<serde_json::value::RawValue>, RegistryError> {
    let (revision, version, _) = slot;
    encoded
        .get_or_encode(key, slot, || strategy.read_json(version, value, revision))
        .map_err(|e| RegistryError::Internal(e.to_string()))
}

impl ResourceRest {
    pub fn new(
        strategy: Arc<dyn Strategy>,
        store: ObjectStore,
        config: RestConfig,
        encoded: Arc<EncodedCache>,
        admission: Arc<dyn Admission>,
    ) -> Result<Self, ColumnDefinitionError> {
        let tables = strategy
            .descriptor()
            .versions
            .iter()
            .map(|v| {
                Ok((
                    v.version,
                    Arc::new(TableConvertor::new(&v.printer_columns)?),
                ))
            })
            .collect::<Result<_, _>>()?;
        static READERS: AtomicU64 = AtomicU64::new(0);
        Ok(Self {
            strategy,
            store,
            tables,
            config,
            encoded,
            reader: READERS.fetch_add(1, Ordering::Relaxed),
            admission,
        })
    }

    pub fn descriptor(&self) -> &ResourceDescriptor {
        self.strategy.descriptor()
    }

    /// The PATCH forms this kind accepts besides JSON and merge patches.
    pub fn patch_support(&self) -> super::strategy::PatchSupport {
        self.strategy.patch_support()
    }

    /// How this kind reads protobuf request bodies, if it does.
    pub fn protobuf_decoder(&self) -> Option<super::strategy::ProtobufDecoder> {
        self.strategy.protobuf_decoder()
    }

    pub fn serves(&self, version: GroupVersion) -> bool {
        self.descriptor().serves(version)
    }

    /// Whether `version` has the `status` subresource.
    pub fn has_status(&self, version: GroupVersion) -> bool {
        self.descriptor().has_status(version)
    }

    /// The table convertor of a served version.
    pub fn table(&self, version: GroupVersion) -> Option<&Arc<TableConvertor>> {
        self.tables
            .iter()
            .find(|(v, _)| *v == version)
            .map(|(_, t)| t)
    }

    /// The store underneath (readiness checks).
    pub fn object_store(&self) -> &ObjectStore {
        &self.store
    }

    fn group(&self) -> String {
        self.descriptor().group.to_owned()
    }

    fn resource(&self) -> String {
        self.descriptor().plural.to_owned()
    }

    fn not_found(&self, name: &str) -> RegistryError {
        RegistryError::NotFound {
            group: self.group(),
            resource: self.resource(),
            name: name.to_owned(),
        }
    }

    fn conflict(&self, name: &str, reason: &str) -> RegistryError {
        RegistryError::Conflict {
            group: self.group(),
            resource: self.resource(),
            name: name.to_owned(),
            reason: reason.to_owned(),
        }
    }

    fn conflict_modified(&self, name: &str) -> RegistryError {
        self.conflict(
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    fn invalid(&self, name: &str, errors: Vec<FieldError>) -> RegistryError {
        RegistryError::Invalid {
            group: self.group(),
            kind: self.descriptor().kind.to_owned(),
            name: name.to_owned(),
            errors,
        }
    }

    fn key(&self, namespace: &str, name: &str) -> Result<String, RegistryError> {
        self.store
            .key(namespace, name)
            .ok_or_else(|| self.not_found(name))
    }

    /// A stored object as the hub's JSON, with its resourceVersion.
    fn read_hub(&self, stored: &Stored) -> Result<Value, RegistryError> {
        let mut hub: Value = serde_json::from_slice(&stored.value).map_err(|e| {
            RegistryError::Internal(format!("the stored object cannot be decoded: {e}"))
        })?;
        set_resource_version(&mut hub, stored.revision);
        Ok(hub)
    }

    /// A stored object in `version`, with its resourceVersion.
    fn read_in(&self, version: GroupVersion, stored: &Stored) -> Result<Value, RegistryError> {
        let mut object = self
            .strategy
            .read(version, &stored.value)
            .map_err(|e| RegistryError::Internal(e.to_string()))?;
        set_resource_version(&mut object, stored.revision);
        Ok(object)
    }

    /// A hub object in `version`, with `revision` as its resourceVersion when given.
    fn encode(
        &self,
        version: GroupVersion,
        hub: Value,
        revision: Option<Revision>,
    ) -> Result<Value, RegistryError> {
        let mut object = self
            .strategy
            .encode(version, hub)
            .map_err(|e| RegistryError::Internal(e.to_string()))?;
        if let Some(revision) = revision {
            set_resource_version(&mut object, revision);
        }
        Ok(object)
    }
}
