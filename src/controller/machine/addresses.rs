//! Static addresses: one `IPAddressClaim` per device and pool (the zone's default pools
//! first, then `ipPoolRef`), named like upstream `<machine>-<netN>-<NN>-inet`, owned by
//! the ProxmoxMachine (controller reference), labelled with the cluster and zone, and
//! annotated with the pool position and default-gateway flag. Claims are created once
//! (get-or-create by name) and checked before use: a claim owned by another object, on
//! another pool, or pointing at a missing or foreign address is reported and never
//! replaced behind the user's back. DHCP devices need no claim.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::phase::Phase;
use super::{Failure, Flow, Pass, Step, mgmt_failure};
use crate::api::v1alpha2::{IpAddressesSpec, ProxmoxCluster, ProxmoxMachine};
use crate::api::{GROUP, Version};
use crate::controller::action::Action;
use crate::controller::names::{
    DEFAULT_GATEWAY_ANNOTATION, DEFAULT_ZONE, GATEWAY_METRIC_ANNOTATION, LEGACY_METRIC_ANNOTATION,
    POOL_REF_COUNTER_ANNOTATION, ZONE_LABEL,
};
use crate::controller::seams::{InfraStore, Management, ManagementError};
use crate::management::types::{
    CLUSTER_NAME_LABEL, IPAM_GROUP, IpAddressClaim, IpAddressClaimSpec, IpPool, PoolKind, PoolRef,
    annotation, label,
};

/// One claim the machine needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ClaimPlan {
    /// Claim (and address) name.
    pub name: String,
    /// Device (`netN`).
    pub device: String,
    /// Position of the pool in the device's pool list.
    pub offset: usize,
    /// Pool kind.
    pub kind: PoolKind,
    /// Pool name.
    pub pool: String,
    /// From the zone's default pools.
    pub default: bool,
}

/// A claim with its address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// The claim.
    pub plan: ClaimPlan,
    /// The address.
    pub address: IpAddr,
    /// Prefix length.
    pub prefix: u8,
    /// Gateway.
    pub gateway: Option<IpAddr>,
    /// Metric of the default route through the gateway.
    pub metric: Option<i64>,
}

/// Claims' state.
pub(super) enum Claims {
    /// All resolved.
    Ready(Vec<Resolved>),
    /// This many still wait for an address.
    Pending(usize),
}

/// The claim name upstream uses.
pub(crate) fn claim_name(machine: &str, device: &str, offset: usize) -> String {
    format!("{machine}-{device}-{offset:02}-inet")
}

