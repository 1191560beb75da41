//! A stand-in for the management cluster's kube-apiserver, over HTTPS on 127.0.0.1: the
//! `kube-system/extension-apiserver-authentication` ConfigMap and the namespaces (list and
//! watch, as kube-rs's watcher uses them; namespaces also by name), the admission webhook
//! configurations and ValidatingAdmissionPolicies with bindings (list and watch), Services (by
//! name), TokenReviews and
//! SubjectAccessReviews, with a programmable policy and a record of every review, and the
//! management kinds the built-in controller works on (`fake_objects`). Requests must carry
//! the server's service-account token.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::{Path as UrlPath, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use capmox_apiserver::server::listener::{self, ListenerOptions, RunningServer, Shutdown};
use capmox_apiserver::server::pki::CertificateAuthority;
use capmox_apiserver::server::tls::{self, ReloadingCertResolver};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::fake_objects::{self, ObjectStore};

/// The token the server under test authenticates to the fake with.
const SERVICE_ACCOUNT_TOKEN: &str = "capmox-apiserver-sa-token";

/// Decides a SubjectAccessReview spec: `Ok((allowed, reason))`, or `Err(status)` to fail the
/// review itself.
pub type Policy = dyn Fn(&Value) -> Result<(bool, String), StatusCode> + Send + Sync;

/// The namespaces every fake cluster starts with.
const INITIAL_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

struct State_ {
    configmap_data: Option<Value>,
    /// Namespace objects by name.
    namespaces: BTreeMap<String, Value>,
    resource_version: u64,
    tokens: HashMap<String, Value>,
    token_reviews: Vec<String>,
    access_reviews: Vec<Value>,
    /// Webhook configurations, admission policies and CRDs by resource
    /// (`validatingwebhookconfigurations`…) and name.
    cluster_objects: BTreeMap<String, BTreeMap<String, Value>>,
    /// Services by `namespace/name`.
    services: BTreeMap<String, Value>,
    /// Cluster-scoped resources whose lists answer 503 for now (a cluster that is slow to
    /// answer them).
    withheld: BTreeSet<String>,
}

#[derive(Clone)]
struct Shared {
    state: Arc<Mutex<State_>>,
    policy: Arc<Mutex<Arc<Policy>>>,
    changes: broadcast::Sender<Value>,
    /// Namespace watch events (`{"type", "object"}`).
    namespace_events: broadcast::Sender<Value>,
    /// Webhook configuration watch events: the resource and `{"type", "object"}`.
    webhook_events: broadcast::Sender<(String, Value)>,
}

impl Shared {
    fn configmap(&self) -> Option<Value> {
        let state = self.state.lock().expect("state");
        state.configmap_data.as_ref().map(|data| {
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": "extension-apiserver-authentication",
                    "namespace": "kube-system",
                    "uid": "2f0c1c3e-0000-4000-8000-000000000001",
                    "resourceVersion": state.resource_version.to_string(),
                },
                "data": data,
            })
        })
    }

    fn resource_version(&self) -> u64 {
        self.state.lock().expect("state").resource_version
    }
}

/// The running fake and the kubeconfig that reaches it.
pub struct FakeKube {
    shared: Shared,
    /// Read and written through the methods in `fake_objects`.
    pub(super) objects: ObjectStore,
    server: Option<RunningServer>,
    pub kubeconfig: PathBuf,
}

/// Every request must carry the server's service-account token.
async fn require_token(request: Request, next: Next) -> Response {
    let authorized = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Bearer {SERVICE_ACCOUNT_TOKEN}"));
    if authorized {
        return next.run(request).await;
    }
    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "reason": "Unauthorized", "code": 401, "message": "Unauthorized"});
    (StatusCode::UNAUTHORIZED, axum::Json(status)).into_response()
}

async fn configmaps(
    State(shared): State<Shared>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    assert_eq!(
        query.get("fieldSelector").map(String::as_str),
        Some("metadata.name=extension-apiserver-authentication"),
        "the server lists only its ConfigMap"
    );
    let watching = query.get("watch").is_some_and(|w| w == "true" || w == "1");
    if !watching {
        let items: Vec<Value> = shared.configmap().into_iter().collect();
        return axum::Json(json!({
            "apiVersion": "v1",
            "kind": "ConfigMapList",
            "metadata": {"resourceVersion": shared.resource_version().to_string()},
            "items": items,
        }))
        .into_response();
    }
    // Changes after the requested version, then every later change, one JSON line each.
    let since: u64 = query
        .get("resourceVersion")
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0);
    let mut changes = shared.changes.subscribe();
    let missed = (shared.resource_version() > since)
        .then(|| shared.configmap())
        .flatten();
    let stream = async_stream::stream! {
        if let Some(object) = missed {
            yield Ok::<_, Infallible>(event_line(&object));
        }
        while let Ok(object) = changes.recv().await {
            yield Ok(event_line(&object));
        }
    };
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(stream))
        .expect("response")
}

