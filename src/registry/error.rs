//! The registry layer's error type. Each variant maps to exactly one kube `Status` at the server
//! edge (see `server::error`); the messages here are already kube's.

use super::field_error::{FieldError, aggregate_message};
use super::gofmt;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RegistryError {
    /// 400 BadRequest with this message.
    #[error("{0}")]
    BadRequest(String),
    /// 422 Invalid: `<Kind>.<group> "<name>" is invalid: <errors>`.
    #[error("{}", invalid_message(group, kind, name, errors))]
    Invalid {
        group: String,
        kind: String,
        name: String,
        errors: Vec<FieldError>,
    },
    /// 410 Expired, optionally carrying a continue token to resume an inconsistent list.
    #[error("{message}")]
    Expired {
        message: String,
        continue_token: Option<String>,
    },
    /// 406 NotAcceptable with this message.
    #[error("{0}")]
    NotAcceptable(String),
    /// 404 `<resource>.<group> "<name>" not found`.
    #[error("{} {} not found", qualified(group, resource), gofmt::quote(name))]
    NotFound {
        group: String,
        resource: String,
        name: String,
    },
    /// 409 `<resource>.<group> "<name>" already exists`; `generated` when the name came from
    /// `generateName` and every retry collided.
    #[error("{} {} already exists", qualified(group, resource), gofmt::quote(name))]
    AlreadyExists {
        group: String,
        resource: String,
        name: String,
        generated: bool,
    },
    /// 409 `Operation cannot be fulfilled on <resource>.<group> "<name>": <reason>`.
    #[error(
        "Operation cannot be fulfilled on {} {}: {reason}",
        qualified(group, resource),
        gofmt::quote(name)
    )]
    Conflict {
        group: String,
        resource: String,
        name: String,
        reason: String,
    },
    /// 409 from server-side apply: fields other managers own would change; one
    /// `FieldManagerConflict` cause per field and manager.
    #[error("{message}")]
    ApplyConflict {
        message: String,
        causes: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::StatusCause>,
    },
    /// 413 RequestEntityTooLarge with this message (a JSON patch of too many operations).
    #[error("{0}")]
    TooLarge(String),
    /// 422 Invalid without field causes (a patch that cannot be applied).
    #[error("{0}")]
    Unprocessable(String),
    /// 504 `Too large resource version: <requested>, current: <current>` (clients retry).
    #[error("{}", super::list_options::too_large_resource_version_message(*requested, *current))]
    TooLargeResourceVersion { requested: u64, current: u64 },
    /// A policy of the management cluster refused the write (an admission webhook's Status,
    /// its message already `admission webhook "x" denied the request: …`).
    #[error("{message}")]
    Denied {
        code: u16,
        reason: String,
        message: String,
        details: Option<serde_json::Value>,
    },
    /// 503: the store cannot be reached right now.
    #[error("{0}")]
    Unavailable(String),
    /// 500: a broken invariant (corrupt stored data, a failed conversion of a stored object).
    #[error("{0}")]
    Internal(String),
}

impl RegistryError {
    /// An Invalid error about request options (e.g. `ListOptions.meta.k8s.io "" is invalid`).
    pub fn invalid_options(kind: &str, errors: Vec<FieldError>) -> Self {
        Self::Invalid {
            group: "meta.k8s.io".to_owned(),
            kind: kind.to_owned(),
            name: String::new(),
            errors,
        }
    }
}

/// `<resource>.<group>`, or just the resource for the core group.
pub fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_owned()
    } else {
        format!("{resource}.{group}")
    }
}

/// `NewInvalid`'s message: `<Kind>.<group> "<name>" is invalid: <aggregate>`.
pub fn invalid_message(group: &str, kind: &str, name: &str, errors: &[FieldError]) -> String {
    let qualified = if group.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}.{group}")
    };
    match aggregate_message(errors) {
        Some(agg) => format!("{qualified} {} is invalid: {agg}", gofmt::quote(name)),
        None => format!("{qualified} {} is invalid", gofmt::quote(name)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::field_error::FieldPath;

    #[test]
    fn invalid_message_matches_kube() {
        let err = RegistryError::Invalid {
            group: "infrastructure.cluster.x-k8s.io".into(),
            kind: "ProxmoxMachine".into(),
            name: "m1".into(),
            errors: vec![FieldError::invalid(
                &FieldPath::new("spec").child("numSockets"),
                0i64,
                "spec.numSockets in body should be greater than or equal to 1",
            )],
        };
        assert_eq!(
            err.to_string(),
            "ProxmoxMachine.infrastructure.cluster.x-k8s.io \"m1\" is invalid: spec.numSockets: \
             Invalid value: 0: spec.numSockets in body should be greater than or equal to 1"
        );
        assert_eq!(
            invalid_message("", "Thing", "", &[]),
            "Thing \"\" is invalid"
        );
    }
}
