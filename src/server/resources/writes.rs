//! POST, PUT, PATCH, DELETE and DELETECOLLECTION: options from the query (DeleteOptions also
//! from the body), the body decoded by its `Content-Type`, the registry operation, and the
//! answer in the request's version with the warnings of every step.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use crate::registry::delete_options::DeleteOptions;
use crate::registry::patch::Patch;
use crate::registry::request_options::{WriteKind, WriteOptions};
use crate::registry::rest::{DeleteOutcome, Failure, Outcome, PatchRequest};

use super::super::body::{self, DecodedBody, MAX_REQUEST_BODY_BYTES};
use super::super::error::{ApiError, GroupResource, Status, StatusDetails};
use super::super::negotiation::{self, BodyFormat, PatchType};
use super::super::router::ServerState;
use super::output::Output;
use super::{Call, Target};

pub(super) fn failure(output: Output, failure: Failure) -> Response {
    let Failure { error, warnings } = failure;
    let mut output = output;
    output.warnings.extend(warnings);
    output.error(ApiError::from(*error))
}

fn written(output: Output, code: StatusCode, outcome: Outcome) -> Response {
    let mut output = output;
    output.warnings.extend(outcome.warnings);
    output.object(code, &outcome.object)
}

/// The answer of a write whose object is not the kind's (a `Scale`): sent as it is.
pub(super) fn written_raw(output: Output, outcome: Outcome) -> Response {
    let mut output = output;
    output.warnings.extend(outcome.warnings);
    output.raw(StatusCode::OK, &outcome.object)
}

pub(super) async fn read_raw(call: &mut Call) -> Result<bytes::Bytes, ApiError> {
    let body = std::mem::take(&mut call.body);
    body::read_body(body, MAX_REQUEST_BODY_BYTES).await
}

/// The body of a create or update, decoded by its `Content-Type` (JSON or YAML; protobuf
/// for kinds that read it).
pub(super) async fn read_object(call: &mut Call, target: &Target) -> Result<DecodedBody, ApiError> {
    if negotiation::is_protobuf(call.content_type())
        && let Some(decode) = target.rest.protobuf_decoder()
    {
        let bytes = read_raw(call).await?;
        let value = decode(&bytes).map_err(ApiError::bad_request)?;
        return Ok(DecodedBody {
            value,
            duplicate_fields: Vec::new(),
        });
    }
    let format = negotiation::request_body_format(call.content_type())?;
    let bytes = read_raw(call).await?;
    body::decode(format, &bytes)
}

