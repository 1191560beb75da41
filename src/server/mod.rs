//! The server edge: HTTPS (rustls, h2 + http/1.1), authentication and authorization seams,
//! routing, content negotiation, request bodies, kube `Status` errors, health, metrics and
//! version endpoints, and the `serve` / `dev` modes that put them together.

pub mod app;
pub mod assembly;
pub mod authn;
pub mod authz;
pub mod body;
pub mod deadline;
pub mod dev;
pub mod discovery;
pub mod error;
pub mod headers;
pub mod health;
pub mod listener;
pub mod logging;
pub mod metrics;
pub mod namespaces;
pub mod negotiation;
pub mod openapi;
pub mod openapi_proto;
pub mod pki;
pub mod request_info;
pub mod resources;
pub mod response;
pub mod router;
pub mod serve;
pub mod tls;
pub mod ttl_cache;
pub mod version;
pub mod watch;

pub use error::{ApiError, GroupKind, GroupResource, Status};
pub use router::{ApiRouter, ServerState};
