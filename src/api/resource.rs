//! The per-kind surface that the generic registry drives: one marker type per
//! kind implements [`Resource`] (types, webhook defaulting and validation);
//! [`HubConversion`] adds the v1alpha1 ⇄ v1alpha2 conversion, implemented in
//! `api::conversion`. [`admit`] runs the whole write path.

use serde_json::Value;

use super::conversion::Spoke;
use super::decode::{self, DecodeError, Decoded, FieldValidation};
use super::defaults::{self, webhook as webhook_defaults};
use super::field::ErrorList;
use super::object::{ApiObject, to_value};
use super::unserved::NotServed;
use super::validation::webhook::{cluster, machine, release};
use super::validation::{self, Verdict};
use super::{Kind, KindDescriptor, Version, v1alpha1, v1alpha2};

/// One kind: its type in each version and upstream's webhook behaviour on
/// the hub (v1alpha2) type.
pub trait Resource: Send + Sync + 'static {
    /// The kind.
    const KIND: Kind;
    /// The type in v1alpha1.
    type V1alpha1: ApiObject;
    /// The type in v1alpha2, the hub and storage version.
    type Hub: ApiObject;

    /// The kind's descriptor.
    fn descriptor() -> &'static KindDescriptor {
        Self::KIND.descriptor()
    }

    /// Upstream's defaulting webhook.
    fn default_hub(hub: &mut Self::Hub);

    /// Upstream's validating webhook on create.
    fn validate_create(hub: &Self::Hub) -> Verdict;

    /// Upstream's validating webhook on update.
    fn validate_update(new: &Self::Hub, old: &Self::Hub) -> Verdict;

    /// The same on a dry run (`dryRun=All`), which some rules let through.
    fn validate_dry_run_update(new: &Self::Hub, old: &Self::Hub) -> Verdict {
        Self::validate_update(new, old)
    }
}

/// Conversion between v1alpha1 and the hub, implemented per kind in
/// `api::conversion`.
pub trait HubConversion: Resource {
    /// Converts a v1alpha1 object to the hub. `stored` is the object as
    /// stored before this write, if any, so that hub-only fields survive a
    /// round trip through v1alpha1.
    fn to_hub(
        spoke: Self::V1alpha1,
        stored: Option<&Self::Hub>,
    ) -> Result<Self::Hub, ConversionError>;

    /// Converts a hub object to v1alpha1.
    fn from_hub(hub: &Self::Hub) -> Result<Self::V1alpha1, ConversionError>;
}

pub use super::conversion::ConversionError;

/// Every kind whose v1alpha1 type converts to its hub type.
impl<R: Resource> HubConversion for R
where
    R::V1alpha1: Spoke<Hub = R::Hub>,
{
    fn to_hub(
        spoke: Self::V1alpha1,
        stored: Option<&Self::Hub>,
    ) -> Result<Self::Hub, ConversionError> {
        spoke.to_hub(stored)
    }

    fn from_hub(hub: &Self::Hub) -> Result<Self::V1alpha1, ConversionError> {
        Self::V1alpha1::from_hub(hub)
    }
}

/// An object of kind `R` in one of the served versions.
pub enum Versioned<R: Resource> {
    /// In v1alpha1.
    V1alpha1(R::V1alpha1),
    /// In v1alpha2 (the hub).
    V1alpha2(R::Hub),
}

impl<R: Resource> Clone for Versioned<R> {
    fn clone(&self) -> Self {
        match self {
            Versioned::V1alpha1(o) => Versioned::V1alpha1(o.clone()),
            Versioned::V1alpha2(o) => Versioned::V1alpha2(o.clone()),
        }
    }
}

impl<R: Resource> std::fmt::Debug for Versioned<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Versioned::V1alpha1(o) => f.debug_tuple("V1alpha1").field(o).finish(),
            Versioned::V1alpha2(o) => f.debug_tuple("V1alpha2").field(o).finish(),
        }
    }
}

impl<R: Resource> PartialEq for Versioned<R> {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Versioned::V1alpha1(a), Versioned::V1alpha1(b)) => a == b,
            (Versioned::V1alpha2(a), Versioned::V1alpha2(b)) => a == b,
            _ => false,
        }
    }
}

