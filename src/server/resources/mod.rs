//! The API routes: discovery (`/apis…`), OpenAPI (`/openapi…`) and every resource endpoint
//! of every served kind. One generic handler serves all kinds: the `RequestInfo` (derived
//! as kube-apiserver derives it) names the group, version, resource, namespace, name,
//! subresource and verb, the registry's catalog supplies the kind, and the verb picks the
//! registry operation. Nothing here knows a kind.

mod delegated;
mod output;
mod reads;
mod scale;
mod watch;
mod writes;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};

use crate::registry::admission::Requester;
use crate::registry::catalog::Catalog;
use crate::registry::crd::delegated::DelegatedKind;
use crate::registry::descriptor::GroupVersion;
use crate::registry::descriptor::ResourceDescriptor;
use crate::registry::error::RegistryError;
use crate::registry::list_options::ListOptions;
use crate::registry::rest::{ResourceRest, Subresource};
use crate::registry::table::{IncludeObject, TableConvertor};

use super::authn::UserInfo;
use super::cotenants;
use super::error::ApiError;
use super::negotiation::{Capabilities, negotiate_output};
use super::request_info::{RequestInfo, query_pairs};
use super::router::ServerState;
use super::{discovery::Discovery, live::Live, openapi::OpenApi};

use output::{Output, with_warnings};

/// What the API handlers share.
#[derive(Clone)]
pub struct ApiState {
    pub catalog: Arc<Catalog>,
    pub discovery: Arc<Live<Discovery>>,
    pub openapi: Arc<OpenApi>,
    pub server: ServerState,
}

impl ApiState {
    pub fn new(catalog: Arc<Catalog>, server: ServerState) -> Self {
        let listed = Arc::clone(&catalog);
        let discovery = Arc::new(Live::new(server.cotenants.clone(), move |set| {
            Discovery::new(&listed, set)
        }));
        // OpenAPI documents exist for this server's group only (see docs/dev.md).
        let own: Vec<crate::api::Version> = discovery
            .current()
            .versions(crate::api::GROUP)
            .iter()
            .filter_map(|v| v.api())
            .collect();
        let openapi = Arc::new(OpenApi::new(&own, server.cotenants.clone()));
        Self {
            catalog,
            discovery,
            openapi,
            server,
        }
    }
}

impl ApiState {
    /// A 503 for discovery of `group` while the co-tenants' CRDs are not listed yet.
    fn discovery_unlisted(&self, group: &str, version: Option<&str>) -> Option<ApiError> {
        let cotenants = self.server.cotenants.as_deref()?;
        super::cotenants::discovery_unlisted(cotenants, group, version)
    }
}

/// The routes of discovery, OpenAPI and the resources.
pub fn routes(state: ApiState) -> Router {
    Router::new()
        .route("/api", get(core))
        .route("/api/", get(core))
        .route("/api/{*path}", any(api_path))
        .route("/apis", get(apis))
        .route("/apis/", get(apis))
        .route("/apis/{*path}", any(api_path))
        .route("/openapi/v2", get(openapi_v2))
        .route("/openapi/v3", get(openapi_v3_index))
        .route(
            "/openapi/v3/apis/{group}/{version}",
            get(openapi_v3_document),
        )
        .with_state(Arc::new(state))
}

async fn apis(State(state): State<Arc<ApiState>>, headers: HeaderMap) -> Response {
    if let Some(e) = state.discovery_unlisted(crate::api::GROUP, None) {
        return e.into_response();
    }
    state.discovery.current().apis(&headers)
}

async fn core(State(state): State<Arc<ApiState>>, headers: HeaderMap) -> Response {
    state.discovery.current().core(&headers)
}

async fn openapi_v2(State(state): State<Arc<ApiState>>, headers: HeaderMap) -> Response {
    state.openapi.v2(&headers)
}

