//! The per-kind descriptor the generic REST machinery drives ("strategy" in kube-apiserver's
//! terms): what the kind is called and how it is served (from `api::KindDescriptor`), and the
//! typed work done through `api::resource` — admitting a write (decode, default, convert to
//! the hub, validate) and reading a stored hub object in a served version.
//!
//! Everything above this trait works on JSON and knows no kind, so a fifth kind is one more
//! [`KindStrategy`] in the catalog.

use std::marker::PhantomData;

use serde_json::Value;
use serde_json::value::RawValue;

use crate::api::Version;
use crate::api::decode::{DecodeError, FieldValidation as DecodeMode};
use crate::api::field::ErrorList;
use crate::api::object::ApiObject;
use crate::api::resource::{self, AdmitError, HubConversion, Operation as AdmitOperation};

use super::apply::{self, ApplyError, Conflicts, FieldManager, HubVersions};
use super::descriptor::{GroupVersion, ResourceDescriptor};
use super::request_options::FieldValidation;

/// Which write is admitted, with the stored hub object (JSON) for updates.
#[derive(Debug, Clone, Copy)]
pub enum Operation<'a> {
    Create,
    Update(&'a Value),
    /// An update of the main resource that is not persisted (`dryRun=All`).
    DryRunUpdate(&'a Value),
    UpdateStatus(&'a Value),
}

/// An admitted write: the hub object to store (JSON) and warnings for the client.
#[derive(Debug, Clone, PartialEq)]
pub struct Admitted {
    pub hub: Value,
    pub warnings: Vec<String>,
}

/// Why a write was refused by the kind's rules.
#[derive(Debug, Clone, PartialEq)]
pub enum Rejection {
    /// The body cannot be read as this kind in this version (400): wrong `apiVersion`/`kind`,
    /// not an object, unknown fields under `fieldValidation=Strict`.
    BadRequest(String),
    /// Field errors (422), with the warnings gathered so far.
    Invalid {
        errors: ErrorList,
        warnings: Vec<String>,
    },
    /// The object cannot be converted to the hub (400: the input is at fault).
    Conversion(String),
    /// Server-side apply would change fields other managers own (409).
    Conflicts(Conflicts),
    /// A server-side fault (500): an object could not be converted for a field manager.
    Internal(String),
}

/// Serializing either version's typed object through one closure.
mod erased {
    use serde::Serialize;
    use serde_json::Value;
    use serde_json::value::RawValue;

    /// A typed API object that can be written as JSON.
    pub trait Typed {
        fn to_value(&self) -> Result<Value, serde_json::Error>;
        fn to_raw_value(&self) -> Result<Box<RawValue>, serde_json::Error>;
    }

    impl<T: Serialize> Typed for T {
        fn to_value(&self) -> Result<Value, serde_json::Error> {
            serde_json::to_value(self)
        }

        fn to_raw_value(&self) -> Result<Box<RawValue>, serde_json::Error> {
            serde_json::value::to_raw_value(self)
        }
    }
}

/// The field manager's view of a write, in the registry's terms.
#[derive(Debug, Clone, Copy)]
pub struct FieldRequest<'a> {
    pub version: GroupVersion,
    pub manager: &'a str,
    pub subresource: apply::Subresource,
    pub now: jiff::Timestamp,
}

/// The PATCH forms a kind accepts besides JSON patch and merge patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PatchSupport {
    /// `application/apply-patch+yaml` (server-side apply).
    pub apply: bool,
    /// `application/strategic-merge-patch+json`, applied as a merge patch (kubectl sends it
    /// for built-in types such as Secret).
    pub strategic_as_merge: bool,
}

/// Reads a request body sent as Kubernetes protobuf into the JSON object it stands for.
pub type ProtobufDecoder = fn(&[u8]) -> Result<Value, String>;

/// A stored object could not be read in the requested version (a server-side fault).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ReadError(pub String);

/// The per-kind surface of the registry.
pub trait Strategy: Send + Sync {
    /// Names, scope, served versions, subresources and printer columns of the kind.
    fn descriptor(&self) -> &ResourceDescriptor;

