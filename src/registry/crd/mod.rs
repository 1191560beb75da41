//! Kinds defined by CustomResourceDefinitions, served as kube-apiserver's CRD handler serves
//! them: one [`CustomStrategy`] per CRD, built from it at run time, behind the same
//! `ResourceRest` as this server's own kinds. It drives the machinery those use — pruning,
//! defaulting, schema validation with ratcheting (`api::validation`), server-side apply
//! (`apply::FieldManager`) — on the CRD's structural schemas instead of generated ones, and
//! runs the CRD's `x-kubernetes-validations` through the [`RuleEngine`] it is given (CEL, from
//! the server).
//!
//! Used for co-tenants: kinds other providers define in the group-versions this server holds
//! (`registry::cotenant`). Their versions are versions of our group, so `api::Version` names
//! them; conversion between them is kube's `None` strategy (the `apiVersion` is rewritten) or
//! the CRD's conversion webhook ([`conversion`]).

pub mod conversion;
mod definition;
pub mod delegated;
mod embedded;
pub mod interned;
mod versions;

use std::sync::Arc;

use serde_json::Value;
use serde_json::value::RawValue;

use crate::api::Version;
use crate::api::decode::{DecodeError, check_type_fields, unknown_field};
use crate::api::defaults::schema as defaulting;
use crate::api::field::go_quote;
use crate::api::resource::relative_to_status;
use crate::api::schema::Structural;
use crate::api::schema::prune::prune_object;
use crate::api::validation::rules::RuleEngine;
use crate::api::validation::validate_structural;

use super::apply::{self, FieldManager};
use super::cotenant::CoTenantKind;
use super::descriptor::{GroupVersion, ResourceDescriptor};
use super::lifecycle::set_managed_fields;
use super::request_options::FieldValidation;
use super::strategy::{
    Admitted, FieldRequest, Operation, ReadError, Rejection, Strategy, apply_with,
    merge_with_schema, track_with, value_json,
};

use conversion::{ConversionCaller, WebhookConversion};
pub use definition::{Definition, Home};
use versions::CustomVersions;

/// The strategy of a kind defined by a CRD.
pub struct CustomStrategy {
    definition: Definition,
    storage: Version,
    rules: Arc<dyn RuleEngine>,
    /// How versions convert when the CRD names a webhook; `None` rewrites `apiVersion`.
    webhook: Option<WebhookConversion>,
}

impl CustomStrategy {
    /// The strategy of `kind`, read from its CRD's `spec`, its rules run by `rules` and its
    /// conversion webhook, if any, called through `caller`; the reason when this server cannot
    /// serve it faithfully.
    pub fn new(
        kind: &CoTenantKind,
        spec: &Value,
        rules: Arc<dyn RuleEngine>,
        caller: Arc<dyn ConversionCaller>,
    ) -> Result<Self, String> {
        let definition = definition::read(kind, spec)?;
        let storage = match definition.home {
            Home::Here(storage) => storage,
            Home::Kube(version) => {
                return Err(format!(
                    "its objects live in kube-apiserver, which serves it in {version}, and no \
                     kube-apiserver is at hand"
                ));
            }
        };
        let webhook = match spec.get("conversion") {
            Some(conversion) if definition.versions.len() > 1 => {
                WebhookConversion::from_crd(conversion, caller)?
            }
            _ => None,
        };
        for version in &definition.versions {
            check_rules(version.schema, rules.as_ref()).map_err(|e| {
                format!(
                    "its schema of {} has a rule that cannot run: {e}",
                    version.version
                )
            })?;
        }
        Ok(Self {
            definition,
            storage,
            rules,
            webhook,
        })
    }

