//! MutatingAdmissionPolicies with their bindings, run as kube-apiserver runs them (before the
//! mutating webhooks): a binding applies when its policy's `matchConstraints` and its own
//! `matchResources` intercept the write and the policy's match conditions hold; for each of
//! its params, each mutation in order patches the object as the previous one left it, with
//! the policy's `variables`: an `ApplyConfiguration` is merged with the kind's schema
//! (structured merge, atomic lists, maps and structs refused), a `JSONPatch` applied (a
//! failed `test` leaves the object as it was). Errors are kube's policy errors: under
//! `failurePolicy: Fail` they refuse the write once every binding has run, 403 with the first
//! error's message and every error as a cause; under `Ignore` they are logged.
//!
//! The API is beta in kube 1.34 (`v1beta1`), alpha before (`v1alpha1`) and served only
//! where a cluster enables it: its version is discovered, and the policies and bindings are
//! read as JSON in whichever it is, their fields being the same.

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MatchResources, ParamKind, ParamRef, Variable,
};
use kube::api::{Api, DynamicObject};
use kube::core::ApiResource;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::watch;

use crate::registry::admission::{AdmissionError, AdmissionKind, Attributes};

use super::expressions::{Activation, Expression};
use super::hooks::Scope;
use super::policies::{Params, compiled_variables};
use super::{PolicyInputs, review};
use crate::server::metrics::Metrics;

/// The group of the admission APIs.
const GROUP: &str = "admissionregistration.k8s.io";
/// The versions that may serve the API, most stable first.
const VERSIONS: [&str; 3] = ["v1", "v1beta1", "v1alpha1"];

/// A MutatingAdmissionPolicy's spec, as every version of the API spells it.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PolicySpec {
    param_kind: Option<ParamKind>,
    match_constraints: Option<MatchResources>,
    #[serde(default)]
    variables: Vec<Variable>,
    #[serde(default)]
    mutations: Vec<Mutation>,
    failure_policy: Option<String>,
    #[serde(default)]
    match_conditions: Vec<MatchCondition>,
    reinvocation_policy: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Mutation {
    patch_type: String,
    apply_configuration: Option<PatchExpression>,
    json_patch: Option<PatchExpression>,
}

#[derive(Debug, Deserialize)]
struct PatchExpression {
    expression: String,
}

/// A MutatingAdmissionPolicyBinding's spec.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct BindingSpec {
    policy_name: Option<String>,
    param_ref: Option<ParamRef>,
    match_resources: Option<MatchResources>,
}

fn spec<T: for<'de> Deserialize<'de>>(object: &DynamicObject) -> Option<T> {
    let name = object.metadata.name.as_deref().unwrap_or_default();
    match serde_json::from_value(object.data["spec"].clone()) {
        Ok(spec) => Some(spec),
        Err(e) => {
            tracing::warn!(%name, error = %e, "a MutatingAdmissionPolicy or binding cannot be read: it is not run");
            None
        }
    }
}

/// One binding of an existing policy, read once per change of either.
pub struct Invocation {
    policy: String,
    binding: String,
    spec: Arc<PolicySpec>,
    binding_spec: BindingSpec,
    /// The policy's scope and the binding's narrowing of it.
    scopes: (Option<Scope>, Option<Scope>),
}

/// A policy error, already in kube's words.
pub struct PolicyError {
    pub message: String,
    /// `Invalid` where a mutation or match condition failed; none (Forbidden) where the
    /// binding could not be configured.
    pub reason: Option<&'static str>,
    pub fail_closed: bool,
}

