//! The webhooks of the management cluster's Mutating- and ValidatingWebhookConfigurations in
//! one shape, with the defaults kube-apiserver applies (`failurePolicy: Fail`, `matchPolicy:
//! Equivalent`, `timeoutSeconds: 10`, selectors matching everything), and which of them
//! intercept a write: rules (operations, groups, versions, resources with subresources,
//! scope), the version a webhook is sent (`matchPolicy`), the object selector. The namespace
//! selector and match conditions need lookups and CEL; `chain` runs them.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MatchResources, MutatingWebhook, MutatingWebhookConfiguration,
    NamedRuleWithOperations, RuleWithOperations, ValidatingWebhook, ValidatingWebhookConfiguration,
    WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as ApiSelector;
use serde_json::Value;

use crate::registry::admission::Attributes;
use crate::registry::descriptor::GroupVersion;
use crate::registry::label_selector::LabelSelector;

/// kube-apiserver's default `timeoutSeconds`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Mutating or validating, as the metrics' `type` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    Mutating,
    Validating,
}

impl Flavor {
    /// kube's metric label: `admit` or `validating`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Mutating => "admit",
            Self::Validating => "validating",
        }
    }
}

/// What a webhook or an admission policy intercepts: webhook rules or a policy's
/// `matchConstraints` / a binding's `matchResources` (rules with resource names, exclusions).
#[derive(Debug, Clone)]
pub struct Scope {
    rules: Vec<Rule>,
    excluded: Vec<Rule>,
    /// `matchPolicy: Equivalent` (the default): a rule naming another served version of the
    /// kind matches too, and the object is converted to it.
    equivalent: bool,
    /// Without rules, everything matches (a binding's `matchResources` that only selects).
    everything_without_rules: bool,
    /// The selectors; a selector that does not parse is the webhook's (policy's) error.
    pub namespace_selector: Result<LabelSelector, String>,
    pub object_selector: Result<LabelSelector, String>,
}

/// A rule, with the object names it is limited to (policies' `resourceNames`).
#[derive(Debug, Clone)]
struct Rule {
    rule: RuleWithOperations,
    names: Vec<String>,
}

/// One webhook, normalized.
#[derive(Debug, Clone)]
pub struct Hook {
    pub name: String,
    pub flavor: Flavor,
    pub client: WebhookClientConfig,
    pub scope: Scope,
    /// `failurePolicy: Fail` (the default): a call that fails refuses the request.
    pub fail_closed: bool,
    /// `sideEffects`: only `None` and `NoneOnDryRun` webhooks may see dry runs.
    pub dry_run_safe: bool,
    pub timeout: Duration,
    pub review_versions: Vec<String>,
    /// `reinvocationPolicy: IfNeeded` (mutating webhooks only).
    pub reinvoke: bool,
    pub match_conditions: Vec<MatchCondition>,
}

fn selector(selector: Option<&ApiSelector>) -> Result<LabelSelector, String> {
    selector.map_or(Ok(LabelSelector::everything()), |s| {
        LabelSelector::from_api(s).map_err(|e| e.to_string())
    })
}

fn dry_run_safe(side_effects: &str) -> bool {
    matches!(side_effects, "None" | "NoneOnDryRun")
}

fn timeout(seconds: Option<i32>) -> Duration {
    seconds
        .and_then(|s| u64::try_from(s).ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs)
}

/// A `Hook` from a MutatingWebhook or ValidatingWebhook: distinct types with the same fields.
macro_rules! hook_from {
    ($hook:expr, $flavor:expr, $reinvoke:expr) => {{
        let hook = $hook;
        Hook {
            name: hook.name.clone(),
            flavor: $flavor,
            client: hook.client_config.clone(),
            scope: Scope::webhook(
                hook.rules.as_deref(),
                hook.match_policy.as_deref(),
                hook.namespace_selector.as_ref(),
                hook.object_selector.as_ref(),
            ),
            fail_closed: hook.failure_policy.as_deref() != Some("Ignore"),
            dry_run_safe: dry_run_safe(&hook.side_effects),
            timeout: timeout(hook.timeout_seconds),
            review_versions: hook.admission_review_versions.clone(),
            reinvoke: $reinvoke,
            match_conditions: hook.match_conditions.clone().unwrap_or_default(),
        }
    }};
}

impl Hook {
    fn mutating(hook: &MutatingWebhook) -> Self {
        let reinvoke = hook.reinvocation_policy.as_deref() == Some("IfNeeded");
        hook_from!(hook, Flavor::Mutating, reinvoke)
    }

    fn validating(hook: &ValidatingWebhook) -> Self {
        hook_from!(hook, Flavor::Validating, false)
    }

    /// The webhooks of mutating configurations in kube's order: configurations by name, the
    /// webhooks of each as listed.
    pub fn from_mutating(configurations: &[impl AsRef<MutatingWebhookConfiguration>]) -> Vec<Self> {
        let mut sorted: Vec<&MutatingWebhookConfiguration> =
            configurations.iter().map(AsRef::as_ref).collect();
        sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        sorted
            .into_iter()
            .flat_map(|c| c.webhooks.iter().flatten().map(Self::mutating))
            .collect()
    }

