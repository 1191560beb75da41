//! The HTTP router: built-in endpoints (health, metrics, version, default discovery) plus
//! routes contributed by other layers, wrapped in the request pipeline:
//! common headers → panic guard → request info → metrics → log → authentication →
//! authorization → deadline (non-watch requests) → body limit → handler.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::FutureExt;
use serde_json::json;

use super::authn::{self, Authentication, UserInfo};
use super::authz::{self, Authorizer};
use super::body;
use super::deadline;
use super::error::ApiError;
use super::health::{self, HealthChecks};
use super::listener::Shutdown;
use super::metrics::{self, Metrics};
use super::namespaces::NamespaceLifecycle;
use super::negotiation::{self, Capabilities};
use super::request_info::{RequestInfo, query_pairs};
use super::response;
use super::version;

/// Shared services every handler may use.
#[derive(Clone)]
pub struct ServerState {
    pub health: Arc<HealthChecks>,
    pub metrics: Arc<Metrics>,
    pub authentication: Arc<Authentication>,
    pub authorizer: Arc<dyn Authorizer>,
    /// Long-running handlers (watches) end their streams when this fires.
    pub shutdown: Shutdown,
    /// Namespace existence for creates (`serve`); `None` accepts any valid namespace name.
    pub namespaces: Option<Arc<NamespaceLifecycle>>,
}

impl ServerState {
    pub fn new(authentication: Authentication, authorizer: Arc<dyn Authorizer>) -> Self {
        Self {
            health: Arc::new(HealthChecks::new()),
            metrics: Arc::new(Metrics::new()),
            authentication: Arc::new(authentication),
            authorizer,
            shutdown: Shutdown::new(),
            namespaces: None,
        }
    }

    /// Checks creates against the cluster's namespaces.
    pub fn with_namespace_lifecycle(mut self, namespaces: Arc<NamespaceLifecycle>) -> Self {
        self.namespaces = Some(namespaces);
        self
    }
}

/// Builds the server's router from the built-in endpoints and contributed routes.
pub struct ApiRouter {
    state: ServerState,
    routes: Router,
    default_discovery: bool,
}

impl ApiRouter {
    pub fn new(state: ServerState) -> Self {
        Self {
            state,
            routes: Router::new(),
            default_discovery: true,
        }
    }

    /// The shared services, for handlers of merged routes.
    pub fn state(&self) -> &ServerState {
        &self.state
    }

    /// Adds routes (resource endpoints, discovery, OpenAPI). They run behind the same
    /// authentication, authorization, metrics and limits as the built-in endpoints.
    pub fn merge(mut self, routes: Router) -> Self {
        self.routes = self.routes.merge(routes);
        self
    }

    /// Drops the built-in `/apis` (an empty group list) and `/api` (no versions) because
    /// merged routes serve the API groups themselves (the core group only in `dev`).
    pub fn without_default_discovery(mut self) -> Self {
        self.default_discovery = false;
        self
    }

    pub fn build(self) -> Router {
        let state = self.state;
        let mut router = Router::new()
            .merge(health::routes(Arc::clone(&state.health)))
            .route(
                "/metrics",
                get(metrics::handler).with_state(Arc::clone(&state.metrics)),
            )
            .route("/version", get(version::handler))
            // client libraries generated from the OpenAPI spec ask for `/version/`
            .route("/version/", get(version::handler));
        if self.default_discovery {
            router = router
                .route("/api", get(legacy_api_versions))
                .route("/apis", get(empty_group_list));
        }
        router
            .merge(self.routes)
            .fallback(|| async { ApiError::route_not_found() })
            .method_not_allowed_fallback(|| async { ApiError::route_method_not_allowed() })
            .layer(middleware::from_fn(body::enforce_declared_length))
            .layer(middleware::from_fn(deadline::enforce))
            .layer(middleware::from_fn_with_state(
                Arc::clone(&state.authorizer),
                authz::authorize,
            ))
            .layer(middleware::from_fn_with_state(
                Arc::clone(&state.authentication),
                authn::authenticate,
            ))
            .layer(middleware::from_fn(log_request))
            .layer(middleware::from_fn_with_state(
                Arc::clone(&state.metrics),
                metrics::track,
            ))
            .layer(middleware::from_fn(attach_request_info))
            .layer(middleware::from_fn(catch_panic))
            .layer(middleware::from_fn(common_headers))
    }
}

/// `GET /apis` until the API groups are wired in: an empty `APIGroupList`.
async fn empty_group_list(headers: HeaderMap) -> Response {
    discovery_response(
        &headers,
        &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": []}),
    )
}

/// `GET /api`: this server serves no legacy (core) group versions.
async fn legacy_api_versions(headers: HeaderMap) -> Response {
    discovery_response(
        &headers,
        &json!({"kind": "APIVersions", "versions": [], "serverAddressByClientCIDRs": []}),
    )
}

fn discovery_response(headers: &HeaderMap, value: &serde_json::Value) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    match negotiation::negotiate_output(accept, Capabilities::PLAIN) {
        Ok(negotiated) => response::object(StatusCode::OK, &negotiated, value),
        Err(err) => err.into_response(),
    }
}

/// Derives the `RequestInfo` once for everything behind it.
async fn attach_request_info(mut request: Request, next: Next) -> Response {
    let query = query_pairs(request.uri());
    match RequestInfo::new(request.method(), request.uri().path(), &query) {
        Ok(info) => {
            request.extensions_mut().insert(info);
            next.run(request).await
        }
        Err(_) => ApiError::route_not_found().into_response(),
    }
}

/// One structured line per request (probes and scrapes at debug level).
async fn log_request(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    let status = response.status().as_u16();
    let user = response
        .extensions()
        .get::<UserInfo>()
        .map(|u| u.name.clone())
        .unwrap_or_default();
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    let routine = matches!(
        path.as_str(),
        "/healthz" | "/livez" | "/readyz" | "/metrics"
    );
    if routine {
        tracing::debug!(target: "capmox::http", %method, %path, status, latency_ms, %user, "request");
    } else {
        tracing::info!(target: "capmox::http", %method, %path, status, latency_ms, %user, "request");
    }
    response
}

/// A panicking handler answers 500 instead of dropping the connection.
async fn catch_panic(request: Request, next: Next) -> Response {
    let path = request.uri().path().to_owned();
    match AssertUnwindSafe(next.run(request)).catch_unwind().await {
        Ok(response) => response,
        Err(panic) => {
            let detail = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            tracing::error!(%path, panic = %detail, "handler panicked");
            ApiError::internal("the server panicked while handling the request").into_response()
        }
    }
}

static AUDIT_ID: HeaderName = HeaderName::from_static("audit-id");

/// `Audit-Id` echo (or a fresh one) and kube's default `Cache-Control: no-cache, private`.
async fn common_headers(request: Request, next: Next) -> Response {
    let audit_id = request
        .headers()
        .get(&AUDIT_ID)
        .cloned()
        .unwrap_or_else(|| {
            HeaderValue::from_str(&uuid::Uuid::new_v4().to_string())
                .unwrap_or_else(|_| HeaderValue::from_static("unknown"))
        });
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(AUDIT_ID.clone(), audit_id);
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache, private"),
        );
    }
    response
}
