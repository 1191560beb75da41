//! A network device's IP pools: v1alpha1 `ipv4PoolRef`/`ipv6PoolRef` ⇄
//! v1alpha2 `defaultIPv4`/`defaultIPv6` + the `ipPoolRef` list.
//!
//! In v1alpha1 a pool reference on the default device (net0) *replaces* the
//! cluster's pool of that family, and an additional device gets one address
//! per referenced pool. In v1alpha2 pools are additive: `defaultIPvX`
//! attaches the cluster's (zone's) pool, each `ipPoolRef` entry adds one more.
//! So a v1alpha1 reference becomes an `ipPoolRef` entry *and* an explicit
//! `defaultIPvX: false` ("this family does not come from the default pool");
//! net0 without a reference gets `defaultIPvX: true`.
//!
//! Reading back, an explicit `defaultIPvX: false` marks the device's
//! references as written from v1alpha1: the first belongs to the first
//! marked family, the next to the second. This tells the family exactly,
//! without guessing from pool names. Devices without such a mark (written in
//! v1alpha2) show no pools on net0 (in v1alpha1 terms net0 then uses the
//! cluster pools, which is what `defaultIPvX: true` says) and, on other
//! devices, the references whose names say their family (`v4`, `ipv6`,
//! `inet6`, … as name tokens, like the in-cluster pools `<cluster>-v4-icip`),
//! an unnamed-family one as IPv4. References v1alpha1 cannot show stay in the
//! hub through the stored object.

use super::prior::Origin;
use crate::api::common::TypedLocalObjectReference as PoolRef;

/// Whether the device is v1alpha1's default device (net0) or an additional one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Default,
    Additional,
}

/// The pool fields of a hub device.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct HubPools {
    pub(crate) default_ipv4: Option<bool>,
    pub(crate) default_ipv6: Option<bool>,
    pub(crate) refs: Vec<PoolRef>,
}

/// The pool fields of a v1alpha1 device.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SpokePools {
    pub(crate) ipv4: Option<PoolRef>,
    pub(crate) ipv6: Option<PoolRef>,
}

/// Which entries of `refs` v1alpha1 shows, by index.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Shown {
    ipv4: Option<usize>,
    ipv6: Option<usize>,
}

impl Shown {
    fn includes(self, index: usize) -> bool {
        self.ipv4 == Some(index) || self.ipv6 == Some(index)
    }
}

/// The family a pool's name gives away, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NamedFamily {
    V4,
    V6,
    Unknown,
}

fn named_family(name: &str) -> NamedFamily {
    const V6_TOKENS: [&str; 4] = ["v6", "ip6", "ipv6", "inet6"];
    const V4_TOKENS: [&str; 5] = ["v4", "ip4", "ipv4", "inet", "inet4"];
    let lower = name.to_ascii_lowercase();
    let tokens = || lower.split(|c: char| !c.is_ascii_alphanumeric());
    if lower.contains("ipv6") || lower.contains("inet6") || tokens().any(|t| V6_TOKENS.contains(&t))
    {
        NamedFamily::V6
    } else if lower.contains("ipv4")
        || lower.contains("inet4")
        || tokens().any(|t| V4_TOKENS.contains(&t))
    {
        NamedFamily::V4
    } else {
        NamedFamily::Unknown
    }
}

fn shown(hub: &HubPools, role: Role, origin: Origin) -> Shown {
    match origin {
        Origin::Stored => shown_here(hub, role),
        Origin::Upstream => shown_by_upstream(&hub.refs),
    }
}

/// What this server shows (see the module documentation).
fn shown_here(hub: &HubPools, role: Role) -> Shown {
    let marked_v4 = hub.default_ipv4 == Some(false);
    let marked_v6 = hub.default_ipv6 == Some(false);
    if marked_v4 || marked_v6 {
        let ipv4 = (marked_v4 && !hub.refs.is_empty()).then_some(0);
        let next = usize::from(ipv4.is_some());
        let ipv6 = (marked_v6 && next < hub.refs.len()).then_some(next);
        return Shown { ipv4, ipv6 };
    }
    match role {
        Role::Default => Shown::default(),
        Role::Additional => {
            let first = |family| {
                hub.refs
                    .iter()
                    .position(|r| named_family(&r.name) == family)
            };
            Shown {
                ipv4: first(NamedFamily::V4).or_else(|| first(NamedFamily::Unknown)),
                ipv6: first(NamedFamily::V6),
            }
        }
    }
}

