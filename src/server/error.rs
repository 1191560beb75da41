//! The server edge's error: one `ApiError` holding a kube `Status`, built by constructors that
//! mirror apimachinery's `errors.New*` (same codes, reasons, details and messages), and turned
//! into an HTTP response in exactly one place.

use std::fmt;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use crate::registry::error::invalid_message;
use crate::registry::gofmt::quote;
use crate::registry::meta::ListMeta;
use crate::registry::{FieldError, RegistryError};

/// `metav1.Status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub kind: String,
    pub api_version: String,
    #[serde(default)]
    pub metadata: ListMeta,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub code: u16,
}

fn is_zero(code: &u16) -> bool {
    *code == 0
}

/// `metav1.StatusDetails`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StatusDetails {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub group: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
    #[serde(skip_serializing_if = "is_zero_i32")]
    pub retry_after_seconds: i32,
}

fn is_zero_i32(v: &i32) -> bool {
    *v == 0
}

/// `metav1.StatusCause` (its Go field `Type` is serialised as `reason`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StatusCause {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub field: String,
}

impl From<&FieldError> for StatusCause {
    fn from(e: &FieldError) -> Self {
        Self {
            reason: e.kind.reason().to_owned(),
            message: e.body(),
            field: e.path.clone(),
        }
    }
}

impl Status {
    fn failure(
        code: StatusCode,
        reason: &str,
        message: String,
        details: Option<StatusDetails>,
    ) -> Self {
        Self {
            kind: "Status".to_owned(),
            api_version: "v1".to_owned(),
            metadata: ListMeta::default(),
            status: "Failure".to_owned(),
            message,
            reason: reason.to_owned(),
            details,
            code: code.as_u16(),
        }
    }

    /// A `Success` status, as returned by an immediate DELETE (no code, like kube).
    pub fn success(details: StatusDetails) -> Self {
        Self {
            kind: "Status".to_owned(),
            api_version: "v1".to_owned(),
            metadata: ListMeta::default(),
            status: "Success".to_owned(),
            message: String::new(),
            reason: String::new(),
            details: Some(details),
            code: 0,
        }
    }
}

/// A resource qualified by its group: `proxmoxmachines.infrastructure.cluster.x-k8s.io`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct GroupResource {
    pub group: String,
    pub resource: String,
}

impl GroupResource {
    pub fn new(group: &str, resource: &str) -> Self {
        Self {
            group: group.to_owned(),
            resource: resource.to_owned(),
        }
    }

    fn is_empty(&self) -> bool {
        self.group.is_empty() && self.resource.is_empty()
    }
}

impl fmt::Display for GroupResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// A kind qualified by its group: `ProxmoxMachine.infrastructure.cluster.x-k8s.io`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct GroupKind {
    pub group: String,
    pub kind: String,
}

impl GroupKind {
    pub fn new(group: &str, kind: &str) -> Self {
        Self {
            group: group.to_owned(),
            kind: kind.to_owned(),
        }
    }
}

/// An error answered as a kube `Status`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", .0.message)]
pub struct ApiError(Box<Status>);

fn resource_details(gr: &GroupResource, name: &str) -> StatusDetails {
    StatusDetails {
        name: name.to_owned(),
        group: gr.group.clone(),
        kind: gr.resource.clone(),
        ..StatusDetails::default()
    }
}

impl ApiError {
    fn new(
        code: StatusCode,
        reason: &str,
        message: String,
        details: Option<StatusDetails>,
    ) -> Self {
        Self(Box::new(Status::failure(code, reason, message, details)))
    }

    /// An error another API server answered with, as it answered it.
    pub fn from_status(status: Status) -> Self {
        Self(Box::new(status))
    }

    pub fn status(&self) -> &Status {
        &self.0
    }

    pub fn into_status(self) -> Status {
        *self.0
    }

