//! ProxmoxKubernetesRelease rules beyond the schema: a machine must find one template per
//! node, so two VMID sources on the same node that serve the same failure domains are refused
//! (the schema cannot compare list items).

use std::collections::BTreeSet;

use crate::api::field::{Error, ErrorList, Path};
use crate::api::v1alpha2::{ProxmoxKubernetesRelease, ReleaseTemplate};
use crate::api::validation::Verdict;

/// Rules for creating a ProxmoxKubernetesRelease.
pub fn validate_release_create(release: &ProxmoxKubernetesRelease) -> Verdict {
    Verdict {
        errors: template_errors(&release.spec.templates),
        warnings: Vec::new(),
    }
}

/// Rules for updating a ProxmoxKubernetesRelease: the same as on create. Its spec may change
/// at any time; machines that exist keep the template they were cloned from.
pub fn validate_release_update(
    new: &ProxmoxKubernetesRelease,
    _old: &ProxmoxKubernetesRelease,
) -> Verdict {
    validate_release_create(new)
}

/// Whether two sources can serve one machine: both serve every domain no other source names,
/// or they name a domain in common.
fn overlap(a: &ReleaseTemplate, b: &ReleaseTemplate) -> bool {
    if a.failure_domains.is_empty() || b.failure_domains.is_empty() {
        return a.failure_domains.is_empty() && b.failure_domains.is_empty();
    }
    let a: BTreeSet<&String> = a.failure_domains.iter().collect();
    b.failure_domains.iter().any(|d| a.contains(d))
}

fn template_errors(templates: &[ReleaseTemplate]) -> ErrorList {
    let path = Path::new(&["spec", "templates"]);
    let mut errors = ErrorList::new();
    for (j, later) in templates.iter().enumerate() {
        let Some(node) = later.source_node.as_deref() else {
            continue;
        };
        let earlier = templates[..j]
            .iter()
            .position(|t| t.source_node.as_deref() == Some(node) && overlap(t, later));
        if let Some(i) = earlier {
            errors.push(Error::invalid(
                path.index(j).child("sourceNode"),
                node,
                format!(
                    "spec.templates[{i}] already names a template on {node} for the same \
                     failure domains: a machine must find one template per node"
                ),
            ));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(node: &str, vmid: i32, domains: &[&str]) -> ReleaseTemplate {
        ReleaseTemplate {
            source_node: Some(node.into()),
            template_id: Some(vmid),
            template_selector: None,
            failure_domains: domains.iter().map(|d| d.to_string()).collect(),
        }
    }

    #[test]
    fn one_template_per_node_and_domain() {
        let fine = [
            on("pve1", 100, &[]),
            on("pve2", 101, &[]),
            on("pve1", 102, &["a"]),
        ];
        assert!(template_errors(&fine).is_empty());
        let twice = [on("pve1", 100, &["a", "b"]), on("pve1", 101, &["b"])];
        let errors = template_errors(&twice);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].field.as_str(), "spec.templates[1].sourceNode");
        assert!(
            errors[0].detail.contains("spec.templates[0]"),
            "{}",
            errors[0].detail
        );
        assert_eq!(
            template_errors(&[on("pve1", 100, &[]), on("pve1", 101, &[])]).len(),
            1
        );
    }
}