async fn openapi_v3_index(State(state): State<Arc<ApiState>>, headers: HeaderMap) -> Response {
    state.openapi.v3_index(&headers)
}

async fn openapi_v3_document(
    State(state): State<Arc<ApiState>>,
    axum::extract::Path((group, version)): axum::extract::Path<(String, String)>,
    request: Request,
) -> Response {
    let query = query_pairs(request.uri());
    state
        .openapi
        .v3_document(&group, &version, &query, request.headers())
        .unwrap_or_else(|| ApiError::route_not_found().into_response())
}

/// A resolved resource request.
pub(super) struct Target {
    pub rest: Arc<ResourceRest>,
    pub version: GroupVersion,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Subresource,
}

/// Where a resource request points, in a kind's descriptor.
pub(super) struct Address {
    pub version: GroupVersion,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Subresource,
}

impl Target {
    /// The list options of the request's query, field selectors checked against what the
    /// kind makes selectable in the requested version.
    fn list_options<'a>(
        &self,
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
        watch_list_supported: bool,
    ) -> Result<ListOptions, RegistryError> {
        let descriptor = self.rest.descriptor();
        let selectable = descriptor
            .version(self.version)
            .map_or(&[][..], |v| v.selectable_fields.as_slice());
        ListOptions::from_query(
            pairs,
            descriptor.namespaced,
            selectable,
            watch_list_supported,
        )
    }
}

/// The parts of a request the verb handlers need.
pub(super) struct Call {
    pub method: Method,
    pub uri: Uri,
    pub headers: HeaderMap,
    pub query: Vec<(String, String)>,
    pub body: Body,
    pub info: RequestInfo,
    /// The authenticated user (the admission chain's requester).
    pub user: Option<UserInfo>,
}

