//! The `scale` subresource of a kind that declares one (a CRD's `subresources.scale`): GET
//! reads the `Scale` from the object; PUT and PATCH edit that `Scale` and write its desired
//! replicas into the object through the update path, so admission, the kind's validation
//! (kube's replica checks among it), ratcheting and managedFields (entries with subresource
//! `scale`) are those of any update.

use serde_json::Value;

use crate::registry::descriptor::GroupVersion;
use crate::registry::error::RegistryError;
use crate::registry::request_options::WriteOptions;
use crate::registry::scale::{AccessorError, ScalePaths};

use super::write::Tracking;
use super::{Failure, Outcome, ResourceRest, Subresource};

impl ResourceRest {
    fn scale_paths(&self, version: GroupVersion) -> Result<&ScalePaths, RegistryError> {
        self.descriptor().scale(version).ok_or_else(|| {
            RegistryError::Internal(format!(
                "{} has no scale subresource in {}",
                self.descriptor().kind,
                version.api_version()
            ))
        })
    }

    /// GET `…/<name>/scale`.
    pub async fn get_scale(
        &self,
        version: GroupVersion,
        namespace: &str,
        name: &str,
    ) -> Result<Value, RegistryError> {
        let paths = self.scale_paths(version)?;
        let object = self.get(version, namespace, name, "").await?;
        let (scale, found) = paths.scale_of(&object).map_err(accessor)?;
        if !found {
            return Err(RegistryError::Internal(format!(
                "the spec replicas field {:?} does not exist",
                paths.spec_replicas
            )));
        }
        Ok(scale)
    }

    /// PUT or PATCH of `…/<name>/scale`: `edit` turns the current `Scale` into the one to
    /// write; a `resourceVersion` in it is a precondition. Answers with the written `Scale`.
    pub async fn write_scale(
        &self,
        version: GroupVersion,
        namespace: &str,
        name: &str,
        options: &WriteOptions,
        edit: impl Fn(Value) -> Result<Value, Failure>,
    ) -> Result<Outcome, Failure> {
        let paths = self.scale_paths(version)?;
        let outcome = self
            .write_existing(
                version,
                namespace,
                name,
                options,
                Subresource::Scale,
                Tracking::Update,
                Vec::new(),
                |current| {
                    let mut object = self.read_in(version, &current.stored)?;
                    let before = paths.scale_before_update(&object).map_err(accessor)?;
                    let scale = edit(before)?;
                    paths
                        .apply_scale(&mut object, &scale)
                        .map_err(RegistryError::BadRequest)?;
                    let precondition = object
                        .pointer("/metadata/resourceVersion")
                        .and_then(Value::as_str);
                    if precondition != Some(current.stored.revision.to_string().as_str()) {
                        return Err(self.conflict_modified(name).into());
                    }
                    Ok(object)
                },
            )
            .await?;
        let (scale, _) = paths
            .scale_of(&outcome.object)
            .map_err(|AccessorError(e)| {
                Failure::new(RegistryError::BadRequest(e), outcome.warnings.clone())
            })?;
        Ok(Outcome {
            object: scale,
            warnings: outcome.warnings,
        })
    }
}

/// A field the `Scale` is read from has the wrong type: kube answers its accessor error as an
/// internal one.
fn accessor(AccessorError(e): AccessorError) -> RegistryError {
    RegistryError::Internal(e)
}