    /// The PATCH forms accepted (custom resources: server-side apply, no strategic merge).
    fn patch_support(&self) -> PatchSupport {
        PatchSupport {
            apply: true,
            strategic_as_merge: false,
        }
    }

    /// How to read protobuf request bodies, for kinds typed clients send that way (none of
    /// this server's own kinds).
    fn protobuf_decoder(&self) -> Option<ProtobufDecoder> {
        None
    }

    /// The write path of `api::resource::admit` on JSON: `body` in `version` becomes the
    /// defaulted, validated hub object.
    fn admit(
        &self,
        version: GroupVersion,
        body: Value,
        mode: FieldValidation,
        operation: Operation<'_>,
    ) -> Result<Admitted, Rejection>;

    /// The fields the request version's schema does not know, in kube's order (for strict
    /// decoding messages that also name duplicate fields).
    fn unknown_fields(&self, version: GroupVersion, body: &Value) -> Vec<String>;

    /// Removes the fields the schema of `version` does not know from `body` (an apply
    /// configuration) and returns their paths, sorted.
    fn prune_unknown(&self, version: GroupVersion, body: &mut Value) -> Vec<String>;

    /// A stored hub object (its JSON bytes) as a client of `version` reads it.
    fn read(&self, version: GroupVersion, stored: &[u8]) -> Result<Value, ReadError>;

    /// The same, serialized, with `revision` as its resourceVersion: the typed object is
    /// written out directly, never built as a `Value` (large LISTs).
    fn read_json(
        &self,
        version: GroupVersion,
        stored: &[u8],
        revision: i64,
    ) -> Result<Box<RawValue>, ReadError>;

    /// A hub object (JSON) as a client of `version` reads it.
    fn encode(&self, version: GroupVersion, hub: Value) -> Result<Value, ReadError>;

    /// `object`, a request's object in `from`, as it reads in `to`, not admitted: what an
    /// admission webhook registered for another served version is sent.
    fn convert(
        &self,
        object: &Value,
        from: GroupVersion,
        to: GroupVersion,
    ) -> Result<Value, ReadError>;

    /// Applies the schema defaults of `version` to `object` as kube-apiserver applies a CRD's
    /// while decoding a request, before mutating admission sees it, and after each mutation.
    /// Without a schema, none.
    fn apply_schema_defaults(&self, _version: GroupVersion, _object: &mut Value) {}

    /// `config`, an apply configuration in `version` that a MutatingAdmissionPolicy made,
    /// merged onto `object` (in `version`) as structured merge merges it: refused, in kube's
    /// words, where it sets fields the schema does not declare or values of the wrong type,
    /// or sets an atomic list, map or struct (which would replace what it does not name).
    /// Without a schema, maps merge and lists are replaced.
    fn merge_configuration(
        &self,
        _version: GroupVersion,
        object: &Value,
        config: &Value,
    ) -> Result<Value, String> {
        let ty = apply::typed::Ty::Deduced;
        Ok(apply::typed::merge(Some(object), Some(config), ty).unwrap_or_default())
    }

    /// Records the write of `new` (a hub object about to be stored over `stored`, `None` on
    /// create) in its `metadata.managedFields`, as `FieldManager::update` does in the
    /// request's version. Managed fields the client sent must still be on `new`.
    fn track_update(
        &self,
        stored: Option<&Value>,
        new: &mut Value,
        request: &FieldRequest<'_>,
    ) -> Result<(), ReadError>;

    /// Server-side apply of `config` (in the request's version) onto `stored` (a hub object;
    /// `None` when nothing is stored): the merged object in the request's version, with
    /// `managedFields`, still to be admitted like a PUT body.
    fn apply(
        &self,
        stored: Option<&Value>,
        config: &Value,
        request: &FieldRequest<'_>,
        force: bool,
    ) -> Result<Value, Rejection>;
}

/// The strategy of a kind described by `api::resource`.
pub struct KindStrategy<R> {
    descriptor: ResourceDescriptor,
    kind: PhantomData<fn() -> R>,
}

