//! The management cluster's admission webhooks and admission policies, run on writes of our
//! kinds as kube-apiserver runs them for custom resources (it proxies aggregated requests
//! without admission, so an aggregated server must run them itself). Implements
//! `registry::admission::Admission`.
//!
//! The Mutating- and ValidatingWebhookConfigurations and the policies come from informers.
//! For each write: the MutatingAdmissionPolicies (`mutating`, their patches in `patches`),
//! then the mutating webhooks, one after the other, each on the previous one's result, those
//! with `IfNeeded` reinvoked once when a later one changed the object; after our own
//! validation the ValidatingAdmissionPolicies (`policies`), then the validating webhooks
//! concurrently, the first denial (in webhook order) winning. A webhook is called with an
//! AdmissionReview v1 (`review`) over HTTPS (`call`, with the `credentials` kube-apiserver
//! would present) when its rules, `matchPolicy`, selectors and match conditions intercept the
//! write; a failed call refuses the write under `failurePolicy: Fail` and is skipped under
//! `Ignore`; a dry run refuses webhooks with side effects. Expressions are CEL
//! (`expressions`) with Kubernetes' libraries (`library`, `formats`, `authz`). Metrics carry
//! kube-apiserver's names (`apiserver_admission_webhook_*`, `apiserver_*_admission_policy_*`,
//! docs/metrics.md).

mod authz;
mod call;
mod credentials;
mod expressions;
mod formats;
mod hooks;
mod library;
mod mutating;
mod patches;
mod policies;
mod review;
pub mod schema_rules;

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    ValidatingWebhookConfiguration,
};
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;

use crate::registry::admission::{Admission, AdmissionError, AdmissionKind, Attributes, Mutated};
use crate::registry::descriptor::ResourceDescriptor;

use super::authz::Authorizer;
use super::metrics::{Metrics, WebhookCall};
use super::namespaces::NamespaceLifecycle;
pub use call::Caller;
pub use credentials::WebhookCredentials;
use expressions::{Activation, Expression};
use hooks::{Flavor, Hook, Scope};
use mutating::{Invocation, MutatingPolicies};
use policies::Params;
use review::{Objects, ReviewVersion, Verdict};

/// How long a write waits for the first list of webhook configurations.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// Keeps the informers running; dropping it stops them.
pub type AdmissionInformers = crate::task::TaskGuard;

/// The webhook admission chain of `serve`.
pub struct WebhookAdmission {
    mutating: Store<MutatingWebhookConfiguration>,
    validating: Store<ValidatingWebhookConfiguration>,
    policies: Store<ValidatingAdmissionPolicy>,
    bindings: Store<ValidatingAdmissionPolicyBinding>,
    mutating_policies: MutatingPolicies,
    synced: AtomicBool,
    /// Counts the informers' events: the webhooks are normalized again when it moved.
    generation: Arc<AtomicU64>,
    webhooks: Mutex<Arc<Webhooks>>,
    namespaces: Arc<NamespaceLifecycle>,
    caller: Caller,
    params: Params,
    /// What `authorizer` in CEL asks (SubjectAccessReviews in `serve`).
    authorizer: Arc<dyn Authorizer>,
    metrics: Arc<Metrics>,
}

/// The configurations' webhooks and the mutating policies' bindings, normalized and in calling
/// order, as of an informer generation.
struct Webhooks {
    generation: u64,
    mutating: Vec<Hook>,
    validating: Vec<Hook>,
    mutating_policies: Vec<Invocation>,
}

impl Webhooks {
    /// The webhooks of `flavor` whose rules may concern this kind.
    fn relevant(&self, flavor: Flavor, descriptor: &ResourceDescriptor) -> Vec<&Hook> {
        let all = match flavor {
            Flavor::Mutating => &self.mutating,
            Flavor::Validating => &self.validating,
        };
        all.iter()
            .filter(|h| h.scope.may_intercept(descriptor.group, descriptor.plural))
            .collect()
    }

