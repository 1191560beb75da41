//! What kube-apiserver would run and this server does not: MutatingAdmissionPolicies (beta in
//! kube 1.34, served only when a cluster enables them). So that such a cluster does not
//! bypass them for our kinds in silence, each one whose `matchConstraints` can reach our group
//! is named in the log, once.

use std::collections::HashSet;

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;

use crate::task::TaskGuard;

/// Whether a policy's resource rules can match a resource of `group`.
fn concerns(policy: &DynamicObject, group: &str) -> bool {
    policy.data["spec"]["matchConstraints"]["resourceRules"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|rule| {
            rule["apiGroups"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .any(|g| g == "*" || g == group)
        })
}

/// Watches the cluster's MutatingAdmissionPolicies, if it serves them, and warns about each
/// that concerns `group`.
pub fn warn_about_mutating_policies(client: kube::Client, group: &'static str) -> TaskGuard {
    TaskGuard::new(tokio::spawn(async move {
        let Ok(admission) = kube::discovery::group(&client, "admissionregistration.k8s.io").await
        else {
            return;
        };
        let Some((resource, _)) = admission
            .resources_by_stability()
            .into_iter()
            .find(|(r, _)| r.plural == "mutatingadmissionpolicies")
        else {
            return;
        };
        let api: Api<DynamicObject> = Api::all_with(client, &resource);
        let mut warned = HashSet::new();
        let mut policies = watcher(api, watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        while let Some(event) = policies.next().await {
            let Ok(policy) = event else { continue };
            let name = policy.metadata.name.clone().unwrap_or_default();
            if concerns(&policy, group) && warned.insert(name.clone()) {
                tracing::warn!(policy = %name, %group,
                    "MutatingAdmissionPolicy matches this server's group, but this server does not run MutatingAdmissionPolicies: writes of its kinds are not mutated by it");
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_concerns_the_groups_its_rules_name() {
        let policy = |groups: Value| -> DynamicObject {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "admissionregistration.k8s.io/v1beta1",
                "kind": "MutatingAdmissionPolicy",
                "metadata": {"name": "p"},
                "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": groups}]}},
            }))
            .expect("policy")
        };
        let group = crate::api::GROUP;
        assert!(concerns(&policy(serde_json::json!([group])), group));
        assert!(concerns(&policy(serde_json::json!(["*"])), group));
        assert!(!concerns(&policy(serde_json::json!(["apps"])), group));
    }
}
