//! Prometheus metrics (`/metrics`, OpenMetrics text): requests by verb, group, version,
//! resource, subresource, scope and code with a latency histogram (kube-apiserver's names),
//! long-running requests (open watches), a storage latency histogram other layers feed
//! through [`Metrics::storage_timer`] / [`Metrics::observe_storage`], the controller's
//! passes, Proxmox tasks and machines (through `ControllerObserver`), and Proxmox API
//! requests ([`Metrics::observe_proxmox_request`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
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

/// Proxmox tasks take seconds to many minutes (a full clone of a large disk).
const TASK_BUCKETS: [f64; 13] = [
    0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0,
];

/// A machine takes minutes from creation to provisioned (clone, boot, cloud-init).
const PROVISIONING_BUCKETS: [f64; 12] = [
    5.0, 10.0, 30.0, 60.0, 120.0, 180.0, 300.0, 600.0, 900.0, 1200.0, 1800.0, 3600.0,
];

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

fn storage_histogram() -> Histogram {
    Histogram::new(STORAGE_BUCKETS)
}

fn task_histogram() -> Histogram {
    Histogram::new(TASK_BUCKETS)
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
struct ProxmoxCallLabels {
    endpoint: String,
    operation: String,
    result: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ProxmoxOperationLabels {
    endpoint: String,
    operation: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct TaskLabels {
    r#type: String,
    result: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct PhaseLabels {
    phase: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StorageLabels {
    operation: String,
    resource: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct WebhookLabels {
    name: String,
    r#type: String,
    operation: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct WebhookRequestLabels {
    name: String,
    r#type: String,
    operation: String,
    code: String,
    rejected: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct WebhookDurationLabels {
    name: String,
    r#type: String,
    operation: String,
    rejected: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct WebhookRejectionLabels {
    name: String,
    r#type: String,
    operation: String,
    error_type: String,
    rejection_code: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct WebhookFailOpenLabels {
    name: String,
    r#type: String,
}

/// How one admission webhook call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookCall {
    Allowed,
    /// The webhook denied the write with this code.
    Denied {
        code: u16,
    },
    /// No usable answer, and `failurePolicy: Fail` refused the write.
    Failed,
    /// No usable answer, ignored under `failurePolicy: Ignore`.
    FailedOpen,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct PolicyCheckLabels {
    policy: String,
    policy_binding: String,
    error_type: String,
    enforcement_action: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct MutationCheckLabels {
    policy: String,
    policy_binding: String,
    error_type: String,
}

/// The admission webhook and policy metrics (kube-apiserver's names).
struct WebhookMetrics {
    requests: Family<WebhookRequestLabels, Counter>,
    duration: Family<WebhookDurationLabels, Histogram, fn() -> Histogram>,
    rejections: Family<WebhookRejectionLabels, Counter>,
    fail_open: Family<WebhookFailOpenLabels, Counter>,
    policy_checks: Family<PolicyCheckLabels, Counter>,
    policy_duration: Family<PolicyCheckLabels, Histogram, fn() -> Histogram>,
    mutation_checks: Family<MutationCheckLabels, Counter>,
    mutation_duration: Family<MutationCheckLabels, Histogram, fn() -> Histogram>,
}

impl WebhookMetrics {
    fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            requests: Family::default(),
            duration: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            rejections: Family::default(),
            fail_open: Family::default(),
            policy_checks: Family::default(),
            policy_duration: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            mutation_checks: Family::default(),
            mutation_duration: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
        };
        registry.register(
            "apiserver_admission_webhook_request",
            "Admission webhook requests by webhook name, type (admit, validating), operation, HTTP code of the answer (0 without one) and whether the write was rejected.",
            metrics.requests.clone(),
        );
        registry.register(
            "apiserver_admission_webhook_admission_duration_seconds",
            "Admission webhook latency distribution in seconds by webhook name, type, operation and whether the write was rejected.",
            metrics.duration.clone(),
        );
        registry.register(
            "apiserver_admission_webhook_rejection_count",
            "Admission webhook rejections by webhook name, type, operation, error type (calling_webhook_error, no_error) and rejection code.",
            metrics.rejections.clone(),
        );
        registry.register(
            "apiserver_admission_webhook_fail_open_count",
            "Admission webhook calls that failed and were ignored (failurePolicy Ignore), by webhook name and type.",
            metrics.fail_open.clone(),
        );
        registry.register(
            "apiserver_validating_admission_policy_check",
            "ValidatingAdmissionPolicy binding evaluations by policy, binding, error type and enforcement action (deny, warn, allow).",
            metrics.policy_checks.clone(),
        );
        registry.register(
            "apiserver_validating_admission_policy_check_duration_seconds",
            "ValidatingAdmissionPolicy binding evaluation latency distribution in seconds, labelled as the checks.",
            metrics.policy_duration.clone(),
        );
        registry.register(
            "apiserver_mutating_admission_policy_check",
            "MutatingAdmissionPolicy mutations evaluated, by policy, binding and error type (no_error, compile_error, invalid_error, out_of_budget).",
            metrics.mutation_checks.clone(),
        );
        registry.register(
            "apiserver_mutating_admission_policy_check_duration_seconds",
            "MutatingAdmissionPolicy mutation latency distribution in seconds, labelled as the checks.",
            metrics.mutation_duration.clone(),
        );
        metrics
    }

    fn observe(&self, labels: WebhookLabels, call: WebhookCall, elapsed: Duration) {
        let (code, rejected) = match call {
            WebhookCall::Allowed => (200, false),
            WebhookCall::Denied { .. } => (200, true),
            WebhookCall::Failed => (0, true),
            WebhookCall::FailedOpen => (0, false),
        };
        let WebhookLabels {
            name,
            r#type,
            operation,
        } = labels;
        self.requests
            .get_or_create(&WebhookRequestLabels {
                name: name.clone(),
                r#type: r#type.clone(),
                operation: operation.clone(),
                code: code.to_string(),
                rejected: rejected.to_string(),
            })
            .inc();
        self.duration
            .get_or_create(&WebhookDurationLabels {
                name: name.clone(),
                r#type: r#type.clone(),
                operation: operation.clone(),
                rejected: rejected.to_string(),
            })
            .observe(elapsed.as_secs_f64());
        let rejection = match call {
            WebhookCall::Denied { code } => Some(("no_error", code)),
            WebhookCall::Failed => Some(("calling_webhook_error", 0)),
            WebhookCall::Allowed | WebhookCall::FailedOpen => None,
        };
        if let Some((error_type, code)) = rejection {
            self.rejections
                .get_or_create(&WebhookRejectionLabels {
                    name: name.clone(),
                    r#type: r#type.clone(),
                    operation,
                    error_type: error_type.to_owned(),
                    rejection_code: code.to_string(),
                })
                .inc();
        }
        if call == WebhookCall::FailedOpen {
            self.fail_open
                .get_or_create(&WebhookFailOpenLabels { name, r#type })
                .inc();
        }
    }
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
    proxmox_calls: Family<ProxmoxCallLabels, Counter>,
    proxmox_latency: Family<ProxmoxOperationLabels, Histogram, fn() -> Histogram>,
    tasks: Family<TaskLabels, Histogram, fn() -> Histogram>,
    provisioning: Histogram,
    machines: Family<PhaseLabels, Gauge>,
    /// The phase each machine was last reported in, behind `machines`.
    machine_phases: Mutex<HashMap<String, &'static str>>,
    webhooks: WebhookMetrics,
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
        let proxmox_calls = Family::<ProxmoxCallLabels, Counter>::default();
        let proxmox_latency =
            Family::<ProxmoxOperationLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                latency_histogram as fn() -> Histogram,
            );
        let tasks = Family::<TaskLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            task_histogram as fn() -> Histogram,
        );
        let provisioning = Histogram::new(PROVISIONING_BUCKETS);
        let machines = Family::<PhaseLabels, Gauge>::default();
        registry.register(
            "capmox_proxmox_requests",
            "Counter of Proxmox VE API requests by endpoint (the Proxmox VE cluster's API URL), operation (method and path template) and result (HTTP status code, or timeout / stalled / transport without an answer).",
            proxmox_calls.clone(),
        );
        registry.register(
            "capmox_proxmox_request_duration_seconds",
            "Proxmox VE API request latency distribution in seconds by endpoint and operation (the round trip, without waiting for the rate limit).",
            proxmox_latency.clone(),
        );
        registry.register(
            "capmox_proxmox_task_duration_seconds",
            "Duration distribution in seconds of Proxmox VE tasks the controller saw end, by task type and result (success, failed), from the start recorded in the UPID.",
            tasks.clone(),
        );
        registry.register(
            "capmox_machine_provisioning_duration_seconds",
            "Distribution in seconds of the time from a ProxmoxMachine's creation until it was provisioned.",
            provisioning.clone(),
        );
        registry.register(
            "capmox_machines",
            "ProxmoxMachines by phase (the reason of VirtualMachineProvisioned), as the leading controller last left them.",
            machines.clone(),
        );
        let webhooks = WebhookMetrics::register(&mut registry);
        Self {
            registry,
            webhooks,
            requests,
            latency,
            longrunning,
            storage,
            reconciles,
            reconcile_latency,
            queue_depth,
            leader,
            proxmox_calls,
            proxmox_latency,
            tasks,
            provisioning,
            machines,
            machine_phases: Mutex::new(HashMap::new()),
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

    /// Records one admission webhook call: `flavor` is `admit` or `validating`.
    pub fn observe_webhook(
        &self,
        name: &str,
        flavor: &str,
        operation: &str,
        call: WebhookCall,
        elapsed: Duration,
    ) {
        let labels = WebhookLabels {
            name: name.to_owned(),
            r#type: flavor.to_owned(),
            operation: operation.to_owned(),
        };
        self.webhooks.observe(labels, call, elapsed);
    }

    /// Records one evaluation of an admission policy binding: `action` is `deny`, `warn` or
    /// `allow`, `error_type` `no_error` or `invalid_error` (an expression erred).
    pub fn observe_policy(
        &self,
        policy: &str,
        binding: &str,
        error_type: &str,
        action: &str,
        elapsed: Duration,
    ) {
        let labels = PolicyCheckLabels {
            policy: policy.to_owned(),
            policy_binding: binding.to_owned(),
            error_type: error_type.to_owned(),
            enforcement_action: action.to_owned(),
        };
        self.webhooks.policy_checks.get_or_create(&labels).inc();
        self.webhooks
            .policy_duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
    }

    /// Records one MutatingAdmissionPolicy mutation of a binding.
    pub fn observe_mutation(
        &self,
        policy: &str,
        binding: &str,
        error_type: &str,
        elapsed: Duration,
    ) {
        let labels = MutationCheckLabels {
            policy: policy.to_owned(),
            policy_binding: binding.to_owned(),
            error_type: error_type.to_owned(),
        };
        self.webhooks.mutation_checks.get_or_create(&labels).inc();
        self.webhooks
            .mutation_duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
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

impl crate::controller::observe::ControllerObserver for Metrics {
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
        if !leading {
            // Another replica reconciles now; what this one saw goes stale.
            let mut phases = self.lock_phases();
            for phase in phases.drain().map(|(_, phase)| phase) {
                self.phase_gauge(phase).dec();
            }
        }
    }

    fn task_finished(&self, task_type: &str, result: &str, elapsed: Duration) {
        self.tasks
            .get_or_create(&TaskLabels {
                r#type: task_type.to_owned(),
                result: result.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }

    fn machine_phase(&self, machine: &str, phase: Option<&'static str>) {
        let mut phases = self.lock_phases();
        let previous = match phase {
            Some(phase) => phases.insert(machine.to_owned(), phase),
            None => phases.remove(machine),
        };
        if previous == phase {
            return;
        }
        if let Some(previous) = previous {
            self.phase_gauge(previous).dec();
        }
        if let Some(phase) = phase {
            self.phase_gauge(phase).inc();
        }
    }

    fn machine_provisioned(&self, elapsed: Duration) {
        self.provisioning.observe(elapsed.as_secs_f64());
    }
}

impl Metrics {
    fn lock_phases(&self) -> std::sync::MutexGuard<'_, HashMap<String, &'static str>> {
        self.machine_phases
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn phase_gauge(&self, phase: &str) -> Gauge {
        self.machines
            .get_or_create(&PhaseLabels {
                phase: phase.to_owned(),
            })
            .clone()
    }
}

impl Metrics {
    /// Records one Proxmox VE API request (`run::controller` feeds the clients' reports in:
    /// nothing in `server/` names the Proxmox client).
    /// `endpoint` is the Proxmox VE cluster's API URL.
    pub fn observe_proxmox_request(
        &self,
        endpoint: &str,
        operation: &str,
        result: &str,
        elapsed: Duration,
    ) {
        self.proxmox_calls
            .get_or_create(&ProxmoxCallLabels {
                endpoint: endpoint.to_owned(),
                operation: operation.to_owned(),
                result: result.to_owned(),
            })
            .inc();
        self.proxmox_latency
            .get_or_create(&ProxmoxOperationLabels {
                endpoint: endpoint.to_owned(),
                operation: operation.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
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
        use crate::controller::observe::ControllerObserver;
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
    fn proxmox_calls_tasks_and_machines_are_exposed() {
        use crate::controller::observe::ControllerObserver;
        let metrics = Metrics::new();
        let clone = "POST /nodes/{node}/qemu/{vmid}/clone";
        let pve = "https://pve-b:8006";
        metrics.observe_proxmox_request(pve, clone, "200", Duration::from_millis(20));
        metrics.observe_proxmox_request(pve, clone, "500", Duration::from_millis(30));
        metrics.task_finished("qmclone", "success", Duration::from_secs(4));
        metrics.machine_provisioned(Duration::from_secs(90));
        metrics.machine_phase("default/a", Some("Cloning"));
        metrics.machine_phase("default/b", Some("Cloning"));
        metrics.machine_phase("default/a", Some("Provisioned"));
        metrics.machine_phase("default/a", Some("Provisioned"));
        let text = metrics.encode();
        for line in [
            r#"capmox_proxmox_requests_total{endpoint="https://pve-b:8006",operation="POST /nodes/{node}/qemu/{vmid}/clone",result="200"} 1"#,
            r#"capmox_proxmox_requests_total{endpoint="https://pve-b:8006",operation="POST /nodes/{node}/qemu/{vmid}/clone",result="500"} 1"#,
            r#"capmox_proxmox_request_duration_seconds_count{endpoint="https://pve-b:8006",operation="POST /nodes/{node}/qemu/{vmid}/clone"} 2"#,
            r#"capmox_proxmox_task_duration_seconds_count{type="qmclone",result="success"} 1"#,
            r#"capmox_proxmox_task_duration_seconds_bucket{le="5.0",type="qmclone",result="success"} 1"#,
            "capmox_machine_provisioning_duration_seconds_sum 90.0",
            r#"capmox_machines{phase="Cloning"} 1"#,
            r#"capmox_machines{phase="Provisioned"} 1"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in {text}");
        }
        metrics.machine_phase("default/b", None);
        assert!(
            metrics
                .encode()
                .contains("capmox_machines{phase=\"Cloning\"} 0")
        );
        // A replica that stops leading stops counting machines another one reconciles.
        metrics.leader(false);
        let text = metrics.encode();
        assert!(
            text.contains("capmox_machines{phase=\"Provisioned\"} 0"),
            "{text}"
        );
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
