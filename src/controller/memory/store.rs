//! [`MemoryInfraStore`]: ProxmoxMachines and ProxmoxClusters in memory.

use std::collections::BTreeMap;
use std::sync::MutexGuard;

use serde_json::Value;

use super::table::{Part, TableError};
use super::{Backend, Faults, State};
use crate::api::object::{ApiObject, to_value};
use crate::controller::seams::{InfraStore, StoreError};

/// An [`InfraStore`] in memory. Clones share the same objects.
#[derive(Clone)]
pub struct MemoryInfraStore {
    backend: Backend<()>,
}

impl Default for MemoryInfraStore {
    fn default() -> Self {
        Self::new()
    }
}

fn name_of<T: ApiObject>(object: &T) -> String {
    format!(
        "{} {}/{}",
        T::KIND.as_str(),
        object.metadata().namespace.as_deref().unwrap_or_default(),
        object.metadata().name.as_deref().unwrap_or_default()
    )
}

fn decode<T: ApiObject>(value: Value) -> Result<T, StoreError> {
    serde_json::from_value(value).map_err(|e| StoreError::Unavailable(format!("decode: {e}")))
}

fn store_error(e: TableError, what: String) -> StoreError {
    match e {
        TableError::NotFound => StoreError::NotFound(what),
        TableError::Conflict => StoreError::Conflict(what),
        TableError::AlreadyExists => StoreError::Invalid(format!("{what} already exists")),
        TableError::Invalid(m) => StoreError::Invalid(m),
    }
}

impl MemoryInfraStore {
    /// An empty store without faults.
    pub fn new() -> Self {
        Self {
            backend: Backend::new(7, ()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<()>> {
        self.backend.lock()
    }

    /// Replaces the failure injection (seeded for reproducibility).
    pub fn set_faults(&self, faults: Faults, seed: u64) {
        self.backend.set_faults(faults, seed);
    }

    /// Creates an object as a client would (uid, resourceVersion, generation).
    pub fn create<T: ApiObject>(&self, object: &T) -> Result<T, StoreError> {
        let what = name_of(object);
        let value = self
            .lock()
            .table
            .create(T::KIND.as_str(), to_value(object))
            .map_err(|e| store_error(e, what))?;
        decode(value)
    }

    /// Deletes an object as a client would (deletion timestamp while finalizers remain).
    pub fn delete<T: ApiObject>(&self, namespace: &str, name: &str) -> bool {
        self.lock().table.delete(T::KIND.as_str(), namespace, name)
    }

    /// Every object of a kind, in all namespaces.
    pub fn all<T: ApiObject>(&self) -> Vec<T> {
        self.lock()
            .table
            .list(T::KIND.as_str(), None, &BTreeMap::new())
            .into_iter()
            .filter_map(|v| serde_json::from_value(v).ok())
            .collect()
    }

    /// One object without fault injection (for assertions).
    pub fn peek<T: ApiObject>(&self, namespace: &str, name: &str) -> Option<T> {
        let value = self
            .lock()
            .table
            .get(T::KIND.as_str(), namespace, name)
            .cloned()?;
        serde_json::from_value(value).ok()
    }

    /// Revision of the last write: changes whenever any object changes.
    pub fn revision(&self) -> u64 {
        self.lock().table.revision()
    }

    async fn before(&self, what: &str) -> Result<(), StoreError> {
        self.backend
            .before(what)
            .await
            .map_err(StoreError::Unavailable)
    }

    async fn write(
        &self,
        kind: &str,
        value: &Value,
        part: Part,
        what: String,
    ) -> Result<Option<Value>, StoreError> {
        self.before(&what).await?;
        let mut s = self.lock();
        let result = s
            .table
            .update(kind, value, part)
            .map_err(|e| store_error(e, what.clone()))?;
        drop(s);
        self.backend
            .after_write(&what)
            .map_err(StoreError::Unavailable)?;
        Ok(result)
    }
}

impl InfraStore for MemoryInfraStore {
    async fn get<T: ApiObject>(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<T>, StoreError> {
        self.before(name).await?;
        let value = self
            .lock()
            .table
            .get(T::KIND.as_str(), namespace, name)
            .cloned();
        value.map(decode).transpose()
    }

    async fn list<T: ApiObject>(
        &self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<Vec<T>, StoreError> {
        self.before(namespace).await?;
        let values = self
            .lock()
            .table
            .list(T::KIND.as_str(), Some(namespace), labels);
        values.into_iter().map(decode).collect()
    }

    async fn update<T: ApiObject>(&self, object: &T) -> Result<Option<T>, StoreError> {
        let what = name_of(object);
        self.write(T::KIND.as_str(), &to_value(object), Part::Main, what)
            .await?
            .map(decode)
            .transpose()
    }

    async fn update_status<T: ApiObject>(&self, object: &T) -> Result<T, StoreError> {
        let what = name_of(object);
        match self
            .write(
                T::KIND.as_str(),
                &to_value(object),
                Part::Status,
                what.clone(),
            )
            .await?
        {
            Some(v) => decode(v),
            None => Err(StoreError::NotFound(what)),
        }
    }
}
