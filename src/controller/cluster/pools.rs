//! The in-cluster IP pools of a ProxmoxCluster: one `InClusterIPPool` per IP config of
//! the default zone and of every `zoneConfig` entry, named, annotated and labelled like
//! upstream, and the status references to them (`inClusterIPPoolRef`,
//! `inClusterZoneRef` — the latter without upstream's out-of-range append).

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::api::Version;
use crate::api::common::LocalObjectReference;
use crate::api::v1alpha2::{InClusterZoneRef, IpConfigSpec, ProxmoxCluster};
use crate::controller::names::{
    DEFAULT_ZONE, GATEWAY_METRIC_ANNOTATION, IP_FAMILY_ANNOTATION, LEGACY_METRIC_ANNOTATION,
    ZONE_LABEL,
};
use crate::management::types::{IpPool, IpPoolSpec, PoolKind};

/// Seconds a released address is held back (upstream's fixed value).
pub const ADDRESS_REUSE_GRACE_PERIOD_SECONDS: i32 = 60;

/// A pool the cluster wants.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredPool {
    /// Zone (`default` for the cluster-wide configs).
    pub zone: String,
    /// IPv6 (else IPv4).
    pub v6: bool,
    /// The object to apply.
    pub pool: IpPool,
}

/// The family of a config: from its first address (`a`, `a-b` or `a/n`).
fn is_v6(config: &IpConfigSpec) -> Option<bool> {
    let first = config.addresses.first()?;
    let ip = first.split(['-', '/']).next().unwrap_or(first);
    ip.trim().parse::<IpAddr>().ok().map(|ip| ip.is_ipv6())
}