    /// The mutating policy bindings whose policies' rules may concern this kind.
    fn relevant_policies(&self, descriptor: &ResourceDescriptor) -> Vec<&Invocation> {
        self.mutating_policies
            .iter()
            .filter(|i| {
                i.scopes()
                    .0
                    .as_ref()
                    .is_some_and(|scope| scope.may_intercept(descriptor.group, descriptor.plural))
            })
            .collect()
    }
}

/// A policy binding's view of a write it intercepts: the objects in the version its policy
/// matched, and the request's Namespace.
struct PolicyInputs {
    version: crate::registry::descriptor::GroupVersion,
    object: Option<Value>,
    old: Option<Value>,
    namespace: Option<Value>,
}

/// A create or update going through mutating admission: the object so far, how often it
/// changed, and the warnings.
struct Mutation<'a> {
    attributes: &'a Attributes<'a>,
    old: Option<&'a Value>,
    kind: &'a dyn AdmissionKind,
    /// The write's `authorizer` for CEL: one per write, so a check is asked once.
    authorizer: &'a cel::Value,
    object: Value,
    changes: usize,
    warnings: Vec<String>,
}

impl Mutation<'_> {
    /// Folds a mutating webhook's outcome into the object; whether the webhook was called.
    fn take(&mut self, outcome: Outcome) -> bool {
        match outcome {
            Outcome::Skipped => false,
            Outcome::Allowed { patched, warnings } => {
                self.warnings.extend(warnings);
                if let Some(patched) = patched {
                    self.object = patched;
                    self.changes += 1;
                }
                true
            }
        }
    }
}

/// What one webhook did with a write.
enum Outcome {
    /// It does not intercept the write (rules, selectors) or was skipped (`Ignore`).
    Skipped,
    /// It allowed the write; a mutating webhook's patched object, in the request's version.
    Allowed {
        patched: Option<Value>,
        warnings: Vec<String>,
    },
}

fn forbidden_not_ready(attributes: &Attributes<'_>) -> AdmissionError {
    let descriptor = attributes.descriptor;
    AdmissionError::Denied {
        code: 403,
        reason: "Forbidden".to_owned(),
        message: format!(
            "{}.{} {} is forbidden: not yet ready to handle request",
            descriptor.plural,
            descriptor.group,
            crate::registry::gofmt::quote(attributes.name)
        ),
        details: None,
        warnings: Vec::new(),
    }
}

/// A reflector over every object of `K`: its store, and the stream that keeps it current.
fn reflect<K>(
    client: &kube::Client,
) -> (
    Store<K>,
    futures::stream::BoxStream<'static, Result<(), watcher::Error>>,
)
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (store, writer) = reflector::store();
    let api: Api<K> = Api::all(client.clone());
    let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()))
        .default_backoff()
        .map(|event| event.map(|_| ()))
        .boxed();
    (store, stream)
}

impl WebhookAdmission {
    /// Starts the informers of the cluster's webhook configurations and admission policies.
    pub fn start(
        client: kube::Client,
        namespaces: Arc<NamespaceLifecycle>,
        metrics: Arc<Metrics>,
        credentials: WebhookCredentials,
        authorizer: Arc<dyn Authorizer>,
    ) -> (Arc<Self>, AdmissionInformers) {
        let (mutating, mutating_events) = reflect(&client);
        let (validating, validating_events) = reflect(&client);
        let (policies, policy_events) = reflect(&client);
        let (bindings, binding_events) = reflect(&client);
        let generation = Arc::new(AtomicU64::new(0));
        let changed = {
            let generation = Arc::clone(&generation);
            move || {
                generation.fetch_add(1, Ordering::Release);
            }
        };
        let (mutating_policies, mutating_policy_events) =
            MutatingPolicies::start(client.clone(), changed.clone());
        let chain = Arc::new(Self {
            mutating,
            validating,
            policies,
            bindings,
            mutating_policies,
            synced: AtomicBool::new(false),
            generation,
            webhooks: Mutex::new(Arc::new(Webhooks {
                generation: u64::MAX,
                mutating: Vec::new(),
                validating: Vec::new(),
                mutating_policies: Vec::new(),
            })),
            namespaces,
            caller: Caller::new(Some(client.clone()), credentials),
            params: Params::new(client),
            authorizer,
            metrics,
        });
        let informer = Arc::clone(&chain);
        let task = tokio::spawn(async move {
            let ready = async {
                if informer.wait_for_lists().await {
                    informer.synced.store(true, Ordering::Release);
                }
            };
            let events = futures::stream::select_all([
                mutating_events,
                validating_events,
                policy_events,
                binding_events,
            ]);
            let drain = events.for_each(|event| {
                match event {
                    Ok(()) => changed(),
                    Err(e) => {
                        tracing::warn!(error = %e, "watching webhook configurations and admission policies");
                    }
                }
                futures::future::ready(())
            });
            futures::join!(ready, drain, mutating_policy_events);
        });
        (chain, AdmissionInformers::new(task))
    }

