//! Failure domains: groups of Proxmox nodes listed in `ProxmoxCluster.spec.failureDomains`,
//! reported in its status for Cluster API (which spreads machines across them and sets
//! `Machine.spec.failureDomain`), and the placement rule that follows: a Machine in a
//! failure domain is placed on one of the domain's nodes only.

use crate::api::v1alpha2::{FailureDomain, FailureDomainSpec};

/// The failure domains as the Cluster API contract (v1beta2) reads them: a list sorted by
/// name, `controlPlane` explicit, the nodes as an attribute.
pub fn reported(spec: &[FailureDomainSpec]) -> Vec<FailureDomain> {
    let mut domains: Vec<FailureDomain> = spec
        .iter()
        .map(|d| FailureDomain {
            name: d.name.clone(),
            control_plane: Some(d.control_plane.unwrap_or(true)),
            attributes: [("nodes".to_string(), d.nodes.join(","))].into(),
        })
        .collect();
    domains.sort_by(|a, b| a.name.cmp(&b.name));
    domains
}

/// The nodes a machine of failure domain `domain` may be placed on, out of `allowed` (all
/// nodes when empty). `cluster` names the ProxmoxCluster in messages.
pub fn confine(
    domain: Option<&str>,
    domains: &[FailureDomainSpec],
    allowed: Vec<String>,
    cluster: &str,
) -> Result<Vec<String>, String> {
    let Some(name) = domain.filter(|d| !d.is_empty()) else {
        return Ok(allowed);
    };
    let Some(spec) = domains.iter().find(|d| d.name == name) else {
        let known: Vec<&str> = domains.iter().map(|d| d.name.as_str()).collect();
        return Err(format!(
            "the Machine's failure domain {name} is not one of ProxmoxCluster {cluster}'s ({})",
            if known.is_empty() {
                "it has none".to_string()
            } else {
                known.join(", ")
            }
        ));
    };
    // allowedNodes name nodes of the cluster's own Proxmox VE cluster.
    if allowed.is_empty() || spec.credentials_ref.is_some() {
        return Ok(spec.nodes.clone());
    }
    let nodes: Vec<String> = spec
        .nodes
        .iter()
        .filter(|n| allowed.contains(n))
        .cloned()
        .collect();
    if nodes.is_empty() {
        return Err(format!(
            "failure domain {name} ({}) has no node among the allowed nodes ({})",
            spec.nodes.join(", "),
            allowed.join(", ")
        ));
    }
    Ok(nodes)
}

/// The failure domain of a VM on `node`: the Machine's own, else the one the node is in.
pub fn of_node(
    node: &str,
    machine_domain: Option<&str>,
    domains: &[FailureDomainSpec],
) -> Option<String> {
    machine_domain
        .filter(|d| !d.is_empty())
        .map(str::to_string)
        .or_else(|| {
            domains
                .iter()
                .filter(|d| d.nodes.iter().any(|n| n == node))
                .map(|d| d.name.clone())
                .min()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn domains() -> Vec<FailureDomainSpec> {
        let domain = |name: &str, nodes: &[&str], control_plane| FailureDomainSpec {
            name: name.into(),
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
            control_plane,
            ..FailureDomainSpec::default()
        };
        vec![
            domain("rack-b", &["pve3", "pve4"], Some(false)),
            domain("rack-a", &["pve1", "pve2"], None),
        ]
    }

    fn nodes(list: &[&str]) -> Vec<String> {
        list.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn reported_sorted_with_control_plane_explicit() {
        let r = reported(&domains());
        assert_eq!(r[0].name, "rack-a");
        assert_eq!(r[0].control_plane, Some(true));
        assert_eq!(r[0].attributes["nodes"], "pve1,pve2");
        assert_eq!(r[1].control_plane, Some(false));
    }

    #[test]
    fn a_domain_confines_the_allowed_nodes() {
        assert_eq!(
            confine(None, &domains(), nodes(&["pve1"]), "c1"),
            Ok(nodes(&["pve1"]))
        );
        assert_eq!(
            confine(Some("rack-b"), &domains(), vec![], "c1"),
            Ok(nodes(&["pve3", "pve4"]))
        );
        assert_eq!(
            confine(Some("rack-b"), &domains(), nodes(&["pve1", "pve4"]), "c1"),
            Ok(nodes(&["pve4"]))
        );
        assert_eq!(
            confine(Some("rack-b"), &domains(), nodes(&["pve1"]), "c1"),
            Err(
                "failure domain rack-b (pve3, pve4) has no node among the allowed nodes (pve1)"
                    .into()
            )
        );
        assert_eq!(
            confine(Some("rack-z"), &domains(), vec![], "c1"),
            Err("the Machine's failure domain rack-z is not one of ProxmoxCluster c1's (rack-b, rack-a)".into())
        );
        assert_eq!(of_node("pve4", None, &domains()).as_deref(), Some("rack-b"));
        assert_eq!(of_node("pve9", None, &domains()), None);
        assert_eq!(
            of_node("pve9", Some("rack-a"), &domains()).as_deref(),
            Some("rack-a")
        );
    }
}