    pub fn code(&self) -> StatusCode {
        StatusCode::from_u16(self.0.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    pub fn reason(&self) -> &str {
        &self.0.reason
    }

    /// 404 `<plural>.<group> "<name>" not found`.
    pub fn not_found(gr: &GroupResource, name: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("{gr} {} not found", quote(name)),
            Some(resource_details(gr, name)),
        )
    }

    /// The 404 for paths no route serves.
    pub fn route_not_found() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            "the server could not find the requested resource".to_owned(),
            Some(StatusDetails::default()),
        )
    }

    /// The 405 for methods a route does not serve.
    pub fn route_method_not_allowed() -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource".to_owned(),
            Some(StatusDetails::default()),
        )
    }

    /// 409 `<plural>.<group> "<name>" already exists`.
    pub fn already_exists(gr: &GroupResource, name: &str) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "AlreadyExists",
            format!("{gr} {} already exists", quote(name)),
            Some(resource_details(gr, name)),
        )
    }

    /// 409 after `generateName` retries ran out.
    pub fn generate_name_conflict(
        gr: &GroupResource,
        name: &str,
        retry_after_seconds: i32,
    ) -> Self {
        let mut details = resource_details(gr, name);
        details.retry_after_seconds = retry_after_seconds;
        Self::new(
            StatusCode::CONFLICT,
            "AlreadyExists",
            format!(
                "{gr} {} already exists, the server was not able to generate a unique name for the object",
                quote(name)
            ),
            Some(details),
        )
    }

    /// 409 `Operation cannot be fulfilled on <plural>.<group> "<name>": <reason>`.
    pub fn conflict(gr: &GroupResource, name: &str, reason: &str) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {gr} {}: {reason}",
                quote(name)
            ),
            Some(resource_details(gr, name)),
        )
    }

    /// The optimistic-concurrency conflict every client knows.
    pub fn conflict_modified(gr: &GroupResource, name: &str) -> Self {
        Self::conflict(
            gr,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 409 from server-side apply, with `FieldManagerConflict` causes.
    pub fn apply_conflict(causes: Vec<StatusCause>, message: String) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "Conflict",
            message,
            Some(StatusDetails {
                causes,
                ..StatusDetails::default()
            }),
        )
    }

    /// 422 `<Kind>.<group> "<name>" is invalid: <errors>` with one cause per field error.
    pub fn invalid(gk: &GroupKind, name: &str, errors: &[FieldError]) -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            invalid_message(&gk.group, &gk.kind, name, errors),
            Some(StatusDetails {
                name: name.to_owned(),
                group: gk.group.clone(),
                kind: gk.kind.clone(),
                causes: errors.iter().map(StatusCause::from).collect(),
                ..StatusDetails::default()
            }),
        )
    }

    /// 400 with the given message.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "BadRequest", message.into(), None)
    }

    /// 401; an empty message becomes kube's "not authorized".
    pub fn unauthorized(message: &str) -> Self {
        let message = if message.is_empty() {
            "not authorized"
        } else {
            message
        };
        Self::new(
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
            message.to_owned(),
            None,
        )
    }

    /// 403 in `NewForbidden`'s three message forms.
    pub fn forbidden(gr: &GroupResource, name: &str, reason: &str) -> Self {
        let message = if gr.is_empty() {
            format!("forbidden: {reason}")
        } else if name.is_empty() {
            format!("{gr} is forbidden: {reason}")
        } else {
            format!("{gr} {} is forbidden: {reason}", quote(name))
        };
        Self::new(
            StatusCode::FORBIDDEN,
            "Forbidden",
            message,
            Some(resource_details(gr, name)),
        )
    }

    /// The same error with one more cause in its details.
    pub fn with_cause(mut self, cause: StatusCause) -> Self {
        self.0
            .details
            .get_or_insert_with(StatusDetails::default)
            .causes
            .push(cause);
        self
    }

    /// The same error with another message (kube overrides some constructors' messages).
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.0.message = message.into();
        self
    }

    /// 405 `<action> is not supported on resources of kind "<plural>.<group>"`.
    pub fn method_not_supported(gr: &GroupResource, action: &str) -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            format!(
                "{action} is not supported on resources of kind {}",
                quote(&gr.to_string())
            ),
            Some(StatusDetails {
                group: gr.group.clone(),
                kind: gr.resource.clone(),
                ..StatusDetails::default()
            }),
        )
    }

    /// 406 listing what the server can produce.
    pub fn not_acceptable(accepted: &[&str]) -> Self {
        Self::not_acceptable_message(format!(
            "only the following media types are accepted: {}",
            accepted.join(", ")
        ))
    }

    /// 406 with a specific message (e.g. a Table for a list-only conversion).
    pub fn not_acceptable_message(message: String) -> Self {
        Self::new(StatusCode::NOT_ACCEPTABLE, "NotAcceptable", message, None)
    }

    /// 415 listing what the server can read.
    pub fn unsupported_media_type(accepted: &[&str]) -> Self {
        Self::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
            None,
        )
    }

    /// 415 for `application/apply-patch+yaml` on a kind without server-side apply (dev's
    /// schemaless stand-ins).
    pub fn apply_not_supported(accepted: &[&str]) -> Self {
        Self::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!(
                "server-side apply is not supported for this resource (a schemaless stand-in of \
                 capmox-apiserver dev); use client-side apply, a JSON patch or a merge patch - \
                 accepted media types include: {}",
                accepted.join(", ")
            ),
            None,
        )
    }

    /// 413 `Request entity too large: <message>`.
    pub fn request_entity_too_large(message: &str) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestEntityTooLarge",
            format!("Request entity too large: {message}"),
            None,
        )
    }

    /// 410 Gone.
    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(StatusCode::GONE, "Gone", message.into(), None)
    }

    /// 410 Expired (a compacted resourceVersion).
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(StatusCode::GONE, "Expired", message.into(), None)
    }

    /// 410 Expired carrying a continue token that resumes the list at the latest revision.
    pub fn expired_with_continue(message: impl Into<String>, continue_token: String) -> Self {
        let mut err = Self::expired(message);
        err.0.metadata.continue_token = continue_token;
        err
    }

    /// 429 with a Retry-After (`NewTooManyRequests`).
    pub fn too_many_requests(message: impl Into<String>, retry_after_seconds: i32) -> Self {
        Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "TooManyRequests",
            message.into(),
            Some(StatusDetails {
                retry_after_seconds,
                ..StatusDetails::default()
            }),
        )
    }

    /// 500 `Internal error occurred: <err>`.
    pub fn internal(err: impl fmt::Display) -> Self {
        let message = err.to_string();
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            format!("Internal error occurred: {message}"),
            Some(StatusDetails {
                causes: vec![StatusCause {
                    message,
                    ..StatusCause::default()
                }],
                ..StatusDetails::default()
            }),
        )
    }

    /// 503 ServiceUnavailable.
    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            message.into(),
            None,
        )
    }

    /// 503 ServiceUnavailable about `resource` of `group`, with a Retry-After when
    /// `retry_after_seconds` is positive.
    pub fn service_unavailable_for(
        group: &str,
        resource: &str,
        message: impl Into<String>,
        retry_after_seconds: i32,
    ) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            message.into(),
            Some(StatusDetails {
                group: group.to_owned(),
                kind: resource.to_owned(),
                retry_after_seconds,
                ..StatusDetails::default()
            }),
        )
    }

    /// 504 `Timeout: <message>` with a Retry-After.
    pub fn timeout(message: &str, retry_after_seconds: i32) -> Self {
        Self::new(
            StatusCode::GATEWAY_TIMEOUT,
            "Timeout",
            format!("Timeout: {message}"),
            Some(StatusDetails {
                retry_after_seconds,
                ..StatusDetails::default()
            }),
        )
    }

    /// 504 for a resourceVersion newer than the store's; clients retry.
    pub fn too_large_resource_version(
        requested: u64,
        current: u64,
        retry_after_seconds: i32,
    ) -> Self {
        let mut err = Self::timeout(
            &crate::registry::list_options::too_large_resource_version_message(requested, current),
            retry_after_seconds,
        );
        if let Some(details) = err.0.details.as_mut() {
            details.causes = vec![StatusCause {
                reason: "ResourceVersionTooLarge".to_owned(),
                message: "Too large resource version".to_owned(),
                field: String::new(),
            }];
        }
        err
    }
}

