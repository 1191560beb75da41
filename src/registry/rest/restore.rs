//! Restore: an object exported from another server of these kinds (upstream CAPMOX's CRDs)
//! written as it was, for a move in place (`capmox-apiserver migrate import`). Unlike a
//! create, the identity the cluster already refers to is kept — `uid` (owner references of
//! IP claims and pools point at it), `creationTimestamp`, `generation`, `deletionTimestamp`,
//! finalizers, owner references, labels, annotations, managed fields — and so is `status`
//! (what the controller already provisioned). Spec and status are still admitted like any
//! write in the object's version: decoded, defaulted, converted to the hub (reading
//! upstream's conversion-data annotation), validated.

use serde_json::{Map, Value};

use crate::registry::descriptor::GroupVersion;
use crate::registry::error::RegistryError;
use crate::registry::lifecycle::{edit_metadata, meta_field, meta_str, status_update};
use crate::registry::object_meta;
use crate::registry::object_store::WriteConflict;
use crate::registry::request_options::FieldValidation;
use crate::registry::strategy::Operation;

use super::{Failure, ResourceRest};

/// Metadata a restore keeps from the exported object (a create would set them afresh).
const KEPT_IDENTITY: [&str; 6] = [
    "uid",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
];

/// What a restore did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restored {
    /// Written (or, in a dry run, would be).
    Written,
    /// The same object (same uid) is already stored: nothing to do, so an import can be
    /// run again after an interruption.
    AlreadyThere,
}

impl ResourceRest {
    /// Writes `body` (in `version`) with its identity and status; refuses an object of the
    /// same name with another uid. `dry_run` admits and checks without writing.
    pub async fn restore(
        &self,
        version: GroupVersion,
        body: Value,
        dry_run: bool,
    ) -> Result<Restored, Failure> {
        let fail = |error: RegistryError| Failure::new(error, Vec::new());
        if !body.is_object() {
            return Err(fail(RegistryError::BadRequest(
                "the object to restore is not a JSON object".to_owned(),
            )));
        }
        let (namespace, name, uid) = (
            meta_str(&body, "namespace").to_owned(),
            meta_str(&body, "name").to_owned(),
            meta_str(&body, "uid").to_owned(),
        );
        if name.is_empty() || uid.is_empty() {
            return Err(fail(RegistryError::BadRequest(
                "an object to restore needs metadata.name and metadata.uid".to_owned(),
            )));
        }
        let key = self.key(&namespace, &name).map_err(fail)?;
        if let Some(stored) = self.store.get(&key).await.map_err(fail)? {
            let hub = self.read_hub(&stored).map_err(fail)?;
            return if meta_str(&hub, "uid") == uid {
                Ok(Restored::AlreadyThere)
            } else {
                Err(fail(self.already_exists(&name, false)))
            };
        }
        let identity = kept_identity(&body);
        let body = without_server_fields(body);
        let mut spec_body = body.clone();
        if let Value::Object(map) = &mut spec_body {
            map.remove("status");
        }
        let meta_errors =
            object_meta::validate_create(spec_body.get("metadata"), self.descriptor().namespaced);
        let (hub, warnings) = self.admit(
            version,
            spec_body,
            FieldValidation::Strict,
            Operation::Create,
            &name,
            meta_errors,
            Vec::new(),
        )?;
        let mut hub = if body.get("status").is_some_and(|s| !s.is_null()) {
            let (with_status, _) = self.admit(
                version,
                body,
                FieldValidation::Strict,
                Operation::UpdateStatus(&hub),
                &name,
                Vec::new(),
                warnings,
            )?;
            status_update(&hub, &with_status)
        } else {
            hub
        };
        edit_metadata(&mut hub, |meta| meta.extend(identity));
        if dry_run {
            return Ok(Restored::Written);
        }
        match self.store.create(&key, &hub).await {
            Ok(_) => Ok(Restored::Written),
            Err(WriteConflict::AlreadyExists) => Err(fail(self.already_exists(&name, false))),
            Err(conflict) => Err(fail(self.write_conflict(conflict, &name))),
        }
    }
}

/// The identity fields of the exported object, to put back after admission.
fn kept_identity(body: &Value) -> Map<String, Value> {
    KEPT_IDENTITY
        .iter()
        .filter_map(|field| {
            meta_field(body, field)
                .filter(|v| !v.is_null())
                .map(|v| ((*field).to_owned(), v.clone()))
        })
        .collect()
}

/// The object without what its old server set and admission would refuse or replace.
fn without_server_fields(mut body: Value) -> Value {
    edit_metadata(&mut body, |meta| {
        for field in KEPT_IDENTITY {
            meta.remove(field);
        }
        meta.remove("resourceVersion");
        meta.remove("selfLink");
    });
    body
}