/// The controller reference of a ProxmoxCluster.
pub fn owner_reference(pc: &ProxmoxCluster) -> OwnerReference {
    OwnerReference {
        api_version: Version::V1alpha2.api_version().to_string(),
        kind: "ProxmoxCluster".to_string(),
        name: pc.metadata.name.clone().unwrap_or_default(),
        uid: pc.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The pools for the cluster's configs. Configs whose family cannot be told are
/// reported by address.
pub fn desired_pools(pc: &ProxmoxCluster) -> Result<Vec<DesiredPool>, String> {
    let name = pc.metadata.name.clone().unwrap_or_default();
    let mut configs: Vec<(Option<&str>, &IpConfigSpec)> = Vec::new();
    configs.extend(pc.spec.ipv4_config.iter().map(|c| (None, c)));
    configs.extend(pc.spec.ipv6_config.iter().map(|c| (None, c)));
    for z in &pc.spec.zone_config {
        let zone = z.zone.as_deref();
        configs.extend(z.ipv4_config.iter().map(|c| (zone, c)));
        configs.extend(z.ipv6_config.iter().map(|c| (zone, c)));
    }
    let mut out = Vec::new();
    for (zone, config) in configs {
        let v6 = is_v6(config).ok_or_else(|| {
            format!(
                "cannot tell the IP family of addresses {:?}",
                config.addresses
            )
        })?;
        let format = if v6 { "v6" } else { "v4" };
        let pool_name = match zone {
            Some(z) => format!("{name}-{z}-{format}-icip"),
            None => format!("{name}-{format}-icip"),
        };
        let metric = config.metric.map(|m| m.to_string());
        let mut annotations = BTreeMap::from([
            (
                IP_FAMILY_ANNOTATION.to_string(),
                if v6 { "ipv6" } else { "ipv4" }.to_string(),
            ),
            (
                GATEWAY_METRIC_ANNOTATION.to_string(),
                metric.clone().unwrap_or_default(),
            ),
        ]);
        if let Some(m) = metric {
            annotations.insert(LEGACY_METRIC_ANNOTATION.to_string(), m);
        }
        let zone = zone.unwrap_or(DEFAULT_ZONE).to_string();
        out.push(DesiredPool {
            v6,
            pool: IpPool {
                kind: PoolKind::InCluster.as_str().to_string(),
                metadata: ObjectMeta {
                    name: Some(pool_name),
                    namespace: pc.metadata.namespace.clone(),
                    labels: Some(BTreeMap::from([(ZONE_LABEL.to_string(), zone.clone())])),
                    annotations: Some(annotations),
                    owner_references: Some(vec![owner_reference(pc)]),
                    ..ObjectMeta::default()
                },
                spec: IpPoolSpec {
                    addresses: config.addresses.clone(),
                    prefix: config.prefix,
                    gateway: Some(config.gateway.clone()).filter(|g| !g.is_empty()),
                    address_reuse_grace_period_seconds: Some(ADDRESS_REUSE_GRACE_PERIOD_SECONDS),
                    ..IpPoolSpec::default()
                },
            },
            zone,
        });
    }
    Ok(out)
}

/// Whether the stored pool already is what `desired` asks for (so nothing is written).
pub fn up_to_date(stored: &IpPool, desired: &IpPool) -> bool {
    let contains = |have: &Option<BTreeMap<String, String>>,
                    want: &Option<BTreeMap<String, String>>| {
        want.iter()
            .flatten()
            .all(|(k, v)| have.as_ref().and_then(|h| h.get(k)) == Some(v))
    };
    stored.spec == desired.spec
        && contains(&stored.metadata.annotations, &desired.metadata.annotations)
        && contains(&stored.metadata.labels, &desired.metadata.labels)
        && stored.metadata.owner_references == desired.metadata.owner_references
}

/// `status.inClusterIPPoolRef` and `status.inClusterZoneRef` for the pools.
pub fn status_refs(pools: &[DesiredPool]) -> (Vec<LocalObjectReference>, Vec<InClusterZoneRef>) {
    let mut refs = Vec::new();
    let mut zones: Vec<InClusterZoneRef> = Vec::new();
    for p in pools {
        let name = p.pool.metadata.name.clone().unwrap_or_default();
        refs.push(LocalObjectReference { name: name.clone() });
        let index = match zones
            .iter()
            .position(|z| z.zone.as_deref() == Some(p.zone.as_str()))
        {
            Some(i) => i,
            None => {
                zones.push(InClusterZoneRef {
                    zone: Some(p.zone.clone()),
                    ..InClusterZoneRef::default()
                });
                zones.len() - 1
            }
        };
        let entry = &mut zones[index];
        let slot = if p.v6 {
            &mut entry.in_cluster_ip_pool_ref_v6
        } else {
            &mut entry.in_cluster_ip_pool_ref_v4
        };
        *slot = Some(LocalObjectReference { name });
    }
    (refs, zones)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::v1alpha2::ZoneConfigSpec;

    fn config(addresses: &[&str], metric: Option<i32>) -> IpConfigSpec {
        IpConfigSpec {
            addresses: addresses.iter().map(|s| s.to_string()).collect(),
            prefix: 24,
            gateway: "10.0.0.1".into(),
            metric,
        }
    }

    fn cluster() -> ProxmoxCluster {
        let mut pc = ProxmoxCluster::default();
        pc.metadata.name = Some("test-cluster".into());
        pc.metadata.namespace = Some("ns".into());
        pc.metadata.uid = Some("uid-1".into());
        pc.spec.ipv4_config = Some(config(&["10.0.0.10-10.0.0.20"], Some(100)));
        pc.spec.ipv6_config = Some(config(&["fd00::10/124"], None));
        pc.spec.zone_config = vec![
            ZoneConfigSpec {
                zone: Some("east".into()),
                ipv4_config: Some(config(&["10.1.0.5"], Some(200))),
                ipv6_config: None,
                dns_servers: vec!["10.1.0.53".into()],
            },
            ZoneConfigSpec {
                zone: Some("west".into()),
                ipv4_config: None,
                ipv6_config: Some(config(&["fd01::5"], None)),
                dns_servers: vec![],
            },
        ];
        pc
    }

    #[test]
    fn pools_have_upstreams_names_annotations_and_labels() {
        let pools = desired_pools(&cluster()).expect("pools");
        let names: Vec<&str> = pools
            .iter()
            .filter_map(|p| p.pool.metadata.name.as_deref())
            .collect();
        assert_eq!(
            names,
            [
                "test-cluster-v4-icip",
                "test-cluster-v6-icip",
                "test-cluster-east-v4-icip",
                "test-cluster-west-v6-icip"
            ]
        );
        let v4 = &pools[0].pool;
        let a = v4.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(a[IP_FAMILY_ANNOTATION], "ipv4");
        assert_eq!(a[GATEWAY_METRIC_ANNOTATION], "100");
        assert_eq!(a[LEGACY_METRIC_ANNOTATION], "100");
        let a6 = pools[1]
            .pool
            .metadata
            .annotations
            .clone()
            .unwrap_or_default();
        assert_eq!(
            (
                a6[GATEWAY_METRIC_ANNOTATION].as_str(),
                a6.contains_key(LEGACY_METRIC_ANNOTATION)
            ),
            ("", false)
        );
        assert_eq!(
            pools[2].pool.metadata.labels.clone().unwrap_or_default()[ZONE_LABEL],
            "east"
        );
        assert_eq!(v4.spec.address_reuse_grace_period_seconds, Some(60));
        assert_eq!(
            v4.metadata
                .owner_references
                .as_ref()
                .map(|o| o[0].controller),
            Some(Some(true))
        );
    }

    #[test]
    fn zone_refs_are_appended_without_panicking() {
        let (refs, zones) = status_refs(&desired_pools(&cluster()).expect("pools"));
        assert_eq!(refs.len(), 4);
        let zone_names: Vec<_> = zones
            .iter()
            .map(|z| z.zone.clone().unwrap_or_default())
            .collect();
        assert_eq!(zone_names, ["default", "east", "west"]);
        assert_eq!(
            zones[0]
                .in_cluster_ip_pool_ref_v6
                .as_ref()
                .map(|r| r.name.as_str()),
            Some("test-cluster-v6-icip")
        );
        assert_eq!(zones[1].in_cluster_ip_pool_ref_v6, None);
        assert_eq!(zones[2].in_cluster_ip_pool_ref_v4, None);
        let mut bad = cluster();
        bad.spec.ipv4_config = Some(config(&["x"], None));
        assert!(desired_pools(&bad).is_err());
    }
}
