//! The management cluster's admission webhooks on writes of our kinds in `serve`: webhook
//! configurations served by the fake kube-apiserver, webhooks served over HTTPS by this test.
//! A validating webhook's denial is the client's error in kube's words and nothing is stored;
//! a mutating webhook's patch is stored and validated by our rules; a v1alpha1-only webhook
//! is sent v1alpha1 (`matchPolicy: Equivalent`) and nothing under `Exact`; a webhook that
//! accepts only AdmissionReview v1beta1 (as CAPK's does) is sent v1beta1; `failurePolicy`,
//! timeouts, dry runs and side effects, namespace and object selectors, deletes, and the
//! webhook metrics.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::post;
use base64::Engine as _;
use capmox_apiserver::server::listener::RunningServer;
use capmox_apiserver::server::pki::CertificateAuthority;
use capmox_apiserver::server::tls::{self, ReloadingCertResolver};
use serde_json::{Value, json};

use super::fake_kube::serve_on_loopback;
use super::{Setup, eventually};
use crate::rest::{collection, item, labelled, machine};

const MACHINES: &str = "proxmoxmachines";
const MUTATING: &str = "mutatingwebhookconfigurations";
const VALIDATING: &str = "validatingwebhookconfigurations";
/// The Service the mutating webhook is reached through (resolved like kube-apiserver does).
const SERVICE_HOST: &str = "policy-hooks.policy.svc";

/// The reviews each webhook path received.
type Received = Arc<Mutex<Vec<(String, Value)>>>;

/// The test's webhook server: `/cores` refuses more than 8 cores, `/cost-center` labels
/// machines without a cost centre, `/protect` refuses deleting protected machines, `/record`
/// allows everything, `/slow` answers after 3 s.
struct Webhooks {
    ca: CertificateAuthority,
    received: Received,
    server: RunningServer,
}

fn allowed(review: &Value) -> Value {
    json!({"uid": review["request"]["uid"], "allowed": true})
}

fn denied(review: &Value, code: u16, message: &str) -> Value {
    json!({"uid": review["request"]["uid"], "allowed": false,
        "status": {"code": code, "reason": "Forbidden", "message": message}})
}

fn answer(path: &str, review: &Value) -> Value {
    let request = &review["request"];
    match path {
        "cores" => match request["object"]["spec"]["numCores"].as_u64() {
            Some(cores) if cores > 8 => denied(
                review,
                403,
                &format!("spec.numCores: {cores} exceeds the 8 cores allowed here"),
            ),
            _ => {
                let mut response = allowed(review);
                response["warnings"] = json!(["cores checked"]);
                response
            }
        },
        "cost-center" if request["object"]["metadata"]["labels"]["cost-center"].is_null() => {
            let labels = &request["object"]["metadata"]["labels"];
            let patch = if labels.is_object() {
                json!([{"op": "add", "path": "/metadata/labels/cost-center", "value": "unassigned"}])
            } else {
                json!([{"op": "add", "path": "/metadata/labels", "value": {"cost-center": "unassigned"}}])
            };
            let mut response = allowed(review);
            response["patchType"] = json!("JSONPatch");
            response["patch"] =
                json!(base64::engine::general_purpose::STANDARD.encode(patch.to_string()));
            response
        }
        "protect" if request["oldObject"]["metadata"]["labels"]["protected"] == "true" => {
            denied(review, 403, "protected machines cannot be deleted")
        }
        _ => allowed(review),
    }
}

/// The bearer token `/token` requires.
const WEBHOOK_TOKEN: &str = "webhook-token";

async fn handle(
    State(received): State<Received>,
    Path(path): Path<String>,
    headers: axum::http::HeaderMap,
    axum::Json(review): axum::Json<Value>,
) -> axum::Json<Value> {
    received
        .lock()
        .expect("received")
        .push((path.clone(), review.clone()));
    if path == "slow" {
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    let authorization = headers.get("authorization").and_then(|v| v.to_str().ok());
    let response = if path == "token" && authorization != Some(&format!("Bearer {WEBHOOK_TOKEN}")) {
        denied(&review, 401, "no valid token")
    } else {
        answer(&path, &review)
    };
    axum::Json(json!({
        "apiVersion": review["apiVersion"],
        "kind": "AdmissionReview",
        "response": legacy(&review, response),
    }))
}

/// A v1beta1 answer as older webhooks wrote them: without the uid and the patch type, which
/// kube never checked in v1beta1.
fn legacy(review: &Value, mut response: Value) -> Value {
    if review["apiVersion"] == "admission.k8s.io/v1beta1"
        && let Some(fields) = response.as_object_mut()
    {
        fields.remove("uid");
        fields.remove("patchType");
    }
    response
}

impl Webhooks {
    async fn start() -> Self {
        Self::start_verifying(None).await
    }

    /// The webhooks, accepting only clients with a certificate of `clients` when given.
    async fn start_verifying(clients: Option<&CertificateAuthority>) -> Self {
        let ca = CertificateAuthority::generate("webhooks-ca").expect("CA");
        let serving = ca.serving(&[SERVICE_HOST.to_owned()]).expect("serving");
        let resolver = Arc::new(ReloadingCertResolver::new(
            serving.certified_key().expect("key"),
        ));
        let verifier = clients.map(|clients| {
            let mut roots = rustls::RootCertStore::empty();
            for certificate in
                tls::parse_certificates(clients.pair.cert_pem.as_bytes(), None).expect("client CA")
            {
                roots.add(certificate).expect("root");
            }
            rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                tls::provider(),
            )
            .build()
            .expect("verifier")
        });
        let config = tls::server_config(resolver, verifier).expect("tls");
        let received = Received::default();
        let router = Router::new()
            .route("/{path}", post(handle))
            .with_state(Arc::clone(&received));
        let server = serve_on_loopback(config, router).await;
        Self {
            ca,
            received,
            server,
        }
    }

    fn port(&self) -> u16 {
        self.server.local_addr().port()
    }

    fn ca_bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.ca.pair.cert_pem)
    }

    /// The reviews `path` received so far.
    fn reviews(&self, path: &str) -> Vec<Value> {
        self.received
            .lock()
            .expect("received")
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, r)| r.clone())
            .collect()
    }

    /// A webhook at `/path` by URL, for machines in `versions`, with `extra` fields.
    fn hook(&self, name: &str, path: &str, versions: &[&str], extra: Value) -> Value {
        let mut hook = json!({
            "name": name,
            "clientConfig": {
                "url": format!("https://127.0.0.1:{}/{path}", self.port()),
                "caBundle": self.ca_bundle(),
            },
            "rules": [{
                "operations": ["CREATE", "UPDATE"],
                "apiGroups": ["infrastructure.cluster.x-k8s.io"],
                "apiVersions": versions,
                "resources": [MACHINES],
            }],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        });
        merge(&mut hook, extra);
        hook
    }
}