    /// Waits for the first list of every informer; whether all arrived.
    async fn wait_for_lists(&self) -> bool {
        let (m, v, p, b, mp) = futures::join!(
            self.mutating.wait_until_ready(),
            self.validating.wait_until_ready(),
            self.policies.wait_until_ready(),
            self.bindings.wait_until_ready(),
            self.mutating_policies.wait_until_ready()
        );
        m.is_ok() && v.is_ok() && p.is_ok() && b.is_ok() && mp
    }

    /// Whether the first lists have arrived (a readiness check).
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    async fn ready(&self, attributes: &Attributes<'_>) -> Result<(), AdmissionError> {
        if self.is_synced() {
            return Ok(());
        }
        match tokio::time::timeout(READY_TIMEOUT, self.wait_for_lists()).await {
            Ok(true) => Ok(()),
            _ => Err(forbidden_not_ready(attributes)),
        }
    }

    /// The webhooks as the informers last saw them, normalized once per change rather than
    /// on every write.
    fn webhooks(&self) -> Arc<Webhooks> {
        let generation = self.generation.load(Ordering::Acquire);
        let mut cached = self.webhooks.lock().unwrap_or_else(|e| e.into_inner());
        if cached.generation != generation {
            let (policies, bindings) = self.mutating_policies.state();
            *cached = Arc::new(Webhooks {
                generation,
                mutating: Hook::from_mutating(&self.mutating.state()),
                validating: Hook::from_validating(&self.validating.state()),
                mutating_policies: mutating::invocations(&policies, &bindings),
            });
        }
        Arc::clone(&cached)
    }

    /// The `authorizer` of CEL for this write (made once per admission phase, so that each
    /// distinct check is asked once): the requester's checks, `requestResource` the written
    /// resource.
    fn cel_authorizer(&self, attributes: &Attributes<'_>) -> cel::Value {
        let requester = attributes.requester;
        let user = super::authn::UserInfo {
            name: requester.username.clone(),
            uid: requester.uid.clone(),
            groups: requester.groups.clone(),
            extra: requester.extra.clone(),
        };
        let checks = authz::Checks::new(Arc::clone(&self.authorizer), user);
        let descriptor = attributes.descriptor;
        authz::authorizer_value(
            &checks,
            [
                descriptor.group,
                descriptor.plural,
                attributes.subresource,
                attributes.namespace,
                attributes.name,
            ],
        )
    }

    /// Whether the write is in scope of `hook` beyond its rules: the namespace's labels and the
    /// objects' labels match its selectors; its match conditions hold (on the objects in the
    /// version it is sent).
    async fn in_scope(
        &self,
        hook: &Hook,
        attributes: &Attributes<'_>,
        objects: &Objects<'_>,
        authorizer: &cel::Value,
    ) -> Result<bool, String> {
        if !in_selected_namespace(&self.namespaces, &hook.scope, attributes).await?
            || !hook.scope.matches_objects(objects.object, objects.old)?
        {
            return Ok(false);
        }
        if hook.match_conditions.is_empty() {
            return Ok(true);
        }
        let request = review::cel_request(attributes, objects.version);
        let activation =
            Activation::new(objects.object, objects.old, &request).with_authorizer(authorizer);
        let conditions = hook.match_conditions.iter();
        conditions_hold(
            conditions.map(|c| (c.name.as_str(), c.expression.as_str())),
            &activation,
        )
    }

