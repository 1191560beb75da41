//! ValidatingAdmissionPolicies with their bindings, evaluated as kube-apiserver evaluates them
//! (after mutation and our own validation, before the validating webhooks): a binding applies
//! when its policy's `matchConstraints` and its own `matchResources` intercept the write and
//! the policy's match conditions hold; its params (`paramKind`, `paramRef` by name or
//! selector, in the request's namespace unless one is named) are read from the cluster, each
//! param evaluated on its own; `variables`, then each validation's expression. A failed
//! validation is a violation with `message`, `messageExpression` or `failed expression: …`,
//! acted on by the binding's `validationActions`: Deny refuses in kube's words, Warn warns,
//! Audit logs (this server writes no audit log). An expression that errs counts as a violation
//! under `failurePolicy: Fail` and is ignored under `Ignore`.

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::admissionregistration::v1::{
    MatchResources, ParamKind, ParamRef, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding, Variable,
};
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

use crate::registry::admission::{AdmissionError, Attributes};
use crate::registry::gofmt::quote;
use crate::registry::label_selector::LabelSelector;

use super::expressions::{Activation, Expression};
use super::hooks::Scope;
use super::review::{self, Objects};

/// A binding's actions on a violation.
#[derive(Debug, Default, Clone, Copy)]
struct Actions {
    deny: bool,
    warn: bool,
    audit: bool,
}

fn actions(binding: &ValidatingAdmissionPolicyBinding) -> Actions {
    let listed = binding
        .spec
        .as_ref()
        .and_then(|s| s.validation_actions.clone())
        .unwrap_or_default();
    let has = |action: &str| listed.iter().any(|a| a == action);
    Actions {
        deny: has("Deny"),
        warn: has("Warn"),
        audit: has("Audit"),
    }
}

/// A policy's verdict on one param: violations (message, reason), or nothing.
struct Violation {
    message: String,
    reason: String,
}

/// The policy and binding of one decision, for messages.
struct Names<'a> {
    policy: &'a str,
    binding: &'a str,
}

/// kube's code for a violation's `reason`.
fn code(reason: &str) -> u16 {
    match reason {
        "Unauthorized" => 401,
        "Forbidden" => 403,
        "RequestEntityTooLarge" => 413,
        _ => 422,
    }
}

fn denial(attributes: &Attributes<'_>, names: &Names<'_>, violation: Violation) -> AdmissionError {
    let message = format!(
        "ValidatingAdmissionPolicy '{}' with binding '{}' denied request: {}",
        names.policy, names.binding, violation.message
    );
    let descriptor = attributes.descriptor;
    AdmissionError::Denied {
        code: code(&violation.reason),
        reason: violation.reason,
        message: format!(
            "{}.{} {} is forbidden: {message}",
            descriptor.plural,
            descriptor.group,
            quote(attributes.name)
        ),
        details: Some(serde_json::json!({
            "name": attributes.name,
            "group": descriptor.group,
            "kind": descriptor.plural,
            "causes": [{"message": message}],
        })),
        warnings: Vec::new(),
    }
}

/// Where params are read: discovery of each param kind, cached.
pub struct Params {
    client: kube::Client,
    resources: Mutex<HashMap<String, ApiResource>>,
}