/// The claims a machine needs, from its devices and the cluster's zone pools.
pub(crate) fn plan_claims(
    pm: &ProxmoxMachine,
    pc: &ProxmoxCluster,
) -> Result<Vec<ClaimPlan>, String> {
    let Some(network) = &pm.spec.network else {
        return Ok(Vec::new());
    };
    let machine = pm.metadata.name.as_deref().unwrap_or_default();
    let zone = network.zone.as_deref().unwrap_or(DEFAULT_ZONE);
    let zone_ref = pc
        .status
        .in_cluster_zone_ref
        .iter()
        .find(|z| z.zone.as_deref().unwrap_or(DEFAULT_ZONE) == zone);
    // The default zone always exists; others once the cluster lists them (in its spec, or
    // in its status when the controller has made their pools).
    let zone_known = zone == DEFAULT_ZONE
        || zone_ref.is_some()
        || pc
            .spec
            .zone_config
            .iter()
            .any(|z| z.zone.as_deref() == Some(zone));
    let mut plans = Vec::new();
    for device in &network.network_devices {
        let mut pools: Vec<(PoolKind, String, bool)> = Vec::new();
        let defaults = [
            (
                "defaultIPv4",
                device.default_ipv4,
                zone_ref.and_then(|z| z.in_cluster_ip_pool_ref_v4.as_ref()),
            ),
            (
                "defaultIPv6",
                device.default_ipv6,
                zone_ref.and_then(|z| z.in_cluster_ip_pool_ref_v6.as_ref()),
            ),
        ];
        let mut asked = Vec::new();
        for (flag, wanted, pool) in defaults {
            if wanted != Some(true) {
                continue;
            }
            if !zone_known {
                return Err(format!("zone {zone} not found"));
            }
            asked.push(flag);
            // A family the cluster has no pool for is simply not claimed.
            if let Some(pool) = pool.filter(|p| !p.name.is_empty()) {
                pools.push((PoolKind::InCluster, pool.name.clone(), true));
            }
        }
        let other_source = device.dhcp4 == Some(true)
            || device.dhcp6 == Some(true)
            || !device.ip_pool_ref.is_empty();
        if !asked.is_empty() && pools.is_empty() && !other_source {
            return Err(format!(
                "{} takes its addresses from the cluster's IP pools ({}), but ProxmoxCluster {} \
                 has none for zone {zone}: give the device dhcp4, dhcp6 or an ipPoolRef, or the \
                 cluster an ipv4Config or ipv6Config",
                device.name,
                asked.join(", "),
                pc.metadata.name.as_deref().unwrap_or_default(),
            ));
        }
        for r in &device.ip_pool_ref {
            let kind = PoolKind::from_kind(&r.kind)
                .ok_or_else(|| format!("unsupported pool kind {:?}", r.kind))?;
            pools.push((kind, r.name.clone(), false));
        }
        for (offset, (kind, pool, default)) in pools.into_iter().enumerate() {
            plans.push(ClaimPlan {
                name: claim_name(machine, &device.name, offset),
                device: device.name.clone(),
                offset,
                kind,
                pool,
                default,
            });
        }
    }
    Ok(plans)
}

fn net_number(name: &str) -> u32 {
    name.strip_prefix("net")
        .and_then(|n| n.parse().ok())
        .unwrap_or(u32::MAX)
}

/// `status.ipAddresses`: `default` (the default pools' addresses) first, then every
/// device in device order, IPv4 and IPv6 each in pool order.
pub(crate) fn ip_status(resolved: &[Resolved]) -> Vec<IpAddressesSpec> {
    let mut sorted: Vec<&Resolved> = resolved.iter().collect();
    sorted.sort_by_key(|r| (net_number(&r.plan.device), r.plan.offset));
    let entry = |net: &str, items: &mut dyn Iterator<Item = &&Resolved>| {
        let mut e = IpAddressesSpec {
            net: net.to_string(),
            ..IpAddressesSpec::default()
        };
        for r in items {
            let list = if r.address.is_ipv4() {
                &mut e.ipv4
            } else {
                &mut e.ipv6
            };
            list.push(r.address.to_string());
        }
        e
    };
    let mut out = vec![entry(
        "default",
        &mut sorted.iter().filter(|r| r.plan.default),
    )];
    let mut devices: Vec<&str> = sorted.iter().map(|r| r.plan.device.as_str()).collect();
    devices.dedup();
    for d in devices {
        out.push(entry(d, &mut sorted.iter().filter(|r| r.plan.device == d)));
    }
    out
}

/// The pool annotation's route metric: the prefixed key wins over the legacy one;
/// empty means none.
fn pool_metric(pool: &IpPool) -> Option<i64> {
    annotation(&pool.metadata, GATEWAY_METRIC_ANNOTATION)
        .or_else(|| annotation(&pool.metadata, LEGACY_METRIC_ANNOTATION))
        .and_then(|m| m.trim().parse().ok())
}

fn group_of(api_group: &str) -> &str {
    api_group.split('/').next().unwrap_or(api_group)
}