    fn schema(&self, version: GroupVersion) -> Result<&'static Structural, ReadError> {
        version
            .api()
            .and_then(|v| self.definition.schema(v))
            .ok_or_else(|| {
                ReadError(format!(
                    "{} is not served in {}",
                    self.definition.descriptor.kind,
                    version.api_version()
                ))
            })
    }

    /// A stored object as `version` reads it, as kube documents it for CRDs: the storage
    /// version's defaults (applied on every read, never written back), then the `None`
    /// conversion to `version` (its `apiVersion`) and that version's pruning.
    fn in_version(&self, version: GroupVersion, mut stored: Value) -> Result<Value, ReadError> {
        defaulting::apply(&mut stored, self.schema(self.storage())?);
        self.converted(version, stored)
    }

    /// `object` in `version`, converted by the CRD's webhook or by kube's `None` conversion
    /// (its `apiVersion` rewritten), then what the version's schema does not declare pruned.
    fn converted(&self, version: GroupVersion, mut object: Value) -> Result<Value, ReadError> {
        let schema = self.schema(version)?;
        let desired = version.api_version();
        let current = object.get("apiVersion").and_then(Value::as_str);
        match &self.webhook {
            Some(webhook) if current != Some(desired.as_str()) => {
                object = webhook.convert(object, &desired).map_err(ReadError)?;
            }
            _ => {
                if let Value::Object(map) = &mut object {
                    map.insert("apiVersion".to_owned(), desired.into());
                }
            }
        }
        prune_object(&mut object, schema);
        Ok(object)
    }

    fn storage(&self) -> GroupVersion {
        self.storage.into()
    }
}

/// Every rule in `schema` and below, checked by `engine`.
fn check_rules(schema: &Structural, engine: &dyn RuleEngine) -> Result<(), String> {
    for rule in &schema.rules {
        engine.check(rule)?;
    }
    let below = schema.properties.values().map(|s| s as &Structural);
    let nested = [&schema.items, &schema.additional_properties]
        .into_iter()
        .flatten()
        .map(|s| s.as_ref());
    below
        .chain(nested)
        .try_for_each(|child| check_rules(child, engine))
}

fn decode_stored(stored: &[u8]) -> Result<Value, ReadError> {
    serde_json::from_slice(stored)
        .map_err(|e| ReadError(format!("the stored object cannot be decoded: {e}")))
}

fn internal(e: ReadError) -> Rejection {
    Rejection::Internal(e.0)
}

impl Strategy for CustomStrategy {
    fn descriptor(&self) -> &ResourceDescriptor {
        &self.definition.descriptor
    }

    fn admit(
        &self,
        version: GroupVersion,
        mut body: Value,
        mode: FieldValidation,
        operation: Operation<'_>,
    ) -> Result<Admitted, Rejection> {
        let descriptor = &self.definition.descriptor;
        check_type_fields(&body, &version.api_version(), descriptor.kind)
            .map_err(|e| Rejection::BadRequest(e.to_string()))?;
        let schema = self.schema(version).map_err(internal)?;
        let unknown = prune_object(&mut body, schema);
        if let Some(error) = embedded::type_field_error(&body, schema) {
            let kind = descriptor.kind;
            return Err(Rejection::BadRequest(format!(
                "{kind} in version {} cannot be handled as a {kind}: {error}",
                go_quote(version.as_str())
            )));
        }
        let mut warnings = match mode {
            FieldValidation::Strict if !unknown.is_empty() => {
                return Err(Rejection::BadRequest(
                    DecodeError::UnknownFields(unknown).to_string(),
                ));
            }
            FieldValidation::Warn => unknown.iter().map(|p| unknown_field(p)).collect(),
            FieldValidation::Strict | FieldValidation::Ignore => Vec::new(),
        };
        defaulting::apply(&mut body, schema);
        let old = match operation {
            Operation::Create => None,
            Operation::Update(old)
            | Operation::DryRunUpdate(old)
            | Operation::UpdateStatus(old) => {
                Some(self.in_version(version, old.clone()).map_err(internal)?)
            }
        };
        let status_write = matches!(operation, Operation::UpdateStatus(_));
        // After the schema's errors, kube reports the scale fields' checks, then those of
        // embedded resources.
        let mut after_schema = descriptor
            .scale(version)
            .map(|scale| scale.validate(&body, !status_write))
            .unwrap_or_default();
        after_schema.extend(embedded::validate(&body, schema));
        let mut verdict = validate_structural(
            schema,
            self.rules.as_ref(),
            &body,
            old.as_ref(),
            after_schema,
        );
        if status_write {
            relative_to_status(&mut verdict.errors);
        }
        warnings.extend(verdict.warnings);
        if !verdict.errors.is_empty() {
            return Err(Rejection::Invalid {
                errors: verdict.errors,
                warnings,
            });
        }
        let hub = if version == self.storage() {
            body
        } else {
            self.converted(self.storage(), body).map_err(internal)?
        };
        Ok(Admitted { hub, warnings })
    }