fn merge(target: &mut Value, extra: Value) {
    if let (Value::Object(target), Value::Object(extra)) = (target, extra) {
        target.extend(extra);
    }
}

fn configuration(hooks: Vec<Value>) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "metadata": {}, "webhooks": hooks})
}

/// Creates or replaces the ValidatingWebhookConfiguration `name` with `hooks`.
fn set_validating(setup: &Setup, name: &str, hooks: Vec<Value>) {
    setup
        .kube
        .set_admission_object(VALIDATING, name, Some(configuration(hooks)));
}

/// Creates or replaces the MutatingWebhookConfiguration `name` with `hooks`.
fn set_mutating(setup: &Setup, name: &str, hooks: Vec<Value>) {
    setup
        .kube
        .set_admission_object(MUTATING, name, Some(configuration(hooks)));
}

async fn send(request: reqwest::RequestBuilder) -> (u16, Value, Vec<String>) {
    let response = request.send().await.expect("request");
    let code = response.status().as_u16();
    let warnings = response
        .headers()
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_owned))
        .collect();
    (code, response.json().await.expect("json"), warnings)
}

fn machines_url(setup: &Setup, version: &str) -> String {
    format!(
        "{}{}",
        setup.base(),
        collection(version, "default", MACHINES)
    )
}

/// The server's metrics text.
async fn metrics_of(client: &reqwest::Client, setup: &Setup) -> String {
    let url = format!("{}/metrics", setup.base());
    let response = client.get(url).send().await.expect("metrics");
    response.text().await.expect("text")
}

/// The v1alpha2 URL of the machine `name` in `default`.
fn machine_url(setup: &Setup, name: &str) -> String {
    format!(
        "{}{}",
        setup.base(),
        item("v1alpha2", "default", MACHINES, name)
    )
}

/// POST of `object` in v1alpha2.
async fn create(
    client: &reqwest::Client,
    setup: &Setup,
    object: &Value,
) -> (u16, Value, Vec<String>) {
    create_in(client, setup, "v1alpha2", object).await
}

async fn create_in(
    client: &reqwest::Client,
    setup: &Setup,
    version: &str,
    object: &Value,
) -> (u16, Value, Vec<String>) {
    send(client.post(machines_url(setup, version)).json(object)).await
}

fn with_cores(name: &str, cores: u64) -> Value {
    let mut object = machine(name);
    object["spec"]["numCores"] = json!(cores);
    object
}

