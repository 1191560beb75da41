//! GET, PUT and PATCH of `…/<name>/scale`: an `autoscaling/v1` `Scale`, as kube's CRD handler
//! answers it (`kubectl scale` sends a merge patch; HPAs and clients of the scale API GET and
//! PUT). Server-side apply is not taken here (docs/api.md).

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

use crate::registry::error::RegistryError;
use crate::registry::field_error::{FieldError, FieldPath};
use crate::registry::request_options::WriteKind;
use crate::registry::rest::Failure;
use crate::registry::scale::scale_replicas;
use crate::registry::strategy::PatchSupport;

use super::super::error::ApiError;
use super::super::negotiation::{self, PatchType};
use super::writes::{failure, patch_request, read_object, read_raw, write_options, written_raw};
use super::{Call, Target};

const SCALE_API_VERSION: &str = "autoscaling/v1";

fn names(target: &Target) -> (&str, &str) {
    (
        target.namespace.as_deref().unwrap_or_default(),
        target.name.as_deref().unwrap_or_default(),
    )
}

/// GET: the object's `Scale`.
pub(super) async fn get(call: Call, target: &Target, warnings: Vec<String>) -> Response {
    let output = match call.output(target, false, warnings) {
        Ok(output) => output,
        Err(response) => return *response,
    };
    let (namespace, name) = names(target);
    match target.rest.get_scale(target.version, namespace, name).await {
        Ok(scale) => output.raw(StatusCode::OK, &scale),
        Err(e) => output.error(e.into()),
    }
}

/// PUT: a whole `Scale`; its name must be the URL's.
pub(super) async fn update(mut call: Call, target: &Target, warnings: Vec<String>) -> Response {
    let output = match call.output(target, false, warnings) {
        Ok(output) => output,
        Err(response) => return *response,
    };
    let prepared = async {
        let options = write_options(&call, WriteKind::Update)?;
        let body = read_object(&mut call, target).await?;
        check_scale(&body.value, names(target).1).map_err(ApiError::bad_request)?;
        Ok::<_, ApiError>((options, body.value))
    };
    let (options, scale) = match prepared.await {
        Ok(prepared) => prepared,
        Err(e) => return output.error(e),
    };
    let (namespace, name) = names(target);
    let written = target
        .rest
        .write_scale(target.version, namespace, name, &options, |_| {
            Ok(scale.clone())
        })
        .await;
    match written {
        Ok(outcome) => written_raw(output, outcome),
        Err(e) => failure(output, e),
    }
}

/// PATCH: a JSON or merge patch of the current `Scale`.
pub(super) async fn patch(mut call: Call, target: &Target, warnings: Vec<String>) -> Response {
    let output = match call.output(target, false, warnings) {
        Ok(output) => output,
        Err(response) => return *response,
    };
    let prepared = async {
        let plain = PatchSupport {
            apply: false,
            strategic_as_merge: false,
        };
        let patch_type = negotiation::patch_type(call.content_type(), plain)?;
        let options = write_options(&call, WriteKind::Patch { apply: false })?;
        let bytes = read_raw(&mut call).await?;
        Ok::<_, ApiError>((
            options,
            patch_request(patch_type == PatchType::Merge, &bytes)?,
        ))
    };
    let (options, request) = match prepared.await {
        Ok(prepared) => prepared,
        Err(e) => return output.error(e),
    };
    let (namespace, name) = names(target);
    let written = target
        .rest
        .write_scale(target.version, namespace, name, &options, |current| {
            let patched = request.patch.apply(&current)?;
            check_scale(&patched, name).map_err(|e| Failure::from(RegistryError::BadRequest(e)))?;
            // kube decodes the patched Scale into its Go type: what does not fit is a 422
            // about the patch, quoting the patched object.
            if let Err(e) = scale_replicas(&patched) {
                let cause = FieldError::invalid(&FieldPath::new("patch"), patched.to_string(), e);
                return Err(Failure::from(RegistryError::Invalid {
                    group: String::new(),
                    kind: String::new(),
                    name: String::new(),
                    errors: vec![cause],
                }));
            }
            Ok(patched)
        })
        .await;
    match written {
        Ok(outcome) => written_raw(output, outcome),
        Err(e) => failure(output, e),
    }
}

/// What kube's handler checks of a `Scale` before the update, as a bad request's message:
/// its type (what it decodes into) and its name (`checkName`).
fn check_scale(scale: &Value, name: &str) -> Result<(), String> {
    let text = |key: &str| scale.get(key).and_then(Value::as_str).unwrap_or_default();
    if !scale.is_object() {
        return Err("the body of a Scale update is not an object".to_owned());
    }
    match text("apiVersion") {
        "" | SCALE_API_VERSION => {}
        other => {
            return Err(format!(
                "the API version in the data ({other}) does not match the expected API version \
                 ({SCALE_API_VERSION})"
            ));
        }
    }
    match text("kind") {
        "" | "Scale" => {}
        other => {
            return Err(format!(
                "no kind {other:?} is registered for version {SCALE_API_VERSION:?}"
            ));
        }
    }
    let body_name = scale
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if body_name != name {
        return Err(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        ));
    }
    Ok(())
}