    fn unknown_fields(&self, version: GroupVersion, body: &Value) -> Vec<String> {
        let mut body = body.clone();
        self.prune_unknown(version, &mut body)
    }

    fn prune_unknown(&self, version: GroupVersion, body: &mut Value) -> Vec<String> {
        self.schema(version)
            .map(|schema| prune_object(body, schema))
            .unwrap_or_default()
    }

    fn read(&self, version: GroupVersion, stored: &[u8]) -> Result<Value, ReadError> {
        self.in_version(version, decode_stored(stored)?)
    }

    fn read_json(
        &self,
        version: GroupVersion,
        stored: &[u8],
        revision: i64,
    ) -> Result<Box<RawValue>, ReadError> {
        value_json(self.read(version, stored)?, revision)
    }

    fn encode(&self, version: GroupVersion, hub: Value) -> Result<Value, ReadError> {
        self.in_version(version, hub)
    }

    fn convert(
        &self,
        object: &Value,
        from: GroupVersion,
        to: GroupVersion,
    ) -> Result<Value, ReadError> {
        if from == to {
            return Ok(object.clone());
        }
        self.converted(to, object.clone())
    }

    fn apply_schema_defaults(&self, version: GroupVersion, object: &mut Value) {
        if let Ok(schema) = self.schema(version) {
            defaulting::apply(object, schema);
        }
    }

    fn merge_configuration(
        &self,
        version: GroupVersion,
        object: &Value,
        config: &Value,
    ) -> Result<Value, String> {
        let schema = self.schema(version).map_err(|e| e.0)?;
        merge_with_schema(schema, object, config)
    }

    fn track_update(
        &self,
        stored: Option<&Value>,
        new: &mut Value,
        request: &FieldRequest<'_>,
    ) -> Result<(), ReadError> {
        let live = stored
            .map(|s| self.encode(request.version, s.clone()))
            .transpose()?;
        if request.subresource == apply::Subresource::Scale
            && let (Some(scale), Some(live)) =
                (self.definition.descriptor.scale(request.version), &live)
        {
            // Tracked as kube's scale handler tracks it, on the replicas alone.
            let written = self.encode(request.version, new.clone())?;
            let manager = match request.manager {
                "" => apply::UNKNOWN_MANAGER,
                named => named,
            };
            let entries = scale.tracked(live, &written, manager, &request.version.api_version());
            set_managed_fields(new, entries);
            return Ok(());
        }
        let versions = CustomVersions::new(&self.definition);
        let manager = FieldManager::new(&versions);
        track_with(&manager, live, new, request, self.storage(), |new| {
            self.encode(request.version, new)
        })
    }

    fn apply(
        &self,
        stored: Option<&Value>,
        config: &Value,
        request: &FieldRequest<'_>,
        force: bool,
    ) -> Result<Value, Rejection> {
        let live = stored
            .map(|s| self.encode(request.version, s.clone()))
            .transpose()
            .map_err(internal)?;
        apply_with(
            &CustomVersions::new(&self.definition),
            live,
            config,
            request,
            force,
        )
    }
}