    /// Calls `hook` on the write if it intercepts it (`authorizer`: the write's, for CEL).
    async fn run(
        &self,
        hook: &Hook,
        attributes: &Attributes<'_>,
        (object, old): (Option<&Value>, Option<&Value>),
        kind: &dyn AdmissionKind,
        authorizer: &cel::Value,
    ) -> Result<Outcome, AdmissionError> {
        let Some(version) = hook.scope.intercepted_version(attributes) else {
            return Ok(Outcome::Skipped);
        };
        let (object, old) = in_version(kind, attributes, version, object, old)?;
        let objects = Objects {
            version,
            object: object.as_ref(),
            old: old.as_ref(),
        };
        match self.in_scope(hook, attributes, &objects, authorizer).await {
            Ok(true) => {}
            Ok(false) => return Ok(Outcome::Skipped),
            Err(why) => return self.failed(hook, attributes, why, Instant::now()),
        }
        if attributes.dry_run && !hook.dry_run_safe {
            return Err(AdmissionError::BadRequest(format!(
                "admission webhook {} does not support dry run",
                crate::registry::gofmt::quote(&hook.name)
            )));
        }
        let review_version = match ReviewVersion::preferred(&hook.review_versions) {
            Ok(version) => version,
            Err(why) => {
                let why = format!("could not create admission objects: {why}");
                return self.failed(hook, attributes, why, Instant::now());
            }
        };
        let uid = uuid::Uuid::new_v4().to_string();
        let request = review::request(review_version, &uid, attributes, &objects);
        let sent = review::Sent {
            version: review_version,
            uid: &uid,
            mutating: hook.flavor == Flavor::Mutating,
        };
        let started = Instant::now();
        let call = self
            .caller
            .call(&hook.client, hook.flavor, hook.timeout, &request);
        let answer = match call.await {
            Ok(body) => review::verdict(&hook.name, &sent, &body)
                .map_err(|e| format!("received invalid webhook response: {e}")),
            Err(e) => Err(e.0),
        };
        let verdict = match answer {
            Ok(verdict) => verdict,
            Err(why) => return self.failed(hook, attributes, why, started),
        };
        match verdict {
            Verdict::Denied(error) => {
                let code = match &error {
                    AdmissionError::Denied { code, .. } => *code,
                    _ => 400,
                };
                self.observe(hook, attributes, started, WebhookCall::Denied { code });
                tracing::info!(webhook = %hook.name, user = %attributes.requester.username,
                    field_manager = attributes.field_manager, operation = attributes.operation.as_str(),
                    namespace = attributes.namespace, name = attributes.name, "admission webhook denied a write");
                Err(error)
            }
            Verdict::Allowed { patch, warnings } => {
                self.observe(hook, attributes, started, WebhookCall::Allowed);
                let patched = match (hook.flavor, patch, object) {
                    (Flavor::Mutating, Some(patch), Some(mut patched)) => {
                        let before = patched.clone();
                        if let Err(e) = patch.apply(&mut patched) {
                            let why = format!(
                                "received invalid webhook response: the patch does not apply: {e}"
                            );
                            return self.failed(hook, attributes, why, started);
                        }
                        kind.apply_schema_defaults(version, &mut patched);
                        (patched != before)
                            .then(|| kind.convert(&patched, version, attributes.version))
                            .transpose()
                            .map_err(AdmissionError::Failed)?
                    }
                    _ => None,
                };
                Ok(Outcome::Allowed { patched, warnings })
            }
        }
    }