/// Waits until a dry-run create of `object` is answered `code` (the informer has delivered
/// the configuration); every webhook used with it must allow dry runs.
async fn until_answered(setup: &Setup, object: &Value, code: u16) {
    let client = setup.admin("alice");
    let url = format!("{}?dryRun=All", machines_url(setup, "v1alpha2"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (answered, body, _) = send(client.post(&url).json(object)).await;
        if answered == code {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still answered {answered} instead of {code}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn webhooks_deny_mutate_and_warn() {
    let setup = Setup::start(|_| {}).await;
    let hooks = Webhooks::start().await;
    setup.kube.set_service(
        "policy",
        "policy-hooks",
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "policy-hooks", "namespace": "policy"},
            "spec": {"type": "ExternalName", "externalName": "127.0.0.1"}}),
    );
    let mut mutating = hooks.hook("cost-center.example.com", "cost-center", &["*"], json!({}));
    mutating["clientConfig"] = json!({
        "service": {"namespace": "policy", "name": "policy-hooks", "path": "/cost-center",
            "port": hooks.port()},
        "caBundle": hooks.ca_bundle(),
    });
    set_mutating(&setup, "cost-center", vec![mutating]);
    set_validating(
        &setup,
        "cores",
        vec![
            hooks.hook("cores.example.com", "cores", &["v1alpha2"], json!({})),
            hooks.hook("record.example.com", "record", &["v1alpha2"], json!({})),
        ],
    );
    until_answered(&setup, &with_cores("probe", 16), 403).await;
    let client = setup.admin("alice");

    let (code, status, _) = create(&client, &setup, &with_cores("big", 16)).await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(
        status["message"],
        "admission webhook \"cores.example.com\" denied the request: spec.numCores: 16 exceeds the 8 cores allowed here"
    );
    let url = |name| machine_url(&setup, name);
    let (code, _, _) = send(client.get(url("big"))).await;
    assert_eq!(code, 404, "a denied create stores nothing");

    let (code, created, warnings) = create(&client, &setup, &with_cores("small", 4)).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["metadata"]["labels"]["cost-center"], "unassigned");
    assert!(
        warnings.iter().any(|w| w.contains("cores checked")),
        "{warnings:?}"
    );
    // The validating webhook saw the mutated, defaulted object and who asked.
    let review = hooks.reviews("record").pop().expect("recorded");
    let request = &review["request"];
    assert_eq!(request["operation"], "CREATE");
    assert_eq!(request["userInfo"]["username"], "alice");
    assert_eq!(request["kind"]["version"], "v1alpha2");
    assert_eq!(
        request["object"]["metadata"]["labels"]["cost-center"],
        "unassigned"
    );
    assert!(request["object"]["metadata"]["uid"].is_string());
    assert!(request["oldObject"].is_null());

    // An update is reviewed with the stored object; a denied one changes nothing.
    let patch = json!({"spec": {"numCores": 32}});
    let (code, status, _) = send(
        client
            .patch(url("small"))
            .header("content-type", "application/merge-patch+json")
            .body(patch.to_string()),
    )
    .await;
    assert_eq!(code, 403, "{status}");
    let (_, stored, _) = send(client.get(url("small"))).await;
    assert_eq!(stored["spec"]["numCores"], 4);
    let patch = json!({"spec": {"numCores": 6}});
    let (code, _, _) = send(
        client
            .patch(url("small"))
            .header("content-type", "application/merge-patch+json")
            .body(patch.to_string()),
    )
    .await;
    assert_eq!(code, 200);
    let review = hooks.reviews("record").pop().expect("recorded");
    assert_eq!(review["request"]["operation"], "UPDATE");
    assert_eq!(review["request"]["oldObject"]["spec"]["numCores"], 4);
    assert_eq!(review["request"]["object"]["spec"]["numCores"], 6);

    let metrics = metrics_of(&client, &setup).await;
    assert!(
        metrics.contains(
            "apiserver_admission_webhook_rejection_count_total{name=\"cores.example.com\",type=\"validating\",operation=\"CREATE\",error_type=\"no_error\",rejection_code=\"403\"}"
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains(
            "apiserver_admission_webhook_request_total{name=\"cost-center.example.com\",type=\"admit\",operation=\"CREATE\",code=\"200\",rejected=\"false\"}"
        ),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn equivalent_versions_are_converted_exact_ones_skipped() {
    let setup = Setup::start(|_| {}).await;
    let hooks = Webhooks::start().await;
    set_validating(
        &setup,
        "v1alpha1-only",
        vec![
            hooks.hook("record.example.com", "record", &["v1alpha1"], json!({})),
            hooks.hook(
                "cores.example.com",
                "cores",
                &["v1alpha1"],
                json!({"matchPolicy": "Exact"}),
            ),
        ],
    );
    let client = setup.admin("alice");
    eventually(Duration::from_secs(10), "the configuration", || {
        let request = client
            .post(format!("{}?dryRun=All", machines_url(&setup, "v1alpha2")))
            .json(&with_cores("probe", 4));
        let hooks = &hooks;
        async move {
            send(request).await;
            !hooks.reviews("record").is_empty()
        }
    })
    .await;
    let (code, status, _) = create(&client, &setup, &with_cores("big", 16)).await;
    assert_eq!(
        code, 201,
        "the Exact webhook for v1alpha1 is not called: {status}"
    );
    assert!(hooks.reviews("cores").is_empty());
    let review = hooks.reviews("record").pop().expect("recorded");
    let request = &review["request"];
    assert_eq!(
        request["object"]["apiVersion"],
        "infrastructure.cluster.x-k8s.io/v1alpha1"
    );
    assert_eq!(request["kind"]["version"], "v1alpha1");
    assert_eq!(request["requestKind"]["version"], "v1alpha2");
    assert_eq!(request["object"]["spec"]["numCores"], 16);
}

#[tokio::test(flavor = "multi_thread")]
async fn v1beta1_only_webhooks_are_sent_v1beta1() {
    let setup = Setup::start(|_| {}).await;
    let hooks = Webhooks::start().await;
    let legacy = json!({"admissionReviewVersions": ["v1beta1"]});
    let mutating = hooks.hook(
        "cost-center.example.com",
        "cost-center",
        &["*"],
        legacy.clone(),
    );
    set_mutating(&setup, "cost-center", vec![mutating]);
    set_validating(
        &setup,
        "cores",
        vec![hooks.hook("cores.example.com", "cores", &["*"], legacy)],
    );
    until_answered(&setup, &with_cores("probe", 16), 403).await;
    let client = setup.admin("alice");

    let (code, status, _) = create(&client, &setup, &with_cores("big", 16)).await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        "admission webhook \"cores.example.com\" denied the request: spec.numCores: 16 exceeds the 8 cores allowed here"
    );
    let (code, created, _) = create(&client, &setup, &with_cores("small", 4)).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(
        created["metadata"]["labels"]["cost-center"], "unassigned",
        "a v1beta1 patch without its type is a JSON patch"
    );
    let review = hooks.reviews("cost-center").pop().expect("reviewed");
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(review["request"]["operation"], "CREATE");

    // A webhook that knows neither version fails the write under its failure policy.
    let unknown = json!({"admissionReviewVersions": ["v2"]});
    set_validating(
        &setup,
        "cores",
        vec![hooks.hook("future.example.com", "record", &["*"], unknown)],
    );
    until_answered(&setup, &machine("probe"), 500).await;
    let (code, status, _) = create(&client, &setup, &machine("m1")).await;
    assert_eq!(code, 500, "{status}");
    assert_eq!(
        status["message"],
        "Internal error occurred: failed calling webhook \"future.example.com\": could not create admission objects: webhook does not accept known AdmissionReview versions (v1, v1beta1)"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn failure_policy_timeouts_and_dry_runs() {
    let setup = Setup::start(|_| {}).await;
    let hooks = Webhooks::start().await;
    let client = setup.admin("alice");
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let down = |name: &str, policy: &str| {
        let mut hook = hooks.hook(name, "record", &["*"], json!({"failurePolicy": policy}));
        hook["clientConfig"]["url"] = json!(format!("https://127.0.0.1:{closed}/record"));
        hook
    };
    set_validating(&setup, "down", vec![down("down.example.com", "Fail")]);
    until_answered(&setup, &machine("probe"), 500).await;
    let (code, status, _) = create(&client, &setup, &machine("m1")).await;
    assert_eq!(code, 500, "{status}");
    let message = status["message"].as_str().expect("message");
    assert!(
        message.starts_with(&format!(
            "Internal error occurred: failed calling webhook \"down.example.com\": failed to call webhook: Post \"https://127.0.0.1:{closed}/record?timeout=10s\": "
        )),
        "{message}"
    );

    set_validating(&setup, "down", vec![down("down.example.com", "Ignore")]);
    until_answered(&setup, &machine("probe"), 201).await;
    let (code, _, _) = create(&client, &setup, &machine("m1")).await;
    assert_eq!(code, 201, "Ignore lets the write through");

    let slow = hooks.hook(
        "slow.example.com",
        "slow",
        &["*"],
        json!({"timeoutSeconds": 1}),
    );
    set_validating(&setup, "down", vec![slow]);
    until_answered(&setup, &machine("probe"), 500).await;
    let (code, status, _) = create(&client, &setup, &machine("m2")).await;
    assert_eq!(code, 500);
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.ends_with("?timeout=1s\": context deadline exceeded")),
        "{status}"
    );

    // Side effects: a dry run is refused before the webhook is called; one without is
    // reviewed as a dry run and stores nothing.
    let effects = |side_effects: &str| {
        let extra = json!({"sideEffects": side_effects});
        hooks.hook("effects.example.com", "record", &["*"], extra)
    };
    set_validating(&setup, "down", vec![effects("Unknown")]);
    until_answered(&setup, &machine("probe"), 400).await;
    let (code, status, _) = send(
        client
            .post(format!("{}?dryRun=All", machines_url(&setup, "v1alpha2")))
            .json(&machine("m3")),
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        status["message"],
        "admission webhook \"effects.example.com\" does not support dry run"
    );
    let before = hooks.reviews("record").len();
    set_validating(&setup, "down", vec![effects("NoneOnDryRun")]);
    until_answered(&setup, &machine("probe"), 201).await;
    let reviews = hooks.reviews("record");
    assert!(reviews.len() > before);
    let last = reviews.last().expect("review");
    assert_eq!(last["request"]["dryRun"], true);
    assert_eq!(last["request"]["options"]["dryRun"], json!(["All"]));
    let url = machine_url(&setup, "probe");
    assert_eq!(send(client.get(url)).await.0, 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn selectors_and_deletes() {
    let setup = Setup::start(|_| {}).await;
    let hooks = Webhooks::start().await;
    let client = setup.admin("alice");
    let cores = hooks.hook(
        "cores.example.com",
        "cores",
        &["*"],
        json!({
            "namespaceSelector": {"matchLabels": {"team": "a"}},
            "objectSelector": {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["free"]}]},
        }),
    );
    let mut protect = hooks.hook("protect.example.com", "protect", &["*"], json!({}));
    protect["rules"][0]["operations"] = json!(["DELETE"]);
    set_validating(&setup, "policies", vec![cores, protect]);
    // The namespace is not selected yet: nothing refuses the big machine.
    let (code, _, _) = create(&client, &setup, &with_cores("before", 16)).await;
    assert_eq!(code, 201);
    setup.kube.label_namespace("default", json!({"team": "a"}));
    until_answered(&setup, &with_cores("probe", 16), 403).await;
    let free = labelled(with_cores("free", 16), &[("tier", "free")]);
    let (code, _, _) = create(&client, &setup, &free).await;
    assert_eq!(
        code, 201,
        "the object selector leaves free-tier machines alone"
    );

    let protected = labelled(machine("kept"), &[("protected", "true")]);
    let (code, _, _) = create(&client, &setup, &protected).await;
    assert_eq!(code, 201);
    let url = |name| machine_url(&setup, name);
    let (code, status, _) = send(client.delete(url("kept"))).await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        "admission webhook \"protect.example.com\" denied the request: protected machines cannot be deleted"
    );
    assert_eq!(send(client.get(url("kept"))).await.0, 200);
    let (code, _, _) = send(client.delete(url("free"))).await;
    assert_eq!(code, 200);
    let review = hooks.reviews("protect").pop().expect("reviewed");
    assert_eq!(review["request"]["operation"], "DELETE");
    assert!(review["request"]["object"].is_null());
    assert_eq!(review["request"]["options"]["kind"], "DeleteOptions");
}

/// A ValidatingAdmissionPolicy on ProxmoxMachines (v1alpha2, so v1alpha1 writes are sent
/// converted) with these fields.
fn policy(spec: Value) -> Value {
    let mut object = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {},
        "spec": {"matchConstraints": {"resourceRules": [{
            "apiGroups": ["infrastructure.cluster.x-k8s.io"],
            "apiVersions": ["v1alpha2"],
            "operations": ["CREATE", "UPDATE"],
            "resources": [MACHINES],
        }]}},
    });
    merge(&mut object["spec"], spec);
    object
}

