//! AdmissionReview v1, both ways: the request a webhook is sent (kube-apiserver's
//! `CreateAdmissionObjects`), and what its answer means (`VerifyAdmissionResponse`, then
//! `ToStatusErr` for a denial), in kube's words.

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::registry::admission::{AdmissionError, AdmissionOperation, Attributes};
use crate::registry::descriptor::GroupVersion;
use crate::registry::patch::json::JsonPatch;

/// The objects of one call, in the version the webhook is sent.
pub struct Objects<'a> {
    pub version: GroupVersion,
    pub object: Option<&'a Value>,
    pub old: Option<&'a Value>,
}

/// `group/version/kind` and `group/version/resource` as AdmissionReview writes them.
fn gvk(version: GroupVersion, kind: &str) -> Value {
    json!({"group": version.group, "version": version.version, "kind": kind})
}

fn gvr(version: GroupVersion, resource: &str) -> Value {
    json!({"group": version.group, "version": version.version, "resource": resource})
}

/// The AdmissionReview sent for one call.
pub fn request(uid: &str, attributes: &Attributes<'_>, objects: &Objects<'_>) -> Value {
    let descriptor = attributes.descriptor;
    let requester = attributes.requester;
    let mut user = json!({"username": requester.username, "groups": requester.groups});
    if !requester.uid.is_empty() {
        user["uid"] = json!(requester.uid);
    }
    if !requester.extra.is_empty() {
        user["extra"] = json!(requester.extra);
    }
    let mut options = json!({
        "apiVersion": "meta.k8s.io/v1",
        "kind": attributes.operation.options_kind(),
    });
    if attributes.dry_run {
        options["dryRun"] = json!(["All"]);
    }
    if attributes.operation != AdmissionOperation::Delete && !attributes.field_manager.is_empty() {
        options["fieldManager"] = json!(attributes.field_manager);
    }
    let mut request = json!({
        "uid": uid,
        "kind": gvk(objects.version, descriptor.kind),
        "resource": gvr(objects.version, descriptor.plural),
        "requestKind": gvk(attributes.version, descriptor.kind),
        "requestResource": gvr(attributes.version, descriptor.plural),
        "name": attributes.name,
        "operation": attributes.operation.as_str(),
        "userInfo": user,
        "object": objects.object,
        "oldObject": objects.old,
        "dryRun": attributes.dry_run,
        "options": options,
    });
    if !attributes.subresource.is_empty() {
        request["subResource"] = json!(attributes.subresource);
        request["requestSubResource"] = json!(attributes.subresource);
    }
    if !attributes.namespace.is_empty() {
        request["namespace"] = json!(attributes.namespace);
    }
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": request,
    })
}