/// What upstream showed when it wrote its conversion-data annotation: the
/// first reference whose name contains "inet" as IPv4 (which "inet6" names
/// match too), the first containing "inet6" as IPv6, else the first as IPv4.
fn shown_by_upstream(refs: &[PoolRef]) -> Shown {
    let containing = |needle| refs.iter().position(|r| r.name.contains(needle));
    let ipv4 = containing("inet");
    let ipv6 = containing("inet6");
    if ipv4.is_none() && ipv6.is_none() && !refs.is_empty() {
        return Shown {
            ipv4: Some(0),
            ipv6: None,
        };
    }
    Shown { ipv4, ipv6 }
}

fn view(hub: &HubPools, shown: Shown) -> SpokePools {
    let at = |i: Option<usize>| i.and_then(|i| hub.refs.get(i)).cloned();
    SpokePools {
        ipv4: at(shown.ipv4),
        ipv6: at(shown.ipv6),
    }
}

/// The v1alpha1 pools of a hub device.
pub(crate) fn down(hub: &HubPools, role: Role, origin: Origin) -> SpokePools {
    view(hub, shown(hub, role, origin))
}

/// The `defaultIPvX` of a family v1alpha1 names no pool for: net0 uses the
/// cluster's pool, other devices none.
fn unreferenced(role: Role) -> Option<bool> {
    match role {
        Role::Default => Some(true),
        Role::Additional => None,
    }
}

/// The hub pools of v1alpha1 pools on a device new to the hub.
fn fresh(spoke: SpokePools, role: Role) -> HubPools {
    let flag = |pool: &Option<PoolRef>| {
        if pool.is_some() {
            Some(false)
        } else {
            unreferenced(role)
        }
    };
    HubPools {
        default_ipv4: flag(&spoke.ipv4),
        default_ipv6: flag(&spoke.ipv6),
        refs: [spoke.ipv4, spoke.ipv6].into_iter().flatten().collect(),
    }
}