impl<R: HubConversion> KindStrategy<R> {
    /// Serves every version the descriptor marks as served.
    pub fn new() -> Self {
        Self {
            descriptor: ResourceDescriptor::from_kind(R::descriptor()),
            kind: PhantomData,
        }
    }
}

/// The version of this server's group a request is in (the router only resolves served
/// versions, so another group here is a server fault).
fn own(version: GroupVersion) -> Result<Version, ReadError> {
    version.api().ok_or_else(|| {
        ReadError(format!(
            "{} is not a version of this kind",
            version.api_version()
        ))
    })
}

/// The field manager's request in this server's group.
fn api_request<'a>(request: &FieldRequest<'a>) -> Result<apply::Request<'a>, ReadError> {
    Ok(apply::Request {
        version: own(request.version)?,
        manager: request.manager,
        subresource: request.subresource,
        now: request.now,
    })
}

impl<R: HubConversion> Default for KindStrategy<R> {
    fn default() -> Self {
        Self::new()
    }
}

pub(super) fn decode_mode(mode: FieldValidation) -> DecodeMode {
    match mode {
        FieldValidation::Ignore => DecodeMode::Ignore,
        FieldValidation::Warn => DecodeMode::Warn,
        FieldValidation::Strict => DecodeMode::Strict,
    }
}

fn rejection(err: AdmitError) -> Rejection {
    match err {
        AdmitError::Decode(DecodeError::Invalid(errors)) => Rejection::Invalid {
            errors,
            warnings: Vec::new(),
        },
        AdmitError::Decode(other) => Rejection::BadRequest(other.to_string()),
        AdmitError::Conversion(e) => Rejection::Conversion(e.to_string()),
        AdmitError::Invalid { errors, warnings } => Rejection::Invalid { errors, warnings },
    }
}

impl<R: HubConversion> KindStrategy<R> {
    fn stored_hub(old: &Value) -> Result<R::Hub, Rejection> {
        // The stored object was written by this server from a typed hub; failing to read it
        // back is a server fault reported as such.
        serde_json::from_value(old.clone())
            .map_err(|e| Rejection::Conversion(format!("the stored object cannot be decoded: {e}")))
    }

    /// `hub` in `version`, typed, handed to `write` (no copy of the hub).
    fn write_in<T>(
        version: GroupVersion,
        mut hub: R::Hub,
        write: impl FnOnce(&dyn erased::Typed) -> Result<T, serde_json::Error>,
    ) -> Result<T, ReadError> {
        let written = match own(version)? {
            Version::V1alpha1 => {
                let mut spoke =
                    <R as HubConversion>::from_hub(&hub).map_err(|e| ReadError(e.to_string()))?;
                spoke.set_type_meta();
                write(&spoke)
            }
            Version::V1alpha2 => {
                hub.set_type_meta();
                write(&hub)
            }
        };
        written.map_err(|e| ReadError(format!("encoding the object: {e}")))
    }

    /// The hub in `version`, as JSON.
    fn spoke_value(version: GroupVersion, hub: R::Hub) -> Result<Value, ReadError> {
        Self::write_in(version, hub, |typed| typed.to_value())
    }
}

fn apply_rejection(err: ApplyError) -> Rejection {
    match err {
        ApplyError::Conflicts(conflicts) => Rejection::Conflicts(conflicts),
        ApplyError::Invalid(errors) => Rejection::Invalid {
            errors,
            warnings: Vec::new(),
        },
        ApplyError::BadRequest(message) => Rejection::BadRequest(message),
        ApplyError::Conversion(e) => Rejection::Internal(e.to_string()),
    }
}

impl<R: HubConversion> KindStrategy<R> {
    /// The stored hub typed (the conversion context of the field manager) and as a client of
    /// `version` reads it, managedFields included.
    fn live(
        &self,
        version: GroupVersion,
        stored: Option<&Value>,
    ) -> Result<(Option<R::Hub>, Option<Value>), ReadError> {
        let Some(stored) = stored else {
            return Ok((None, None));
        };
        let typed: R::Hub = serde_json::from_value(stored.clone())
            .map_err(|e| ReadError(format!("the stored object cannot be decoded: {e}")))?;
        let live = self.encode(version, stored.clone())?;
        Ok((Some(typed), Some(live)))
    }
}