fn binding(policy: &str, actions: &[&str], extra: Value) -> Value {
    let mut object = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {},
        "spec": {"policyName": policy, "validationActions": actions},
    });
    merge(&mut object["spec"], extra);
    object
}

const POLICIES: &str = "validatingadmissionpolicies";
const BINDINGS: &str = "validatingadmissionpolicybindings";

#[tokio::test(flavor = "multi_thread")]
async fn admission_policies_deny_warn_and_fail() {
    let setup = Setup::start(|_| {}).await;
    let client = setup.admin("alice");
    setup.kube.label_namespace("default", json!({"team": "a"}));
    setup.kube.set_admission_object(
        POLICIES,
        "core-cap",
        Some(policy(json!({
            "matchConditions": [{"name": "not-exempt",
                "expression": "!has(object.metadata.labels) || !('exempt' in object.metadata.labels)"}],
            "variables": [{"name": "cores", "expression": "object.spec.numCores"}],
            "validations": [{
                "expression": "variables.cores <= 8",
                "messageExpression": "'spec.numCores: ' + string(variables.cores) + ' exceeds 8 in ' + namespaceObject.metadata.name",
                "reason": "Forbidden",
            }],
        }))),
    );
    setup.kube.set_admission_object(
        BINDINGS,
        "core-cap-deny",
        Some(binding(
            "core-cap",
            &["Deny"],
            json!({"matchResources": {"namespaceSelector": {"matchLabels": {"team": "a"}}}}),
        )),
    );
    setup.kube.set_admission_object(
        BINDINGS,
        "core-cap-warn",
        Some(binding("core-cap", &["Warn"], json!({}))),
    );
    until_answered(&setup, &with_cores("probe", 16), 403).await;
    let (code, status, _) = create(&client, &setup, &with_cores("big", 16)).await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(status["reason"], "Forbidden");
    let denied = "ValidatingAdmissionPolicy 'core-cap' with binding 'core-cap-deny' denied request: spec.numCores: 16 exceeds 8 in default";
    assert_eq!(
        status["message"],
        format!("proxmoxmachines.infrastructure.cluster.x-k8s.io \"big\" is forbidden: {denied}")
    );
    assert_eq!(status["details"]["causes"][0]["message"], denied);
    let metrics = metrics_of(&client, &setup).await;
    assert!(
        metrics.contains(
            "apiserver_validating_admission_policy_check_total{policy=\"core-cap\",policy_binding=\"core-cap-deny\",error_type=\"no_error\",enforcement_action=\"deny\"}"
        ),
        "{metrics}"
    );
    // A v1alpha1 write is judged on its v1alpha2 form.
    let mut v1 = crate::rest::machine_v1("big-v1");
    v1["spec"]["numCores"] = json!(16);
    let (code, _, _) = create_in(&client, &setup, "v1alpha1", &v1).await;
    assert_eq!(code, 403);
    let exempt = labelled(with_cores("exempt", 16), &[("exempt", "yes")]);
    let (code, _, warnings) = create(&client, &setup, &exempt).await;
    assert_eq!(code, 201, "the match condition exempts it");
    assert!(warnings.is_empty(), "{warnings:?}");

    // Without the denying binding the other one warns.
    setup
        .kube
        .set_admission_object(BINDINGS, "core-cap-deny", None);
    until_answered(&setup, &with_cores("probe", 16), 201).await;
    let (code, _, warnings) = create(&client, &setup, &with_cores("big", 16)).await;
    assert_eq!(code, 201);
    assert!(
        warnings.iter().any(|w| w.contains(
            "Validation failed for ValidatingAdmissionPolicy 'core-cap' with binding 'core-cap-warn': spec.numCores: 16 exceeds 8 in default"
        )),
        "{warnings:?}"
    );

    // An expression that errs: Fail refuses with the error, Ignore admits.
    let broken = |failure_policy: &str| {
        policy(json!({
            "failurePolicy": failure_policy,
            "validations": [{"expression": "object.spec.nope > 1"}],
        }))
    };
    setup
        .kube
        .set_admission_object(POLICIES, "core-cap", Some(broken("Fail")));
    setup.kube.set_admission_object(
        BINDINGS,
        "core-cap-warn",
        Some(binding("core-cap", &["Deny"], json!({}))),
    );
    until_answered(&setup, &machine("probe"), 422).await;
    let (code, status, _) = create(&client, &setup, &machine("erring")).await;
    assert_eq!(code, 422);
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m
                .contains("denied request: expression 'object.spec.nope > 1' resulted in error: ")),
        "{status}"
    );
    setup
        .kube
        .set_admission_object(POLICIES, "core-cap", Some(broken("Ignore")));
    until_answered(&setup, &machine("probe"), 201).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn match_conditions_choose_the_writes_a_webhook_sees() {
    let setup = Setup::start(|_| {}).await;
    let hooks = Webhooks::start().await;
    let client = setup.admin("alice");
    set_validating(
        &setup,
        "cores",
        vec![hooks.hook(
            "cores.example.com",
            "cores",
            &["*"],
            json!({"matchConditions": [
                {"name": "big-only", "expression": "object.spec.numCores > 8"},
                {"name": "creates", "expression": "request.operation == 'CREATE'"},
            ]}),
        )],
    );
    until_answered(&setup, &with_cores("probe", 16), 403).await;
    let seen = hooks.reviews("cores").len();
    let (code, _, _) = create(&client, &setup, &with_cores("small", 2)).await;
    assert_eq!(code, 201);
    assert_eq!(
        hooks.reviews("cores").len(),
        seen,
        "a false condition skips the webhook"
    );
    // A condition that errs counts as a failed call: failurePolicy Fail refuses.
    set_validating(
        &setup,
        "cores",
        vec![hooks.hook(
            "cores.example.com",
            "cores",
            &["*"],
            json!({"matchConditions": [{"name": "broken", "expression": "object.spec.nope"}]}),
        )],
    );
    until_answered(&setup, &machine("probe"), 500).await;
    let (code, status, _) = create(&client, &setup, &machine("m")).await;
    assert_eq!(code, 500);
    assert!(
        status["message"].as_str().is_some_and(|m| m.contains(
            "failed calling webhook \"cores.example.com\": match condition \"broken\": expression 'object.spec.nope' resulted in error"
        )),
        "{status}"
    );
}

