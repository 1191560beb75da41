//! Errors: [`PveError`] is an error answer exactly as PVE would give it; [`SimError`] is
//! a failure to start the simulator.

use std::collections::BTreeMap;

/// An error answer: status, text (reason phrase and `message`), per-parameter errors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PveError {
    /// HTTP status.
    pub status: u16,
    /// The error text (first line becomes the reason phrase).
    pub message: String,
    /// `errors` of a 400.
    pub errors: BTreeMap<String, String>,
}

impl PveError {
    /// Any status and text.
    pub fn new(status: u16, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            errors: BTreeMap::new(),
        }
    }

    /// 500: a `die` inside a handler.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, message)
    }

    /// 400 `Parameter verification failed.` with one parameter error.
    pub fn param(name: &str, message: impl Into<String>) -> Self {
        Self::params([(name.to_string(), message.into())].into())
    }

    /// 400 `Parameter verification failed.` with these parameter errors.
    pub fn params(errors: BTreeMap<String, String>) -> Self {
        Self {
            status: 400,
            message: "Parameter verification failed.".to_string(),
            errors,
        }
    }

    /// 403.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, message)
    }

    /// 501.
    pub fn not_implemented(message: impl Into<String>) -> Self {
        Self::new(501, message)
    }

    /// The missing-VM error (also what asking the wrong node for a VM gives).
    pub fn no_such_vm(node: &str, vmid: u32) -> Self {
        Self::internal(format!(
            "Configuration file 'nodes/{node}/qemu-server/{vmid}.conf' does not exist"
        ))
    }

    /// A config lock.
    pub fn locked(lock: &str) -> Self {
        Self::internal(format!("VM is locked ({lock})"))
    }

    /// Lost quorum.
    pub fn no_quorum() -> Self {
        Self::internal("cluster not ready - no quorum?")
    }
}

/// What a request handler can end with besides success.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HandlerError {
    /// Answer with this error.
    Pve(PveError),
    /// A lock the synchronous handler needs is held by a task: retry until it is free or
    /// PVE's lock timeout passes, then fail with `message`.
    Busy {
        /// The timeout error text.
        message: String,
    },
}

impl From<PveError> for HandlerError {
    fn from(e: PveError) -> Self {
        Self::Pve(e)
    }
}

/// Why the simulator could not start.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The seed is inconsistent.
    #[error("invalid seed: {0}")]
    Seed(String),
    /// Certificates could not be generated.
    #[error("generating the TLS certificate failed: {0}")]
    Tls(String),
    /// The listener could not bind.
    #[error("binding {addr} failed: {source}")]
    Bind {
        /// Address.
        addr: std::net::SocketAddr,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The request log could not be opened.
    #[error("opening the request log {} failed: {source}", path.display())]
    RequestLog {
        /// The file.
        path: std::path::PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}