impl<R: HubConversion> Strategy for KindStrategy<R> {
    fn descriptor(&self) -> &ResourceDescriptor {
        &self.descriptor
    }

    fn admit(
        &self,
        version: GroupVersion,
        body: Value,
        mode: FieldValidation,
        operation: Operation<'_>,
    ) -> Result<Admitted, Rejection> {
        let old = match operation {
            Operation::Create => None,
            Operation::Update(old)
            | Operation::DryRunUpdate(old)
            | Operation::UpdateStatus(old) => Some(Self::stored_hub(old)?),
        };
        let typed = match (operation, old.as_ref()) {
            (Operation::Update(_), Some(old)) => AdmitOperation::Update(old),
            (Operation::DryRunUpdate(_), Some(old)) => AdmitOperation::DryRunUpdate(old),
            (Operation::UpdateStatus(_), Some(old)) => AdmitOperation::UpdateStatus(old),
            _ => AdmitOperation::Create,
        };
        let version = own(version).map_err(|e| Rejection::Internal(e.0))?;
        let mut admitted =
            resource::admit::<R>(version, body, decode_mode(mode), typed).map_err(rejection)?;
        admitted.hub.set_type_meta();
        let hub = serde_json::to_value(&admitted.hub)
            .map_err(|e| Rejection::Conversion(format!("encoding the object: {e}")))?;
        Ok(Admitted {
            hub,
            warnings: admitted.warnings,
        })
    }

    fn unknown_fields(&self, version: GroupVersion, body: &Value) -> Vec<String> {
        let Ok(version) = own(version) else {
            return Vec::new();
        };
        match crate::api::decode::prepare(version, R::KIND, body.clone(), DecodeMode::Strict) {
            Err(DecodeError::UnknownFields(paths)) => paths,
            _ => Vec::new(),
        }
    }

    fn prune_unknown(&self, version: GroupVersion, body: &mut Value) -> Vec<String> {
        let Ok(version) = own(version) else {
            return Vec::new();
        };
        crate::api::schema::prune::prune_object(
            body,
            crate::api::schema::structural(version, R::KIND),
        )
    }

    fn read(&self, version: GroupVersion, stored: &[u8]) -> Result<Value, ReadError> {
        if version == self.descriptor.storage_version() {
            // The hub is stored as the hub version's JSON: no typed round trip needed.
            return serde_json::from_slice(stored)
                .map_err(|e| ReadError(format!("the stored object cannot be decoded: {e}")));
        }
        let hub: R::Hub = serde_json::from_slice(stored)
            .map_err(|e| ReadError(format!("the stored object cannot be decoded: {e}")))?;
        Self::spoke_value(version, hub)
    }

    fn read_json(
        &self,
        version: GroupVersion,
        stored: &[u8],
        revision: i64,
    ) -> Result<Box<RawValue>, ReadError> {
        let mut hub: R::Hub = serde_json::from_slice(stored)
            .map_err(|e| ReadError(format!("the stored object cannot be decoded: {e}")))?;
        hub.metadata_mut().resource_version = Some(revision.to_string());
        Self::write_in(version, hub, |typed| typed.to_raw_value())
    }

    fn encode(&self, version: GroupVersion, hub: Value) -> Result<Value, ReadError> {
        if version == self.descriptor.storage_version() {
            return Ok(hub);
        }
        let typed: R::Hub = serde_json::from_value(hub)
            .map_err(|e| ReadError(format!("the object cannot be decoded: {e}")))?;
        Self::spoke_value(version, typed)
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
        let decoded = resource::decode::<R>(own(from)?, object.clone(), DecodeMode::Ignore)
            .map_err(|e| ReadError(e.to_string()))?;
        let hub =
            resource::to_hub::<R>(decoded.object, None).map_err(|e| ReadError(e.to_string()))?;
        Self::spoke_value(to, hub)
    }