impl Call {
    /// The query as borrowed pairs.
    pub fn pairs(&self) -> Vec<(&str, &str)> {
        self.query
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    pub fn query_value(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The admission chain's view of the user.
    pub fn requester(&self) -> Option<Requester> {
        self.user.as_ref().map(|user| Requester {
            username: user.name.clone(),
            uid: user.uid.clone(),
            groups: user.groups.clone(),
            extra: user.extra.clone(),
        })
    }

    pub fn content_type(&self) -> Option<&str> {
        self.headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
    }

    /// The negotiated output for this request (`stream` for watches).
    pub fn output(
        &self,
        target: &Target,
        stream: bool,
        warnings: Vec<String>,
    ) -> Result<Output, Box<Response>> {
        let table = target.rest.table(target.version).cloned();
        self.output_in(target.version, table, stream, warnings)
    }

    /// The negotiated output for objects in `version` with the printer columns of `table`.
    pub fn output_in(
        &self,
        version: GroupVersion,
        table: Option<Arc<TableConvertor>>,
        stream: bool,
        warnings: Vec<String>,
    ) -> Result<Output, Box<Response>> {
        let accept = self
            .headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok());
        let caps = if stream {
            Capabilities::WATCH
        } else {
            Capabilities::RESOURCE
        };
        let negotiated = negotiate_output(accept, caps)
            .map_err(|e| Box::new(with_warnings(e, &warnings)))?
            .with_query(&self.query);
        let include_object = IncludeObject::from_query(self.query_value("includeObject"))
            .map_err(|e| Box::new(with_warnings(e.into(), &warnings)))?;
        Ok(Output {
            table,
            version,
            negotiated,
            include_object,
            warnings,
        })
    }
}

/// Every `/apis/<…>` and `/api/<…>` path: discovery of a group and its versions, or a
/// resource request.
async fn api_path(State(state): State<Arc<ApiState>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let Some(info) = parts.extensions.get::<RequestInfo>().cloned() else {
        return ApiError::route_not_found().into_response();
    };
    if !info.is_resource_request {
        return discovery(&state, &parts.method, &parts.uri, &parts.headers);
    }
    let call = Call {
        user: parts.extensions.get::<UserInfo>().cloned(),
        query: query_pairs(&parts.uri),
        uri: parts.uri,
        method: parts.method,
        headers: parts.headers,
        body,
        info,
    };
    let target = match resolve(&state, &call.info) {
        Ok(target) => target,
        // Asked only once resolving failed, so that our kinds pay nothing for it.
        Err(e) => match delegated_kind(&state, &call.info) {
            Some(kind) => return serve_delegated(&state, call, kind).await,
            None => {
                return unserved_cotenant(&state, &call.info)
                    .unwrap_or(e)
                    .into_response();
            }
        },
    };
    if let Some(refused) = state
        .server
        .cotenants
        .as_deref()
        .and_then(|cotenants| cotenants::refused_while_terminating(cotenants, &call.info))
    {
        return refused.into_response();
    }
    let warnings = deprecation(target.rest.descriptor(), target.version);
    dispatch(&state, call, target, warnings).await
}

fn discovery(
    state: &ApiState,
    method: &Method,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
) -> Response {
    if *method != Method::GET && *method != Method::HEAD {
        return ApiError::route_method_not_allowed().into_response();
    }
    let segments: Vec<&str> = uri
        .path()
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let unlisted = match segments.as_slice() {
        ["apis", group] => state.discovery_unlisted(group, None),
        ["apis", group, version] => state.discovery_unlisted(group, Some(version)),
        _ => None,
    };
    if let Some(e) = unlisted {
        return e.into_response();
    }
    let discovery = state.discovery.current();
    let answer = match segments.as_slice() {
        ["api", version] => discovery.resources("", version, headers),
        ["apis", group] => discovery.group(group, headers),
        ["apis", group, version] => discovery.resources(group, version, headers),
        _ => None,
    };
    answer.unwrap_or_else(|| ApiError::route_not_found().into_response())
}

/// The warning of a deprecated version.
fn deprecation(descriptor: &ResourceDescriptor, version: GroupVersion) -> Vec<String> {
    let Some(info) = descriptor.version(version).filter(|v| v.deprecated) else {
        return Vec::new();
    };
    vec![info.deprecation_warning.clone().unwrap_or_else(|| {
        format!(
            "{}/{} {} is deprecated",
            descriptor.group, version, descriptor.kind
        )
    })]
}

/// A request for a co-tenant kind kube-apiserver keeps.
async fn serve_delegated(state: &ApiState, call: Call, kind: Arc<DelegatedKind>) -> Response {
    match address(kind.descriptor(), &call.info) {
        Ok(address) => {
            let warnings = deprecation(kind.descriptor(), address.version);
            delegated::serve(state, call, kind, address, warnings).await
        }
        Err(e) => e.into_response(),
    }
}

/// The co-tenant kind the request is for, when kube-apiserver keeps its objects.
fn delegated_kind(state: &ApiState, info: &RequestInfo) -> Option<Arc<DelegatedKind>> {
    let cotenants = state.server.cotenants.as_deref()?;
    if !cotenants.holds(&info.api_group, &info.api_version) {
        return None;
    }
    cotenants
        .current()
        .find(&info.api_version, &info.resource)?
        .delegated()
        .cloned()
}

/// A resource no kind of ours takes may be another provider's, defined by a CRD in our
/// group-versions: a 503 with the reason instead of the 404 (docs/rest.md, "Discovery").
/// Asked only once resolving failed, so that served requests pay nothing for it.
fn unserved_cotenant(state: &ApiState, info: &RequestInfo) -> Option<ApiError> {
    if served_kind(state, info).is_some() {
        return None;
    }
    cotenants::unserved(state.server.cotenants.as_deref()?, info)
}

/// The kind served as the request's resource: ours, or a co-tenant's served from its CRD.
fn served_kind(state: &ApiState, info: &RequestInfo) -> Option<Arc<ResourceRest>> {
    if let Some(rest) = state.catalog.resource(&info.api_group, &info.resource) {
        return Some(Arc::clone(rest));
    }
    let cotenants = state.server.cotenants.as_deref()?;
    if !cotenants.holds(&info.api_group, &info.api_version) {
        return None;
    }
    cotenants
        .current()
        .served(&info.api_version, &info.resource)
}

/// Finds the kind, version and scope a resource request is about.
fn resolve(state: &ApiState, info: &RequestInfo) -> Result<Target, ApiError> {
    let rest = served_kind(state, info).ok_or_else(ApiError::route_not_found)?;
    let Address {
        version,
        namespace,
        name,
        subresource,
    } = address(rest.descriptor(), info)?;
    Ok(Target {
        rest,
        version,
        namespace,
        name,
        subresource,
    })
}

/// Where a resource request of a kind `descriptor` describes points: its version, scope,
/// name and subresource, or a 404 for a path the kind has not.
fn address(descriptor: &ResourceDescriptor, info: &RequestInfo) -> Result<Address, ApiError> {
    let not_found = ApiError::route_not_found;
    let version = descriptor
        .version_named(&info.api_version)
        .ok_or_else(not_found)?;
    let namespaced = descriptor.namespaced;
    let namespace = (!info.namespace.is_empty()).then(|| info.namespace.clone());
    // An object of a namespaced kind is only addressed inside its namespace; the
    // cluster-wide path serves lists and watches.
    if namespaced && namespace.is_none() && info.parts.len() > 1 {
        return Err(not_found());
    }
    // A cluster-scoped kind has no namespaced paths.
    if !namespaced && namespace.is_some() {
        return Err(not_found());
    }
    let subresource = match info.subresource.as_str() {
        "" => Subresource::Main,
        "status" if descriptor.has_status(version) => Subresource::Status,
        "scale" if descriptor.scale(version).is_some() => Subresource::Scale,
        _ => return Err(not_found()),
    };
    if info.parts.len() > 3 {
        return Err(not_found());
    }
    let name = (info.parts.len() > 1).then(|| info.parts[1].clone());
    Ok(Address {
        version,
        namespace,
        name,
        subresource,
    })
}

async fn dispatch(state: &ApiState, call: Call, target: Target, warnings: Vec<String>) -> Response {
    let collection = target.name.is_none();
    // The cluster-wide path of a namespaced kind serves lists and watches only (as for
    // custom resources): a create there would bypass the namespace's lifecycle, a
    // deletecollection would sweep every namespace at once.
    let in_namespace = target.namespace.is_some() || !target.rest.descriptor().namespaced;
    let verb = call.info.verb.clone();
    match (verb.as_str(), collection, target.subresource) {
        ("get", false, Subresource::Scale) => scale::get(call, &target, warnings).await,
        ("update", false, Subresource::Scale) => scale::update(call, &target, warnings).await,
        ("patch", false, Subresource::Scale) => scale::patch(call, &target, warnings).await,
        ("get", false, _) => reads::get(call, &target, warnings).await,
        ("list", true, Subresource::Main) => reads::list(call, &target, warnings).await,
        ("watch", _, Subresource::Main) => watch::watch(state, call, &target, warnings).await,
        ("create", true, Subresource::Main) if in_namespace => {
            writes::create(&state.server, call, &target, warnings).await
        }
        ("update", false, _) => writes::update(call, &target, warnings).await,
        ("patch", false, _) => writes::patch(&state.server, call, &target, warnings).await,
        ("delete", false, Subresource::Main) => writes::delete(call, &target, warnings).await,
        ("deletecollection", true, Subresource::Main) if in_namespace => {
            writes::delete_collection(call, &target, warnings).await
        }
        _ => with_warnings(
            ApiError::method_not_supported(
                &super::GroupResource::new(
                    target.rest.descriptor().group,
                    target.rest.descriptor().plural,
                ),
                &verb,
            ),
            &warnings,
        ),
    }
}