impl Params {
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            resources: Mutex::new(HashMap::new()),
        }
    }

    async fn resource(&self, kind: &ParamKind) -> Result<ApiResource, String> {
        let api_version = kind.api_version.clone().unwrap_or_default();
        let kind_name = kind.kind.clone().unwrap_or_default();
        let key = format!("{api_version}/{kind_name}");
        if let Some(found) = self
            .resources
            .lock()
            .ok()
            .and_then(|r| r.get(&key).cloned())
        {
            return Ok(found);
        }
        let (group, version) = api_version
            .split_once('/')
            .unwrap_or(("", api_version.as_str()));
        let gvk = GroupVersionKind::gvk(group, version, &kind_name);
        let (resource, _) = kube::discovery::pinned_kind(&self.client, &gvk)
            .await
            .map_err(|e| format!("failed to find resource for param kind {key}: {e}"))?;
        if let Ok(mut resources) = self.resources.lock() {
            resources.insert(key, resource.clone());
        }
        Ok(resource)
    }

    /// The params a binding names; `None` where the policy has no `paramKind`.
    pub async fn read(
        &self,
        kind: Option<&ParamKind>,
        reference: Option<&ParamRef>,
        namespace: &str,
    ) -> Result<Vec<Option<Value>>, String> {
        let Some(kind) = kind else {
            return Ok(vec![None]);
        };
        let Some(reference) = reference else {
            return Err("the policy has a paramKind but its binding no paramRef".to_owned());
        };
        let resource = self.resource(kind).await?;
        let namespace = reference.namespace.as_deref().unwrap_or(namespace);
        let api: Api<DynamicObject> = if namespace.is_empty() {
            Api::all_with(self.client.clone(), &resource)
        } else {
            Api::namespaced_with(self.client.clone(), namespace, &resource)
        };
        let found: Vec<Value> = match (&reference.name, &reference.selector) {
            (Some(name), _) => api
                .get_opt(name)
                .await
                .map_err(|e| format!("failed to read param {name}: {e}"))?
                .into_iter()
                .map(|o| serde_json::to_value(o).unwrap_or_default())
                .collect(),
            (None, Some(selector)) => {
                let selector = LabelSelector::from_api(selector).map_err(|e| e.to_string())?;
                let text = selector_text(&selector);
                api.list(&ListParams::default().labels(&text))
                    .await
                    .map_err(|e| format!("failed to list params: {e}"))?
                    .items
                    .into_iter()
                    .map(|o| serde_json::to_value(o).unwrap_or_default())
                    .collect()
            }
            (None, None) => Vec::new(),
        };
        if found.is_empty() {
            return match reference.parameter_not_found_action.as_deref() {
                Some("Allow") => Ok(Vec::new()),
                _ => Err(
                    "no params found for policy binding with `Deny` parameterNotFoundAction"
                        .to_owned(),
                ),
            };
        }
        Ok(found.into_iter().map(Some).collect())
    }
}

/// A label selector in its string form, for a LIST.
fn selector_text(selector: &LabelSelector) -> String {
    selector
        .requirements()
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// One binding's inputs, resolved.
pub struct Binding<'a> {
    pub policy: &'a ValidatingAdmissionPolicy,
    pub binding: &'a ValidatingAdmissionPolicyBinding,
}

/// The bindings whose policies exist, in the bindings' name order.
pub fn bindings<'a>(
    policies: &'a [std::sync::Arc<ValidatingAdmissionPolicy>],
    bindings: &'a [std::sync::Arc<ValidatingAdmissionPolicyBinding>],
) -> Vec<Binding<'a>> {
    let mut found: Vec<Binding<'a>> = bindings
        .iter()
        .filter_map(|binding| {
            let name = binding.spec.as_ref()?.policy_name.as_deref()?;
            let policy = policies
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(name))?;
            Some(Binding {
                policy: policy.as_ref(),
                binding: binding.as_ref(),
            })
        })
        .collect();
    found.sort_by(|a, b| a.binding.metadata.name.cmp(&b.binding.metadata.name));
    found
}

/// A policy's scope (its `matchConstraints`), and its binding's narrowing of it (the binding's
/// `matchResources`).
pub fn scopes(
    constraints: Option<&MatchResources>,
    resources: Option<&MatchResources>,
) -> (Option<Scope>, Option<Scope>) {
    (constraints.map(Scope::policy), resources.map(Scope::policy))
}

/// A policy's `variables`, compiled; one that does not compile is left out, so only the
/// expressions that use it fail.
pub fn compiled_variables<'a>(
    variables: impl IntoIterator<Item = &'a Variable>,
) -> Vec<(String, std::sync::Arc<Expression>)> {
    variables
        .into_iter()
        .filter_map(|v| Some((v.name.clone(), Expression::compile(&v.expression).ok()?)))
        .collect()
}

