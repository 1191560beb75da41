//! [`RegistryInfraStore`]: the controller's [`InfraStore`] over the registry, in process.
//!
//! Every write takes the same path as a client's PUT (admission: decoding, defaulting,
//! validation; generation; managedFields recorded for the field manager
//! `capmox-controller` as an Update), so the controller cannot store what a user could
//! not. Objects travel as the caller's type and version (the hub, v1alpha2, for the
//! reconcilers).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::api::Kind;
use crate::api::object::{ApiObject, to_value};
use crate::controller::seams::{InfraStore, StoreError};
use crate::registry::catalog::Catalog;
use crate::registry::error::RegistryError;
use crate::registry::label_selector::LabelSelector;
use crate::registry::lifecycle::should_delete_during_update;
use crate::registry::list_options::ListOptions;
use crate::registry::request_options::{FieldValidation, WriteOptions};
use crate::registry::rest::{ResourceRest, Subresource};

/// The field manager the controller's writes are recorded for.
pub const FIELD_MANAGER: &str = "capmox-controller";

/// A kind the catalog does not serve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the registry does not serve {0}")]
pub struct MissingKind(pub &'static str);

/// The registry as the controller's store. Cheap to clone.
#[derive(Clone)]
pub struct RegistryInfraStore {
    catalog: Arc<Catalog>,
    options: Arc<WriteOptions>,
}

/// The catalog's REST operations of `kind`.
pub(super) fn resource(catalog: &Catalog, kind: Kind) -> Result<&Arc<ResourceRest>, MissingKind> {
    let d = kind.descriptor();
    catalog
        .resource(d.group, d.plural)
        .ok_or(MissingKind(d.kind))
}

impl RegistryInfraStore {
    /// The store over `catalog`; fails when it lacks a kind the controller reconciles.
    pub fn new(catalog: Arc<Catalog>) -> Result<Self, MissingKind> {
        for kind in [Kind::ProxmoxCluster, Kind::ProxmoxMachine] {
            resource(&catalog, kind)?;
        }
        Ok(Self {
            catalog,
            options: Arc::new(WriteOptions {
                // Typed objects carry no unknown fields; a warning would have no reader.
                field_validation: FieldValidation::Ignore,
                field_manager: FIELD_MANAGER.to_owned(),
                manager: FIELD_MANAGER.to_owned(),
                ..WriteOptions::default()
            }),
        })
    }

    fn rest<T: ApiObject>(&self) -> Result<&Arc<ResourceRest>, StoreError> {
        resource(&self.catalog, T::KIND).map_err(|e| StoreError::Invalid(e.to_string()))
    }

    async fn put<T: ApiObject>(
        &self,
        object: &T,
        subresource: Subresource,
    ) -> Result<Option<T>, StoreError> {
        let meta = object.metadata();
        let namespace = meta.namespace.as_deref().unwrap_or_default();
        let name = meta.name.as_deref().unwrap_or_default();
        let outcome = self
            .rest::<T>()?
            .update(
                T::VERSION.into(),
                namespace,
                name,
                to_value(object),
                &[],
                &self.options,
                subresource,
            )
            .await
            .map_err(|failure| store_error(*failure.error))?;
        // The last finalizer of a terminating object went: the registry removed it.
        if should_delete_during_update(&outcome.object) {
            return Ok(None);
        }
        decode(outcome.object).map(Some)
    }
}

fn decode<T: ApiObject>(value: Value) -> Result<T, StoreError> {
    serde_json::from_value(value)
        .map_err(|e| StoreError::Unavailable(format!("decoding a stored object: {e}")))
}

/// The registry's errors as the controller sees them.
fn store_error(error: RegistryError) -> StoreError {
    let message = error.to_string();
    match error {
        // `StoreError::NotFound` says "not found" itself.
        RegistryError::NotFound {
            group,
            resource,
            name,
        } => StoreError::NotFound(format!("{resource}.{group} {name:?}")),
        RegistryError::Conflict { .. } | RegistryError::ApplyConflict { .. } => {
            StoreError::Conflict(message)
        }
        RegistryError::Invalid { .. }
        | RegistryError::BadRequest(_)
        | RegistryError::Unprocessable(_)
        | RegistryError::TooLarge(_)
        | RegistryError::AlreadyExists { .. }
        | RegistryError::Denied { .. }
        | RegistryError::NotAcceptable(_) => StoreError::Invalid(message),
        RegistryError::Expired { .. }
        | RegistryError::TooLargeResourceVersion { .. }
        | RegistryError::Unavailable(_)
        | RegistryError::Internal(_) => StoreError::Unavailable(message),
    }
}

/// `k1=v1,k2=v2` as a parsed selector.
fn selector(labels: &BTreeMap<String, String>) -> Result<LabelSelector, StoreError> {
    let text = labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    LabelSelector::parse(&text).map_err(|e| StoreError::Invalid(e.to_string()))
}

impl InfraStore for RegistryInfraStore {
    async fn get<T: ApiObject>(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<T>, StoreError> {
        match self
            .rest::<T>()?
            .get(T::VERSION.into(), namespace, name, "")
            .await
        {
            Ok(object) => decode(object).map(Some),
            Err(RegistryError::NotFound { .. }) => Ok(None),
            Err(e) => Err(store_error(e)),
        }
    }

    async fn list<T: ApiObject>(
        &self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<Vec<T>, StoreError> {
        let options = ListOptions {
            label_selector: selector(labels)?,
            ..ListOptions::default()
        };
        let listed = self
            .rest::<T>()?
            .list(T::VERSION.into(), Some(namespace), &options)
            .await
            .map_err(store_error)?;
        listed.items.into_iter().map(decode).collect()
    }

    async fn update<T: ApiObject>(&self, object: &T) -> Result<Option<T>, StoreError> {
        self.put(object, Subresource::Main).await
    }

    async fn update_status<T: ApiObject>(&self, object: &T) -> Result<T, StoreError> {
        match self.put(object, Subresource::Status).await? {
            Some(stored) => Ok(stored),
            // A status write never removes an object; answer what it would have been.
            None => Err(StoreError::NotFound(format!(
                "{} {}/{}",
                T::KIND.as_str(),
                object.metadata().namespace.as_deref().unwrap_or_default(),
                object.metadata().name.as_deref().unwrap_or_default()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_object_is_named_once() {
        let error = store_error(RegistryError::NotFound {
            group: "infrastructure.cluster.x-k8s.io".into(),
            resource: "proxmoxmachines".into(),
            name: "m1".into(),
        });
        assert_eq!(
            error.to_string(),
            "proxmoxmachines.infrastructure.cluster.x-k8s.io \"m1\" not found"
        );
    }
}