/// The bindings whose policies exist, ordered by policy then binding name (kube's order is
/// unspecified, which reinvocation makes up for).
pub fn invocations(
    policies: &[Arc<DynamicObject>],
    bindings: &[Arc<DynamicObject>],
) -> Vec<Invocation> {
    let policies: Vec<(String, Arc<PolicySpec>)> = policies
        .iter()
        .filter_map(|p| Some((p.metadata.name.clone()?, Arc::new(spec(p)?))))
        .collect();
    let mut found: Vec<Invocation> = bindings
        .iter()
        .filter_map(|b| {
            let binding_spec: BindingSpec = spec(b)?;
            let policy_name = binding_spec.policy_name.as_deref()?;
            let (policy, spec) = policies.iter().find(|(name, _)| name == policy_name)?;
            let scopes = super::policies::scopes(
                spec.match_constraints.as_ref(),
                binding_spec.match_resources.as_ref(),
            );
            Some(Invocation {
                policy: policy.clone(),
                binding: b.metadata.name.clone()?,
                spec: Arc::clone(spec),
                binding_spec,
                scopes,
            })
        })
        .collect();
    found.sort_by(|a, b| (&a.policy, &a.binding).cmp(&(&b.policy, &b.binding)));
    found
}

impl Invocation {
    pub fn scopes(&self) -> &(Option<Scope>, Option<Scope>) {
        &self.scopes
    }

    /// Whether the policy is called again when a later mutation changed the object.
    pub fn reinvoke(&self) -> bool {
        self.spec.reinvocation_policy.as_deref() == Some("IfNeeded")
    }

    fn fail_closed(&self) -> bool {
        self.spec.failure_policy.as_deref() != Some("Ignore")
    }

    fn error(&self, message: impl std::fmt::Display, reason: Option<&'static str>) -> PolicyError {
        PolicyError {
            message: format!(
                "policy '{}' with binding '{}' denied request: {message}",
                self.policy, self.binding
            ),
            reason,
            fail_closed: self.fail_closed(),
        }
    }

    /// Runs the policy's mutations on `inputs.object` for each param; the errors on the way,
    /// and whether the object changed.
    pub async fn mutate(
        &self,
        params: &Params,
        attributes: &Attributes<'_>,
        kind: &dyn AdmissionKind,
        inputs: &mut PolicyInputs,
        authorizer: &cel::Value,
        metrics: &Metrics,
    ) -> (Vec<PolicyError>, bool) {
        let found = params
            .read(
                self.spec.param_kind.as_ref(),
                self.binding_spec.param_ref.as_ref(),
                attributes.namespace,
            )
            .await;
        let found = match found {
            Ok(found) => found,
            Err(e) => {
                let error = self.error(format!("failed to configure binding: {e}"), None);
                return (vec![error], false);
            }
        };
        let Some(mut object) = inputs.object.take() else {
            return (Vec::new(), false);
        };
        let mut changed = false;
        let request = review::cel_request(attributes, inputs.version);
        let variables = compiled_variables(&self.spec.variables);
        let mut errors = Vec::new();
        for param in &found {
            let activation = |object: &Value, old: Option<&Value>| {
                Activation::new(Some(object), old, &request)
                    .with_policy_inputs(param.as_ref(), inputs.namespace.as_ref())
                    .with_authorizer(authorizer)
            };
            let conditions = self.spec.match_conditions.iter();
            let conditions = conditions.map(|c| (c.name.as_str(), c.expression.as_str()));
            match super::conditions_hold(conditions, &activation(&object, inputs.old.as_ref())) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    errors.push(self.error(e, Some("Invalid")));
                    continue;
                }
            }
            for mutation in &self.spec.mutations {
                let started = Instant::now();
                let current = activation(&object, inputs.old.as_ref()).with_variables(&variables);
                let outcome = patched(mutation, &current, &object, inputs.version, kind);
                let error_type = match &outcome {
                    Ok(_) => "no_error",
                    Err(e) if e.starts_with("compilation") => "compile_error",
                    Err(e) if e.contains("cost limit exceeded") => "out_of_budget",
                    Err(_) => "invalid_error",
                };
                metrics.observe_mutation(
                    &self.policy,
                    &self.binding,
                    error_type,
                    started.elapsed(),
                );
                match outcome {
                    Ok(Some(mutated)) => {
                        object = mutated;
                        changed = true;
                    }
                    Ok(None) => {}
                    Err(e) => errors.push(self.error(e, Some("Invalid"))),
                }
            }
        }
        inputs.object = Some(object);
        (errors, changed)
    }
}

