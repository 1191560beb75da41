//! The client's error type and the classification of PVE failures.
//!
//! PVE puts the error text in the HTTP reason phrase and (since 2025) also in the body's
//! `message`; parameter errors add an `errors` map. Both are kept, and the class is
//! derived from the status plus all of that text, because the same status (500) covers
//! everything from "VM is locked" to "no quorum".

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::proxmox::upid::Upid;

/// What kind of failure an [`Error`] is; callers branch on this, not on texts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The VM, task, storage, volume or node does not exist (or not on that node).
    NotFound,
    /// The VM id (or config file) is already taken.
    AlreadyExists,
    /// The VM has a config lock (`VM is locked (clone)`).
    Locked,
    /// A file or cluster lock could not be taken in time; retrying usually helps.
    LockTimeout,
    /// The VM is running where it must not be (`destroy failed`, `already running`).
    VmRunning,
    /// The VM is not running where it must be.
    VmNotRunning,
    /// The guest agent does not answer (yet).
    AgentNotRunning,
    /// 401: bad, expired or revoked credentials.
    Auth,
    /// 403: the token lacks a privilege.
    Permission,
    /// 400: a parameter failed validation.
    InvalidParameter,
    /// The request was understood and refused for a reason retrying will not fix
    /// (protection mode, unsupported storage, template start...).
    Rejected,
    /// 501: the endpoint or method does not exist on this server.
    Unsupported,
    /// Server-side or proxy trouble (5xx, 595/596 node unreachable, no quorum) or a
    /// connection failure: retry later.
    Transient,
    /// The request or a task wait exceeded its time limit.
    Timeout,
    /// A task finished with an error exit status.
    TaskFailed,
    /// The response was not what the API promises.
    Decode,
    /// The client was configured wrongly.
    Config,
}

/// An HTTP-level error answer from PVE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// Request method.
    pub method: String,
    /// Request path below `/api2/json`.
    pub path: String,
    /// HTTP status.
    pub status: u16,
    /// The reason phrase (PVE puts the error's first line there).
    pub reason: String,
    /// The body's `message`, trailing newline removed.
    pub message: Option<String>,
    /// Per-parameter errors of a 400.
    pub errors: BTreeMap<String, String>,
    /// The derived class.
    pub kind: ErrorKind,
}

impl ApiError {
    /// The most specific text: `message`, else the reason phrase, plus parameter errors.
    pub fn text(&self) -> String {
        let mut text = self
            .message
            .clone()
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| self.reason.clone());
        if !self.errors.is_empty() {
            let details: Vec<String> = self
                .errors
                .iter()
                .map(|(k, v)| format!("{k}: {}", v.trim_end()))
                .collect();
            text = format!("{text} ({})", details.join("; "));
        }
        text
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}: HTTP {} {}",
            self.method,
            self.path,
            self.status,
            self.text()
        )
    }
}

/// Errors of the Proxmox VE client.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration cannot produce a working client.
    #[error("invalid Proxmox VE client configuration: {0}")]
    Config(String),
    /// The request never got an HTTP answer (connect, TLS, timeout, reset).
    #[error("{method} {path}: {source}")]
    Transport {
        /// Request method.
        method: String,
        /// Request path.
        path: String,
        /// The underlying error.
        #[source]
        source: reqwest::Error,
    },
    /// PVE answered with an error status.
    #[error("{0}")]
    Api(Box<ApiError>),
    /// Not sent, or given up: the endpoint has not answered for a while.
    #[error("{method} {path}: Proxmox VE at {endpoint} not answering since {since}: {cause}")]
    Unanswered {
        /// Request method.
        method: String,
        /// Request path.
        path: String,
        /// The API's base URL.
        endpoint: String,
        /// The first failure of the outage.
        since: jiff::Timestamp,
        /// The latest failure.
        cause: String,
    },
    /// Not sent: the write fence refused it (this process may no longer lead).
    #[error("{method} {path} not sent: {reason}")]
    Fenced {
        /// Request method.
        method: String,
        /// Request path.
        path: String,
        /// Why the fence refused.
        reason: String,
    },
    /// The response body did not decode.
    #[error("{method} {path}: unexpected response: {message}")]
    Decode {
        /// Request method.
        method: String,
        /// Request path.
        path: String,
        /// What was wrong.
        message: String,
    },
    /// A task ended with an error exit status.
    #[error("task {upid} failed: {exitstatus}")]
    TaskFailed {
        /// The task.
        upid: Upid,
        /// Its exit status (the error text).
        exitstatus: String,
    },
    /// A task was still running (or could not be polled) when the wait gave up.
    #[error("task {upid} not finished after {waited:?}{}", last_error.as_ref().map(|e| format!(" (last poll: {e})")).unwrap_or_default())]
    TaskTimeout {
        /// The task.
        upid: Upid,
        /// How long the client waited.
        waited: Duration,
        /// The last transient polling error, if the final polls failed.
        last_error: Option<String>,
    },
}