fn event_line(object: &Value) -> String {
    format!("{}\n", json!({"type": "MODIFIED", "object": object}))
}

fn namespace_object(name: &str, resource_version: u64, terminating: bool) -> Value {
    let mut object = json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "resourceVersion": resource_version.to_string()},
        "status": {"phase": if terminating { "Terminating" } else { "Active" }},
    });
    if terminating {
        object["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    }
    object
}

fn not_found(resource: &str, name: &str) -> Response {
    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "reason": "NotFound", "code": 404,
        "message": format!("{resource} \"{name}\" not found"),
        "details": {"name": name, "kind": resource}});
    (StatusCode::NOT_FOUND, axum::Json(status)).into_response()
}

/// A list, or with `?watch=true` a watch streaming `events` until the client goes away.
fn list_or_watch(
    query: &HashMap<String, String>,
    list: Value,
    events: impl futures::Stream<Item = Value> + Send + 'static,
) -> Response {
    let watching = query.get("watch").is_some_and(|w| w == "true" || w == "1");
    if !watching {
        return axum::Json(list).into_response();
    }
    let stream = events.map(|event| Ok::<_, Infallible>(format!("{event}\n")));
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(stream))
        .expect("response")
}

/// A broadcast channel's messages as a stream (ends when the sender is gone, or when the
/// receiver lagged behind and missed messages).
pub(super) fn received<T: Clone + Send + 'static>(
    mut receiver: broadcast::Receiver<T>,
) -> impl futures::Stream<Item = T> + Send + 'static {
    async_stream::stream! {
        while let Ok(item) = receiver.recv().await {
            yield item;
        }
    }
}

/// What a watch from `?resourceVersion=` missed of `items` since then, as MODIFIED events: a
/// change between a watcher's list and its watch would otherwise be lost.
fn missed(query: &HashMap<String, String>, items: &[Value]) -> Vec<Value> {
    let since: u64 = query
        .get("resourceVersion")
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(u64::MAX);
    items
        .iter()
        .filter(|item| {
            item["metadata"]["resourceVersion"]
                .as_str()
                .and_then(|rv| rv.parse::<u64>().ok())
                .is_some_and(|rv| rv > since)
        })
        .map(|item| json!({"type": "MODIFIED", "object": item}))
        .collect()
}

async fn namespaces(
    State(shared): State<Shared>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let live = received(shared.namespace_events.subscribe());
    let state = shared.state.lock().expect("state");
    let items: Vec<Value> = state.namespaces.values().cloned().collect();
    let events = futures::stream::iter(missed(&query, &items)).chain(live);
    let list = json!({
        "apiVersion": "v1",
        "kind": "NamespaceList",
        "metadata": {"resourceVersion": state.resource_version.to_string()},
        "items": items,
    });
    list_or_watch(&query, list, events)
}

/// Cluster-scoped objects the server informs itself of, listed and watched: the admission
/// webhook configurations, admission policies with their bindings, and CRDs.
async fn cluster_objects(
    State(shared): State<Shared>,
    UrlPath(resource): UrlPath<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let list_kind = match resource.as_str() {
        "mutatingwebhookconfigurations" => "MutatingWebhookConfigurationList",
        "validatingwebhookconfigurations" => "ValidatingWebhookConfigurationList",
        "validatingadmissionpolicies" => "ValidatingAdmissionPolicyList",
        "validatingadmissionpolicybindings" => "ValidatingAdmissionPolicyBindingList",
        "mutatingadmissionpolicies" => "MutatingAdmissionPolicyList",
        "mutatingadmissionpolicybindings" => "MutatingAdmissionPolicyBindingList",
        "customresourcedefinitions" => "CustomResourceDefinitionList",
        _ => return not_found(&resource, ""),
    };
    let version = admission_version(&resource);
    let wanted = resource.clone();
    let live = received(shared.webhook_events.subscribe())
        .filter_map(move |(r, event)| futures::future::ready((r == wanted).then_some(event)));
    let state = shared.state.lock().expect("state");
    if state.withheld.contains(&resource) {
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "reason": "ServiceUnavailable", "code": 503, "message": "withheld by the test"});
        return (StatusCode::SERVICE_UNAVAILABLE, axum::Json(status)).into_response();
    }
    let items: Vec<Value> = state
        .cluster_objects
        .get(&resource)
        .map(|items| items.values().cloned().collect())
        .unwrap_or_default();
    let events = futures::stream::iter(missed(&query, &items)).chain(live);
    let api_version = match resource.as_str() {
        "customresourcedefinitions" => "apiextensions.k8s.io/v1".to_owned(),
        _ => format!("admissionregistration.k8s.io/{version}"),
    };
    let list = json!({
        "apiVersion": api_version,
        "kind": list_kind,
        "metadata": {"resourceVersion": state.resource_version.to_string()},
        "items": items,
    });
    list_or_watch(&query, list, events)
}