/// The object after one mutation (`None`: unchanged).
fn patched(
    mutation: &Mutation,
    activation: &Activation,
    object: &Value,
    version: crate::registry::descriptor::GroupVersion,
    kind: &dyn AdmissionKind,
) -> Result<Option<Value>, String> {
    let evaluate = |expression: &PatchExpression| {
        let compiled = Expression::compile_patch(&expression.expression)?;
        compiled.evaluate(activation).map_err(|e| {
            format!(
                "expression '{}' resulted in error: {e}",
                expression.expression
            )
        })
    };
    let result = match (mutation.patch_type.as_str(), mutation) {
        (
            "ApplyConfiguration",
            Mutation {
                apply_configuration: Some(e),
                ..
            },
        ) => {
            let mut config = super::patches::apply_configuration(&evaluate(e)?)?;
            if let (Some(config), Some(live)) = (config.as_object_mut(), object.as_object()) {
                for field in ["apiVersion", "kind"] {
                    if let Some(value) = live.get(field) {
                        config.insert(field.to_owned(), value.clone());
                    }
                }
            }
            kind.merge_configuration(version, object, &config)
                .map_err(|e| format!("error applying patch: {e}"))?
        }
        (
            "JSONPatch",
            Mutation {
                json_patch: Some(e),
                ..
            },
        ) => {
            let operations = super::patches::json_patch(&evaluate(e)?)?;
            let patch =
                crate::registry::patch::json::JsonPatch::parse(operations.to_string().as_bytes())
                    .map_err(|e| format!("JSON Patch: {e}"))?;
            let mut result = object.clone();
            match patch.apply(&mut result) {
                Ok(()) => result,
                Err(crate::registry::patch::json::JsonPatchError::TestFailed(_)) => {
                    return Ok(None);
                }
                Err(e) => return Err(format!("JSON Patch: {e}")),
            }
        }
        _ => return Ok(None),
    };
    let mut result = result;
    kind.apply_schema_defaults(version, &mut result);
    Ok((result != *object).then_some(result))
}

/// The refusal of a write by the policy errors that fail closed, as kube words it: 403, the
/// first error's message and reason, each error a cause.
pub fn refusal(attributes: &Attributes<'_>, errors: &[PolicyError]) -> Option<AdmissionError> {
    for error in errors.iter().filter(|e| !e.fail_closed) {
        tracing::warn!(error = %error.message, "admission policy failed: ignored (failurePolicy Ignore)");
    }
    let mut closed = errors.iter().filter(|e| e.fail_closed).peekable();
    let first = closed.peek()?;
    let (message, reason) = (first.message.clone(), first.reason.unwrap_or("Forbidden"));
    let causes: Vec<Value> = closed
        .map(|e| serde_json::json!({"message": e.message}))
        .collect();
    let descriptor = attributes.descriptor;
    tracing::info!(user = %attributes.requester.username, field_manager = attributes.field_manager,
        operation = attributes.operation.as_str(), namespace = attributes.namespace,
        name = attributes.name, error = %message, "admission policy refused a write");
    Some(AdmissionError::Denied {
        code: 403,
        reason: reason.to_owned(),
        message,
        details: Some(serde_json::json!({
            "name": attributes.name,
            "group": descriptor.group,
            "kind": descriptor.plural,
            "causes": causes,
        })),
        warnings: Vec::new(),
    })
}

/// What discovery found about the API.
#[derive(Clone)]
enum Discovered {
    Pending,
    Absent,
    Served {
        policies: Store<DynamicObject>,
        bindings: Store<DynamicObject>,
    },
}

