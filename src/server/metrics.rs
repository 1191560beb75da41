//! Prometheus metrics (`/metrics`, OpenMetrics text): requests by verb, group, version,
//! resource, subresource, scope and code with a latency histogram (kube-apiserver's names),
//! long-running requests (open watches), and a storage latency histogram other layers feed
//! through [`Metrics::storage_timer`] / [`Metrics::observe_storage`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::request_info::RequestInfo;

/// kube-apiserver's request latency buckets (seconds).
const LATENCY_BUCKETS: [f64; 23] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

/// Storage operations are much faster; finer buckets at the low end.
const STORAGE_BUCKETS: [f64; 15] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

fn storage_histogram() -> Histogram {
    Histogram::new(STORAGE_BUCKETS)
}

/// The labels describing a request, without its outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RequestLabels {
    pub verb: String,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: String,
    pub scope: String,
    pub component: String,
}

impl RequestLabels {
    /// Labels for a request. Requests answered 404 lose their resource labels so unknown
    /// paths cannot blow up the label space.
    pub fn from_request(
        info: &RequestInfo,
        method: &Method,
        is_apply: bool,
        code: Option<StatusCode>,
    ) -> Self {
        let known = info.is_resource_request && code != Some(StatusCode::NOT_FOUND);
        let pick = |s: &str| if known { s.to_owned() } else { String::new() };
        Self {
            verb: info.metrics_verb(method, is_apply),
            group: pick(&info.api_group),
            version: pick(&info.api_version),
            resource: pick(&info.resource),
            subresource: pick(&info.subresource),
            scope: if known {
                info.scope().to_owned()
            } else {
                String::new()
            },
            component: "apiserver".to_owned(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct CodeLabels {
    verb: String,
    group: String,
    version: String,
    resource: String,
    subresource: String,
    scope: String,
    component: String,
    code: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReconcileLabels {
    kind: String,
    result: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StorageLabels {
    operation: String,
    resource: String,
}

/// All metrics of the process and their registry.
pub struct Metrics {
    registry: Registry,
    requests: Family<CodeLabels, Counter>,
    latency: Family<RequestLabels, Histogram, fn() -> Histogram>,
    longrunning: Family<RequestLabels, Gauge>,
    storage: Family<StorageLabels, Histogram, fn() -> Histogram>,
    reconciles: Family<ReconcileLabels, Counter>,
    reconcile_latency: Family<ReconcileLabels, Histogram, fn() -> Histogram>,
    queue_depth: Gauge,
    leader: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<CodeLabels, Counter>::default();
        let latency = Family::<RequestLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        let longrunning = Family::<RequestLabels, Gauge>::default();
        let storage = Family::<StorageLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            storage_histogram as fn() -> Histogram,
        );
        registry.register(
            "apiserver_request",
            "Counter of apiserver requests broken out for each verb, group, version, resource, subresource, scope, component and HTTP response code.",
            requests.clone(),
        );
        registry.register(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb, group, version, resource, subresource, scope and component (long-running requests excluded).",
            latency.clone(),
        );
        registry.register(
            "apiserver_longrunning_requests",
            "Gauge of all active long-running apiserver requests (watches) broken out by verb, group, version, resource, scope and component.",
            longrunning.clone(),
        );
        registry.register(
            "capmox_storage_request_duration_seconds",
            "Storage request latency distribution in seconds for each operation and resource.",
            storage.clone(),
        );
        let reconciles = Family::<ReconcileLabels, Counter>::default();
        let reconcile_latency =
            Family::<ReconcileLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                latency_histogram as fn() -> Histogram,
            );
        let queue_depth = Gauge::default();
        let leader = Gauge::default();
        registry.register(
            "capmox_controller_reconcile",
            "Counter of reconcile passes by kind and result (success, requeue, error, conflict).",
            reconciles.clone(),
        );
        registry.register(
            "capmox_controller_reconcile_duration_seconds",
            "Reconcile pass latency distribution in seconds by kind and result.",
            reconcile_latency.clone(),
        );
        registry.register(
            "capmox_controller_queue_depth",
            "Keys waiting in the controller's work queue.",
            queue_depth.clone(),
        );
        registry.register(
            "capmox_controller_leader",
            "1 while this process leads and runs the controller's workers.",
            leader.clone(),
        );
        Self {
            registry,
            requests,
            latency,
            longrunning,
            storage,
            reconciles,
            reconcile_latency,
            queue_depth,
            leader,
        }
    }

    /// Counts a finished request; latency is recorded unless the request was long-running.
    pub fn observe_request(
        &self,
        labels: &RequestLabels,
        code: StatusCode,
        elapsed: Option<Duration>,
    ) {
        let with_code = CodeLabels {
            verb: labels.verb.clone(),
            group: labels.group.clone(),
            version: labels.version.clone(),
            resource: labels.resource.clone(),
            subresource: labels.subresource.clone(),
            scope: labels.scope.clone(),
            component: labels.component.clone(),
            code: code.as_u16().to_string(),
        };
        self.requests.get_or_create(&with_code).inc();
        if let Some(elapsed) = elapsed {
            self.latency
                .get_or_create(labels)
                .observe(elapsed.as_secs_f64());
        }
    }

    /// Records one storage operation (`get`, `list`, `create`, `update`, `delete`, `watch`…).
    pub fn observe_storage(&self, operation: &str, resource: &str, elapsed: Duration) {
        self.storage
            .get_or_create(&StorageLabels {
                operation: operation.to_owned(),
                resource: resource.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Times a storage operation until the returned guard is dropped.
    pub fn storage_timer(self: &Arc<Self>, operation: &str, resource: &str) -> StorageTimer {
        StorageTimer {
            metrics: Arc::clone(self),
            operation: operation.to_owned(),
            resource: resource.to_owned(),
            started: Instant::now(),
        }
    }

    /// Counts an open watch (or other long-running request) until the guard is dropped.
    pub fn long_running(self: &Arc<Self>, labels: RequestLabels) -> LongRunningGuard {
        self.longrunning.get_or_create(&labels).inc();
        LongRunningGuard {
            metrics: Arc::clone(self),
            labels,
        }
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::error!(error = %e, "encoding metrics failed");
        }
        out
    }
}

impl crate::registry::object_store::StorageObserver for Metrics {
    fn observe(&self, operation: &str, resource: &str, elapsed: Duration) {
        self.observe_storage(operation, resource, elapsed);
    }
}

impl crate::controller::runtime::ControllerObserver for Metrics {
    fn reconciled(&self, kind: &str, result: &str, elapsed: Duration) {
        let labels = ReconcileLabels {
            kind: kind.to_owned(),
            result: result.to_owned(),
        };
        self.reconciles.get_or_create(&labels).inc();
        self.reconcile_latency
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
    }

    fn queue_depth(&self, depth: usize) {
        self.queue_depth
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
    }

    fn leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }
}

/// Observes a storage operation's latency when dropped.
pub struct StorageTimer {
    metrics: Arc<Metrics>,
    operation: String,
    resource: String,
    started: Instant,
}

impl Drop for StorageTimer {
    fn drop(&mut self) {
        self.metrics
            .observe_storage(&self.operation, &self.resource, self.started.elapsed());
    }
}

/// Decrements the long-running gauge when dropped (e.g. when a watch stream ends).
pub struct LongRunningGuard {
    metrics: Arc<Metrics>,
    labels: RequestLabels,
}

impl Drop for LongRunningGuard {
    fn drop(&mut self) {
        self.metrics.longrunning.get_or_create(&self.labels).dec();
    }
}

/// `GET /metrics`.
pub async fn handler(State(metrics): State<Arc<Metrics>>) -> Response {
    let mut response = metrics.encode().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    response
}

impl Metrics {
    /// Records a request (`info`) answered with `code`, `started` when it arrived; a watch's
    /// duration is not a latency and is not observed.
    pub fn observe(
        &self,
        info: &RequestInfo,
        method: &Method,
        is_apply: bool,
        code: StatusCode,
        started: Instant,
    ) {
        let labels = RequestLabels::from_request(info, method, is_apply, Some(code));
        let elapsed = (info.verb != "watch").then(|| started.elapsed());
        self.observe_request(&labels, code, elapsed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_contains_requests_watches_and_storage() {
        let metrics = Arc::new(Metrics::new());
        let info = RequestInfo::new(
            &Method::GET,
            "/apis/infrastructure.cluster.x-k8s.io/v1alpha2/namespaces/default/proxmoxmachines",
            &[],
        )
        .expect("info");
        let labels = RequestLabels::from_request(&info, &Method::GET, false, Some(StatusCode::OK));
        metrics.observe_request(&labels, StatusCode::OK, Some(Duration::from_millis(30)));
        {
            let _watch = metrics.long_running(labels.clone());
            let during = metrics.encode();
            assert!(
                during.contains("apiserver_longrunning_requests{"),
                "{during}"
            );
            assert!(
                during
                    .lines()
                    .any(|l| l.starts_with("apiserver_longrunning_requests{") && l.ends_with(" 1"))
            );
        }
        drop(metrics.storage_timer("list", "proxmoxmachines"));
        let text = metrics.encode();
        assert!(text.contains(
            "apiserver_request_total{verb=\"LIST\",group=\"infrastructure.cluster.x-k8s.io\",version=\"v1alpha2\",resource=\"proxmoxmachines\",subresource=\"\",scope=\"namespace\",component=\"apiserver\",code=\"200\"} 1"
        ), "{text}");
        assert!(
            text.contains("apiserver_request_duration_seconds_bucket{"),
            "{text}"
        );
        assert!(
            text.lines()
                .any(|l| l.starts_with("apiserver_longrunning_requests{") && l.ends_with(" 0"))
        );
        assert!(text.contains("capmox_storage_request_duration_seconds_count{operation=\"list\",resource=\"proxmoxmachines\"} 1"), "{text}");
        assert!(text.trim_end().ends_with("# EOF"));
    }

    #[test]
    fn controller_measurements_are_exposed() {
        use crate::controller::runtime::ControllerObserver;
        let metrics = Metrics::new();
        metrics.reconciled("ProxmoxMachine", "requeue", Duration::from_millis(40));
        metrics.queue_depth(3);
        metrics.leader(true);
        let text = metrics.encode();
        assert!(
            text.contains(
                "capmox_controller_reconcile_total{kind=\"ProxmoxMachine\",result=\"requeue\"} 1"
            ),
            "{text}"
        );
        assert!(text.contains("capmox_controller_queue_depth 3"), "{text}");
        assert!(text.contains("capmox_controller_leader 1"), "{text}");
    }

    #[test]
    fn not_found_requests_drop_resource_labels() {
        let info =
            RequestInfo::new(&Method::GET, "/apis/random/v1/garbage-12345", &[]).expect("info");
        let labels =
            RequestLabels::from_request(&info, &Method::GET, false, Some(StatusCode::NOT_FOUND));
        assert_eq!(
            (
                labels.resource.as_str(),
                labels.group.as_str(),
                labels.verb.as_str()
            ),
            ("", "", "LIST")
        );
    }
}