const MUTATING_POLICIES: &str = "mutatingadmissionpolicies";
const MUTATING_BINDINGS: &str = "mutatingadmissionpolicybindings";

/// A MutatingAdmissionPolicy (in v1beta1, as kube 1.34 serves it) on creates of
/// ProxmoxMachines in v1alpha2, so v1alpha1 writes are mutated converted, with these fields;
/// and its binding.
fn set_mutating_policy(setup: &Setup, name: &str, spec: Value) {
    let mut policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1beta1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {},
        "spec": {
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["infrastructure.cluster.x-k8s.io"],
                "apiVersions": ["v1alpha2"],
                "operations": ["CREATE"],
                "resources": [MACHINES],
            }]},
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
        },
    });
    merge(&mut policy["spec"], spec);
    setup
        .kube
        .set_admission_object(MUTATING_POLICIES, name, Some(policy));
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1beta1",
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {},
        "spec": {"policyName": name},
    });
    setup
        .kube
        .set_admission_object(MUTATING_BINDINGS, name, Some(binding));
}

fn apply_configuration(expression: &str) -> Value {
    json!({"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}})
}

fn json_patch(expression: &str) -> Value {
    json!({"patchType": "JSONPatch", "jsonPatch": {"expression": expression}})
}

/// A dry-run create of `machine("probe")`: its code and body.
async fn probe(setup: &Setup) -> (u16, Value) {
    let url = format!("{}?dryRun=All", machines_url(setup, "v1alpha2"));
    let (code, body, _) = send(setup.admin("alice").post(&url).json(&machine("probe"))).await;
    (code, body)
}

/// Waits until a dry-run create comes back with this annotation.
async fn until_annotated(setup: &Setup, key: &str, value: &str) {
    eventually(
        Duration::from_secs(10),
        "the policy's annotation",
        || async { probe(setup).await.1["metadata"]["annotations"][key] == value },
    )
    .await;
}

/// The annotation a policy records the cost centre it saw in.
const SAW: &str = "example.com/saw-cost-center";

#[tokio::test(flavor = "multi_thread")]
async fn mutating_policies_run_before_the_webhooks_and_again_if_needed() {
    let setup = Setup::start(|_| {}).await;
    let hooks = Webhooks::start().await;
    let client = setup.admin("alice");
    // The mutating webhook sets a cost centre; the policy, called before it, records the one
    // it saw and sets the sockets.
    setup.kube.set_admission_object(
        MUTATING,
        "cost-center",
        Some(configuration(vec![hooks.hook(
            "cost-center.example.com",
            "cost-center",
            &["*"],
            json!({}),
        )])),
    );
    let record = |reinvocation: &str| {
        json!({"reinvocationPolicy": reinvocation, "mutations": [apply_configuration(
            "Object{metadata: Object.metadata{annotations: {'example.com/saw-cost-center': \
             has(object.metadata.labels) && 'cost-center' in object.metadata.labels ? \
             object.metadata.labels['cost-center'] : 'none'}}, spec: Object.spec{numSockets: 1}}",
        )]})
    };
    set_mutating_policy(&setup, "record", record("Never"));
    until_annotated(&setup, SAW, "none").await;
    let (code, created, _) = create(&client, &setup, &machine("once")).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["metadata"]["annotations"][SAW], "none");
    assert_eq!(created["metadata"]["labels"]["cost-center"], "unassigned");
    assert_eq!(created["spec"]["numSockets"], 1);
    assert_eq!(created["spec"]["numCores"], 4, "the rest is kept");

    // IfNeeded: called again after the webhook changed the object.
    set_mutating_policy(&setup, "record", record("IfNeeded"));
    until_annotated(&setup, SAW, "unassigned").await;
    let (code, created, _) = create(&client, &setup, &machine("twice")).await;
    assert_eq!(code, 201);
    assert_eq!(created["metadata"]["annotations"][SAW], "unassigned");

    // A v1alpha1 write is mutated in v1alpha2 and stored with the mutation.
    let (code, _, _) =
        create_in(&client, &setup, "v1alpha1", &crate::rest::machine_v1("old")).await;
    assert_eq!(code, 201);
    let (_, stored, _) = send(client.get(machine_url(&setup, "old"))).await;
    assert_eq!(stored["metadata"]["annotations"][SAW], "unassigned");
    assert_eq!(stored["spec"]["numSockets"], 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn mutating_policy_patches_and_their_errors() {
    let setup = Setup::start(|_| {}).await;
    let client = setup.admin("alice");
    // Mutations run in order, each on the previous one's result; a JSON patch whose test
    // fails leaves the object as it was.
    set_mutating_policy(
        &setup,
        "owner",
        json!({"mutations": [
            // `full` is not sent: its schema default is what the policy sees, as in kube.
            apply_configuration("Object{metadata: Object.metadata{annotations: {'example.com/step': 'one', \
                'example.com/full': string(object.spec.full)}}}"),
            json_patch("[JSONPatch{op: 'add', path: '/metadata/annotations/' + \
                jsonpatch.escapeKey('example.com/created-by'), value: request.userInfo.username}]"),
            json_patch("[JSONPatch{op: 'test', path: '/spec/numCores', value: 99}, \
                JSONPatch{op: 'add', path: '/metadata/annotations/never', value: 'set'}]"),
        ]}),
    );
    until_annotated(&setup, "example.com/step", "one").await;
    let (code, created, _) = create(&client, &setup, &machine("patched")).await;
    assert_eq!(code, 201, "{created}");
    let annotations = &created["metadata"]["annotations"];
    assert_eq!(annotations["example.com/full"], "true", "{annotations}");
    assert!(
        annotations["example.com/created-by"].is_string(),
        "{annotations}"
    );
    assert!(annotations["never"].is_null(), "{annotations}");

    // A configuration that would replace an atomic list is refused in kube's words.
    set_mutating_policy(
        &setup,
        "owner",
        json!({"mutations": [apply_configuration(
            "Object{spec: Object.spec{network: Object.spec.network{networkDevices: \
             [Object.spec.network.networkDevices{name: 'net0', routes: \
             [Object.spec.network.networkDevices.routes{metric: 100}]}]}}}",
        )]}),
    );
    until_answered(&setup, &machine("probe"), 403).await;
    let (code, status, _) = create(&client, &setup, &machine("atomic")).await;
    assert_eq!(code, 403, "{status}");
    let refused = "policy 'owner' with binding 'owner' denied request: error applying patch: \
                   invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: \
                   .spec.network.networkDevices[0].routes";
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(status["message"], refused);
    assert_eq!(status["details"]["causes"][0]["message"], refused);
    assert_eq!(status["details"]["kind"], MACHINES);
    let (code, _, _) = send(client.get(machine_url(&setup, "atomic"))).await;
    assert_eq!(code, 404, "nothing was stored");
    let metrics = metrics_of(&client, &setup).await;
    assert!(
        metrics.contains(
            "apiserver_mutating_admission_policy_check_total{policy=\"owner\",policy_binding=\"owner\",error_type=\"invalid_error\"}"
        ),
        "{metrics}"
    );

    // Fields the schema does not declare, and a type named off its field path, are refused;
    // under Ignore an error admits the object unmutated.
    for (expression, message) in [
        (
            "Object{spec: Object.spec{cores: 4}}",
            "error applying patch: failed to convert patch object to typed object: .spec.cores: field not declared in schema",
        ),
        (
            "Object{spec: Object.status{numCores: 2}}",
            "type mismatch: unexpected type name \"Object.status\", expected \"Object.spec\"",
        ),
    ] {
        set_mutating_policy(
            &setup,
            "owner",
            json!({"mutations": [apply_configuration(expression)]}),
        );
        eventually(Duration::from_secs(10), message, || async {
            let (code, status) = probe(&setup).await;
            code == 403
                && status["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(message))
        })
        .await;
    }
    set_mutating_policy(
        &setup,
        "owner",
        json!({"failurePolicy": "Ignore", "mutations": [apply_configuration(
            "Object{spec: Object.spec{numCores: object.spec.missing}}",
        )]}),
    );
    until_answered(&setup, &machine("probe"), 201).await;
    let (code, created, _) = create(&client, &setup, &machine("ignored")).await;
    assert_eq!(code, 201);
    assert_eq!(created["spec"]["numCores"], 4);
}

/// An AdmissionConfiguration naming a kubeconfig whose user for the webhooks' host has a
/// client certificate of `clients` and the token `/token` wants (the files in `dir`).
fn admission_configuration(
    dir: &std::path::Path,
    hooks: &Webhooks,
    clients: &CertificateAuthority,
) -> std::path::PathBuf {
    let b64 = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
    let identity = clients.client("capmox-apiserver", &[]).expect("client");
    let kubeconfig = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "users": [{
            "name": format!("127.0.0.1:{}", hooks.port()),
            "user": {
                "client-certificate-data": b64(&identity.cert_pem),
                "client-key-data": b64(&identity.key_pem),
                "token": WEBHOOK_TOKEN,
            },
        }],
    });
    std::fs::write(dir.join("webhooks.kubeconfig"), kubeconfig.to_string()).expect("kubeconfig");
    let path = dir.join("admission.yaml");
    std::fs::write(
        &path,
        "apiVersion: apiserver.config.k8s.io/v1\n\
         kind: AdmissionConfiguration\n\
         plugins:\n\
         - name: ValidatingAdmissionWebhook\n\
         \x20 configuration:\n\
         \x20   apiVersion: apiserver.config.k8s.io/v1\n\
         \x20   kind: WebhookAdmissionConfiguration\n\
         \x20   kubeConfigFile: webhooks.kubeconfig\n",
    )
    .expect("admission configuration");
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn webhooks_are_called_with_the_configured_credentials() {
    let clients = CertificateAuthority::generate("webhook-clients").expect("CA");
    let hooks = Webhooks::start_verifying(Some(&clients)).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = admission_configuration(dir.path(), &hooks, &clients);
    let hook = || vec![hooks.hook("token.example.com", "token", &["*"], json!({}))];

    // With the configuration: the client certificate passes the handshake, the token the
    // webhook.
    let setup = Setup::start(|options| {
        options.delegation.admission_control_config_file = Some(config.clone());
    })
    .await;
    set_validating(&setup, "token", hook());
    eventually(
        Duration::from_secs(10),
        "the webhook was called",
        || async {
            probe(&setup).await;
            !hooks.reviews("token").is_empty()
        },
    )
    .await;
    assert_eq!(probe(&setup).await.0, 201, "the token was accepted");
    let called = hooks.reviews("token").len();
    let (code, _, _) = create(&setup.admin("alice"), &setup, &machine("m")).await;
    assert_eq!(code, 201);
    assert!(
        hooks.reviews("token").len() > called,
        "the webhook admitted it"
    );

    // Without it the webhook refuses the handshake: failurePolicy Fail refuses the write.
    let bare = Setup::start(|_| {}).await;
    set_validating(&bare, "token", hook());
    until_answered(&bare, &machine("probe"), 500).await;
    let (code, status, _) = create(&bare.admin("alice"), &bare, &machine("m")).await;
    assert_eq!(code, 500);
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.contains("failed calling webhook \"token.example.com\"")),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn policies_ask_the_authorizer_about_the_requests_user() {
    let setup = Setup::start(|_| {}).await;
    // alice and bob may write machines; only alice may "approve-big" ones.
    setup.kube.set_policy(|spec: &Value| {
        let user = spec["user"].as_str().unwrap_or_default();
        let verb = spec["resourceAttributes"]["verb"]
            .as_str()
            .unwrap_or_default();
        Ok((
            user == "alice" || (user == "bob" && verb != "approve-big"),
            String::new(),
        ))
    });
    setup.kube.set_admission_object(
        POLICIES,
        "big-needs-approval",
        Some(policy(json!({"validations": [{
            "expression": "object.spec.numCores <= 8 || authorizer.group('infrastructure.cluster.x-k8s.io')\
                .resource('proxmoxmachines').namespace(object.metadata.namespace).check('approve-big').allowed()",
            "message": "machines of more than 8 cores need the approve-big permission",
        }]}))),
    );
    setup.kube.set_admission_object(
        BINDINGS,
        "big-needs-approval",
        Some(binding("big-needs-approval", &["Deny"], json!({}))),
    );
    let as_user =
        |name: &str| setup.client(Some(&setup.client_ca.client(name, &[]).expect("client")));
    let (bob, alice) = (as_user("bob"), as_user("alice"));
    let url = machines_url(&setup, "v1alpha2");
    eventually(
        Duration::from_secs(10),
        "bob's big machine is refused",
        || async {
            let dry_run = format!("{url}?dryRun=All");
            send(bob.post(&dry_run).json(&with_cores("probe", 16)))
                .await
                .0
                == 422
        },
    )
    .await;
    let (code, status, _) = send(bob.post(&url).json(&with_cores("bobs", 16))).await;
    assert_eq!(code, 422, "{status}");
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.contains("need the approve-big permission")),
        "{status}"
    );
    let (code, _, _) = send(bob.post(&url).json(&with_cores("bobs-small", 4))).await;
    assert_eq!(code, 201, "small machines need no approval");
    let (code, status, _) = send(alice.post(&url).json(&with_cores("alices", 16))).await;
    assert_eq!(code, 201, "{status}");
    let asked = setup.kube.access_reviews();
    assert!(
        asked.iter().any(|r| r["user"] == "alice"
            && r["resourceAttributes"]["verb"] == "approve-big"
            && r["resourceAttributes"]["namespace"] == "default"),
        "{asked:?}"
    );
}
