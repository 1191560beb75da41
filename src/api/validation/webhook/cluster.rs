//! ProxmoxCluster and ProxmoxClusterTemplate webhook rules: a control-plane
//! endpoint must be an FQDN or an IP address outside the node pools. Unlike
//! upstream, a cluster needs no IP pool of its own: its machines may take every
//! address by DHCP or from their devices' pools (the machine controller says so
//! when a device relies on a pool the cluster does not have).

use std::net::IpAddr;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::ip_set::IpSet;
use crate::api::field::{Error, ErrorList, Path};
use crate::api::v1alpha2::{
    IpConfigSpec, ProxmoxCluster, ProxmoxClusterSpec, ProxmoxClusterTemplate,
};
use crate::api::validation::Verdict;

/// Upstream's hostname pattern: a short name, or an optional host label
/// followed by a domain with an alphabetic top-level label. IP literals never
/// match (their last label is numeric).
static HOSTNAME: LazyLock<Regex> = LazyLock::new(|| {
    let short = r"([a-z0-9]{1,253}|[a-z0-9][a-z0-9-]{1,251}[a-z0-9])";
    let host = r"([a-z0-9]{1,63}|[a-z0-9][a-z0-9-]{1,61}[a-z0-9]\.)?";
    let domain = r"((([a-z0-9]{1,63}|[a-z0-9][a-z0-9-]{1,61}[a-z0-9])\.)+?[a-z]{2,63})";
    Regex::new(&format!("(?i)^({short}|{host}{domain})$"))
        .unwrap_or_else(|e| panic!("hostname pattern: {e}"))
});

/// Whether `host` is accepted as a DNS name without further checks.
pub fn is_hostname(host: &str) -> bool {
    HOSTNAME.is_match(host)
}

/// Rules for creating a ProxmoxCluster.
pub fn validate_cluster_create(cluster: &ProxmoxCluster) -> Verdict {
    let name = name_of(&cluster.metadata);
    let spec_path = Path::new(&["spec"]);
    let mut verdict = Verdict::default();
    spec_verdict(&mut verdict, &cluster.spec, &spec_path, || {
        format!("cannot create proxmox cluster {name}")
    });
    verdict
}

/// Rules for updating a ProxmoxCluster.
pub fn validate_cluster_update(new: &ProxmoxCluster, _old: &ProxmoxCluster) -> Verdict {
    let name = name_of(&new.metadata);
    let mut verdict = Verdict::default();
    spec_verdict(&mut verdict, &new.spec, &Path::new(&["spec"]), || {
        format!("cannot update proxmox cluster {name}")
    });
    verdict
}

/// Rules for creating a ProxmoxClusterTemplate.
pub fn validate_cluster_template_create(template: &ProxmoxClusterTemplate) -> Verdict {
    let name = name_of(&template.metadata);
    let spec_path = Path::new(&["spec", "template", "spec"]);
    let spec = &template.spec.template.spec;
    let mut verdict = Verdict::default();
    spec_verdict(&mut verdict, spec, &spec_path, || {
        format!("cannot create proxmox cluster template {name}")
    });
    verdict
}

/// Rules for updating a ProxmoxClusterTemplate.
pub fn validate_cluster_template_update(
    new: &ProxmoxClusterTemplate,
    _old: &ProxmoxClusterTemplate,
) -> Verdict {
    let name = name_of(&new.metadata);
    let spec_path = Path::new(&["spec", "template", "spec"]);
    let mut verdict = Verdict::default();
    spec_verdict(&mut verdict, &new.spec.template.spec, &spec_path, || {
        format!("cannot update proxmox cluster template {name}")
    });
    verdict
}

fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}

/// The endpoint and failure-domain rules; the warning names the refused write.
fn spec_verdict(
    verdict: &mut Verdict,
    spec: &ProxmoxClusterSpec,
    spec_path: &Path,
    warning: impl FnOnce() -> String,
) {
    let mut errors = endpoint_errors(spec, spec_path);
    errors.extend(failure_domain_errors(spec, spec_path));
    if !errors.is_empty() {
        verdict.errors.extend(errors);
        verdict.warnings.push(warning());
    }
}