/// The cluster's MutatingAdmissionPolicies and bindings, once discovered.
pub struct MutatingPolicies {
    discovered: watch::Receiver<Discovered>,
}

/// The API's two resources in the most stable version the cluster serves.
async fn discover(
    client: &kube::Client,
) -> Result<Option<(ApiResource, ApiResource)>, kube::Error> {
    let versions = match kube::discovery::group(client, GROUP).await {
        Ok(group) => group,
        Err(kube::Error::Discovery(kube::error::DiscoveryError::MissingApiGroup(_))) => {
            return Ok(None);
        }
        Err(kube::Error::Api(e)) if e.code == 404 => return Ok(None),
        Err(e) => return Err(e),
    };
    for version in VERSIONS {
        let resources = versions.versioned_resources(version);
        let find = |plural: &str| {
            resources
                .iter()
                .find(|(r, _)| r.plural == plural)
                .map(|(r, _)| r.clone())
        };
        if let (Some(policies), Some(bindings)) = (
            find("mutatingadmissionpolicies"),
            find("mutatingadmissionpolicybindings"),
        ) {
            return Ok(Some((policies, bindings)));
        }
    }
    Ok(None)
}

impl MutatingPolicies {
    /// The policies' handle, and the future that discovers the API and keeps the informers
    /// current, calling `changed` on every event.
    pub fn start(
        client: kube::Client,
        changed: impl Fn() + Send + Sync + 'static,
    ) -> (Self, futures::future::BoxFuture<'static, ()>) {
        let (sender, discovered) = watch::channel(Discovered::Pending);
        let run = async move {
            let mut backoff = std::time::Duration::from_millis(500);
            let found = loop {
                match discover(&client).await {
                    Ok(found) => break found,
                    Err(e) => {
                        tracing::warn!(error = %e, "discovering the MutatingAdmissionPolicy API: retrying");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(std::time::Duration::from_secs(30));
                    }
                }
            };
            let Some((policy_resource, binding_resource)) = found else {
                let _ = sender.send(Discovered::Absent);
                return;
            };
            tracing::info!(version = %policy_resource.version, "running the cluster's MutatingAdmissionPolicies");
            let reflect = |resource: ApiResource| {
                let writer = reflector::store::Writer::new(resource.clone());
                let store = writer.as_reader();
                let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
                let events = reflector::reflector(writer, watcher(api, watcher::Config::default()))
                    .default_backoff()
                    .boxed();
                (store, events)
            };
            let (policies, policy_events) = reflect(policy_resource);
            let (bindings, binding_events) = reflect(binding_resource);
            let _ = sender.send(Discovered::Served { policies, bindings });
            futures::stream::select(policy_events, binding_events)
                .for_each(|event| {
                    match event {
                        Ok(_) => changed(),
                        Err(e) => tracing::warn!(error = %e, "watching MutatingAdmissionPolicies"),
                    }
                    futures::future::ready(())
                })
                .await;
        };
        (Self { discovered }, Box::pin(run))
    }

    /// Waits until discovery answered and, where the API is served, the first lists arrived.
    pub async fn wait_until_ready(&self) -> bool {
        let mut discovered = self.discovered.clone();
        let state = match discovered
            .wait_for(|d| !matches!(d, Discovered::Pending))
            .await
        {
            Ok(state) => state.clone(),
            Err(_) => return false,
        };
        match state {
            Discovered::Served { policies, bindings } => {
                let (p, b) =
                    futures::join!(policies.wait_until_ready(), bindings.wait_until_ready());
                p.is_ok() && b.is_ok()
            }
            _ => true,
        }
    }

    /// The policies and bindings as last seen (none before discovery or where not served).
    pub fn state(&self) -> (Vec<Arc<DynamicObject>>, Vec<Arc<DynamicObject>>) {
        match &*self.discovered.borrow() {
            Discovered::Served { policies, bindings } => (policies.state(), bindings.state()),
            _ => (Vec::new(), Vec::new()),
        }
    }
}
