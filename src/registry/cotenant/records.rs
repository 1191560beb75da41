//! The CRDs whose kinds this server serves, recorded in its store. kube's finalizer on a CRD
//! holds it until its objects are deleted; ours cannot (kube's finalizer controller sees only
//! kube's storage and lets the CRD go at once), so a CRD deleted while no replica of this
//! server watched would leave its objects here for good, and a CRD of the same name created
//! later would serve them again. With a record, the kind is retired from it when the CRD is
//! found gone, and its objects are deleted ([`super::cleanup`]).

use capmox_storage::{Error as StorageError, Store};
use serde_json::{Value, json};

use super::CoTenantKind;

/// Where the records live, beside (not below) the kinds' objects.
const PREFIX: &str = "/capmox-cotenant-crds/";

/// The records of one store.
#[derive(Clone)]
pub struct CrdRecords {
    store: Store,
}

impl CrdRecords {
    pub fn new(store: Store) -> Self {
        Self { store }
    }

    /// Every recorded CRD (its name and `spec`), as a CRD reads; one that cannot be decoded
    /// is skipped.
    pub async fn load(&self) -> Result<Vec<Value>, StorageError> {
        let page = self.store.list(PREFIX, None, None, None).await?;
        Ok(page
            .items
            .iter()
            .filter_map(|kv| serde_json::from_slice(&kv.value).ok())
            .collect())
    }

    /// Records `kind`'s CRD, unless its record says the same already. Another replica
    /// writing it meanwhile is as good.
    pub async fn keep(&self, kind: &CoTenantKind) -> Result<(), StorageError> {
        let key = key(&kind.crd);
        let record = json!({"metadata": {"name": kind.crd}, "spec": *kind.spec});
        let value =
            serde_json::to_vec(&record).map_err(|e| StorageError::Internal(e.to_string()))?;
        let written = match self.store.get(&key).await {
            Ok(current) if current.value == value => return Ok(()),
            Ok(current) => self.store.update(&key, value, current.revision).await,
            Err(StorageError::NotFound { .. }) => self.store.create(&key, value).await,
            Err(e) => return Err(e),
        };
        match written {
            Ok(_) | Err(StorageError::Conflict { .. } | StorageError::AlreadyExists { .. }) => {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Drops the record of CRD `crd`, if there is one.
    pub async fn drop(&self, crd: &str) -> Result<(), StorageError> {
        match self.store.delete(&key(crd), None).await {
            Ok(_) | Err(StorageError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

fn key(crd: &str) -> String {
    format!("{PREFIX}{crd}")
}