    /// A call that produced no usable answer: the failure policy decides.
    fn failed(
        &self,
        hook: &Hook,
        attributes: &Attributes<'_>,
        why: String,
        started: Instant,
    ) -> Result<Outcome, AdmissionError> {
        let message = format!(
            "failed calling webhook {}: {why}",
            crate::registry::gofmt::quote(&hook.name)
        );
        if hook.fail_closed {
            self.observe(hook, attributes, started, WebhookCall::Failed);
            tracing::warn!(webhook = %hook.name, error = %why, "admission webhook failed: the write is refused (failurePolicy Fail)");
            Err(AdmissionError::Failed(message))
        } else {
            self.observe(hook, attributes, started, WebhookCall::FailedOpen);
            tracing::warn!(webhook = %hook.name, error = %why, "admission webhook failed: ignored (failurePolicy Ignore)");
            Ok(Outcome::Skipped)
        }
    }

    fn observe(
        &self,
        hook: &Hook,
        attributes: &Attributes<'_>,
        started: Instant,
        call: WebhookCall,
    ) {
        self.metrics.observe_webhook(
            &hook.name,
            hook.flavor.label(),
            attributes.operation.as_str(),
            call,
            started.elapsed(),
        );
    }

    async fn mutate_all(
        &self,
        attributes: Attributes<'_>,
        object: Value,
        old: Option<&Value>,
        kind: &dyn AdmissionKind,
    ) -> Result<Mutated, AdmissionError> {
        let webhooks = self.webhooks();
        let policies = webhooks.relevant_policies(attributes.descriptor);
        let hooks = webhooks.relevant(Flavor::Mutating, attributes.descriptor);
        if policies.is_empty() && hooks.is_empty() {
            return Ok(Mutated {
                object,
                warnings: Vec::new(),
            });
        }
        self.ready(&attributes).await?;
        let authorizer = self.cel_authorizer(&attributes);
        let mut write = Mutation {
            attributes: &attributes,
            old,
            kind,
            authorizer: &authorizer,
            object,
            changes: 0,
            warnings: Vec::new(),
        };
        let every_policy = (0..policies.len()).collect();
        let policies_called = self
            .run_policies(&policies, every_policy, &mut write)
            .await?;
        // For each webhook called, the count of changes when it was last called.
        let mut called: Vec<(usize, usize)> = Vec::new();
        for (index, hook) in hooks.iter().enumerate() {
            let objects = (Some(&write.object), old);
            let outcome = self
                .run(hook, &attributes, objects, kind, &authorizer)
                .await?;
            if write.take(outcome) {
                called.push((index, write.changes));
            }
        }
        // `IfNeeded`: once more for a policy or webhook whose view a later one changed,
        // policies first, as kube reinvokes its admission plugins in order.
        let again = policies_called
            .into_iter()
            .filter(|&(index, seen)| policies[index].reinvoke() && write.changes > seen)
            .map(|(index, _)| index)
            .collect();
        self.run_policies(&policies, again, &mut write).await?;
        for (index, seen) in called {
            if hooks[index].reinvoke && write.changes > seen {
                let objects = (Some(&write.object), old);
                let outcome = self
                    .run(hooks[index], &attributes, objects, kind, &authorizer)
                    .await?;
                write.take(outcome);
            }
        }
        Ok(Mutated {
            object: write.object,
            warnings: write.warnings,
        })
    }

    /// Runs the mutating policy bindings `which` (indices into `policies`) on the write, in
    /// order; answers the bindings that intercepted it, each with the count of changes after
    /// it ran. Errors that fail closed refuse the write once all have run.
    async fn run_policies(
        &self,
        policies: &[&Invocation],
        which: Vec<usize>,
        write: &mut Mutation<'_>,
    ) -> Result<Vec<(usize, usize)>, AdmissionError> {
        let (attributes, kind) = (write.attributes, write.kind);
        let mut called = Vec::new();
        let mut errors = Vec::new();
        for index in which {
            let invocation = policies[index];
            let Some(mut inputs) = self
                .policy_inputs(
                    invocation.scopes(),
                    attributes,
                    Some(&write.object),
                    write.old,
                    kind,
                )
                .await?
            else {
                continue;
            };
            let (failed, changed) = invocation
                .mutate(
                    &self.params,
                    attributes,
                    kind,
                    &mut inputs,
                    write.authorizer,
                    &self.metrics,
                )
                .await;
            errors.extend(failed);
            if let Some(mutated) = inputs.object.filter(|_| changed) {
                write.object = kind
                    .convert(&mutated, inputs.version, attributes.version)
                    .map_err(AdmissionError::Failed)?;
                write.changes += 1;
            }
            called.push((index, write.changes));
        }
        match mutating::refusal(attributes, &errors) {
            Some(refusal) => Err(refusal),
            None => Ok(called),
        }
    }