/// The hub pools of v1alpha1 pools, given the device's prior hub pools.
///
/// Unchanged pools keep the prior hub fields exactly. Changed pools are
/// written the marked way, followed by the references v1alpha1 could not
/// show (in their order); if those would then show up in v1alpha1 in place
/// of what was written (only possible when a device ends up with no
/// reference at all), they are dropped: the v1alpha1 edit wins.
pub(crate) fn up(
    spoke: SpokePools,
    role: Role,
    prior: Option<&HubPools>,
    origin: Origin,
) -> HubPools {
    let Some(prior) = prior else {
        return fresh(spoke, role);
    };
    let shown = shown(prior, role, origin);
    let seen = view(prior, shown);
    if seen == spoke {
        return prior.clone();
    }
    let flag = |new: &Option<PoolRef>, seen: &Option<PoolRef>, prior_flag: Option<bool>| {
        if new.is_some() {
            Some(false)
        } else if seen.is_none() {
            prior_flag
        } else {
            unreferenced(role)
        }
    };
    let unshown = prior
        .refs
        .iter()
        .enumerate()
        .filter(|(i, _)| !shown.includes(*i))
        .map(|(_, r)| r.clone());
    let candidate = HubPools {
        default_ipv4: flag(&spoke.ipv4, &seen.ipv4, prior.default_ipv4),
        default_ipv6: flag(&spoke.ipv6, &seen.ipv6, prior.default_ipv6),
        refs: [spoke.ipv4.clone(), spoke.ipv6.clone()]
            .into_iter()
            .flatten()
            .chain(unshown)
            .collect(),
    };
    if down(&candidate, role, Origin::Stored) == spoke {
        candidate
    } else {
        fresh(spoke, role)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(name: &str) -> PoolRef {
        PoolRef {
            api_group: Some("ipam.cluster.x-k8s.io".into()),
            kind: "InClusterIPPool".into(),
            name: name.into(),
        }
    }

    fn spoke(ipv4: Option<&str>, ipv6: Option<&str>) -> SpokePools {
        SpokePools {
            ipv4: ipv4.map(pool),
            ipv6: ipv6.map(pool),
        }
    }

    #[test]
    fn names_give_away_families_by_token() {
        assert_eq!(named_family("cluster-v6-icip"), NamedFamily::V6);
        assert_eq!(named_family("cluster-zone-a-v4-icip"), NamedFamily::V4);
        assert_eq!(named_family("pool-inet6"), NamedFamily::V6);
        assert_eq!(named_family("my_inet_pool"), NamedFamily::V4);
        assert_eq!(named_family("corpIPv6Pool"), NamedFamily::V6);
        assert_eq!(named_family("dev6x"), NamedFamily::Unknown);
        assert_eq!(named_family("storage"), NamedFamily::Unknown);
    }

    #[test]
    fn v1alpha1_pools_round_trip_on_every_device_whatever_their_names() {
        for role in [Role::Default, Role::Additional] {
            for (v4, v6) in [
                (None, None),
                (Some("a"), None),
                (None, Some("b")),
                (Some("a"), Some("b")),
                (Some("x-v6"), Some("y-v4")),
            ] {
                let s = spoke(v4, v6);
                let hub = fresh(s.clone(), role);
                assert_eq!(
                    down(&hub, role, Origin::Stored),
                    s,
                    "{role:?} {v4:?} {v6:?}"
                );
            }
        }
    }

    #[test]
    fn a_default_device_reference_replaces_the_cluster_pool() {
        let hub = fresh(spoke(None, Some("six")), Role::Default);
        assert_eq!(
            hub,
            HubPools {
                default_ipv4: Some(true),
                default_ipv6: Some(false),
                refs: vec![pool("six")],
            }
        );
    }

    #[test]
    fn additive_v1alpha2_pools_on_net0_are_not_shown_as_replacements() {
        let hub = HubPools {
            default_ipv4: Some(true),
            default_ipv6: None,
            refs: vec![pool("extra")],
        };
        assert_eq!(
            down(&hub, Role::Default, Origin::Stored),
            SpokePools::default()
        );
        // Round trip through the stored object keeps it.
        assert_eq!(
            up(
                SpokePools::default(),
                Role::Default,
                Some(&hub),
                Origin::Stored
            ),
            hub
        );
    }

    #[test]
    fn other_devices_written_in_v1alpha2_show_pools_by_name() {
        let hub = HubPools {
            default_ipv4: None,
            default_ipv6: None,
            refs: vec![pool("c-v6-icip"), pool("extra"), pool("c-v4-icip")],
        };
        assert_eq!(
            down(&hub, Role::Additional, Origin::Stored),
            spoke(Some("c-v4-icip"), Some("c-v6-icip"))
        );
        let only_unknown = HubPools {
            refs: vec![pool("a"), pool("b")],
            ..HubPools::default()
        };
        assert_eq!(
            down(&only_unknown, Role::Additional, Origin::Stored),
            spoke(Some("a"), None)
        );
    }

    #[test]
    fn an_edit_keeps_the_references_v1alpha1_cannot_show() {
        let hub = HubPools {
            default_ipv4: None,
            default_ipv6: None,
            refs: vec![pool("a"), pool("hidden"), pool("b-v6")],
        };
        let edited = spoke(Some("c"), Some("b-v6"));
        let up = up(edited.clone(), Role::Additional, Some(&hub), Origin::Stored);
        assert_eq!(up.refs, vec![pool("c"), pool("b-v6"), pool("hidden")]);
        assert_eq!(down(&up, Role::Additional, Origin::Stored), edited);
    }

    #[test]
    fn removing_the_last_reference_does_not_surface_hidden_ones() {
        let hub = HubPools {
            default_ipv4: None,
            default_ipv6: None,
            refs: vec![pool("a"), pool("hidden")],
        };
        let up = up(
            SpokePools::default(),
            Role::Additional,
            Some(&hub),
            Origin::Stored,
        );
        assert_eq!(up, HubPools::default());
    }

    #[test]
    fn upstream_annotation_pools_are_kept_when_the_v1alpha1_side_is_unchanged() {
        // Upstream wrote net0 as additive defaults plus both references and
        // showed only the first (no name contains "inet").
        let hub = HubPools {
            default_ipv4: Some(true),
            default_ipv6: Some(true),
            refs: vec![pool("four"), pool("six")],
        };
        let seen = down(&hub, Role::Default, Origin::Upstream);
        assert_eq!(seen, spoke(Some("four"), None));
        assert_eq!(up(seen, Role::Default, Some(&hub), Origin::Upstream), hub);
        assert_eq!(
            shown_by_upstream(&[pool("x-inet6"), pool("y-inet")]),
            Shown {
                ipv4: Some(0),
                ipv6: Some(0)
            }
        );
    }
}
