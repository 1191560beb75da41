//! The template of a machine whose spec names a ProxmoxKubernetesRelease: the release (by
//! name, or the one whose version is the Machine's), the sources that serve the machine's
//! failure domain, and their templates, one per node. It is resolved when the VM is cloned
//! and only then, so a release that changes later leaves existing VMs alone; the choice is
//! recorded in `status.template`.
//!
//! Everything that stops the resolution (no such release, two releases of one version, no
//! source for the domain, tags that match nothing) is a `Blocked` wait with the reason: the
//! release or the templates may appear, and no VM is created meanwhile.

use std::collections::BTreeMap;

use super::{Failure, Pass};
use crate::api::v1alpha2::{KubernetesReleaseReference, ProxmoxKubernetesRelease, ReleaseTemplate};
use crate::controller::seams::{InfraStore, Management};
use crate::controller::template::{TemplateRef, TemplateSource};
use crate::proxmox::types::ClusterResource;

/// The release a machine clones from and the templates it offers the machine.
pub(super) struct ReleaseTemplates {
    /// The release's name.
    pub name: String,
    /// Its `spec.version`.
    pub version: String,
    /// One template, or one copy per node (sorted by node).
    pub copies: Vec<TemplateRef>,
}

impl<S: InfraStore, M: Management> Pass<'_, S, M> {
    /// Resolves `spec.kubernetesRelease` to the templates the machine may clone.
    pub(super) async fn release_templates(
        &mut self,
        reference: &KubernetesReleaseReference,
        cache: &mut Option<Vec<ClusterResource>>,
    ) -> Result<ReleaseTemplates, Failure> {
        let retry = self.r.config.blocked_retry;
        let blocked = |message: String| Failure::Blocked(message, retry);
        let namespace = self.ns();
        let release = match &reference.name {
            Some(name) => self
                .r
                .store
                .get::<ProxmoxKubernetesRelease>(&namespace, name)
                .await?
                .ok_or_else(|| {
                    blocked(format!(
                        "ProxmoxKubernetesRelease {name} not found in namespace {namespace}"
                    ))
                })?,
            None => {
                let version = self
                    .machine
                    .as_ref()
                    .and_then(|m| m.spec.version.clone())
                    .ok_or_else(|| {
                        blocked(
                            "the Machine has no spec.version to find its \
                             ProxmoxKubernetesRelease by"
                                .into(),
                        )
                    })?;
                let releases = self
                    .r
                    .store
                    .list::<ProxmoxKubernetesRelease>(&namespace, &BTreeMap::new())
                    .await?;
                of_version(releases, &version, &namespace).map_err(blocked)?
            }
        };
        let name = release.metadata.name.clone().unwrap_or_default();
        let sources = sources_for(&release, self.failure_domain()).map_err(&blocked)?;
        // The listing is only read when a selector needs it, as for a machine's own.
        let needs_listing = sources.iter().any(|s| s.template_selector.is_some());
        let resources = if needs_listing {
            self.resources(cache).await?
        } else {
            &[]
        };
        let copies = templates_of(&sources, resources)
            .map_err(|e| blocked(format!("ProxmoxKubernetesRelease {name}: {e}")))?;
        Ok(ReleaseTemplates {
            name,
            version: release.spec.version,
            copies,
        })
    }
}

/// Versions compare without their leading `v`: Cluster API accepts both spellings.
fn same_version(a: &str, b: &str) -> bool {
    a.strip_prefix('v').unwrap_or(a) == b.strip_prefix('v').unwrap_or(b)
}

/// The one release of `version` among `releases`.
fn of_version(
    releases: Vec<ProxmoxKubernetesRelease>,
    version: &str,
    namespace: &str,
) -> Result<ProxmoxKubernetesRelease, String> {
    let mut matching: Vec<ProxmoxKubernetesRelease> = releases
        .into_iter()
        .filter(|r| same_version(&r.spec.version, version))
        .collect();
    matching.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    match matching.len() {
        0 => Err(format!(
            "no ProxmoxKubernetesRelease in namespace {namespace} has version {version} \
             (the Machine's spec.version)"
        )),
        1 => Ok(matching.remove(0)),
        _ => {
            let names: Vec<&str> = matching
                .iter()
                .filter_map(|r| r.metadata.name.as_deref())
                .collect();
            Err(format!(
                "ProxmoxKubernetesReleases {} all have version {version}: name one in \
                 spec.kubernetesRelease",
                names.join(", ")
            ))
        }
    }
}

/// The sources that serve a machine in `domain`: those naming it, or else those naming no
/// domain.
fn sources_for<'r>(
    release: &'r ProxmoxKubernetesRelease,
    domain: Option<&str>,
) -> Result<Vec<&'r ReleaseTemplate>, String> {
    let templates = &release.spec.templates;
    let named: Vec<&ReleaseTemplate> = match domain {
        Some(domain) => templates
            .iter()
            .filter(|t| t.failure_domains.iter().any(|d| d == domain))
            .collect(),
        None => Vec::new(),
    };
    if !named.is_empty() {
        return Ok(named);
    }
    let generic: Vec<&ReleaseTemplate> = templates
        .iter()
        .filter(|t| t.failure_domains.is_empty())
        .collect();
    if generic.is_empty() {
        let name = release.metadata.name.as_deref().unwrap_or_default();
        return Err(match domain {
            Some(domain) => format!(
                "ProxmoxKubernetesRelease {name} has no template for failure domain {domain}"
            ),
            None => format!(
                "ProxmoxKubernetesRelease {name} has templates for named failure domains only, \
                 and the Machine has none"
            ),
        });
    }
    Ok(generic)
}