impl<R: Resource> Versioned<R> {
    /// The version the object is in.
    pub fn version(&self) -> Version {
        match self {
            Versioned::V1alpha1(_) => Version::V1alpha1,
            Versioned::V1alpha2(_) => Version::V1alpha2,
        }
    }

    /// The object as JSON, with `apiVersion` and `kind` set.
    pub fn to_value(&self) -> Value {
        match self {
            Versioned::V1alpha1(o) => to_value(o),
            Versioned::V1alpha2(o) => to_value(o),
        }
    }
}

/// Decodes a request body of kind `R` in `version` (see [`decode::decode`]).
pub fn decode<R: Resource>(
    version: Version,
    body: Value,
    mode: FieldValidation,
) -> Result<Decoded<Versioned<R>>, DecodeError> {
    fn wrap<T, R: Resource>(
        d: Decoded<T>,
        f: impl FnOnce(T) -> Versioned<R>,
    ) -> Decoded<Versioned<R>> {
        Decoded {
            object: f(d.object),
            value: d.value,
            warnings: d.warnings,
        }
    }
    Ok(match version {
        Version::V1alpha1 => wrap(
            decode::decode::<R::V1alpha1>(body, mode)?,
            Versioned::V1alpha1,
        ),
        Version::V1alpha2 => wrap(decode::decode::<R::Hub>(body, mode)?, Versioned::V1alpha2),
    })
}

/// Converts an object to the hub.
pub fn to_hub<R: HubConversion>(
    object: Versioned<R>,
    stored: Option<&R::Hub>,
) -> Result<R::Hub, ConversionError> {
    match object {
        Versioned::V1alpha1(spoke) => R::to_hub(spoke, stored),
        Versioned::V1alpha2(hub) => Ok(hub),
    }
}

/// The hub object with v1alpha2's schema defaults applied. kube-apiserver applies the storage
/// version's defaults whenever it reads a CRD object from etcd, so a field a v1alpha1 write
/// cannot set (`externalManagedControlPlane`) reads as its v1alpha2 default; applied here, once,
/// the stored object is what those reads show, and a later v1alpha2 write of it changes nothing.
fn with_storage_defaults<R: HubConversion>(hub: R::Hub) -> R::Hub {
    let mut value = to_value(&hub);
    defaults::schema::apply(
        &mut value,
        super::schema::structural(Version::V1alpha2, R::KIND),
    );
    // The defaults are values of the schema's own types, so the typed form holds them.
    serde_json::from_value(value).unwrap_or(hub)
}

/// Converts a hub object to `version`.
pub fn from_hub<R: HubConversion>(
    version: Version,
    hub: &R::Hub,
) -> Result<Versioned<R>, ConversionError> {
    Ok(match version {
        Version::V1alpha1 => Versioned::V1alpha1(R::from_hub(hub)?),
        Version::V1alpha2 => Versioned::V1alpha2(hub.clone()),
    })
}

/// A hub object as the JSON of `version` (what a client of that version
/// reads).
pub fn encode<R: HubConversion>(version: Version, hub: &R::Hub) -> Result<Value, ConversionError> {
    Ok(from_hub::<R>(version, hub)?.to_value())
}

/// The stored object as the schema validation of `version` compares the new
/// one with: converted to `version` and given that version's schema
/// defaults, as kube-apiserver decodes a stored custom resource for an
/// update. Both sides normalized alike, an unchanged value compares equal.
fn stored_in<R: HubConversion>(
    version: Version,
    stored: &R::Hub,
) -> Result<Value, ConversionError> {
    let mut value = encode::<R>(version, stored)?;
    defaults::apply(version, R::KIND, &mut value);
    Ok(value)
}