/// The write options, with the manager derived from the User-Agent when `fieldManager` is
/// absent.
pub(super) fn write_options(call: &Call, kind: WriteKind) -> Result<WriteOptions, ApiError> {
    let user_agent = call
        .headers
        .get(axum::http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let mut options = WriteOptions::from_query(kind, &call.pairs())?.for_user_agent(user_agent);
    options.requester = call.requester();
    Ok(options)
}

/// The options and the decoded body of a create or update.
async fn options_and_body(
    call: &mut Call,
    target: &Target,
    kind: WriteKind,
) -> Result<(WriteOptions, DecodedBody), ApiError> {
    let options = write_options(call, kind)?;
    let body = read_object(call, target).await?;
    Ok((options, body))
}

/// The namespace lifecycle check of a create of `name` (empty with `generateName`).
async fn admit_create(
    server: &ServerState,
    target: &Target,
    namespace: &str,
    name: &str,
) -> Result<(), ApiError> {
    let Some(namespaces) = &server.namespaces else {
        return Ok(());
    };
    let descriptor = target.rest.descriptor();
    let resource = GroupResource::new(descriptor.group, descriptor.plural);
    namespaces.admit_create(&resource, namespace, name).await
}

/// POST on a collection.
pub(super) async fn create(
    server: &ServerState,
    mut call: Call,
    target: &Target,
    warnings: Vec<String>,
) -> Response {
    let output = match call.output(target, false, warnings) {
        Ok(output) => output,
        Err(response) => return *response,
    };
    let (options, body) = match options_and_body(&mut call, target, WriteKind::Create).await {
        Ok(prepared) => prepared,
        Err(e) => return output.error(e),
    };
    let namespace = target.namespace.as_deref().unwrap_or_default();
    let name = body
        .value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if let Err(e) = admit_create(server, target, namespace, name).await {
        return output.error(e);
    }
    match target
        .rest
        .create(
            target.version,
            namespace,
            body.value,
            &body.duplicate_fields,
            &options,
        )
        .await
    {
        Ok(outcome) => written(output, StatusCode::CREATED, outcome),
        Err(e) => failure(output, e),
    }
}

/// PUT on an object or its status.
pub(super) async fn update(mut call: Call, target: &Target, warnings: Vec<String>) -> Response {
    let output = match call.output(target, false, warnings) {
        Ok(output) => output,
        Err(response) => return *response,
    };
    let (options, body) = match options_and_body(&mut call, target, WriteKind::Update).await {
        Ok(prepared) => prepared,
        Err(e) => return output.error(e),
    };
    match target
        .rest
        .update(
            target.version,
            target.namespace.as_deref().unwrap_or_default(),
            target.name.as_deref().unwrap_or_default(),
            body.value,
            &body.duplicate_fields,
            &options,
            target.subresource,
        )
        .await
    {
        Ok(outcome) => written(output, StatusCode::OK, outcome),
        Err(e) => failure(output, e),
    }
}

/// A merge patch (`merge`) or JSON patch body.
pub(super) fn patch_request(merge: bool, bytes: &[u8]) -> Result<PatchRequest, ApiError> {
    if merge {
        let decoded = body::decode_json(bytes)?;
        return Ok(PatchRequest {
            patch: Patch::merge(decoded.value)?,
            duplicates: decoded.duplicate_fields,
        });
    }
    Ok(PatchRequest {
        patch: Patch::json(bytes)?,
        duplicates: Vec::new(),
    })
}

/// A PATCH body: a JSON or merge patch, or a server-side apply configuration.
enum PatchBody {
    Patch(PatchRequest),
    Apply(DecodedBody),
}

/// PATCH of an object or its status: JSON patch, merge patch or server-side apply (YAML or
/// JSON). Strategic merge patch is a 415, as for custom resources. An apply that would create
/// the object passes the namespace lifecycle check first.
pub(super) async fn patch(
    server: &ServerState,
    mut call: Call,
    target: &Target,
    warnings: Vec<String>,
) -> Response {
    let output = match call.output(target, false, warnings) {
        Ok(output) => output,
        Err(response) => return *response,
    };
    let prepared = async {
        let patch_type = negotiation::patch_type(call.content_type(), target.rest.patch_support())?;
        let apply = patch_type == PatchType::Apply;
        let options = write_options(&call, WriteKind::Patch { apply })?;
        let bytes = read_raw(&mut call).await?;
        let body = match patch_type {
            // YAML is a superset of JSON: kubectl sends JSON, people write YAML.
            PatchType::Apply => PatchBody::Apply(body::decode(BodyFormat::Yaml, &bytes)?),
            PatchType::Merge | PatchType::Json => {
                PatchBody::Patch(patch_request(patch_type == PatchType::Merge, &bytes)?)
            }
        };
        Ok::<_, ApiError>((options, body))
    };
    let (options, body) = match prepared.await {
        Ok(prepared) => prepared,
        Err(e) => return output.error(e),
    };
    let namespace = target.namespace.as_deref().unwrap_or_default();
    let name = target.name.as_deref().unwrap_or_default();
    let rest = &target.rest;
    let result = match body {
        PatchBody::Patch(request) => rest
            .patch(
                target.version,
                namespace,
                name,
                &request,
                &options,
                target.subresource,
            )
            .await
            .map(|outcome| (StatusCode::OK, outcome)),
        PatchBody::Apply(config) => {
            if let Err(e) = admit_apply(server, target, namespace, name).await {
                return output.error(e);
            }
            rest.apply(
                target.version,
                namespace,
                name,
                config.value,
                &config.duplicate_fields,
                &options,
                target.subresource,
            )
            .await
            .map(|applied| {
                let code = if applied.created {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                };
                (code, applied.outcome)
            })
        }
    };
    match result {
        Ok((code, outcome)) => written(output, code, outcome),
        Err(e) => failure(output, e),
    }
}

/// An apply creates the object when it does not exist: then the namespace must exist and not
/// be terminating. Applies to existing objects are updates and pass.
async fn admit_apply(
    server: &ServerState,
    target: &Target,
    namespace: &str,
    name: &str,
) -> Result<(), ApiError> {
    let Err(refused) = admit_create(server, target, namespace, name).await else {
        return Ok(());
    };
    match target.rest.get(target.version, namespace, name, "").await {
        Ok(_) => Ok(()),
        Err(_) => Err(refused),
    }
}

/// DeleteOptions from the body (JSON or YAML) when it has one, else from the query.
async fn delete_options(call: &mut Call) -> Result<DeleteOptions, ApiError> {
    let bytes = read_raw(call).await?;
    let body: Option<Value> = if bytes.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        let format = negotiation::request_body_format(call.content_type())?;
        Some(body::decode(format, &bytes)?.value)
    };
    let mut options = DeleteOptions::from_request(body.as_ref(), &call.pairs())?;
    options.requester = call.requester();
    Ok(options)
}

/// DELETE of one object: a `Success` Status when it is gone, the terminating object while
/// finalizers hold it.
pub(super) async fn delete(mut call: Call, target: &Target, warnings: Vec<String>) -> Response {
    let output = match call.output(target, false, warnings) {
        Ok(output) => output,
        Err(response) => return *response,
    };
    let options = match delete_options(&mut call).await {
        Ok(options) => options,
        Err(e) => return output.error(e),
    };
    let descriptor = target.rest.descriptor();
    match target
        .rest
        .delete(
            target.version,
            target.namespace.as_deref().unwrap_or_default(),
            target.name.as_deref().unwrap_or_default(),
            &options,
        )
        .await
    {
        Ok(DeleteOutcome::Removed { name, uid }) => {
            let status = Status::success(StatusDetails {
                name,
                group: descriptor.group.to_owned(),
                kind: descriptor.plural.to_owned(),
                uid,
                ..StatusDetails::default()
            });
            output.raw(
                StatusCode::OK,
                &serde_json::to_value(status).unwrap_or_else(|_| json!({})),
            )
        }
        Ok(DeleteOutcome::Terminating(object)) => output.object(StatusCode::OK, &object),
        Err(e) => failure(output, e),
    }
}

/// DELETE on a collection: every object the selectors match; answers the deleted list.
pub(super) async fn delete_collection(
    mut call: Call,
    target: &Target,
    warnings: Vec<String>,
) -> Response {
    let output = match call.output(target, false, warnings) {
        Ok(output) => output,
        Err(response) => return *response,
    };
    let prepared = async {
        let list = target.list_options(call.pairs(), false)?;
        let options = delete_options(&mut call).await?;
        Ok::<_, ApiError>((list, options))
    };
    let (list, options) = match prepared.await {
        Ok(prepared) => prepared,
        Err(e) => return output.error(e),
    };
    match target
        .rest
        .delete_collection(target.version, target.namespace.as_deref(), &list, &options)
        .await
    {
        Ok(deleted) => output.list(
            &deleted.items,
            &deleted.meta,
            target.rest.descriptor().list_kind,
        ),
        Err(e) => failure(output, e),
    }
}