impl Error {
    /// The class of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Config(_) => ErrorKind::Config,
            Self::Transport { source, .. } if source.is_timeout() => ErrorKind::Timeout,
            Self::Transport { source, .. } if source.is_builder() => ErrorKind::Config,
            Self::Transport { .. } => ErrorKind::Transient,
            Self::Api(api) => api.kind,
            Self::Unanswered { .. } => ErrorKind::Transient,
            // Another replica may lead now; this one's passes end with its term.
            Self::Fenced { .. } => ErrorKind::Transient,
            Self::Decode { .. } => ErrorKind::Decode,
            Self::TaskFailed { exitstatus, .. } => match classify_text(exitstatus) {
                Some(ErrorKind::Locked) => ErrorKind::Locked,
                Some(ErrorKind::LockTimeout) => ErrorKind::LockTimeout,
                _ => ErrorKind::TaskFailed,
            },
            Self::TaskTimeout { .. } => ErrorKind::Timeout,
        }
    }

    /// Whether retrying the same call later is likely to succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self.kind(),
            ErrorKind::Transient
                | ErrorKind::LockTimeout
                | ErrorKind::Timeout
                | ErrorKind::AgentNotRunning
        )
    }

    /// The HTTP status, for API errors.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Api(api) => Some(api.status),
            _ => None,
        }
    }

    /// The API error, if this is one.
    pub fn api(&self) -> Option<&ApiError> {
        match self {
            Self::Api(api) => Some(api),
            _ => None,
        }
    }
}

/// Message patterns, most specific first. Matching is case-insensitive.
const PATTERNS: &[(&str, ErrorKind)] = &[
    ("vm is locked (", ErrorKind::Locked),
    ("can't lock file", ErrorKind::LockTimeout),
    ("got lock request timeout", ErrorKind::LockTimeout),
    ("got timeout", ErrorKind::LockTimeout),
    ("is running - destroy failed", ErrorKind::VmRunning),
    ("already running", ErrorKind::VmRunning),
    ("guest agent is not running", ErrorKind::AgentNotRunning),
    ("is not running", ErrorKind::VmNotRunning),
    ("not running", ErrorKind::VmNotRunning),
    ("already exists", ErrorKind::AlreadyExists),
    ("does not exist", ErrorKind::NotFound),
    ("no such task", ErrorKind::NotFound),
    ("no such storage", ErrorKind::NotFound),
    ("no such cluster node", ErrorKind::NotFound),
    ("hostname lookup", ErrorKind::NotFound),
    ("volume_size_info", ErrorKind::NotFound),
    ("no quorum", ErrorKind::Transient),
    ("protection mode enabled", ErrorKind::Rejected),
    ("no qemu guest agent configured", ErrorKind::Rejected),
    ("can't ", ErrorKind::Rejected),
    ("not supported", ErrorKind::Rejected),
    ("not allowed", ErrorKind::Rejected),
    ("does not support", ErrorKind::Rejected),
];