/// The version the fake serves an admission resource in: the mutating policies in
/// v1beta1, as kube 1.34 does where they are enabled, everything else in v1.
fn admission_version(resource: &str) -> &'static str {
    if resource.starts_with("mutatingadmissionpolic") {
        "v1beta1"
    } else {
        "v1"
    }
}

/// The admission resources, by version, as discovery lists them.
const ADMISSION_RESOURCES: [(&str, &str); 6] = [
    (
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
    ),
    (
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
    ),
    ("validatingadmissionpolicies", "ValidatingAdmissionPolicy"),
    (
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
    ),
    ("mutatingadmissionpolicies", "MutatingAdmissionPolicy"),
    (
        "mutatingadmissionpolicybindings",
        "MutatingAdmissionPolicyBinding",
    ),
];

/// Discovery of the API groups: the admission group only.
async fn api_groups() -> Response {
    let version = |v: &str| json!({"groupVersion": format!("admissionregistration.k8s.io/{v}"), "version": v});
    axum::Json(json!({
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [{
            "name": "admissionregistration.k8s.io",
            "versions": [version("v1"), version("v1beta1")],
            "preferredVersion": version("v1"),
        }],
    }))
    .into_response()
}

/// Discovery of one version of the admission group.
async fn admission_resources(UrlPath(version): UrlPath<String>) -> Response {
    let resources: Vec<Value> = ADMISSION_RESOURCES
        .iter()
        .filter(|(plural, _)| admission_version(plural) == version)
        .map(|(plural, kind)| {
            json!({"name": plural, "singularName": "", "namespaced": false, "kind": kind,
                "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]})
        })
        .collect();
    axum::Json(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": format!("admissionregistration.k8s.io/{version}"),
        "resources": resources,
    }))
    .into_response()
}

async fn service(
    State(shared): State<Shared>,
    UrlPath((namespace, name)): UrlPath<(String, String)>,
) -> Response {
    let found = shared
        .state
        .lock()
        .expect("state")
        .services
        .get(&format!("{namespace}/{name}"))
        .cloned();
    match found {
        Some(service) => axum::Json(service).into_response(),
        None => not_found("services", &name),
    }
}

async fn namespace(State(shared): State<Shared>, UrlPath(name): UrlPath<String>) -> Response {
    let found = shared
        .state
        .lock()
        .expect("state")
        .namespaces
        .get(&name)
        .cloned();
    match found {
        Some(object) => axum::Json(object).into_response(),
        None => not_found("namespaces", &name),
    }
}

async fn token_reviews(
    State(shared): State<Shared>,
    axum::Json(review): axum::Json<Value>,
) -> Response {
    let token = review["spec"]["token"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let mut state = shared.state.lock().expect("state");
    state.token_reviews.push(token.clone());
    let status = match state.tokens.get(&token) {
        Some(user) => json!({"authenticated": true, "user": user}),
        None => json!({"authenticated": false, "error": "token not found"}),
    };
    axum::Json(json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "metadata": {},
        "spec": review["spec"],
        "status": status,
    }))
    .into_response()
}

async fn access_reviews(
    State(shared): State<Shared>,
    axum::Json(review): axum::Json<Value>,
) -> Response {
    assert_eq!(review["apiVersion"], "authorization.k8s.io/v1");
    assert_eq!(review["kind"], "SubjectAccessReview");
    let spec = review["spec"].clone();
    shared
        .state
        .lock()
        .expect("state")
        .access_reviews
        .push(spec.clone());
    let policy = Arc::clone(&shared.policy.lock().expect("policy"));
    match policy(&spec) {
        Ok((allowed, reason)) => axum::Json(json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "metadata": {},
            "spec": spec,
            "status": {"allowed": allowed, "reason": reason},
        }))
        .into_response(),
        Err(code) => (code, "review failed").into_response(),
    }
}