    fn apply_schema_defaults(&self, version: GroupVersion, object: &mut Value) {
        if let Ok(version) = own(version) {
            crate::api::defaults::apply(version, R::KIND, object);
        }
    }

    fn merge_configuration(
        &self,
        version: GroupVersion,
        object: &Value,
        config: &Value,
    ) -> Result<Value, String> {
        let version = own(version).map_err(|e| e.0)?;
        merge_with_schema(
            crate::api::schema::structural(version, R::KIND),
            object,
            config,
        )
    }

    fn track_update(
        &self,
        stored: Option<&Value>,
        new: &mut Value,
        request: &FieldRequest<'_>,
    ) -> Result<(), ReadError> {
        let (typed, live) = self.live(request.version, stored)?;
        let versions = HubVersions::<R>::new(typed.as_ref());
        let manager = FieldManager::new(&versions);
        let storage = self.descriptor.storage_version();
        track_with(&manager, live, new, request, storage, |new| {
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
        let (typed, live) = self
            .live(request.version, stored)
            .map_err(|e| Rejection::Internal(e.0))?;
        let versions = HubVersions::<R>::new(typed.as_ref());
        apply_with(&versions, live, config, request, force)
    }
}

/// [`Strategy::merge_configuration`] for a kind whose version has the structural `schema`.
pub fn merge_with_schema(
    schema: &crate::api::schema::Structural,
    object: &Value,
    config: &Value,
) -> Result<Value, String> {
    use apply::typed::{Ty, atomic_paths, merge, validate_config};
    let ty = Ty::Object(schema);
    let errors = validate_config(config, ty);
    if !errors.is_empty() {
        // structured-merge-diff's form: `.spec.cores: field not declared in schema`.
        let errors: Vec<String> = errors
            .iter()
            .map(|e| format!(".{}: {}", e.field, e.detail))
            .collect();
        return Err(format!(
            "failed to convert patch object to typed object: {}",
            errors.join(", ")
        ));
    }
    let atomics = atomic_paths(config, ty);
    if !atomics.is_empty() {
        return Err(format!(
            "invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: {}",
            atomics.join(", ")
        ));
    }
    Ok(merge(Some(object), Some(config), ty).unwrap_or_default())
}

/// A read object, with `revision` as its resourceVersion, as JSON: [`Strategy::read_json`] for
/// kinds read as JSON values rather than typed objects.
pub fn value_json(mut object: Value, revision: i64) -> Result<Box<RawValue>, ReadError> {
    super::object_store::set_resource_version(&mut object, revision);
    serde_json::value::to_raw_value(&object)
        .map_err(|e| ReadError(format!("encoding the object: {e}")))
}

/// [`Strategy::apply`] through the field manager of `versions`, `live` being the stored object
/// in the request's version.
pub fn apply_with(
    versions: &dyn apply::KindVersions,
    live: Option<Value>,
    config: &Value,
    request: &FieldRequest<'_>,
    force: bool,
) -> Result<Value, Rejection> {
    let request = api_request(request).map_err(|e| Rejection::Internal(e.0))?;
    FieldManager::new(versions)
        .apply(live, config, &request, force)
        .map_err(apply_rejection)
}

/// [`Strategy::track_update`] through `manager`, `live` being the stored object in the
/// request's version: in place when the request's version is the one stored, else on `new` as
/// `encode` gives it in the request's version, keeping only the managedFields.
pub fn track_with(
    manager: &FieldManager<'_>,
    live: Option<Value>,
    new: &mut Value,
    request: &FieldRequest<'_>,
    storage: GroupVersion,
    encode: impl FnOnce(Value) -> Result<Value, ReadError>,
) -> Result<(), ReadError> {
    let api = api_request(request)?;
    if request.version == storage {
        *new = manager.update(live, std::mem::take(new), &api);
        return Ok(());
    }
    let tracked = manager.update(live, encode(new.clone())?, &api);
    let managed = tracked.pointer("/metadata/managedFields").cloned();
    super::lifecycle::set_managed_fields(new, managed);
    Ok(())
}