/// The AdmissionRequest as CEL's `request` variable: the review's request without its
/// objects and uid.
pub fn cel_request(attributes: &Attributes<'_>, version: GroupVersion) -> Value {
    let objects = Objects {
        version,
        object: None,
        old: None,
    };
    let mut review = request("", attributes, &objects);
    let mut request = review["request"].take();
    if let Some(fields) = request.as_object_mut() {
        for field in ["uid", "object", "oldObject"] {
            fields.remove(field);
        }
    }
    request
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Review {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    response: Option<Response>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Response {
    #[serde(default)]
    uid: String,
    allowed: bool,
    #[serde(default)]
    status: Option<Value>,
    #[serde(default)]
    patch: Option<String>,
    #[serde(default)]
    patch_type: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
}

/// What a webhook answered.
#[derive(Debug)]
pub enum Verdict {
    /// Allowed, with a JSON patch for a mutating webhook.
    Allowed {
        patch: Option<JsonPatch>,
        warnings: Vec<String>,
    },
    /// Denied: the Status to answer the client (with the webhook's warnings).
    Denied(AdmissionError),
}

/// Reads a webhook's answer to the review `uid`; `Err` is an invalid answer (kube: "received
/// invalid webhook response: …"), subject to the failure policy.
pub fn verdict(webhook: &str, uid: &str, body: &[u8]) -> Result<Verdict, String> {
    let review: Review = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    if review.api_version != "admission.k8s.io/v1" || review.kind != "AdmissionReview" {
        return Err(format!(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {}, Kind={}",
            review.api_version, review.kind
        ));
    }
    let response = review
        .response
        .ok_or_else(|| "webhook response was absent".to_owned())?;
    if response.uid != uid {
        return Err(format!(
            "expected response.uid={uid:?}, got {:?}",
            response.uid
        ));
    }
    if !response.allowed {
        return Ok(Verdict::Denied(denial(
            webhook,
            response.status,
            response.warnings,
        )));
    }
    let patch = match (response.patch, response.patch_type.as_deref()) {
        (None, _) => None,
        (Some(_), None) => {
            return Err("webhook returned response.patch but not response.patchType".to_owned());
        }
        (Some(patch), Some("JSONPatch")) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(patch)
                .map_err(|e| format!("response.patch is not base64: {e}"))?;
            Some(JsonPatch::parse(&bytes).map_err(|e| e.to_string())?)
        }
        (Some(_), Some(other)) => {
            return Err(format!(
                "webhook returned invalid response.patchType of {other:?}"
            ));
        }
    };
    Ok(Verdict::Allowed {
        patch,
        warnings: response.warnings,
    })
}

/// `webhookerrors.ToStatusErr`: the webhook's Status with a code of at least 400 and its
/// message prefixed `admission webhook "x" denied the request`.
fn denial(webhook: &str, status: Option<Value>, warnings: Vec<String>) -> AdmissionError {
    let status = status.unwrap_or(Value::Null);
    let text = |key: &str| {
        status
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let code = status
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c >= 400)
        .unwrap_or(400);
    let (message, reason) = (text("message"), text("reason"));
    let denied = format!("admission webhook {} denied the request", quote(webhook));
    let message = if !message.is_empty() {
        format!("{denied}: {message}")
    } else if !reason.is_empty() {
        format!("{denied}: {reason}")
    } else {
        format!("{denied} without explanation")
    };
    AdmissionError::Denied {
        code,
        reason,
        message,
        details: status.get("details").cloned(),
        warnings,
    }
}

fn quote(text: &str) -> String {
    crate::registry::gofmt::quote(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(response: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": response,
        }))
        .expect("json")
    }

    #[test]
    fn a_denial_carries_the_webhook_status() {
        let body = answer(json!({"uid": "u", "allowed": false, "status": {
            "code": 422, "reason": "Invalid", "message": "spec.numCores: too many",
            "details": {"causes": [{"field": "spec.numCores"}]}}}));
        let Ok(Verdict::Denied(error)) = verdict("cap.example.com", "u", &body) else {
            panic!("not a denial");
        };
        assert_eq!(
            error,
            AdmissionError::Denied {
                code: 422,
                reason: "Invalid".into(),
                message: "admission webhook \"cap.example.com\" denied the request: spec.numCores: too many".into(),
                details: Some(json!({"causes": [{"field": "spec.numCores"}]})),
                warnings: vec![],
            }
        );
        let bare = answer(json!({"uid": "u", "allowed": false}));
        let Ok(Verdict::Denied(error)) = verdict("w", "u", &bare) else {
            panic!("not a denial");
        };
        assert_eq!(
            error.to_string(),
            "admission webhook \"w\" denied the request without explanation"
        );
    }

    #[test]
    fn invalid_answers_are_errors() {
        let wrong_uid = answer(json!({"uid": "x", "allowed": true}));
        assert_eq!(
            verdict("w", "u", &wrong_uid).unwrap_err(),
            "expected response.uid=\"u\", got \"x\""
        );
        let no_type = answer(json!({"uid": "u", "allowed": true, "patch": "W10="}));
        assert!(verdict("w", "u", &no_type).is_err());
        let patch = base64::engine::general_purpose::STANDARD
            .encode(br#"[{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]"#);
        let patched = answer(json!({"uid": "u", "allowed": true, "patch": patch,
            "patchType": "JSONPatch", "warnings": ["careful"]}));
        let Ok(Verdict::Allowed {
            patch: Some(patch),
            warnings,
        }) = verdict("w", "u", &patched)
        else {
            panic!("not a patch");
        };
        let mut object = json!({"metadata": {}});
        patch.apply(&mut object).expect("applies");
        assert_eq!(object, json!({"metadata": {"labels": {"a": "b"}}}));
        assert_eq!(warnings, ["careful"]);
    }
}
