//! A [`Strategy`] for kinds without a schema, as kube-apiserver serves a CRD whose schema is
//! `x-kubernetes-preserve-unknown-fields: true`: any fields are kept, `apiVersion` and `kind`
//! must be the request's, metadata is validated by the registry as for every kind, and one
//! version is both served and stored (no conversion). A kind may add its own rules
//! ([`ObjectRules`]: normalization and field errors, e.g. the Secret stand-in's `stringData`).
//!
//! `dev` serves the management-cluster stand-ins through it (`management::standins`). There
//! is no field manager (no `managedFields` are recorded, server-side apply is refused with a
//! 415 before it reaches the registry) and no pruning. It lives here, not beside the
//! stand-ins, because it is generic registry behaviour with no kind knowledge; the kinds
//! that use it are listed in `management::standins`.

use std::sync::Arc;

use serde_json::Value;
use serde_json::value::RawValue;

use crate::api::decode::check_type_fields;
use crate::api::field::ErrorList;

use super::descriptor::{GroupVersion, ResourceDescriptor};
use super::request_options::FieldValidation;
use super::strategy::{
    Admitted, FieldRequest, Operation, PatchSupport, ProtobufDecoder, ReadError, Rejection,
    Strategy,
};

/// Kind-specific rules of a schemaless kind, run on every admitted write.
pub trait ObjectRules: Send + Sync {
    /// Normalizes `object` (defaults, derived fields) and returns its field errors;
    /// `old` is the stored object on updates.
    fn admit(&self, object: &mut Value, old: Option<&Value>) -> ErrorList;
}

/// A schemaless kind served in one version.
pub struct SchemalessStrategy {
    descriptor: ResourceDescriptor,
    patches: PatchSupport,
    rules: Option<Arc<dyn ObjectRules>>,
    protobuf: Option<ProtobufDecoder>,
}

impl SchemalessStrategy {
    /// Serves `descriptor` (its one version is the storage version), with JSON and merge
    /// patches only.
    pub fn new(descriptor: ResourceDescriptor) -> Self {
        Self {
            descriptor,
            patches: PatchSupport {
                apply: false,
                strategic_as_merge: false,
            },
            rules: None,
            protobuf: None,
        }
    }

    /// Also reads protobuf request bodies with `decoder`.
    pub fn with_protobuf(mut self, decoder: ProtobufDecoder) -> Self {
        self.protobuf = Some(decoder);
        self
    }

    /// Also accepts strategic merge patches, applied as merge patches.
    pub fn with_strategic_merge_as_merge(mut self) -> Self {
        self.patches.strategic_as_merge = true;
        self
    }

    /// Runs `rules` on every write.
    pub fn with_rules(mut self, rules: Arc<dyn ObjectRules>) -> Self {
        self.rules = Some(rules);
        self
    }

    fn decode(stored: &[u8]) -> Result<Value, ReadError> {
        serde_json::from_slice(stored)
            .map_err(|e| ReadError(format!("the stored object cannot be decoded: {e}")))
    }
}

impl Strategy for SchemalessStrategy {
    fn descriptor(&self) -> &ResourceDescriptor {
        &self.descriptor
    }

    fn patch_support(&self) -> PatchSupport {
        self.patches
    }

    fn protobuf_decoder(&self) -> Option<ProtobufDecoder> {
        self.protobuf
    }

    fn admit(
        &self,
        version: GroupVersion,
        mut body: Value,
        _mode: FieldValidation,
        operation: Operation<'_>,
    ) -> Result<Admitted, Rejection> {
        check_type_fields(&body, &version.api_version(), self.descriptor.kind)
            .map_err(|e| Rejection::BadRequest(e.to_string()))?;
        let old = match operation {
            Operation::Create => None,
            Operation::Update(old)
            | Operation::DryRunUpdate(old)
            | Operation::UpdateStatus(old) => Some(old),
        };
        let errors = self
            .rules
            .as_ref()
            .map(|rules| rules.admit(&mut body, old))
            .unwrap_or_default();
        if !errors.is_empty() {
            return Err(Rejection::Invalid {
                errors,
                warnings: Vec::new(),
            });
        }
        Ok(Admitted {
            hub: body,
            warnings: Vec::new(),
        })
    }

    fn unknown_fields(&self, _: GroupVersion, _: &Value) -> Vec<String> {
        Vec::new()
    }

    fn prune_unknown(&self, _: GroupVersion, _: &mut Value) -> Vec<String> {
        Vec::new()
    }

    fn read(&self, _: GroupVersion, stored: &[u8]) -> Result<Value, ReadError> {
        Self::decode(stored)
    }

    fn convert(
        &self,
        object: &Value,
        from: GroupVersion,
        to: GroupVersion,
    ) -> Result<Value, ReadError> {
        if from == to {
            Ok(object.clone())
        } else {
            Err(ReadError(format!(
                "{} is served in one version only",
                self.descriptor.kind
            )))
        }
    }

    fn read_json(
        &self,
        version: GroupVersion,
        stored: &[u8],
        revision: i64,
    ) -> Result<Box<RawValue>, ReadError> {
        super::strategy::value_json(self.read(version, stored)?, revision)
    }

    fn encode(&self, _: GroupVersion, object: Value) -> Result<Value, ReadError> {
        Ok(object)
    }

    fn track_update(
        &self,
        _: Option<&Value>,
        _: &mut Value,
        _: &FieldRequest<'_>,
    ) -> Result<(), ReadError> {
        Ok(())
    }

    fn apply(
        &self,
        _: Option<&Value>,
        _: &Value,
        _: &FieldRequest<'_>,
        _: bool,
    ) -> Result<Value, Rejection> {
        // The server answers 415 before a request gets here (`patch_support`).
        Err(Rejection::BadRequest(
            "server-side apply is not supported for this resource".to_owned(),
        ))
    }
}