/// Serves `router` over TLS on a free port of 127.0.0.1, with the default listener options.
pub async fn serve_on_loopback(config: Arc<rustls::ServerConfig>, router: Router) -> RunningServer {
    let socket = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    listener::serve(
        socket,
        config,
        router,
        ListenerOptions::default(),
        Shutdown::new(),
    )
    .expect("serve")
}

impl FakeKube {
    /// Starts the fake with the ConfigMap `data` (`None`: no ConfigMap) and writes a kubeconfig
    /// for it into `dir`.
    pub async fn start(dir: &Path, data: Option<Value>) -> Self {
        let (changes, _) = broadcast::channel(16);
        let shared = Shared {
            state: Arc::new(Mutex::new(State_ {
                configmap_data: data,
                namespaces: INITIAL_NAMESPACES
                    .iter()
                    .map(|name| ((*name).to_owned(), namespace_object(name, 1, false)))
                    .collect(),
                resource_version: 1,
                tokens: HashMap::new(),
                token_reviews: Vec::new(),
                access_reviews: Vec::new(),
                cluster_objects: BTreeMap::new(),
                services: BTreeMap::new(),
                withheld: BTreeSet::new(),
            })),
            policy: Arc::new(Mutex::new(Arc::new(|_: &Value| {
                Ok((false, "no policy".to_owned()))
            }))),
            changes,
            namespace_events: broadcast::channel(16).0,
            webhook_events: broadcast::channel(16).0,
        };
        let objects = ObjectStore::new();
        let router = Router::new()
            .route("/api/v1/namespaces", get(namespaces))
            .route("/api/v1/namespaces/{name}", get(namespace))
            .route("/api/v1/namespaces/kube-system/configmaps", get(configmaps))
            .route(
                "/api/v1/namespaces/{namespace}/services/{name}",
                get(service),
            )
            .route("/apis", get(api_groups))
            .route(
                "/apis/admissionregistration.k8s.io/{version}",
                get(admission_resources),
            )
            .route(
                "/apis/admissionregistration.k8s.io/v1/{resource}",
                get(cluster_objects),
            )
            .route(
                "/apis/admissionregistration.k8s.io/v1beta1/{resource}",
                get(cluster_objects),
            )
            .route(
                "/apis/apiextensions.k8s.io/v1/{resource}",
                get(cluster_objects),
            )
            .route(
                "/apis/authentication.k8s.io/v1/tokenreviews",
                post(token_reviews),
            )
            .route(
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                post(access_reviews),
            )
            .with_state(shared.clone())
            .merge(fake_objects::router(objects.clone()))
            .layer(axum::middleware::from_fn(require_token));

        let ca = CertificateAuthority::generate("fake-kube-ca").expect("CA");
        let serving = ca.serving(&[]).expect("serving");
        let resolver = Arc::new(ReloadingCertResolver::new(
            serving.certified_key().expect("key"),
        ));
        let config = tls::server_config(resolver, None).expect("tls");
        let server = serve_on_loopback(config, router).await;

        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let kubeconfig = dir.join("management.kubeconfig");
        // JSON is YAML: both kube-rs and kubectl read it.
        let document = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "management", "cluster": {
                "server": format!("https://{}", server.local_addr()),
                "certificate-authority-data": b64(&ca.pair.cert_pem),
            }}],
            "users": [{"name": "capmox-apiserver", "user": {"token": SERVICE_ACCOUNT_TOKEN}}],
            "contexts": [{"name": "management", "context": {"cluster": "management", "user": "capmox-apiserver"}}],
            "current-context": "management",
        });
        std::fs::write(&kubeconfig, document.to_string()).expect("kubeconfig");
        Self {
            shared,
            objects,
            server: Some(server),
            kubeconfig,
        }
    }

    /// Replaces the ConfigMap's data; watchers see a MODIFIED event.
    pub fn update_configmap(&self, data: Value) {
        {
            let mut state = self.shared.state.lock().expect("state");
            state.configmap_data = Some(data);
            state.resource_version += 1;
        }
        if let Some(object) = self.shared.configmap() {
            // No receiver only means no watch is open right now; the next list sees it.
            let _ = self.shared.changes.send(object);
        }
    }

    /// Creates, updates (`terminating`) or, with `None`, deletes a namespace. With `announce`
    /// false the change is not sent to watchers (a watch that lags behind).
    pub fn set_namespace(&self, name: &str, terminating: Option<bool>, announce: bool) {
        let event = {
            let mut state = self.shared.state.lock().expect("state");
            state.resource_version += 1;
            let rv = state.resource_version;
            match terminating {
                Some(terminating) => {
                    let object = namespace_object(name, rv, terminating);
                    let kind = match state.namespaces.insert(name.to_owned(), object.clone()) {
                        Some(_) => "MODIFIED",
                        None => "ADDED",
                    };
                    json!({"type": kind, "object": object})
                }
                None => {
                    let object = state
                        .namespaces
                        .remove(name)
                        .unwrap_or_else(|| namespace_object(name, rv, true));
                    json!({"type": "DELETED", "object": object})
                }
            }
        };
        if announce {
            // No receiver only means no watch is open right now; the next list sees it.
            let _ = self.shared.namespace_events.send(event);
        }
    }

    /// Sets the labels of an existing namespace; watchers see the change.
    pub fn label_namespace(&self, name: &str, labels: Value) {
        let event = {
            let mut state = self.shared.state.lock().expect("state");
            state.resource_version += 1;
            let rv = state.resource_version.to_string();
            let object = state.namespaces.get_mut(name).expect("namespace exists");
            object["metadata"]["labels"] = labels;
            object["metadata"]["resourceVersion"] = json!(rv);
            json!({"type": "MODIFIED", "object": object})
        };
        let _ = self.shared.namespace_events.send(event);
    }

    /// Makes lists and watches of the cluster-scoped `resource` answer 503 until called again
    /// with `withheld` false.
    pub fn withhold(&self, resource: &str, withheld: bool) {
        let mut state = self.shared.state.lock().expect("state");
        if withheld {
            state.withheld.insert(resource.to_owned());
        } else {
            state.withheld.remove(resource);
        }
    }

    /// Creates or replaces the CustomResourceDefinition of `plural` in `group` (named
    /// `<plural>.<group>`, as kube requires) and tells watchers; `None` deletes it.
    pub fn set_crd(&self, plural: &str, group: &str, crd: Option<Value>) {
        let name = format!("{plural}.{group}");
        self.set_admission_object("customresourcedefinitions", &name, crd);
    }

    /// Creates or replaces a webhook configuration or admission policy (binding) (`resource`
    /// is its plural) and tells watchers; `None` deletes it.
    pub fn set_admission_object(&self, resource: &str, name: &str, object: Option<Value>) {
        let event = {
            let mut state = self.shared.state.lock().expect("state");
            state.resource_version += 1;
            let rv = state.resource_version.to_string();
            let items = state
                .cluster_objects
                .entry(resource.to_owned())
                .or_default();
            match object {
                Some(mut object) => {
                    object["metadata"]["name"] = json!(name);
                    object["metadata"]["resourceVersion"] = json!(rv);
                    let kind = match items.insert(name.to_owned(), object.clone()) {
                        Some(_) => "MODIFIED",
                        None => "ADDED",
                    };
                    json!({"type": kind, "object": object})
                }
                None => {
                    let mut object = items.remove(name).expect("configuration exists");
                    object["metadata"]["resourceVersion"] = json!(rv);
                    json!({"type": "DELETED", "object": object})
                }
            }
        };
        // No receiver only means no watch is open right now; the next list sees it.
        let _ = self
            .shared
            .webhook_events
            .send((resource.to_owned(), event));
    }

    /// Creates or replaces the Service `namespace/name`.
    pub fn set_service(&self, namespace: &str, name: &str, service: Value) {
        self.shared
            .state
            .lock()
            .expect("state")
            .services
            .insert(format!("{namespace}/{name}"), service);
    }

    /// Makes `token` authenticate as `user` (a TokenReview `status.user`).
    pub fn add_token(&self, token: &str, user: Value) {
        self.shared
            .state
            .lock()
            .expect("state")
            .tokens
            .insert(token.to_owned(), user);
    }

    pub fn set_policy(
        &self,
        policy: impl Fn(&Value) -> Result<(bool, String), StatusCode> + Send + Sync + 'static,
    ) {
        *self.shared.policy.lock().expect("policy") = Arc::new(policy);
    }

    /// The tokens reviewed so far.
    pub fn token_reviews(&self) -> Vec<String> {
        self.shared
            .state
            .lock()
            .expect("state")
            .token_reviews
            .clone()
    }

    /// The SubjectAccessReview specs received so far.
    pub fn access_reviews(&self) -> Vec<Value> {
        self.shared
            .state
            .lock()
            .expect("state")
            .access_reviews
            .clone()
    }
}

impl Drop for FakeKube {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown_signal().trigger();
        }
        self.objects.close();
    }
}