impl Binding<'_> {
    /// The policy's scope, and the binding's narrowing of it.
    pub fn scopes(&self) -> (Option<Scope>, Option<Scope>) {
        scopes(
            self.policy
                .spec
                .as_ref()
                .and_then(|s| s.match_constraints.as_ref()),
            self.binding
                .spec
                .as_ref()
                .and_then(|s| s.match_resources.as_ref()),
        )
    }

    fn fail_closed(&self) -> bool {
        self.policy
            .spec
            .as_ref()
            .and_then(|s| s.failure_policy.as_deref())
            != Some("Ignore")
    }

    fn names(&self) -> Names<'_> {
        Names {
            policy: self.policy_name(),
            binding: self.binding_name(),
        }
    }

    pub fn policy_name(&self) -> &str {
        self.policy.metadata.name.as_deref().unwrap_or_default()
    }

    pub fn binding_name(&self) -> &str {
        self.binding.metadata.name.as_deref().unwrap_or_default()
    }

    /// Evaluates the binding on a write already known to be in its scope: the warnings, or
    /// the denial; and whether an expression erred.
    pub async fn evaluate(
        &self,
        params: &Params,
        attributes: &Attributes<'_>,
        objects: &Objects<'_>,
        namespace: Option<&Value>,
        authorizer: &cel::Value,
    ) -> (Result<Vec<String>, AdmissionError>, bool) {
        let Some(spec) = self.policy.spec.as_ref() else {
            return (Ok(Vec::new()), false);
        };
        let names = self.names();
        let actions = actions(self.binding);
        let mut erred = false;
        let mut fail = |message: String| {
            erred = true;
            if self.fail_closed() {
                Some(Violation {
                    message,
                    reason: "Invalid".to_owned(),
                })
            } else {
                tracing::warn!(policy = names.policy, binding = names.binding, error = %message,
                    "admission policy failed: ignored (failurePolicy Ignore)");
                None
            }
        };
        let request = review::cel_request(attributes, objects.version);
        let base =
            Activation::new(objects.object, objects.old, &request).with_authorizer(authorizer);
        let mut violations = Vec::new();
        let reference = self
            .binding
            .spec
            .as_ref()
            .and_then(|s| s.param_ref.as_ref());
        let found = params
            .read(spec.param_kind.as_ref(), reference, attributes.namespace)
            .await;
        let found = match found {
            Ok(found) => found,
            Err(e) => {
                violations.extend(fail(format!("failed to configure binding: {e}")));
                Vec::new()
            }
        };
        for param in &found {
            let activation = base.clone().with_policy_inputs(param.as_ref(), namespace);
            let conditions = spec.match_conditions.iter().flatten();
            let conditions = conditions.map(|c| (c.name.as_str(), c.expression.as_str()));
            match super::conditions_hold(conditions, &activation) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    violations.extend(fail(e));
                    continue;
                }
            }
            let variables = compiled_variables(spec.variables.iter().flatten());
            let activation = activation.with_variables(&variables);
            for validation in spec.validations.iter().flatten() {
                let verdict = Expression::compile(&validation.expression)
                    .and_then(|e| e.evaluate_bool(&activation));
                match verdict {
                    Ok(true) => {}
                    Ok(false) => violations.push(Violation {
                        message: message(validation, &activation),
                        reason: validation
                            .reason
                            .clone()
                            .unwrap_or_else(|| "Invalid".to_owned()),
                    }),
                    Err(e) => violations.extend(fail(e)),
                }
            }
            if actions.audit {
                for annotation in spec.audit_annotations.iter().flatten() {
                    if let Ok(value) = Expression::compile(&annotation.value_expression)
                        .and_then(|e| e.evaluate_string(&activation))
                    {
                        tracing::info!(policy = names.policy, key = %annotation.key, %value,
                            "admission policy audit annotation");
                    }
                }
            }
        }
        let mut warnings = Vec::new();
        for violation in violations {
            if actions.audit {
                tracing::info!(policy = names.policy, binding = names.binding,
                    message = %violation.message, "admission policy validation failure (Audit)");
            }
            if actions.warn {
                warnings.push(format!(
                    "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {}",
                    names.policy, names.binding, violation.message
                ));
            }
            if actions.deny {
                return (Err(denial(attributes, &names, violation)), erred);
            }
        }
        (Ok(warnings), erred)
    }
}

/// A failed validation's message: `messageExpression` when it yields a non-empty string,
/// else `message`, else `failed expression: <expression>`.
fn message(
    validation: &k8s_openapi::api::admissionregistration::v1::Validation,
    activation: &Activation,
) -> String {
    let from_expression = validation.message_expression.as_deref().and_then(|source| {
        Expression::compile(source)
            .and_then(|e| e.evaluate_string(activation))
            .ok()
            .filter(|m| !m.trim().is_empty())
    });
    from_expression
        .or_else(|| validation.message.clone().filter(|m| !m.is_empty()))
        .unwrap_or_else(|| format!("failed expression: {}", validation.expression.trim()))
}