    /// The same for validating configurations.
    pub fn from_validating(
        configurations: &[impl AsRef<ValidatingWebhookConfiguration>],
    ) -> Vec<Self> {
        let mut sorted: Vec<&ValidatingWebhookConfiguration> =
            configurations.iter().map(AsRef::as_ref).collect();
        sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        sorted
            .into_iter()
            .flat_map(|c| c.webhooks.iter().flatten().map(Self::validating))
            .collect()
    }
}

impl Scope {
    fn webhook(
        rules: Option<&[RuleWithOperations]>,
        match_policy: Option<&str>,
        namespace_selector: Option<&ApiSelector>,
        object_selector: Option<&ApiSelector>,
    ) -> Self {
        Self {
            rules: rules
                .into_iter()
                .flatten()
                .map(|rule| Rule {
                    rule: rule.clone(),
                    names: Vec::new(),
                })
                .collect(),
            excluded: Vec::new(),
            equivalent: match_policy != Some("Exact"),
            everything_without_rules: false,
            namespace_selector: selector(namespace_selector),
            object_selector: selector(object_selector),
        }
    }

    /// A policy's `matchConstraints` or a binding's `matchResources`.
    pub fn policy(resources: &MatchResources) -> Self {
        let rules = |rules: Option<&Vec<NamedRuleWithOperations>>| {
            rules
                .into_iter()
                .flatten()
                .map(|named| Rule {
                    rule: RuleWithOperations {
                        api_groups: named.api_groups.clone(),
                        api_versions: named.api_versions.clone(),
                        operations: named.operations.clone(),
                        resources: named.resources.clone(),
                        scope: named.scope.clone(),
                    },
                    names: named.resource_names.clone().unwrap_or_default(),
                })
                .collect()
        };
        Self {
            rules: rules(resources.resource_rules.as_ref()),
            excluded: rules(resources.exclude_resource_rules.as_ref()),
            equivalent: resources.match_policy.as_deref() != Some("Exact"),
            everything_without_rules: true,
            namespace_selector: selector(resources.namespace_selector.as_ref()),
            object_selector: selector(resources.object_selector.as_ref()),
        }
    }

    /// Whether a rule could match some write of this group and resource (any version,
    /// operation or subresource): the chain's cheap test before any conversion.
    pub fn may_intercept(&self, group: &str, plural: &str) -> bool {
        self.rules.iter().any(|Rule { rule, .. }| {
            listed(rule.api_groups.as_deref(), group)
                && rule.resources.iter().flatten().any(|r| {
                    let (resource, _) = split_resource(r);
                    resource == "*" || resource == plural
                })
        })
    }

    /// The version the webhook is sent the object in, if its rules intercept the write: the
    /// request's own version when a rule names it, else (`Equivalent`) the first other served
    /// version a rule names.
    pub fn intercepted_version(&self, attributes: &Attributes<'_>) -> Option<GroupVersion> {
        let any = |rules: &[Rule], version: GroupVersion| {
            rules.iter().any(|r| r.matches(attributes, version))
        };
        let versions = || attributes.descriptor.versions.iter().map(|v| v.version);
        if versions().any(|v| any(&self.excluded, v)) {
            return None;
        }
        let matches = |version: GroupVersion| any(&self.rules, version);
        if matches(attributes.version) || (self.rules.is_empty() && self.everything_without_rules) {
            return Some(attributes.version);
        }
        if !self.equivalent {
            return None;
        }
        attributes
            .descriptor
            .versions
            .iter()
            .map(|v| v.version)
            .filter(|v| *v != attributes.version)
            .find(|v| matches(*v))
    }

