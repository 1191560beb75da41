//! The HTTP router: built-in endpoints (health, metrics, version, default discovery) plus
//! routes contributed by other layers, wrapped in the request pipeline (one layer):
//! common headers → panic guard → request info → metrics and log → authentication →
//! authorization → deadline (non-watch requests) → body limit → handler.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::FutureExt;
use serde_json::json;

use crate::registry::admission::{Admission, NoAdmission};
use crate::registry::cotenant::CoTenants;
use crate::registry::crd::conversion::ConversionCaller;

use super::admission::Caller;
use super::authn::{Authentication, AuthnRequest, ConnectionInfo, UserInfo};
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
use super::unread_body;
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
    /// The management cluster's admission chain every write passes (`serve`).
    pub admission: Arc<dyn Admission>,
    /// Kinds other providers define by CRD in our group-versions (`serve`); `None` knows
    /// of none, and an unknown resource is a 404.
    pub cotenants: Option<Arc<CoTenants>>,
    /// Calls the conversion webhooks of co-tenant CRDs (in `dev`, those addressed by URL).
    pub conversion: Arc<dyn ConversionCaller>,
    /// The management cluster's kube-apiserver, through which co-tenant kinds it keeps are
    /// served (`serve`); `None` answers them 503 with the reason.
    pub kube: Option<kube::Client>,
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
            admission: Arc::new(NoAdmission),
            cotenants: None,
            conversion: Arc::new(Caller::without_cluster()),
            kube: None,
        }
    }

    /// Calls co-tenants' conversion webhooks through `caller`.
    pub fn with_conversion_caller(mut self, caller: Arc<dyn ConversionCaller>) -> Self {
        self.conversion = caller;
        self
    }

    /// Answers for, and lists, the kinds other providers define in our group-versions.
    pub fn with_cotenants(mut self, cotenants: Arc<CoTenants>) -> Self {
        self.cotenants = Some(cotenants);
        self
    }

    /// Serves the co-tenant kinds kube-apiserver keeps through `client`.
    pub fn with_kube(mut self, client: kube::Client) -> Self {
        self.kube = Some(client);
        self
    }

    /// Runs `admission` around every write.
    pub fn with_admission(mut self, admission: Arc<dyn Admission>) -> Self {
        self.admission = admission;
        self
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
            .layer(middleware::from_fn_with_state(Arc::new(state), pipeline))
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

/// The request pipeline, as one layer (one boxed service and future per request rather than
/// one per step): the request's body held until the answer is sent → common headers → panic
/// guard → request info → metrics and log → authentication → authorization → deadline
/// (non-watch requests) → body limit → handler.
async fn pipeline(State(state): State<Arc<ServerState>>, request: Request, next: Next) -> Response {
    let audit_id = audit_id(request.headers());
    let path = request.uri().path().to_owned();
    let (request, body) = unread_body::hold(request);
    let response = match AssertUnwindSafe(state.observed(request, &path, next))
        .catch_unwind()
        .await
    {
        Ok(response) => response,
        Err(panic) => panicked(&path, panic),
    };
    let mut response = body.until_sent(response);
    let through_front_proxy = response.extensions().get::<ThroughFrontProxy>().is_some();
    let headers = response.headers_mut();
    if through_front_proxy {
        // kube-apiserver's own filters set both on the answer it writes, and its proxy adds
        // ours beside them: each would reach the client twice.
        headers.remove(&AUDIT_ID);
        headers.remove(header::CACHE_CONTROL);
        return response;
    }
    headers.insert(AUDIT_ID.clone(), audit_id);
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache, private"),
        );
    }
    response
}

/// Marks an answer to a request kube-apiserver's front proxy brought (see [`pipeline`]).
#[derive(Clone, Copy)]
struct ThroughFrontProxy;

/// The steps of [`pipeline`] inside its panic guard.
impl ServerState {
    /// Derives the `RequestInfo` once for everything behind it, then counts and logs the
    /// request with its answer.
    async fn observed(&self, mut request: Request, path: &str, next: Next) -> Response {
        let started = Instant::now();
        let query = query_pairs(request.uri());
        let Ok(info) = RequestInfo::new(request.method(), path, &query) else {
            return ApiError::route_not_found().into_response();
        };
        let method = request.method().clone();
        let is_apply = request
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.starts_with("application/apply-patch"));
        request.extensions_mut().insert(info.clone());
        let (response, user) = self.admitted(request, &info, &query, next).await;
        let status = response.status();
        self.metrics
            .observe(&info, &method, is_apply, status, started);
        log_request(&method, path, status, started, user.as_ref());
        response
    }

    /// Authentication, then [`Self::authorized`]; the answer and who asked (when known).
    async fn admitted(
        &self,
        request: Request,
        info: &RequestInfo,
        query: &[(String, String)],
        next: Next,
    ) -> (Response, Option<UserInfo>) {
        let authenticated = self
            .authentication
            .authenticate(AuthnRequest {
                headers: request.headers(),
                connection: request.extensions().get::<ConnectionInfo>(),
            })
            .await;
        let (user, through_front_proxy) = match authenticated {
            Ok(authenticated) => (authenticated.user, authenticated.through_front_proxy),
            Err(err) => return (err.into_response(), None),
        };
        let (mut response, user) = self.authorized(request, info, query, next, user).await;
        if through_front_proxy {
            response.extensions_mut().insert(ThroughFrontProxy);
        }
        (response, user)
    }

    /// Authorization, the deadline and the body limit, then the handler.
    async fn authorized(
        &self,
        mut request: Request,
        info: &RequestInfo,
        query: &[(String, String)],
        next: Next,
        user: UserInfo,
    ) -> (Response, Option<UserInfo>) {
        if let Err(err) = authz::check(self.authorizer.as_ref(), &user, info).await {
            return (err.into_response(), Some(user));
        }
        request.extensions_mut().insert(user.clone());
        let response = if deadline::is_long_running(info) {
            next.run(request).await
        } else {
            match deadline::request_deadline(query) {
                Ok(deadline) => tokio::time::timeout(deadline, within_limits(request, next))
                    .await
                    .unwrap_or_else(|_| {
                        ApiError::timeout("request did not complete within the allotted timeout", 0)
                            .into_response()
                    }),
                Err(err) => err.into_response(),
            }
        };
        (response, Some(user))
    }
}

