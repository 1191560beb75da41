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
//! Exactly one template must qualify.

use std::collections::BTreeSet;

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

/// Why no single template was found.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("VM template not found: found {found} VM templates with tags \"{tags}\"")]
pub struct TemplateNotFound {
    /// How many templates qualified (0 or more than 1).
    pub found: usize,
    /// The requested tags, normalised and `;`-joined.
    pub tags: String,
}

/// Picks the one template matching `tags` under `policy` from a `/cluster/resources`
/// listing. Order of the listing and of `tags` does not matter.
pub fn find_template(
    resources: &[ClusterResource],
    tags: &[String],
    policy: MatchPolicy,
) -> Result<TemplateRef, TemplateNotFound> {
    let wanted: BTreeSet<String> = tags.iter().map(|t| t.trim().to_ascii_lowercase()).collect();
    let candidates: Vec<(usize, TemplateRef)> = resources
        .iter()
        .filter(|r| r.kind == "qemu" && r.template)
        .filter_map(|r| {
            let have: BTreeSet<String> = r.tag_list().into_iter().collect();
            if have.is_empty() || !wanted.is_subset(&have) {
                return None;
            }
            let extra = have.len() - wanted.len();
            Some((
                extra,
                TemplateRef {
                    node: r.node.clone()?,
                    vmid: r.vmid?,
                },
            ))
        })
        .collect();
    let qualified: Vec<&TemplateRef> = match policy {
        MatchPolicy::Exact => candidates
            .iter()
            .filter(|(extra, _)| *extra == 0)
            .map(|(_, t)| t)
            .collect(),
        MatchPolicy::UniqueSubset => candidates.iter().map(|(_, t)| t).collect(),
        MatchPolicy::BestSubset => {
            let best = candidates.iter().map(|(extra, _)| *extra).min();
            candidates
                .iter()
                .filter(|(extra, _)| Some(*extra) == best)
                .map(|(_, t)| t)
                .collect()
        }
    };
    match qualified.as_slice() {
        [one] => Ok((*one).clone()),
        _ => Err(TemplateNotFound {
            found: qualified.len(),
            tags: wanted.into_iter().collect::<Vec<_>>().join(";"),
        }),
    }
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
            Ok(TemplateRef {
                node: "pve2".into(),
                vmid: 9001
            })
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
            find_template(&l, &tags(&["gpu"]), MatchPolicy::UniqueSubset).map(|t| t.vmid),
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
        assert_eq!(forward.map(|t| t.vmid), Ok(9001));
        // A tie among the best candidates is an error, whatever the order.
        let tie = find_template(&l, &tags(&["capmox", "ubuntu"]), MatchPolicy::BestSubset);
        assert_eq!(tie.map_err(|e| e.found), Err(2));
        assert_eq!(want, tags(&["capmox", "kube-v1.32"]), "input untouched");
        assert_eq!(MatchPolicy::parse(""), Some(MatchPolicy::Exact));
        assert_eq!(MatchPolicy::parse("subset"), None);
    }
}
