//! The server edge: HTTPS (rustls, h2 + http/1.1), authentication and authorization seams,
//! routing, content negotiation, request bodies, kube `Status` errors, health, metrics and
//! version endpoints, and the `serve` / `dev` modes that put them together.
//!
//! A request passes, outermost first, through one pipeline layer ([`router`]): its body held
//! and, when the handler left it unread, read to its end after the answer ([`unread_body`]) →
//! common headers (`Audit-Id`, `Cache-Control`) → panic guard (a 500 `Status`) → [`request_info`]
//! (kube's verb and resource derivation) → [`metrics`] and the request log → [`authn`] →
//! [`authz`] → [`deadline`] (60 s or `?timeout=`, not for watches) → [`body`] limit (3 MiB) →
//! the route: the built-in endpoints ([`health`], [`metrics`], [`version`]), [`discovery`],
//! [`openapi`] and one generic handler for every resource path ([`resources`], which calls
//! `registry::rest::ResourceRest` and streams watches through [`watch`]).
//!
//! Around it: [`listener`] (tokio-rustls, hyper-util h2 + http/1.1, timeouts, graceful
//! shutdown), [`tls`] and [`pki`] (certificates, reloading, `dev`'s CA), [`negotiation`],
//! [`response`] and [`headers`] (representations, warnings, ETags), [`error`] (the one
//! `ApiError`, where registry errors become a kube `Status`), [`namespaces`]
//! (NamespaceLifecycle in `serve`), [`cotenants`] (the cluster's CRDs, for the kinds other
//! providers define in our group-versions, in `serve`), [`assembly`] (store, catalog and API routes),
//! [`app::Server`] (a running server and its shutdown hooks), and the two modes, [`serve`]
//! and [`dev`]. Nothing here knows Proxmox or a particular kind. Behaviour: docs/rest.md;
//! delegated authentication and authorization: docs/deploy.md.

pub mod admission;
pub mod app;
pub mod assembly;
pub mod authn;
pub mod authz;
pub mod body;
pub mod cotenants;
pub mod deadline;
pub mod dev;
pub mod discovery;
pub mod error;
pub mod headers;
pub mod health;
pub mod list_body;
pub mod listener;
pub mod live;
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
pub mod unread_body;
pub mod version;
pub mod watch;

pub use error::{ApiError, GroupKind, GroupResource, Status};
pub use router::{ApiRouter, ServerState};