    /// Where a policy binding with these scopes intercepts the write: the objects in the
    /// version its policy matched, and the request's Namespace; `None` when out of scope.
    async fn policy_inputs(
        &self,
        (policy_scope, narrowed): &(Option<Scope>, Option<Scope>),
        attributes: &Attributes<'_>,
        object: Option<&Value>,
        old: Option<&Value>,
        kind: &dyn AdmissionKind,
    ) -> Result<Option<PolicyInputs>, AdmissionError> {
        let Some(policy_scope) = policy_scope else {
            return Ok(None);
        };
        let Some(version) = policy_scope.intercepted_version(attributes) else {
            return Ok(None);
        };
        if narrowed
            .as_ref()
            .is_some_and(|scope| scope.intercepted_version(attributes).is_none())
        {
            return Ok(None);
        }
        let (object, old) = in_version(kind, attributes, version, object, old)?;
        for scope in std::iter::once(policy_scope).chain(narrowed.as_ref()) {
            let selected = in_selected_namespace(&self.namespaces, scope, attributes)
                .await
                .and_then(|ok| Ok(ok && scope.matches_objects(object.as_ref(), old.as_ref())?));
            match selected {
                Ok(true) => {}
                Ok(false) => return Ok(None),
                Err(e) => return Err(AdmissionError::Failed(e)),
            }
        }
        let namespace = match attributes.namespace {
            "" => None,
            ns => self
                .namespaces
                .object(ns)
                .await
                .ok()
                .flatten()
                .and_then(|n| serde_json::to_value(n).ok()),
        };
        Ok(Some(PolicyInputs {
            version,
            object,
            old,
            namespace,
        }))
    }

    /// One validating policy binding on a write: nothing if out of its scope.
    async fn evaluate_binding(
        &self,
        binding: &policies::Binding<'_>,
        attributes: &Attributes<'_>,
        object: Option<&Value>,
        old: Option<&Value>,
        kind: &dyn AdmissionKind,
        authorizer: &cel::Value,
    ) -> Result<Vec<String>, AdmissionError> {
        let Some(inputs) = self
            .policy_inputs(&binding.scopes(), attributes, object, old, kind)
            .await?
        else {
            return Ok(Vec::new());
        };
        let objects = Objects {
            version: inputs.version,
            object: inputs.object.as_ref(),
            old: inputs.old.as_ref(),
        };
        let namespace = inputs.namespace;
        let started = Instant::now();
        let (result, erred) = binding
            .evaluate(
                &self.params,
                attributes,
                &objects,
                namespace.as_ref(),
                authorizer,
            )
            .await;
        let action = match &result {
            Err(_) => "deny",
            Ok(warnings) if !warnings.is_empty() => "warn",
            Ok(_) => "allow",
        };
        let error_type = if erred { "invalid_error" } else { "no_error" };
        let (policy, name) = (binding.policy_name(), binding.binding_name());
        self.metrics
            .observe_policy(policy, name, error_type, action, started.elapsed());
        if action != "allow" {
            let user = &attributes.requester.username;
            let (operation, namespace) = (attributes.operation.as_str(), attributes.namespace);
            let verdict = if action == "deny" {
                "admission policy denied a write"
            } else {
                "admission policy warned about a write"
            };
            tracing::info!(policy, binding = name, %user, field_manager = attributes.field_manager,
                operation, namespace, name = attributes.name, "{verdict}");
        }
        result
    }

