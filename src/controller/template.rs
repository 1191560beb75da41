//! Finding the template VM by Proxmox tags (`spec.templateSelector`).
//!
//! Upstream lower-cases and sorts the caller's tag list in place and counts `bestSubset`
//! matches with a running minimum, so the answer depended on the order of
//! `/cluster/resources`. Here the inputs are left alone and every policy is a pure
//! function of the set of candidates:
//!
//! * `exact`: the template's tags equal the requested set;
//! * `uniqueSubset`: the template has all requested tags (and maybe more);
//! * `bestSubset`: among those, the ones with the fewest extra tags.
//!
//! One template must qualify, or one copy per node: a template on local storage can only
//! be cloned on its own node, so it is copied to every node that clones it (the same tags,
//! its own VMID). Qualifying templates with different tags, or two on one node, are
//! ambiguous.

use std::collections::BTreeSet;

use crate::api::v1alpha2::TemplateSelector;
use crate::proxmox::types::ClusterResource;

/// How requested tags are compared with a template's tags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchPolicy {
    /// Same set of tags.
    Exact,
    /// All requested tags; exactly one such template.
    UniqueSubset,
    /// All requested tags with the fewest extra tags; exactly one such template.
    BestSubset,
}

impl MatchPolicy {
    /// Parses the API value; empty means `exact` (the default).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "" | "exact" => Some(Self::Exact),
            "uniqueSubset" => Some(Self::UniqueSubset),
            "bestSubset" => Some(Self::BestSubset),
            _ => None,
        }
    }
}

/// A template VM found by its tags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateRef {
    /// Its node.
    pub node: String,
    /// Its VMID.
    pub vmid: u32,
}

/// Why no single template (or set of per-node copies) was found.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("VM template not found: found {found} VM templates with tags \"{tags}\"")]
pub struct TemplateNotFound {
    /// How many templates qualified (0, or several with two on one node).
    pub found: usize,
    /// The requested tags, normalised and `;`-joined.
    pub tags: String,
}