/// The templates of `sources`: a VMID on its node, or what the tags find in `resources`;
/// one per node.
fn templates_of(
    sources: &[&ReleaseTemplate],
    resources: &[ClusterResource],
) -> Result<Vec<TemplateRef>, String> {
    let mut by_node: BTreeMap<String, TemplateRef> = BTreeMap::new();
    for source in sources {
        let found = TemplateSource::of(
            source.template_selector.as_ref(),
            source.template_id,
            source.source_node.as_deref(),
        )
        .ok_or("a template source names no template")?
        .templates(resources)
        .map_err(|e| e.to_string())?;
        for template in found {
            if let Some(other) = by_node.get(&template.node)
                && other.vmid != template.vmid
            {
                return Err(format!(
                    "two templates on {} ({} and {}) serve this machine",
                    template.node, other.vmid, template.vmid
                ));
            }
            by_node.insert(template.node.clone(), template);
        }
    }
    Ok(by_node.into_values().collect())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::v1alpha2::TemplateSelector;

    fn release(
        name: &str,
        version: &str,
        templates: Vec<ReleaseTemplate>,
    ) -> ProxmoxKubernetesRelease {
        let mut r = ProxmoxKubernetesRelease::default();
        r.metadata.name = Some(name.into());
        r.spec.version = version.into();
        r.spec.templates = templates;
        r
    }

    fn by_id(node: &str, vmid: i32, domains: &[&str]) -> ReleaseTemplate {
        ReleaseTemplate {
            source_node: Some(node.into()),
            template_id: Some(vmid),
            template_selector: None,
            failure_domains: domains.iter().map(|d| d.to_string()).collect(),
        }
    }

    fn by_tags(tags: &[&str]) -> ReleaseTemplate {
        ReleaseTemplate {
            template_selector: Some(TemplateSelector {
                match_tags: tags.iter().map(|t| t.to_string()).collect(),
                match_policy: String::new(),
            }),
            ..ReleaseTemplate::default()
        }
    }

    fn template(vmid: u32, node: &str, tags: &str) -> ClusterResource {
        serde_json::from_value(json!({
            "id": format!("qemu/{vmid}"), "type": "qemu", "vmid": vmid, "node": node,
            "template": 1, "tags": tags
        }))
        .expect("resource")
    }

    #[test]
    fn the_release_of_the_machines_version() {
        let releases = vec![
            release("old", "v1.33.4", vec![]),
            release("new", "1.34.8", vec![]),
        ];
        let found = of_version(releases.clone(), "v1.34.8", "ns").expect("one");
        assert_eq!(found.metadata.name.as_deref(), Some("new"));
        let none = of_version(releases.clone(), "v1.35.0", "ns").unwrap_err();
        assert!(none.contains("no ProxmoxKubernetesRelease in namespace ns has version v1.35.0"));
        let mut twice = releases;
        twice.push(release("again", "v1.34.8", vec![]));
        let ambiguous = of_version(twice, "v1.34.8", "ns").unwrap_err();
        assert!(
            ambiguous.contains("again, new all have version v1.34.8"),
            "{ambiguous}"
        );
    }

    #[test]
    fn sources_of_the_domain_or_else_the_generic_ones() {
        let r = release(
            "r",
            "v1.34.8",
            vec![by_id("pve1", 100, &[]), by_id("pve3", 300, &["rack-c"])],
        );
        let ids = |d| -> Vec<Option<i32>> {
            sources_for(&r, d)
                .expect("sources")
                .iter()
                .map(|s| s.template_id)
                .collect()
        };
        assert_eq!(ids(Some("rack-c")), [Some(300)]);
        assert_eq!(ids(Some("rack-a")), [Some(100)]);
        assert_eq!(ids(None), [Some(100)]);
        let only_named = release("r", "v1.34.8", vec![by_id("pve3", 300, &["rack-c"])]);
        let e = sources_for(&only_named, Some("rack-a")).unwrap_err();
        assert_eq!(
            e,
            "ProxmoxKubernetesRelease r has no template for failure domain rack-a"
        );
    }

    #[test]
    fn one_template_per_node_from_ids_and_tags() {
        let listing = [
            template(9000, "pve1", "k8s;v1.34.8"),
            template(9001, "pve2", "k8s;v1.34.8"),
        ];
        let tags = by_tags(&["k8s", "v1.34.8"]);
        let id = by_id("pve3", 300, &[]);
        let found = templates_of(&[&tags, &id], &listing).expect("templates");
        let nodes: Vec<(&str, u32)> = found.iter().map(|t| (t.node.as_str(), t.vmid)).collect();
        assert_eq!(nodes, [("pve1", 9000), ("pve2", 9001), ("pve3", 300)]);
        let clash = by_id("pve1", 100, &[]);
        let e = templates_of(&[&tags, &clash], &listing).unwrap_err();
        assert_eq!(e, "two templates on pve1 (9000 and 100) serve this machine");
        let missing = templates_of(&[&by_tags(&["v1.99.0"])], &listing).unwrap_err();
        assert!(missing.starts_with("VM template not found"), "{missing}");
    }
}
