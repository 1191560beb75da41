//! AdmissionReview, both ways: the request a webhook is sent (kube-apiserver's
//! `CreateAdmissionObjects`), and what its answer means (`VerifyAdmissionResponse`, then
//! `ToStatusErr` for a denial), in kube's words. Both versions kube still sends: v1, and
//! v1beta1 for webhooks that list only it (CAPK's, among our co-tenants), whose answers kube
//! checks less (no uid or kind check, the patch type taken as JSONPatch).

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::registry::admission::{AdmissionError, AdmissionOperation, Attributes};
use crate::registry::descriptor::GroupVersion;
use crate::registry::patch::json::JsonPatch;

/// The AdmissionReview version a webhook is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewVersion {
    V1,
    V1beta1,
}

impl ReviewVersion {
    /// The first version of the webhook's `admissionReviewVersions` that kube knows, in the
    /// webhook's order of preference; `Err` names what kube would answer when none is.
    pub fn preferred(versions: &[String]) -> Result<Self, String> {
        versions
            .iter()
            .find_map(|version| match version.as_str() {
                "v1" => Some(Self::V1),
                "v1beta1" => Some(Self::V1beta1),
                _ => None,
            })
            .ok_or_else(|| {
                "webhook does not accept known AdmissionReview versions (v1, v1beta1)".to_owned()
            })
    }

    fn api_version(self) -> &'static str {
        match self {
            Self::V1 => "admission.k8s.io/v1",
            Self::V1beta1 => "admission.k8s.io/v1beta1",
        }
    }
}

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

/// The AdmissionReview sent for one call (both versions have the same request fields).
pub fn request(
    version: ReviewVersion,
    uid: &str,
    attributes: &Attributes<'_>,
    objects: &Objects<'_>,
) -> Value {
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
        "apiVersion": version.api_version(),
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
    let mut review = request(ReviewVersion::V1, "", attributes, &objects);
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
    /// Absent reads as false, a denial, as Go decodes it.
    #[serde(default)]
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

/// One call's review: the version sent, its uid, and whether the webhook may patch.
pub struct Sent<'a> {
    pub version: ReviewVersion,
    pub uid: &'a str,
    pub mutating: bool,
}

/// Reads a webhook's answer to the review `sent`; `Err` is an invalid answer (kube: "received
/// invalid webhook response: …"), subject to the failure policy.
pub fn verdict(webhook: &str, sent: &Sent<'_>, body: &[u8]) -> Result<Verdict, String> {
    let review: Review = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let response = match sent.version {
        ReviewVersion::V1 => checked_v1(review, sent)?,
        ReviewVersion::V1beta1 => {
            let mut response = review
                .response
                .ok_or_else(|| "webhook response was absent".to_owned())?;
            // kube never checked v1beta1's patch type: a patch is JSONPatch, and a validating
            // webhook's is ignored.
            response.patch = response
                .patch
                .filter(|patch| sent.mutating && !patch.is_empty());
            response.patch_type = response.patch.as_ref().map(|_| "JSONPatch".to_owned());
            response
        }
    };
    if !response.allowed {
        return Ok(Verdict::Denied(denial(
            webhook,
            response.status,
            response.warnings,
        )));
    }
    let patch = match (response.patch, response.patch_type.as_deref()) {
        (None, _) => None,
        (Some(patch), Some("JSONPatch")) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(patch)
                .map_err(|e| format!("response.patch is not base64: {e}"))?;
            Some(JsonPatch::parse(&bytes).map_err(|e| e.to_string())?)
        }
        (Some(_), other) => {
            return Err(format!(
                "webhook returned invalid response.patchType of {:?}",
                other.unwrap_or_default()
            ));
        }
    };
    Ok(Verdict::Allowed {
        patch,
        warnings: response.warnings,
    })
}