fn classify_text(text: &str) -> Option<ErrorKind> {
    let lower = text.to_ascii_lowercase();
    PATTERNS
        .iter()
        .find(|(pattern, _)| lower.contains(pattern))
        .map(|(_, kind)| *kind)
}

/// Classifies an error answer from its status and every piece of text it carried
/// (reason phrase, `message`, `errors` values).
pub fn classify(status: u16, texts: &[&str]) -> ErrorKind {
    match status {
        401 => return ErrorKind::Auth,
        403 => return ErrorKind::Permission,
        501 => return ErrorKind::Unsupported,
        595..=599 => return ErrorKind::Transient,
        _ => {}
    }
    let joined = texts.join("\n");
    let by_text = classify_text(&joined);
    match (status, by_text) {
        // A 400 only says something more specific for taken ids and missing tasks or
        // storages; "device 'x' does not exist" in a parameter is still a bad parameter.
        (400, Some(ErrorKind::AlreadyExists)) => ErrorKind::AlreadyExists,
        (400, _)
            if ["no such task", "no such storage"]
                .iter()
                .any(|p| joined.to_ascii_lowercase().contains(p)) =>
        {
            ErrorKind::NotFound
        }
        (400, _) => ErrorKind::InvalidParameter,
        (_, Some(kind)) => kind,
        (404, None) => ErrorKind::NotFound,
        (408, None) => ErrorKind::Timeout,
        (500..=599, None) => ErrorKind::Transient,
        _ => ErrorKind::InvalidParameter,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_the_reference_failures() {
        let cases: &[(u16, &str, ErrorKind)] = &[
            (
                500,
                "Configuration file 'nodes/pve1/qemu-server/117.conf' does not exist",
                ErrorKind::NotFound,
            ),
            (400, "VM 105 already exists", ErrorKind::AlreadyExists),
            (
                500,
                "unable to create VM 105: config file already exists",
                ErrorKind::AlreadyExists,
            ),
            (500, "VM is locked (clone)", ErrorKind::Locked),
            (
                500,
                "can't lock file '/var/lock/qemu-server/lock-101.conf' - got timeout",
                ErrorKind::LockTimeout,
            ),
            (
                500,
                "VM 101 is running - destroy failed",
                ErrorKind::VmRunning,
            ),
            (
                500,
                "QEMU guest agent is not running",
                ErrorKind::AgentNotRunning,
            ),
            (500, "VM 101 is not running", ErrorKind::VmNotRunning),
            (500, "cluster not ready - no quorum?", ErrorKind::Transient),
            (
                500,
                "can't remove VM 101 - protection mode enabled",
                ErrorKind::Rejected,
            ),
            (500, "something odd happened", ErrorKind::Transient),
            (401, "Authentication failed!", ErrorKind::Auth),
            (
                403,
                "Permission check failed (/vms/101, VM.Audit)",
                ErrorKind::Permission,
            ),
            (
                400,
                "Parameter verification failed.",
                ErrorKind::InvalidParameter,
            ),
            (400, "no such task", ErrorKind::NotFound),
            (
                501,
                "Method 'GET /x' not implemented",
                ErrorKind::Unsupported,
            ),
            (595, "No route to host", ErrorKind::Transient),
            (596, "Connection timed out", ErrorKind::Transient),
            (502, "", ErrorKind::Transient),
        ];
        for (status, text, kind) in cases {
            assert_eq!(classify(*status, &[text]), *kind, "{status} {text}");
        }
    }

    #[test]
    fn text_prefers_message_and_lists_parameter_errors() {
        let e = ApiError {
            method: "GET".into(),
            path: "/cluster/nextid".into(),
            status: 400,
            reason: "Parameter verification failed.".into(),
            message: Some("Parameter verification failed.".into()),
            errors: [("vmid".to_string(), "VM 105 already exists\n".to_string())].into(),
            kind: ErrorKind::AlreadyExists,
        };
        assert_eq!(
            e.to_string(),
            "GET /cluster/nextid: HTTP 400 Parameter verification failed. (vmid: VM 105 already exists)"
        );
    }
}