/// A template source as the API spells it (on a ProxmoxMachine or in a
/// ProxmoxKubernetesRelease): tags, or a VMID on its node.
#[derive(Clone, Copy, Debug)]
pub enum TemplateSource<'a> {
    /// `templateSelector`.
    Tags(&'a TemplateSelector),
    /// `templateID` on `sourceNode`.
    Vmid { node: &'a str, id: i32 },
}

/// Why a source yields no template.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// The source itself is wrong; it will not get better by waiting.
    #[error("{0}")]
    Invalid(String),
    /// The tags match no template (yet), or several.
    #[error(transparent)]
    NotFound(#[from] TemplateNotFound),
}

impl<'a> TemplateSource<'a> {
    /// The source of these fields: the selector when set, else the VMID with its node.
    pub fn of(
        selector: Option<&'a TemplateSelector>,
        id: Option<i32>,
        node: Option<&'a str>,
    ) -> Option<Self> {
        match (selector, id, node) {
            (Some(selector), _, _) => Some(Self::Tags(selector)),
            (None, Some(id), Some(node)) => Some(Self::Vmid { node, id }),
            _ => None,
        }
    }

    /// Whether finding the template needs the `/cluster/resources` listing.
    pub fn needs_listing(self) -> bool {
        matches!(self, Self::Tags(_))
    }

    /// The templates the source names: one, or one copy per node (sorted by node).
    pub fn templates(self, resources: &[ClusterResource]) -> Result<Vec<TemplateRef>, SourceError> {
        match self {
            Self::Tags(selector) => {
                let policy = MatchPolicy::parse(&selector.match_policy).ok_or_else(|| {
                    SourceError::Invalid(format!("unknown matchPolicy {:?}", selector.match_policy))
                })?;
                Ok(find_template(resources, &selector.match_tags, policy)?)
            }
            Self::Vmid { node, id } => Ok(vec![TemplateRef {
                node: node.to_owned(),
                vmid: u32::try_from(id)
                    .map_err(|_| SourceError::Invalid(format!("invalid templateID {id}")))?,
            }]),
        }
    }
}

/// The template matching `tags` under `policy` from a `/cluster/resources` listing: one, or
/// one copy per node (sorted by node).
pub fn find_template(
    resources: &[ClusterResource],
    tags: &[String],
    policy: MatchPolicy,
) -> Result<Vec<TemplateRef>, TemplateNotFound> {
    let wanted: BTreeSet<String> = tags.iter().map(|t| t.trim().to_ascii_lowercase()).collect();
    let candidates: Vec<(usize, BTreeSet<String>, TemplateRef)> = resources
        .iter()
        .filter(|r| r.kind == "qemu" && r.template)
        .filter_map(|r| {
            let have: BTreeSet<String> = r.tag_list().into_iter().collect();
            if have.is_empty() || !wanted.is_subset(&have) {
                return None;
            }
            let extra = have.len() - wanted.len();
            let template = TemplateRef {
                node: r.node.clone()?,
                vmid: r.vmid?,
            };
            Some((extra, have, template))
        })
        .collect();
    let best = candidates.iter().map(|(extra, _, _)| *extra).min();
    let qualified: Vec<&(usize, BTreeSet<String>, TemplateRef)> = candidates
        .iter()
        .filter(|(extra, _, _)| match policy {
            MatchPolicy::Exact => *extra == 0,
            MatchPolicy::UniqueSubset => true,
            MatchPolicy::BestSubset => Some(*extra) == best,
        })
        .collect();
    let copies = qualified
        .iter()
        .all(|(_, have, _)| Some(have) == qualified.first().map(|(_, h, _)| h));
    let nodes: BTreeSet<&str> = qualified.iter().map(|(_, _, t)| t.node.as_str()).collect();
    if qualified.is_empty() || !copies || nodes.len() < qualified.len() {
        return Err(TemplateNotFound {
            found: qualified.len(),
            tags: wanted.into_iter().collect::<Vec<_>>().join(";"),
        });
    }
    let mut found: Vec<TemplateRef> = qualified.into_iter().map(|(_, _, t)| t.clone()).collect();
    found.sort_by(|a, b| a.node.cmp(&b.node));
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn template(vmid: u32, node: &str, tags: &str) -> ClusterResource {
        serde_json::from_value(json!({
            "id": format!("qemu/{vmid}"), "type": "qemu", "vmid": vmid, "node": node,
            "template": 1, "tags": tags, "name": format!("t{vmid}")
        }))
        .expect("resource")
    }

    fn tags(t: &[&str]) -> Vec<String> {
        t.iter().map(|s| s.to_string()).collect()
    }

    fn listing() -> Vec<ClusterResource> {
        let mut vm = template(100, "pve1", "capmox;ubuntu");
        vm.template = false;
        vec![
            template(9000, "pve1", "capmox;kube-v1.31;ubuntu"),
            template(9001, "pve2", "Capmox;kube-v1.32;ubuntu"),
            template(9002, "pve1", "capmox;kube-v1.32;ubuntu;gpu"),
            template(9003, "pve3", ""),
            vm,
        ]
    }

    #[test]
    fn exact_needs_the_same_set() {
        let l = listing();
        assert_eq!(
            find_template(
                &l,
                &tags(&["ubuntu", "KUBE-v1.32", "capmox"]),
                MatchPolicy::Exact
            ),
            Ok(vec![TemplateRef {
                node: "pve2".into(),
                vmid: 9001
            }])
        );
        let err = find_template(&l, &tags(&["capmox", "ubuntu"]), MatchPolicy::Exact)
            .expect_err("no exact match");
        assert_eq!(err.found, 0);
        assert_eq!(
            err.to_string(),
            "VM template not found: found 0 VM templates with tags \"capmox;ubuntu\""
        );
    }

    #[test]
    fn unique_subset_needs_exactly_one_superset() {
        let l = listing();
        assert_eq!(
            find_template(&l, &tags(&["gpu"]), MatchPolicy::UniqueSubset).map(|t| t[0].vmid),
            Ok(9002)
        );
        assert_eq!(
            find_template(&l, &tags(&["kube-v1.32"]), MatchPolicy::UniqueSubset)
                .map_err(|e| e.found),
            Err(2)
        );
    }

    #[test]
    fn best_subset_is_independent_of_listing_order() {
        let mut l = listing();
        let want = tags(&["capmox", "kube-v1.32"]);
        let forward = find_template(&l, &want, MatchPolicy::BestSubset);
        l.reverse();
        assert_eq!(find_template(&l, &want, MatchPolicy::BestSubset), forward);
        assert_eq!(forward.map(|t| t[0].vmid), Ok(9001));
        // A tie among the best candidates is an error, whatever the order.
        let tie = find_template(&l, &tags(&["capmox", "ubuntu"]), MatchPolicy::BestSubset);
        assert_eq!(tie.map_err(|e| e.found), Err(2));
        assert_eq!(want, tags(&["capmox", "kube-v1.32"]), "input untouched");
        assert_eq!(MatchPolicy::parse(""), Some(MatchPolicy::Exact));
        assert_eq!(MatchPolicy::parse("subset"), None);
    }

    #[test]
    fn copies_on_several_nodes_are_one_template() {
        let mut l = listing();
        l.push(template(9101, "pve3", "capmox;kube-v1.32;ubuntu"));
        l.push(template(9100, "pve1", "ubuntu;capmox;kube-v1.32"));
        let want = tags(&["capmox", "kube-v1.32", "ubuntu"]);
        let copies = find_template(&l, &want, MatchPolicy::Exact).expect("copies");
        let at: Vec<(&str, u32)> = copies.iter().map(|t| (t.node.as_str(), t.vmid)).collect();
        assert_eq!(at, [("pve1", 9100), ("pve2", 9001), ("pve3", 9101)]);
        // A second copy on one node is ambiguous.
        l.push(template(9102, "pve3", "capmox;kube-v1.32;ubuntu"));
        assert_eq!(
            find_template(&l, &want, MatchPolicy::Exact).map_err(|e| e.found),
            Err(4)
        );
    }
}