impl From<RegistryError> for ApiError {
    fn from(err: RegistryError) -> Self {
        match err {
            RegistryError::BadRequest(message) => Self::bad_request(message),
            RegistryError::Invalid {
                group,
                kind,
                name,
                errors,
            } => Self::invalid(&GroupKind { group, kind }, &name, &errors),
            RegistryError::Expired {
                message,
                continue_token: Some(token),
            } => Self::expired_with_continue(message, token),
            RegistryError::Expired { message, .. } => Self::expired(message),
            RegistryError::NotAcceptable(message) => Self::not_acceptable_message(message),
            RegistryError::NotFound {
                group,
                resource,
                name,
            } => Self::not_found(&GroupResource { group, resource }, &name),
            RegistryError::AlreadyExists {
                group,
                resource,
                name,
                generated: false,
            } => Self::already_exists(&GroupResource { group, resource }, &name),
            RegistryError::AlreadyExists {
                group,
                resource,
                name,
                generated: true,
            } => Self::generate_name_conflict(&GroupResource { group, resource }, &name, 1),
            RegistryError::Conflict {
                group,
                resource,
                name,
                reason,
            } => Self::conflict(&GroupResource { group, resource }, &name, &reason),
            RegistryError::ApplyConflict { message, causes } => Self::apply_conflict(
                causes
                    .into_iter()
                    .map(|c| StatusCause {
                        reason: c.reason.unwrap_or_default(),
                        message: c.message.unwrap_or_default(),
                        field: c.field.unwrap_or_default(),
                    })
                    .collect(),
                message,
            ),
            RegistryError::TooLarge(message) => Self::request_entity_too_large(&message),
            RegistryError::Unprocessable(message) => {
                Self::new(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", message, None)
            }
            RegistryError::TooLargeResourceVersion { requested, current } => {
                Self::too_large_resource_version(requested, current, 1)
            }
            RegistryError::Denied {
                code,
                reason,
                message,
                details,
            } => Self::new(
                StatusCode::from_u16(code).unwrap_or(StatusCode::FORBIDDEN),
                &reason,
                message,
                details.and_then(|d| serde_json::from_value(d).ok()),
            ),
            RegistryError::Unavailable(message) => Self::service_unavailable(message),
            RegistryError::Internal(message) => Self::internal(message),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        status_response(self.code(), &self.0)
    }
}

/// Serialises a Status as the JSON body of a response with the given code.
pub fn status_response(code: StatusCode, status: &Status) -> Response {
    let body = serde_json::to_vec(status).unwrap_or_else(|_| b"{}".to_vec());
    let mut response = (code, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let retry = status.details.as_ref().map_or(0, |d| d.retry_after_seconds);
    if retry > 0 {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(retry));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::FieldPath;
    use serde_json::{Value, json};

    fn machines() -> GroupResource {
        GroupResource::new("infrastructure.cluster.x-k8s.io", "proxmoxmachines")
    }

    fn body(err: &ApiError) -> Value {
        serde_json::to_value(err.status()).expect("json")
    }

    #[test]
    fn not_found_matches_kube() {
        let err = ApiError::not_found(&machines(), "foo");
        assert_eq!(
            body(&err),
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "proxmoxmachines.infrastructure.cluster.x-k8s.io \"foo\" not found",
                   "reason": "NotFound",
                   "details": {"name": "foo", "group": "infrastructure.cluster.x-k8s.io", "kind": "proxmoxmachines"},
                   "code": 404})
        );
    }

    #[test]
    fn invalid_carries_causes() {
        let gk = GroupKind::new("infrastructure.cluster.x-k8s.io", "ProxmoxMachine");
        let errs = [FieldError::invalid(
            &FieldPath::new("spec").child("x"),
            0i64,
            "must be positive",
        )];
        let err = ApiError::invalid(&gk, "m1", &errs);
        assert_eq!(err.code(), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            body(&err)["message"],
            "ProxmoxMachine.infrastructure.cluster.x-k8s.io \"m1\" is invalid: spec.x: Invalid value: 0: must be positive"
        );
        assert_eq!(
            body(&err)["details"],
            json!({"name": "m1", "group": "infrastructure.cluster.x-k8s.io", "kind": "ProxmoxMachine",
                   "causes": [{"reason": "FieldValueInvalid", "message": "Invalid value: 0: must be positive", "field": "spec.x"}]})
        );
    }

    #[test]
    fn messages_of_each_constructor() {
        let gr = machines();
        let cases: Vec<(ApiError, u16, &str, &str)> = vec![
            (
                ApiError::already_exists(&gr, "m1"),
                409,
                "AlreadyExists",
                "proxmoxmachines.infrastructure.cluster.x-k8s.io \"m1\" already exists",
            ),
            (
                ApiError::conflict_modified(&gr, "m1"),
                409,
                "Conflict",
                "Operation cannot be fulfilled on proxmoxmachines.infrastructure.cluster.x-k8s.io \"m1\": the object has been modified; please apply your changes to the latest version and try again",
            ),
            (ApiError::bad_request("nope"), 400, "BadRequest", "nope"),
            (
                ApiError::unauthorized(""),
                401,
                "Unauthorized",
                "not authorized",
            ),
            (
                ApiError::forbidden(
                    &GroupResource::default(),
                    "",
                    "User \"a\" cannot get path \"/x\"",
                ),
                403,
                "Forbidden",
                "forbidden: User \"a\" cannot get path \"/x\"",
            ),
            (
                ApiError::forbidden(&gr, "", "why"),
                403,
                "Forbidden",
                "proxmoxmachines.infrastructure.cluster.x-k8s.io is forbidden: why",
            ),
            (
                ApiError::forbidden(&gr, "m1", "why"),
                403,
                "Forbidden",
                "proxmoxmachines.infrastructure.cluster.x-k8s.io \"m1\" is forbidden: why",
            ),
            (
                ApiError::method_not_supported(&gr, "deletecollection"),
                405,
                "MethodNotAllowed",
                "deletecollection is not supported on resources of kind \"proxmoxmachines.infrastructure.cluster.x-k8s.io\"",
            ),
            (
                ApiError::not_acceptable(&["application/json", "application/yaml"]),
                406,
                "NotAcceptable",
                "only the following media types are accepted: application/json, application/yaml",
            ),
            (
                ApiError::unsupported_media_type(&[
                    "application/json-patch+json",
                    "application/merge-patch+json",
                    "application/apply-patch+yaml",
                ]),
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            ),
            (
                ApiError::request_entity_too_large("limit is 3145728"),
                413,
                "RequestEntityTooLarge",
                "Request entity too large: limit is 3145728",
            ),
            (ApiError::gone("gone"), 410, "Gone", "gone"),
            (
                ApiError::expired("too old resource version: 5 (12)"),
                410,
                "Expired",
                "too old resource version: 5 (12)",
            ),
            (
                ApiError::too_many_requests("slow down", 1),
                429,
                "TooManyRequests",
                "slow down",
            ),
            (
                ApiError::internal("boom"),
                500,
                "InternalError",
                "Internal error occurred: boom",
            ),
            (
                ApiError::timeout("took too long", 2),
                504,
                "Timeout",
                "Timeout: took too long",
            ),
            (
                ApiError::too_large_resource_version(20, 10, 1),
                504,
                "Timeout",
                "Timeout: Too large resource version: 20, current: 10",
            ),
            (
                ApiError::service_unavailable("not ready"),
                503,
                "ServiceUnavailable",
                "not ready",
            ),
            (
                ApiError::route_not_found(),
                404,
                "NotFound",
                "the server could not find the requested resource",
            ),
        ];
        for (err, code, reason, message) in cases {
            assert_eq!(
                (err.code().as_u16(), err.reason(), err.to_string().as_str()),
                (code, reason, message)
            );
        }
        assert_eq!(body(&ApiError::route_not_found())["details"], json!({}));
        let large = body(&ApiError::too_large_resource_version(20, 10, 1));
        assert_eq!(
            large["details"]["causes"][0]["reason"],
            "ResourceVersionTooLarge"
        );
        assert_eq!(large["details"]["retryAfterSeconds"], 1);
        let expired = body(&ApiError::expired_with_continue("old", "tok".into()));
        assert_eq!(expired["metadata"], json!({"continue": "tok"}));
    }

    #[test]
    fn registry_errors_map_once() {
        let err: ApiError = RegistryError::BadRequest("bad".into()).into();
        assert_eq!(err.code(), StatusCode::BAD_REQUEST);
        let err: ApiError = RegistryError::invalid_options("ListOptions", vec![]).into();
        assert_eq!(err.to_string(), "ListOptions.meta.k8s.io \"\" is invalid");
        let err: ApiError = RegistryError::NotAcceptable("no".into()).into();
        assert_eq!(err.code(), StatusCode::NOT_ACCEPTABLE);
    }

    #[tokio::test]
    async fn response_has_status_code_headers_and_body() {
        let response = ApiError::too_many_requests("slow", 3).into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[header::RETRY_AFTER], "3");
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .expect("body");
        let status: Status = serde_json::from_slice(&bytes).expect("status");
        assert_eq!(status.code, 429);
        assert_eq!(status.message, "slow");
    }
}