/// The handler, for a body within the limit it declares.
async fn within_limits(request: Request, next: Next) -> Response {
    match body::check_declared_length(request.headers()) {
        Ok(()) => next.run(request).await,
        Err(err) => err.into_response(),
    }
}

/// kube-apiserver's threshold for a slow request (its handlers' `utiltrace.LogIfLong`).
const SLOW_REQUEST: Duration = Duration::from_millis(500);

/// The level of a request's log line. As kube-apiserver logs at its default verbosity: a
/// request that failed (5xx), was denied (401, 403: the user is on the line) or was slow to
/// answer (its response head after 500 ms) at info; every other one, and probes and scrapes
/// always, at debug (`RUST_LOG=info,capmox::http=debug` shows them).
fn request_log_level(path: &str, status: StatusCode, elapsed: Duration) -> tracing::Level {
    let routine = matches!(path, "/healthz" | "/livez" | "/readyz" | "/metrics");
    let notable = status.is_server_error()
        || matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
        || elapsed >= SLOW_REQUEST;
    if notable && !routine {
        tracing::Level::INFO
    } else {
        tracing::Level::DEBUG
    }
}

/// One structured line per request, at [`request_log_level`].
fn log_request(
    method: &Method,
    path: &str,
    status: StatusCode,
    started: Instant,
    user: Option<&UserInfo>,
) {
    let elapsed = started.elapsed();
    let level = request_log_level(path, status, elapsed);
    let status = status.as_u16();
    let user = user.map_or("", |u| u.name.as_str());
    let latency_ms = elapsed.as_secs_f64() * 1000.0;
    if level == tracing::Level::INFO {
        tracing::info!(target: "capmox::http", %method, %path, status, latency_ms, %user, "request");
    } else {
        tracing::debug!(target: "capmox::http", %method, %path, status, latency_ms, %user, "request");
    }
}

/// A panicking handler answers 500 instead of dropping the connection.
fn panicked(path: &str, panic: Box<dyn std::any::Any + Send>) -> Response {
    let detail = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    tracing::error!(%path, panic = %detail, "handler panicked");
    ApiError::internal("the server panicked while handling the request").into_response()
}

static AUDIT_ID: HeaderName = HeaderName::from_static("audit-id");

/// The client's `Audit-Id` (echoed) or a fresh one.
fn audit_id(headers: &HeaderMap) -> HeaderValue {
    headers.get(&AUDIT_ID).cloned().unwrap_or_else(|| {
        HeaderValue::from_str(&uuid::Uuid::new_v4().to_string())
            .unwrap_or_else(|_| HeaderValue::from_static("unknown"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_logged_at_info_when_they_failed_were_denied_or_were_slow() {
        let quick = Duration::from_millis(3);
        let level = |path, status, elapsed| request_log_level(path, status, elapsed);
        let machines = "/apis/infrastructure.cluster.x-k8s.io/v1alpha2/proxmoxmachines";
        assert_eq!(
            level(machines, StatusCode::OK, quick),
            tracing::Level::DEBUG
        );
        assert_eq!(
            level(machines, StatusCode::CONFLICT, quick),
            tracing::Level::DEBUG
        );
        assert_eq!(
            level(machines, StatusCode::NOT_FOUND, quick),
            tracing::Level::DEBUG
        );
        for status in [
            StatusCode::INTERNAL_SERVER_ERROR,
            StatusCode::SERVICE_UNAVAILABLE,
            StatusCode::UNAUTHORIZED,
            StatusCode::FORBIDDEN,
        ] {
            assert_eq!(
                level(machines, status, quick),
                tracing::Level::INFO,
                "{status}"
            );
        }
        assert_eq!(
            level(machines, StatusCode::OK, SLOW_REQUEST),
            tracing::Level::INFO
        );
        assert_eq!(
            level("/readyz", StatusCode::INTERNAL_SERVER_ERROR, SLOW_REQUEST),
            tracing::Level::DEBUG,
            "probes: their checks log why they fail"
        );
    }
}