    async fn validate_all(
        &self,
        attributes: Attributes<'_>,
        object: Option<&Value>,
        old: Option<&Value>,
        kind: &dyn AdmissionKind,
    ) -> Result<Vec<String>, AdmissionError> {
        let webhooks = self.webhooks();
        let hooks = webhooks.relevant(Flavor::Validating, attributes.descriptor);
        let policies = self.policies.state();
        let bindings = self.bindings.state();
        let bindings = policies::bindings(&policies, &bindings);
        if hooks.is_empty() && bindings.is_empty() {
            return Ok(Vec::new());
        }
        self.ready(&attributes).await?;
        let authorizer = self.cel_authorizer(&attributes);
        let mut warnings = Vec::new();
        for binding in &bindings {
            warnings.extend(
                self.evaluate_binding(binding, &attributes, object, old, kind, &authorizer)
                    .await?,
            );
        }
        let outcomes = futures::future::join_all(
            hooks
                .iter()
                .map(|hook| self.run(hook, &attributes, (object, old), kind, &authorizer)),
        )
        .await;
        for outcome in outcomes {
            if let Outcome::Allowed { warnings: more, .. } = outcome? {
                warnings.extend(more);
            }
        }
        Ok(warnings)
    }
}

impl Admission for WebhookAdmission {
    fn intercepts(&self, descriptor: &ResourceDescriptor) -> bool {
        let webhooks = self.webhooks();
        !self.is_synced()
            || !webhooks.relevant(Flavor::Mutating, descriptor).is_empty()
            || !webhooks.relevant(Flavor::Validating, descriptor).is_empty()
            || !webhooks.relevant_policies(descriptor).is_empty()
            || !self.bindings.state().is_empty()
    }

    fn mutate<'a>(
        &'a self,
        attributes: Attributes<'a>,
        object: Value,
        old: Option<&'a Value>,
        kind: &'a dyn AdmissionKind,
    ) -> BoxFuture<'a, Result<Mutated, AdmissionError>> {
        self.mutate_all(attributes, object, old, kind).boxed()
    }

    fn validate<'a>(
        &'a self,
        attributes: Attributes<'a>,
        object: Option<&'a Value>,
        old: Option<&'a Value>,
        kind: &'a dyn AdmissionKind,
    ) -> BoxFuture<'a, Result<Vec<String>, AdmissionError>> {
        self.validate_all(attributes, object, old, kind).boxed()
    }
}

/// Whether the namespace of a namespaced write matches the scope's namespace selector.
async fn in_selected_namespace(
    namespaces: &NamespaceLifecycle,
    scope: &hooks::Scope,
    attributes: &Attributes<'_>,
) -> Result<bool, String> {
    let selector = scope.namespace_selector.as_ref().map_err(Clone::clone)?;
    if !attributes.descriptor.namespaced || attributes.namespace.is_empty() || selector.is_empty() {
        return Ok(true);
    }
    let labels = namespaces
        .labels(attributes.namespace)
        .await
        .map_err(|e| format!("looking up namespace {:?}: {e}", attributes.namespace))?;
    Ok(selector.matches(&labels))
}

/// `object` and `old`, in the write's version, as they read in `version`.
fn in_version(
    kind: &dyn AdmissionKind,
    attributes: &Attributes<'_>,
    version: crate::registry::descriptor::GroupVersion,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Result<(Option<Value>, Option<Value>), AdmissionError> {
    let convert = |o: Option<&Value>| {
        o.map(|o| kind.convert(o, attributes.version, version))
            .transpose()
            .map_err(AdmissionError::Failed)
    };
    Ok((convert(object)?, convert(old)?))
}

/// kube's match conditions (name, expression): any false skips; otherwise an error is the
/// call's failure.
fn conditions_hold<'a>(
    conditions: impl IntoIterator<Item = (&'a str, &'a str)>,
    activation: &Activation,
) -> Result<bool, String> {
    let mut error = None;
    for (name, expression) in conditions {
        match Expression::compile(expression).and_then(|e| e.evaluate_bool(activation)) {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err(e) => {
                error.get_or_insert(format!("match condition {name:?}: {e}"));
            }
        }
    }
    error.map_or(Ok(true), Err)
}