    /// The object selector: the new or the old object's labels match (`{}` matches all).
    pub fn matches_objects(
        &self,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<bool, String> {
        let selector = self.object_selector.as_ref().map_err(Clone::clone)?;
        if selector.is_empty() {
            return Ok(true);
        }
        Ok([object, old]
            .into_iter()
            .flatten()
            .any(|o| selector.matches(&labels(o))))
    }
}

/// An object's `metadata.labels` (non-string values count as absent).
pub fn labels(object: &Value) -> std::collections::BTreeMap<String, String> {
    object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// `*` or the value itself in a rule's list.
fn listed(list: Option<&[String]>, value: &str) -> bool {
    list.into_iter().flatten().any(|v| v == "*" || v == value)
}

/// `pods/status` → (`pods`, `status`); `pods` → (`pods`, ``).
fn split_resource(resource: &str) -> (&str, &str) {
    resource.split_once('/').unwrap_or((resource, ""))
}

impl Rule {
    /// kube's `rules.Matcher` for `version` of the write's kind, and the resource names.
    fn matches(&self, attributes: &Attributes<'_>, version: GroupVersion) -> bool {
        let (rule, descriptor) = (&self.rule, attributes.descriptor);
        let scope = match rule.scope.as_deref() {
            None | Some("*") => true,
            Some("Cluster") => !descriptor.namespaced,
            Some("Namespaced") => descriptor.namespaced,
            Some(_) => false,
        };
        scope
            && (self.names.is_empty() || self.names.iter().any(|n| n == attributes.name))
            && listed(rule.operations.as_deref(), attributes.operation.as_str())
            && listed(rule.api_groups.as_deref(), version.group)
            && listed(rule.api_versions.as_deref(), version.version)
            && rule.resources.iter().flatten().any(|r| {
                let (resource, subresource) = split_resource(r);
                (resource == "*" || resource == descriptor.plural)
                    && (subresource == "*" || subresource == attributes.subresource)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::admission::{AdmissionOperation, Requester};
    use crate::registry::descriptor::ResourceDescriptor;

    fn machines() -> ResourceDescriptor {
        ResourceDescriptor::from_kind(crate::api::Kind::ProxmoxMachine.descriptor())
    }

    fn hook(rules: Value, match_policy: &str) -> Hook {
        Hook::validating(
            &serde_json::from_value(serde_json::json!({
                "name": "machines.example.com",
                "clientConfig": {"url": "https://127.0.0.1:1/validate"},
                "rules": rules,
                "matchPolicy": match_policy,
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
            }))
            .expect("webhook"),
        )
    }

    fn attributes<'a>(
        descriptor: &'a ResourceDescriptor,
        version: &'static str,
        subresource: &'a str,
        requester: &'a Requester,
    ) -> Attributes<'a> {
        Attributes {
            descriptor,
            version: GroupVersion::new(crate::api::GROUP, version),
            subresource,
            operation: AdmissionOperation::Create,
            namespace: "default",
            name: "m",
            requester,
            dry_run: false,
            field_manager: "",
        }
    }

    #[test]
    fn rules_pick_the_version_sent() {
        let descriptor = machines();
        let requester = Requester::server();
        let v1alpha1_only = serde_json::json!([{
            "operations": ["CREATE", "UPDATE"],
            "apiGroups": ["infrastructure.cluster.x-k8s.io"],
            "apiVersions": ["v1alpha1"],
            "resources": ["proxmoxmachines"],
        }]);
        let v2 = attributes(&descriptor, "v1alpha2", "", &requester);
        let equivalent = hook(v1alpha1_only.clone(), "Equivalent");
        assert_eq!(
            equivalent.scope.intercepted_version(&v2).map(|v| v.version),
            Some("v1alpha1")
        );
        assert_eq!(
            hook(v1alpha1_only.clone(), "Exact")
                .scope
                .intercepted_version(&v2),
            None
        );
        let v1 = attributes(&descriptor, "v1alpha1", "", &requester);
        assert_eq!(
            equivalent.scope.intercepted_version(&v1).map(|v| v.version),
            Some("v1alpha1")
        );
        // The main resource's rule does not cover the status subresource.
        let status = attributes(&descriptor, "v1alpha1", "status", &requester);
        assert_eq!(equivalent.scope.intercepted_version(&status), None);
    }

    #[test]
    fn wildcards_scopes_and_operations() {
        let descriptor = machines();
        let requester = Requester::server();
        let status = attributes(&descriptor, "v1alpha2", "status", &requester);
        let all = hook(
            serde_json::json!([{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
                "resources": ["*/*"], "scope": "Namespaced"}]),
            "Equivalent",
        );
        assert!(all.scope.intercepted_version(&status).is_some());
        let cluster_scoped = hook(
            serde_json::json!([{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
                "resources": ["*/*"], "scope": "Cluster"}]),
            "Equivalent",
        );
        assert!(cluster_scoped.scope.intercepted_version(&status).is_none());
        let deletes = hook(
            serde_json::json!([{"operations": ["DELETE"], "apiGroups": ["*"],
                "apiVersions": ["*"], "resources": ["*"]}]),
            "Equivalent",
        );
        let create = attributes(&descriptor, "v1alpha2", "", &requester);
        assert!(deletes.scope.intercepted_version(&create).is_none());
        let capi = hook(
            serde_json::json!([{"operations": ["*"], "apiGroups": ["cluster.x-k8s.io"],
                "apiVersions": ["*"], "resources": ["machines"]}]),
            "Equivalent",
        );
        assert!(
            deletes
                .scope
                .may_intercept(crate::api::GROUP, "proxmoxmachines")
        );
        assert!(
            !capi
                .scope
                .may_intercept(crate::api::GROUP, "proxmoxmachines")
        );
        assert!(capi.scope.may_intercept("cluster.x-k8s.io", "machines"));
    }

    #[test]
    fn object_selector_matches_new_or_old() {
        let mut selected = hook(serde_json::json!([]), "Equivalent");
        selected.scope.object_selector = LabelSelector::parse("team=a").map_err(|e| e.to_string());
        let labelled = serde_json::json!({"metadata": {"labels": {"team": "a"}}});
        let other = serde_json::json!({"metadata": {"labels": {"team": "b"}}});
        assert_eq!(
            selected.scope.matches_objects(Some(&labelled), None),
            Ok(true)
        );
        assert_eq!(
            selected
                .scope
                .matches_objects(Some(&other), Some(&labelled)),
            Ok(true)
        );
        assert_eq!(
            selected.scope.matches_objects(Some(&other), None),
            Ok(false)
        );
    }
}