/// v1's checks of an answer: its kind, the uid sent, and a patch only from a mutating
/// webhook and with its type.
fn checked_v1(review: Review, sent: &Sent<'_>) -> Result<Response, String> {
    let mut response = review
        .response
        .ok_or_else(|| "webhook response was absent".to_owned())?;
    if response.uid != sent.uid {
        return Err(format!(
            "expected response.uid={:?}, got {:?}",
            sent.uid, response.uid
        ));
    }
    if review.api_version != "admission.k8s.io/v1" || review.kind != "AdmissionReview" {
        return Err(format!(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {}, Kind={}",
            review.api_version, review.kind
        ));
    }
    response.patch = response.patch.filter(|patch| !patch.is_empty());
    match (sent.mutating, &response.patch, &response.patch_type) {
        (true, Some(_), None) => {
            Err("webhook returned response.patch but not response.patchType".to_owned())
        }
        (true, None, Some(_)) => {
            Err("webhook returned response.patchType but not response.patch".to_owned())
        }
        (false, Some(_), _) => Err("validating webhook may not return response.patch".to_owned()),
        (false, None, Some(_)) => {
            Err("validating webhook may not return response.patchType".to_owned())
        }
        _ => Ok(response),
    }
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
        answer_in("admission.k8s.io/v1", response)
    }

    fn answer_in(api_version: &str, response: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": api_version,
            "kind": "AdmissionReview",
            "response": response,
        }))
        .expect("json")
    }

    const V1: Sent<'static> = Sent {
        version: ReviewVersion::V1,
        uid: "u",
        mutating: true,
    };

    /// What an allowed answer's patch makes of an empty object, and the answer's warnings.
    fn patched(verdict: Result<Verdict, String>) -> (Value, Vec<String>) {
        let Ok(Verdict::Allowed {
            patch: Some(patch),
            warnings,
        }) = verdict
        else {
            panic!("not a patch: {verdict:?}");
        };
        let mut object = json!({"metadata": {}});
        patch.apply(&mut object).expect("applies");
        (object, warnings)
    }

    fn label_patch() -> String {
        base64::engine::general_purpose::STANDARD
            .encode(br#"[{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]"#)
    }

    #[test]
    fn a_denial_carries_the_webhook_status() {
        let body = answer(json!({"uid": "u", "allowed": false, "status": {
            "code": 422, "reason": "Invalid", "message": "spec.numCores: too many",
            "details": {"causes": [{"field": "spec.numCores"}]}}}));
        let Ok(Verdict::Denied(error)) = verdict("cap.example.com", &V1, &body) else {
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
        let Ok(Verdict::Denied(error)) = verdict("w", &V1, &bare) else {
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
            verdict("w", &V1, &wrong_uid).unwrap_err(),
            "expected response.uid=\"u\", got \"x\""
        );
        let no_type = answer(json!({"uid": "u", "allowed": true, "patch": "W10="}));
        assert!(verdict("w", &V1, &no_type).is_err());
        let answered = answer(json!({"uid": "u", "allowed": true, "patch": label_patch(),
            "patchType": "JSONPatch", "warnings": ["careful"]}));
        let (object, warnings) = patched(verdict("w", &V1, &answered));
        assert_eq!(object, json!({"metadata": {"labels": {"a": "b"}}}));
        assert_eq!(warnings, ["careful"]);
        let validating = Sent {
            mutating: false,
            ..V1
        };
        assert_eq!(
            verdict("w", &validating, &answered).unwrap_err(),
            "validating webhook may not return response.patch"
        );
        let v1beta1_kind = answer_in(
            "admission.k8s.io/v1beta1",
            json!({"uid": "u", "allowed": true}),
        );
        assert!(verdict("w", &V1, &v1beta1_kind).is_err());
    }

    #[test]
    fn v1beta1_answers_are_read_as_kube_reads_them() {
        let sent = Sent {
            version: ReviewVersion::V1beta1,
            uid: "u",
            mutating: true,
        };
        // No uid, no patch type, any kind: kube never checked those in v1beta1.
        let untyped = answer_in(
            "admission.k8s.io/v1beta1",
            json!({"allowed": true, "patch": label_patch()}),
        );
        let (object, _) = patched(verdict("w", &sent, &untyped));
        assert_eq!(object, json!({"metadata": {"labels": {"a": "b"}}}));
        // A validating webhook's patch is ignored, not an error.
        let validating = Sent {
            mutating: false,
            ..sent
        };
        assert!(matches!(
            verdict("w", &validating, &untyped),
            Ok(Verdict::Allowed { patch: None, .. })
        ));
        // An answer without `allowed` is a denial, as Go decodes it.
        let silent = answer_in("admission.k8s.io/v1beta1", json!({}));
        assert!(matches!(
            verdict("w", &sent, &silent),
            Ok(Verdict::Denied(_))
        ));
        let absent = answer_in("admission.k8s.io/v1beta1", Value::Null);
        assert_eq!(
            verdict("w", &sent, &absent).unwrap_err(),
            "webhook response was absent"
        );
    }

    #[test]
    fn the_webhooks_first_known_version_is_sent() {
        let versions = |list: &[&str]| list.iter().map(|v| (*v).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            ReviewVersion::preferred(&versions(&["v1beta1", "v1"])),
            Ok(ReviewVersion::V1beta1)
        );
        assert_eq!(
            ReviewVersion::preferred(&versions(&["v2", "v1"])),
            Ok(ReviewVersion::V1)
        );
        assert_eq!(
            ReviewVersion::preferred(&versions(&["v2"])).unwrap_err(),
            "webhook does not accept known AdmissionReview versions (v1, v1beta1)"
        );
    }
}
