//! The management cluster's admission chain around a write (`registry::admission`): mutation
//! of the request's object before the kind's own admission, validation of the admitted object
//! after it. A chain that intercepts nothing of the kind costs nothing: no conversions.

use serde_json::Value;

use crate::registry::admission::{
    AdmissionError, AdmissionKind, AdmissionOperation, Attributes, Requester,
};
use crate::registry::descriptor::GroupVersion;
use crate::registry::error::RegistryError;
use crate::registry::strategy::Strategy;

use super::{Failure, ResourceRest, Subresource};

/// The kind's strategy as the chain sees the kind.
struct StrategyKind<'a>(&'a dyn Strategy);

impl AdmissionKind for StrategyKind<'_> {
    fn convert(
        &self,
        object: &Value,
        from: GroupVersion,
        to: GroupVersion,
    ) -> Result<Value, String> {
        self.0.convert(object, from, to).map_err(|e| e.0)
    }

    fn apply_schema_defaults(&self, version: GroupVersion, object: &mut Value) {
        self.0.apply_schema_defaults(version, object);
    }

    fn merge_configuration(
        &self,
        version: GroupVersion,
        object: &Value,
        config: &Value,
    ) -> Result<Value, String> {
        self.0.merge_configuration(version, object, config)
    }
}

/// The chain's refusal as the write's failure, with every warning so far.
fn refused(error: AdmissionError, mut warnings: Vec<String>) -> Failure {
    let error = match error {
        AdmissionError::Denied {
            code,
            reason,
            message,
            details,
            warnings: more,
        } => {
            warnings.extend(more);
            RegistryError::Denied {
                code,
                reason,
                message,
                details,
            }
        }
        AdmissionError::BadRequest(message) => RegistryError::BadRequest(message),
        AdmissionError::Failed(message) => RegistryError::Internal(message),
    };
    Failure::new(error, warnings)
}

/// Who writes what, in the chain's terms (borrowed for the duration of one write).
pub(super) struct Write<'a> {
    pub version: GroupVersion,
    pub subresource: Subresource,
    pub operation: AdmissionOperation,
    pub namespace: &'a str,
    pub name: &'a str,
    pub requester: &'a Option<Requester>,
    pub dry_run: bool,
    pub field_manager: &'a str,
}

impl ResourceRest {
    fn attributes<'a>(&'a self, write: &Write<'a>, requester: &'a Requester) -> Attributes<'a> {
        Attributes {
            descriptor: self.descriptor(),
            version: write.version,
            subresource: match write.subresource {
                Subresource::Main => "",
                Subresource::Status => "status",
                Subresource::Scale => "scale",
            },
            operation: write.operation,
            namespace: write.namespace,
            name: write.name,
            requester,
            dry_run: write.dry_run,
            field_manager: write.field_manager,
        }
    }

    /// Mutating admission of `body` (in the write's version; `old` too): the object our own
    /// admission then decodes, defaults and validates.
    pub(super) async fn mutate(
        &self,
        write: &Write<'_>,
        body: Value,
        old: Option<&Value>,
        mut warnings: Vec<String>,
    ) -> Result<(Value, Vec<String>), Failure> {
        if !self.admission.intercepts(self.descriptor()) {
            return Ok((body, warnings));
        }
        // kube-apiserver decodes a custom resource with its schema defaults before admission.
        let mut body = body;
        self.strategy
            .apply_schema_defaults(write.version, &mut body);
        let server = Requester::server();
        let requester = write.requester.as_ref().unwrap_or(&server);
        let kind = StrategyKind(self.strategy.as_ref());
        match self
            .admission
            .mutate(self.attributes(write, requester), body, old, &kind)
            .await
        {
            Ok(mutated) => {
                warnings.extend(mutated.warnings);
                Ok((mutated.object, warnings))
            }
            Err(error) => Err(refused(error, warnings)),
        }
    }

    /// Validating admission of the admitted `hub` (absent on deletes) over the stored `old`
    /// hub (absent on creates); both are shown in the write's version.
    pub(super) async fn validate(
        &self,
        write: &Write<'_>,
        hub: Option<&Value>,
        old: Option<&Value>,
        mut warnings: Vec<String>,
    ) -> Result<Vec<String>, Failure> {
        if !self.admission.intercepts(self.descriptor()) {
            return Ok(warnings);
        }
        let in_version = |hub: Option<&Value>| {
            hub.map(|hub| self.encode(write.version, hub.clone(), None))
                .transpose()
        };
        let (object, old) = match (in_version(hub), in_version(old)) {
            (Ok(object), Ok(old)) => (object, old),
            (Err(error), _) | (_, Err(error)) => return Err(Failure::new(error, warnings)),
        };
        let server = Requester::server();
        let requester = write.requester.as_ref().unwrap_or(&server);
        let kind = StrategyKind(self.strategy.as_ref());
        match self
            .admission
            .validate(
                self.attributes(write, requester),
                object.as_ref(),
                old.as_ref(),
                &kind,
            )
            .await
        {
            Ok(more) => {
                warnings.extend(more);
                Ok(warnings)
            }
            Err(error) => Err(refused(error, warnings)),
        }
    }
}