/// The controller reference of a ProxmoxMachine.
pub(crate) fn owner_reference(pm: &ProxmoxMachine) -> OwnerReference {
    OwnerReference {
        api_version: Version::V1alpha2.api_version().to_string(),
        kind: "ProxmoxMachine".to_string(),
        name: pm.metadata.name.clone().unwrap_or_default(),
        uid: pm.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Whether the claim's controller is this ProxmoxMachine.
pub(crate) fn owned_by(claim: &IpAddressClaim, pm: &ProxmoxMachine) -> bool {
    claim.metadata.owner_references.iter().flatten().any(|o| {
        o.controller == Some(true)
            && o.kind == "ProxmoxMachine"
            && group_of(&o.api_version) == GROUP
            && Some(&o.uid) == pm.metadata.uid.as_ref()
    })
}

impl<S: InfraStore, M: Management> Pass<'_, S, M> {
    /// Phase `WaitingForStaticIPAllocation`.
    pub(super) async fn step_addresses(&mut self) -> Step {
        match self.ensure_claims().await? {
            Claims::Pending(n) => {
                self.h
                    .set_message(&format!("waiting for {n} IP address claim(s)"), self.now);
                Ok(Flow::Wait(Action::Requeue(self.r.config.address_poll)))
            }
            Claims::Ready(resolved) => {
                self.h.status.ip_addresses = ip_status(&resolved);
                self.resolved = Some(resolved);
                Ok(Flow::Next(Phase::InjectingBootstrapData))
            }
        }
    }

    /// Creates missing claims and resolves the others.
    pub(super) async fn ensure_claims(&mut self) -> Result<Claims, Failure> {
        let plans = plan_claims(&self.h.obj, &self.pc)
            .map_err(|m| Failure::Blocked(m, self.r.config.address_poll))?;
        let ns = self.ns();
        let mut pools: HashMap<(PoolKind, String), IpPool> = HashMap::new();
        let mut resolved = Vec::new();
        let mut pending = 0;
        let conflict_retry = self.r.config.address_poll * 6;
        for plan in plans {
            let pool = match pools.entry((plan.kind, plan.pool.clone())) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => {
                    let pool = self
                        .r
                        .mgmt
                        .pool(plan.kind, &ns, &plan.pool)
                        .await
                        .map_err(mgmt_failure)?
                        .ok_or_else(|| {
                            Failure::Blocked(
                                format!("{} {} not found", plan.kind.as_str(), plan.pool),
                                self.r.config.address_poll,
                            )
                        })?;
                    e.insert(pool)
                }
            };
            let Some(claim) = self
                .r
                .mgmt
                .claim(&ns, &plan.name)
                .await
                .map_err(mgmt_failure)?
            else {
                let claim = self.new_claim(&plan, pool);
                match self.r.mgmt.create_claim(&claim).await {
                    Ok(_) | Err(ManagementError::AlreadyExists(_)) => {}
                    Err(e) => return Err(mgmt_failure(e)),
                }
                pending += 1;
                continue;
            };
            let conflict = |reason: &str| {
                Failure::Blocked(
                    format!(
                        "Static IP claim {:?} is conflicting ({reason}); inspect the IPAddressClaim ownership, poolRef, and referenced IPAddress before provisioning can continue.",
                        plan.name
                    ),
                    conflict_retry,
                )
            };
            if !owned_by(&claim, &self.h.obj) {
                return Err(conflict("OwnerMismatch"));
            }
            let same_pool = |r: &PoolRef| {
                group_of(&r.api_group) == IPAM_GROUP
                    && r.kind == plan.kind.as_str()
                    && r.name == plan.pool
            };
            if !same_pool(&claim.spec.pool_ref) {
                return Err(conflict("PoolMismatch"));
            }
            let Some(address_name) = claim
                .status
                .address_ref
                .map(|a| a.name)
                .filter(|n| !n.is_empty())
            else {
                pending += 1;
                continue;
            };
            let Some(address) = self
                .r
                .mgmt
                .ip_address(&ns, &address_name)
                .await
                .map_err(mgmt_failure)?
            else {
                return Err(Failure::Blocked(
                    format!(
                        "Static IP claim {:?} references a missing IPAddress {address_name:?}; delete the stale IPAddressClaim to allow recovery.",
                        plan.name
                    ),
                    conflict_retry,
                ));
            };
            if !same_pool(&address.spec.pool_ref) {
                return Err(conflict("AddressPoolRef"));
            }
            let ip: IpAddr = address
                .spec
                .address
                .parse()
                .map_err(|_| conflict("InvalidAddress"))?;
            let max = if ip.is_ipv4() { 32 } else { 128 };
            let prefix = address
                .spec
                .prefix
                .and_then(|p| u8::try_from(p).ok())
                .filter(|p| *p <= max)
                .ok_or_else(|| conflict("InvalidPrefix"))?;
            let gateway = match address.spec.gateway.as_deref().filter(|g| !g.is_empty()) {
                Some(g) => Some(g.parse().map_err(|_| conflict("InvalidGateway"))?),
                None => None,
            };
            resolved.push(Resolved {
                metric: pool_metric(pool),
                plan,
                address: ip,
                prefix,
                gateway,
            });
        }
        if pending > 0 {
            return Ok(Claims::Pending(pending));
        }
        Ok(Claims::Ready(resolved))
    }

    fn new_claim(&self, plan: &ClaimPlan, pool: &IpPool) -> IpAddressClaim {
        let mut labels =
            BTreeMap::from([(CLUSTER_NAME_LABEL.to_string(), self.cluster_name.clone())]);
        if let Some(zone) = label(&pool.metadata, ZONE_LABEL) {
            labels.insert(ZONE_LABEL.to_string(), zone.to_string());
        }
        let mut annotations = BTreeMap::from([(
            POOL_REF_COUNTER_ANNOTATION.to_string(),
            plan.offset.to_string(),
        )]);
        if plan.default {
            annotations.insert(DEFAULT_GATEWAY_ANNOTATION.to_string(), "true".to_string());
        }
        IpAddressClaim {
            metadata: ObjectMeta {
                name: Some(plan.name.clone()),
                namespace: Some(self.ns()),
                labels: Some(labels),
                annotations: Some(annotations),
                owner_references: Some(vec![owner_reference(&self.h.obj)]),
                ..ObjectMeta::default()
            },
            spec: IpAddressClaimSpec {
                pool_ref: PoolRef {
                    api_group: IPAM_GROUP.to_string(),
                    kind: plan.kind.as_str().to_string(),
                    name: plan.pool.clone(),
                },
                cluster_name: Some(self.cluster_name.clone()),
            },
            status: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::common::{LocalObjectReference, TypedLocalObjectReference};
    use crate::api::v1alpha2::{InClusterZoneRef, NetworkDevice, NetworkSpec};

    fn machine(devices: Vec<NetworkDevice>, zone: Option<&str>) -> ProxmoxMachine {
        let mut pm = ProxmoxMachine::default();
        pm.metadata.name = Some("m".into());
        pm.spec.network = Some(NetworkSpec {
            zone: zone.map(str::to_string),
            network_devices: devices,
            vrfs: vec![],
        });
        pm
    }

    fn cluster() -> ProxmoxCluster {
        let mut pc = ProxmoxCluster::default();
        pc.status.in_cluster_zone_ref = vec![
            InClusterZoneRef {
                zone: Some("default".into()),
                in_cluster_ip_pool_ref_v4: Some(LocalObjectReference {
                    name: "c-v4-icip".into(),
                }),
                in_cluster_ip_pool_ref_v6: Some(LocalObjectReference {
                    name: "c-v6-icip".into(),
                }),
            },
            InClusterZoneRef {
                zone: Some("east".into()),
                in_cluster_ip_pool_ref_v4: Some(LocalObjectReference {
                    name: "c-east-v4-icip".into(),
                }),
                in_cluster_ip_pool_ref_v6: None,
            },
        ];
        pc
    }

    #[test]
    fn plans_follow_upstreams_names_and_order() {
        let net0 = NetworkDevice {
            name: "net0".into(),
            default_ipv4: Some(true),
            default_ipv6: Some(true),
            ip_pool_ref: vec![TypedLocalObjectReference {
                api_group: Some(IPAM_GROUP.into()),
                kind: "GlobalInClusterIPPool".into(),
                name: "shared".into(),
            }],
            ..NetworkDevice::default()
        };
        let net1 = NetworkDevice {
            name: "net1".into(),
            dhcp4: Some(true),
            ..NetworkDevice::default()
        };
        let plans =
            plan_claims(&machine(vec![net0.clone(), net1], None), &cluster()).expect("plans");
        let names: Vec<&str> = plans.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            ["m-net0-00-inet", "m-net0-01-inet", "m-net0-02-inet"]
        );
        assert_eq!(
            (plans[2].kind, plans[2].pool.as_str(), plans[2].default),
            (PoolKind::GlobalInCluster, "shared", false)
        );
        // The zone has no IPv6 pool: that family is not claimed.
        let east =
            plan_claims(&machine(vec![net0.clone()], Some("east")), &cluster()).expect("plans");
        assert_eq!(
            east.iter().map(|p| p.pool.as_str()).collect::<Vec<_>>(),
            ["c-east-v4-icip", "shared"]
        );
        assert_eq!(
            plan_claims(&machine(vec![net0], Some("west")), &cluster()),
            Err("zone west not found".into())
        );
    }

    #[test]
    fn a_cluster_without_pools_serves_dhcp_and_own_pools_and_names_what_is_missing() {
        let mut pc = ProxmoxCluster::default();
        pc.metadata.name = Some("c".into());
        // net0 by DHCP; the defaulting webhook still gave it defaultIPv6 (no device said
        // dhcp6): nothing to claim, no error.
        let dhcp = NetworkDevice {
            name: "net0".into(),
            dhcp4: Some(true),
            default_ipv6: Some(true),
            ..NetworkDevice::default()
        };
        assert_eq!(plan_claims(&machine(vec![dhcp], None), &pc), Ok(vec![]));
        // Its own pool: claimed, the defaults ignored.
        let own = NetworkDevice {
            name: "net0".into(),
            default_ipv4: Some(true),
            ip_pool_ref: vec![TypedLocalObjectReference {
                api_group: Some(IPAM_GROUP.into()),
                kind: "InClusterIPPool".into(),
                name: "mine".into(),
            }],
            ..NetworkDevice::default()
        };
        let plans = plan_claims(&machine(vec![own], None), &pc).expect("plans");
        assert_eq!(
            plans.iter().map(|p| p.pool.as_str()).collect::<Vec<_>>(),
            ["mine"]
        );
        // Only the cluster's pools: said, with what would fix it.
        let relying = NetworkDevice {
            name: "net0".into(),
            default_ipv4: Some(true),
            default_ipv6: Some(true),
            ..NetworkDevice::default()
        };
        let message = plan_claims(&machine(vec![relying.clone()], None), &pc).expect_err("no pool");
        assert!(
            message.starts_with(
                "net0 takes its addresses from the cluster's IP pools (defaultIPv4, defaultIPv6), \
                 but ProxmoxCluster c has none for zone default"
            ),
            "{message}"
        );
        // A zone the cluster lists but gives no pools is known, an unlisted one is not.
        pc.spec.zone_config = vec![crate::api::v1alpha2::ZoneConfigSpec {
            zone: Some("east".into()),
            ..Default::default()
        }];
        let east = plan_claims(&machine(vec![relying.clone()], Some("east")), &pc);
        assert!(east.is_err_and(|m| m.contains("has none for zone east")));
        assert_eq!(
            plan_claims(&machine(vec![relying], Some("west")), &pc),
            Err("zone west not found".into())
        );
    }

    #[test]
    fn status_lists_default_first_then_devices() {
        let r = |device: &str, offset, addr: &str, default| Resolved {
            plan: ClaimPlan {
                name: String::new(),
                device: device.into(),
                offset,
                kind: PoolKind::InCluster,
                pool: String::new(),
                default,
            },
            address: addr.parse().expect("ip"),
            prefix: 24,
            gateway: None,
            metric: None,
        };
        let status = ip_status(&[
            r("net1", 0, "10.1.0.5", false),
            r("net0", 1, "fd00::5", true),
            r("net0", 0, "10.0.0.5", true),
        ]);
        let nets: Vec<&str> = status.iter().map(|e| e.net.as_str()).collect();
        assert_eq!(nets, ["default", "net0", "net1"]);
        assert_eq!(status[0].ipv4, ["10.0.0.5"]);
        assert_eq!(status[0].ipv6, ["fd00::5"]);
        assert_eq!(status[2].ipv4, ["10.1.0.5"]);
    }
}