/// Which write is admitted.
#[derive(Clone, Copy, Debug)]
pub enum Operation<'a, H> {
    /// A new object.
    Create,
    /// An update of the main resource; holds the stored object.
    Update(&'a H),
    /// The same, not persisted (`dryRun=All`).
    DryRunUpdate(&'a H),
    /// An update through the `status` subresource; holds the stored object.
    /// Upstream's webhooks do not intercept status writes.
    UpdateStatus(&'a H),
}

/// An admitted write: the hub object to store and the client's warnings.
#[derive(Clone, Debug, PartialEq)]
pub struct Admitted<H> {
    /// The object to store.
    pub hub: H,
    /// Warnings for the client.
    pub warnings: Vec<String>,
}

/// Why a write is refused.
#[derive(Debug, thiserror::Error)]
pub enum AdmitError {
    /// The body cannot be decoded (400, or 422 for type errors).
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// Conversion failed (400: the request's value cannot be expressed in the hub).
    #[error(transparent)]
    Conversion(#[from] ConversionError),
    /// The object is invalid (422 with one cause per error).
    #[error("{}", super::field::aggregate(.errors))]
    Invalid {
        /// The field errors.
        errors: ErrorList,
        /// Warnings for the client (sent with the error).
        warnings: Vec<String>,
    },
}

/// The write path: decode in the request version (unknown fields, schema
/// defaults) → convert to the hub → upstream's defaulting webhook → schema
/// validation in the request version (OpenAPI rules, list types, CEL rules;
/// on updates, transition rules and ratcheting against the stored object in
/// that version) → upstream's validating webhook on the hub, when the schema
/// validation passed.
pub fn admit<R: HubConversion>(
    version: Version,
    body: Value,
    mode: FieldValidation,
    operation: Operation<'_, R::Hub>,
) -> Result<Admitted<R::Hub>, AdmitError> {
    let stored = match operation {
        Operation::Create => None,
        Operation::Update(old) | Operation::DryRunUpdate(old) | Operation::UpdateStatus(old) => {
            Some(old)
        }
    };
    let decoded = decode::<R>(version, body, mode)?;
    let mut warnings = decoded.warnings;
    let old_value = stored.map(|old| stored_in::<R>(version, old)).transpose()?;
    let mut schema_verdict =
        validation::validate_schema(version, R::KIND, &decoded.value, old_value.as_ref());
    if matches!(operation, Operation::UpdateStatus(_)) {
        relative_to_status(&mut schema_verdict.errors);
    }
    let mut hub = match to_hub::<R>(decoded.object, stored) {
        Ok(hub) => hub,
        // kube-apiserver validates the request version's schema before it converts, so a
        // value the schema refuses (an out-of-range prefix) is a 422 with its field, not
        // the conversion's 400.
        Err(_) if !schema_verdict.errors.is_empty() => {
            warnings.extend(schema_verdict.warnings);
            let errors = schema_verdict.errors;
            return Err(AdmitError::Invalid { errors, warnings });
        }
        Err(conversion) => return Err(conversion.into()),
    };
    if version != Version::V1alpha2 {
        hub = with_storage_defaults::<R>(hub);
    }
    R::default_hub(&mut hub);
    let mut errors = schema_verdict.errors;
    warnings.extend(schema_verdict.warnings);
    if errors.is_empty() {
        let verdict = match operation {
            Operation::Create => R::validate_create(&hub),
            Operation::Update(old) => R::validate_update(&hub, old),
            Operation::DryRunUpdate(old) => R::validate_dry_run_update(&hub, old),
            Operation::UpdateStatus(_) => Verdict::default(),
        };
        errors = verdict.errors;
        warnings.extend(verdict.warnings);
    }
    if errors.is_empty() {
        Ok(Admitted { hub, warnings })
    } else {
        Err(AdmitError::Invalid { errors, warnings })
    }
}

/// kube-apiserver validates a status-subresource write on the `status` value alone and prefixes
/// only the causes' fields with `status`: the schema's messages name the path from there
/// (`conditions[0].message in body should be at least 1 chars long`; ` in body must be of type
/// object` for `status` itself).
pub fn relative_to_status(errors: &mut ErrorList) {
    for error in errors {
        let field = error.field.as_str();
        let relative = match field.strip_prefix("status") {
            Some("") => "",
            Some(rest) => match rest.strip_prefix('.') {
                Some(relative) => relative,
                None => continue,
            },
            None => continue,
        };
        if let Some(rest) = error.detail.strip_prefix(field)
            && rest.starts_with(" in body ")
        {
            error.detail = format!("{relative}{rest}");
        }
    }
}

/// ProxmoxCluster.
pub struct ClusterKind;
/// ProxmoxClusterTemplate.
pub struct ClusterTemplateKind;
/// ProxmoxKubernetesRelease (v1alpha2 only).
pub struct KubernetesReleaseKind;
/// ProxmoxMachine.
pub struct MachineKind;
/// ProxmoxMachineTemplate.
pub struct MachineTemplateKind;

impl Resource for ClusterKind {
    const KIND: Kind = Kind::ProxmoxCluster;
    type V1alpha1 = v1alpha1::ProxmoxCluster;
    type Hub = v1alpha2::ProxmoxCluster;

    fn default_hub(_: &mut Self::Hub) {}

    fn validate_create(hub: &Self::Hub) -> Verdict {
        cluster::validate_cluster_create(hub)
    }

    fn validate_update(new: &Self::Hub, old: &Self::Hub) -> Verdict {
        cluster::validate_cluster_update(new, old)
    }
}

impl Resource for ClusterTemplateKind {
    const KIND: Kind = Kind::ProxmoxClusterTemplate;
    type V1alpha1 = v1alpha1::ProxmoxClusterTemplate;
    type Hub = v1alpha2::ProxmoxClusterTemplate;

    fn default_hub(_: &mut Self::Hub) {}

    fn validate_create(hub: &Self::Hub) -> Verdict {
        cluster::validate_cluster_template_create(hub)
    }

    fn validate_update(new: &Self::Hub, old: &Self::Hub) -> Verdict {
        cluster::validate_cluster_template_update(new, old)
    }
}

impl Resource for KubernetesReleaseKind {
    const KIND: Kind = Kind::ProxmoxKubernetesRelease;
    type V1alpha1 = NotServed<v1alpha2::ProxmoxKubernetesRelease>;
    type Hub = v1alpha2::ProxmoxKubernetesRelease;

    fn default_hub(_: &mut Self::Hub) {}

    fn validate_create(hub: &Self::Hub) -> Verdict {
        release::validate_release_create(hub)
    }

    fn validate_update(new: &Self::Hub, old: &Self::Hub) -> Verdict {
        release::validate_release_update(new, old)
    }
}

impl Resource for MachineKind {
    const KIND: Kind = Kind::ProxmoxMachine;
    type V1alpha1 = v1alpha1::ProxmoxMachine;
    type Hub = v1alpha2::ProxmoxMachine;

    fn default_hub(hub: &mut Self::Hub) {
        webhook_defaults::default_proxmox_machine(hub);
    }

    fn validate_create(hub: &Self::Hub) -> Verdict {
        machine::validate_machine_create(hub)
    }

    fn validate_update(new: &Self::Hub, old: &Self::Hub) -> Verdict {
        machine::validate_machine_update(new, old)
    }
}

impl Resource for MachineTemplateKind {
    const KIND: Kind = Kind::ProxmoxMachineTemplate;
    type V1alpha1 = v1alpha1::ProxmoxMachineTemplate;
    type Hub = v1alpha2::ProxmoxMachineTemplate;

    fn default_hub(_: &mut Self::Hub) {}

    fn validate_create(hub: &Self::Hub) -> Verdict {
        machine::validate_machine_template_create(hub)
    }

    fn validate_update(new: &Self::Hub, old: &Self::Hub) -> Verdict {
        machine::validate_machine_template_update(new, old)
    }

    fn validate_dry_run_update(new: &Self::Hub, old: &Self::Hub) -> Verdict {
        machine::validate_machine_template_dry_run(new, old)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::api::field::{Error, Path};

    #[test]
    fn status_causes_name_their_path_from_status() {
        let status = Path::root().child("status");
        let mut errors = vec![
            Error::invalid(
                status.clone(),
                Value::Null,
                "status in body must be of type object",
            ),
            Error::invalid(
                status.child("ready"),
                Value::Null,
                "status.ready in body must be of type boolean",
            ),
            Error::invalid(status.child("x"), Value::Null, "a rule's message"),
        ];
        relative_to_status(&mut errors);
        let details: Vec<&str> = errors.iter().map(|e| e.detail.as_str()).collect();
        assert_eq!(
            details,
            [
                " in body must be of type object",
                "ready in body must be of type boolean",
                "a rule's message"
            ]
        );
    }
}