/// A node belongs to one failure domain at most in its Proxmox VE cluster (domains with
/// another credentialsRef are another Proxmox VE cluster, whose nodes may have the same
/// names), and to the allowed nodes when the cluster lists them (which name nodes of the
/// cluster's own Proxmox VE cluster).
fn failure_domain_errors(spec: &ProxmoxClusterSpec, spec_path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    // The domain of each node, by its Proxmox VE cluster's Secret (namespace, name).
    type Secret<'a> = Option<(&'a str, &'a str)>;
    let mut owner: std::collections::BTreeMap<(Secret, &str), &str> = Default::default();
    for (i, domain) in spec.failure_domains.iter().enumerate() {
        let own_cluster = domain.credentials_ref.is_none();
        for (j, node) in domain.nodes.iter().enumerate() {
            let path = spec_path
                .child("failureDomains")
                .index(i)
                .child("nodes")
                .index(j);
            let secret = domain
                .credentials_ref
                .as_ref()
                .map(|r| (r.namespace.as_str(), r.name.as_str()));
            let key = (secret, node.as_str());
            if let Some(other) = owner.insert(key, &domain.name)
                && other != domain.name
            {
                errors.push(Error::invalid(
                    path.clone(),
                    node.as_str(),
                    format!("{node} is in failure domain {other} already"),
                ));
            }
            if own_cluster && !spec.allowed_nodes.is_empty() && !spec.allowed_nodes.contains(node) {
                errors.push(Error::invalid(
                    path,
                    node.as_str(),
                    "not one of the cluster's allowedNodes",
                ));
            }
        }
    }
    errors
}

/// The control-plane endpoint must be an FQDN, or an IP address outside
/// every node pool. Skipped for externally managed control planes, and
/// while the endpoint is still to be claimed from
/// `controlPlaneEndpointIPPoolRef`.
pub fn endpoint_errors(spec: &ProxmoxClusterSpec, spec_path: &Path) -> ErrorList {
    if spec.external_managed_control_plane == Some(true) {
        return ErrorList::new();
    }
    let host = spec.control_plane_endpoint.host.as_str();
    if host.is_empty() && spec.control_plane_endpoint_ip_pool_ref.is_some() {
        return ErrorList::new();
    }
    if is_hostname(host) {
        return ErrorList::new();
    }
    let Ok(addr) = host.parse::<IpAddr>() else {
        return vec![Error::invalid(
            spec_path.child("controlPlaneEndpoint").child("host"),
            host,
            "provided endpoint address is not a valid IP or FQDN",
        )];
    };
    let mut pools: Vec<(Path, &IpConfigSpec)> = Vec::new();
    for (name, config) in [
        ("ipv4Config", &spec.ipv4_config),
        ("ipv6Config", &spec.ipv6_config),
    ] {
        if let Some(config) = config {
            pools.push((spec_path.child(name).child("addresses"), config));
        }
    }
    for (i, zone) in spec.zone_config.iter().enumerate() {
        for (name, config) in [
            ("ipv4Config", &zone.ipv4_config),
            ("ipv6Config", &zone.ipv6_config),
        ] {
            if let Some(config) = config {
                let path = spec_path
                    .child("zoneConfig")
                    .index(i)
                    .child(name)
                    .child("addresses");
                pools.push((path, config));
            }
        }
    }
    pools
        .into_iter()
        .filter_map(|(path, config)| {
            let addresses = Value::from(config.addresses.clone());
            match IpSet::parse(&config.addresses) {
                None => Some(Error::invalid(
                    path,
                    addresses,
                    "provided addresses are not valid IP addresses, ranges or CIDRs",
                )),
                Some(set) if set.contains(addr) => Some(Error::invalid(
                    path,
                    addresses,
                    "addresses may not contain the endpoint IP",
                )),
                Some(_) => None,
            }
        })
        .collect()
}
