//! Allocates addresses from in-cluster IP pools the way the in-cluster IPAM provider
//! does: the pool's `addresses` entries are single addresses, `a-b` ranges or CIDRs of
//! one family; the gateway, `excludedAddresses` and — unless
//! `allocateReservedIPAddresses` — the network and broadcast addresses of IPv4 CIDR
//! entries are never handed out; the lowest free address wins.
//!
//! Pure functions over the pool spec and the set of addresses in use; callers (the
//! in-memory management cluster, the `dev` IPAM emulation) own the objects.

use std::collections::BTreeSet;
use std::net::IpAddr;

use ipnet::IpNet;

use super::types::{
    IPAM_API_VERSION, IpAddress, IpAddressClaim, IpAddressSpec, IpPool, NameRef, PoolRef,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// Why an address could not be allocated.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// An `addresses` or `excludedAddresses` entry does not parse.
    #[error("invalid pool address entry {0:?}")]
    InvalidEntry(String),
    /// The entries mix IPv4 and IPv6.
    #[error("pool mixes IPv4 and IPv6 addresses")]
    MixedFamilies,
    /// Every address is taken.
    #[error("pool {0} has no free address")]
    Exhausted(String),
}

/// One inclusive range of addresses, as integers of one family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Range {
    v6: bool,
    start: u128,
    end: u128,
}

fn to_int(ip: IpAddr) -> (bool, u128) {
    match ip {
        IpAddr::V4(v4) => (false, u128::from(u32::from(v4))),
        IpAddr::V6(v6) => (true, u128::from(v6)),
    }
}

fn from_int(v6: bool, n: u128) -> Option<IpAddr> {
    if v6 {
        Some(IpAddr::V6(n.into()))
    } else {
        u32::try_from(n).ok().map(|n| IpAddr::V4(n.into()))
    }
}

/// Parses one entry: `10.0.0.5`, `10.0.0.5-10.0.0.9` or `10.0.0.0/28`. The boolean tells
/// whether the entry was a CIDR (whose network/broadcast addresses are reserved).
fn parse_entry(entry: &str) -> Result<(Range, bool), AllocError> {
    let invalid = || AllocError::InvalidEntry(entry.to_string());
    let entry = entry.trim();
    if let Some((a, b)) = entry.split_once('-') {
        let (fa, a) = to_int(a.trim().parse().map_err(|_| invalid())?);
        let (fb, b) = to_int(b.trim().parse().map_err(|_| invalid())?);
        if fa != fb || a > b {
            return Err(invalid());
        }
        return Ok((
            Range {
                v6: fa,
                start: a,
                end: b,
            },
            false,
        ));
    }
    if entry.contains('/') {
        let net: IpNet = entry.parse().map_err(|_| invalid())?;
        let (v6, start) = to_int(net.network());
        let (_, end) = to_int(net.broadcast());
        return Ok((Range { v6, start, end }, true));
    }
    let (v6, n) = to_int(entry.parse().map_err(|_| invalid())?);
    Ok((
        Range {
            v6,
            start: n,
            end: n,
        },
        false,
    ))
}

/// Whether `ip` lies inside any of the pool's `addresses` entries.
pub fn contains(addresses: &[String], ip: IpAddr) -> Result<bool, AllocError> {
    let (v6, n) = to_int(ip);
    for entry in addresses {
        let (r, _) = parse_entry(entry)?;
        if r.v6 == v6 && r.start <= n && n <= r.end {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The lowest free address of the pool; `used` are addresses already allocated from it.
pub fn next_free(
    pool_name: &str,
    spec: &super::types::IpPoolSpec,
    used: &BTreeSet<IpAddr>,
) -> Result<IpAddr, AllocError> {
    let mut ranges = Vec::new();
    for entry in &spec.addresses {
        ranges.push(parse_entry(entry)?);
    }
    let family = ranges.first().map(|(r, _)| r.v6);
    if ranges.iter().any(|(r, _)| Some(r.v6) != family) {
        return Err(AllocError::MixedFamilies);
    }
    let mut blocked: BTreeSet<u128> = used.iter().map(|ip| to_int(*ip).1).collect();
    if let Some(gw) = spec
        .gateway
        .as_deref()
        .and_then(|g| g.parse::<IpAddr>().ok())
    {
        blocked.insert(to_int(gw).1);
    }
    let mut excluded = Vec::new();
    for entry in &spec.excluded_addresses {
        excluded.push(parse_entry(entry)?.0);
    }
    ranges.sort_by_key(|(r, _)| r.start);
    for (range, cidr) in ranges {
        let (mut start, mut end) = (range.start, range.end);
        // IPv4 CIDRs keep their network and broadcast addresses back, like the provider.
        if cidr && !range.v6 && !spec.allocate_reserved_ip_addresses && end > start + 1 {
            start += 1;
            end -= 1;
        }
        // Each step either returns or skips a blocked/excluded address, so the walk is
        // bounded by the number of blocked and excluded addresses, not the range size.
        let mut candidate = start;
        while candidate <= end {
            if let Some(r) = excluded
                .iter()
                .find(|r| r.v6 == range.v6 && r.start <= candidate && candidate <= r.end)
            {
                match r.end.checked_add(1) {
                    Some(next) => candidate = next,
                    None => break,
                }
                continue;
            }
            if blocked.contains(&candidate) {
                match candidate.checked_add(1) {
                    Some(next) => candidate = next,
                    None => break,
                }
                continue;
            }
            if let Some(ip) = from_int(range.v6, candidate) {
                return Ok(ip);
            }
            break;
        }
    }
    Err(AllocError::Exhausted(pool_name.to_string()))
}

/// The `IPAddress` the provider creates for a claim: same name and namespace, owned by
/// the claim, with the pool's prefix and gateway.
pub fn address_for(claim: &IpAddressClaim, pool: &IpPool, ip: IpAddr) -> IpAddress {
    let owner = OwnerReference {
        api_version: IPAM_API_VERSION.to_string(),
        kind: "IPAddressClaim".to_string(),
        name: claim.metadata.name.clone().unwrap_or_default(),
        uid: claim.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    IpAddress {
        metadata: ObjectMeta {
            name: claim.metadata.name.clone(),
            namespace: claim.metadata.namespace.clone(),
            labels: claim.metadata.labels.clone(),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: IpAddressSpec {
            claim_ref: NameRef {
                name: claim.metadata.name.clone().unwrap_or_default(),
            },
            pool_ref: PoolRef {
                api_group: super::types::IPAM_GROUP.to_string(),
                kind: pool.kind.clone(),
                name: pool.metadata.name.clone().unwrap_or_default(),
            },
            address: ip.to_string(),
            prefix: Some(pool.spec.prefix),
            gateway: pool.spec.gateway.clone().filter(|g| !g.is_empty()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::management::types::IpPoolSpec;

    fn spec(addresses: &[&str], gateway: Option<&str>) -> IpPoolSpec {
        IpPoolSpec {
            addresses: addresses.iter().map(|s| s.to_string()).collect(),
            prefix: 24,
            gateway: gateway.map(str::to_string),
            ..IpPoolSpec::default()
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    #[test]
    fn allocates_lowest_free_address_skipping_gateway_and_used() {
        let s = spec(&["10.0.0.1-10.0.0.4"], Some("10.0.0.1"));
        let mut used = BTreeSet::new();
        let mut got = Vec::new();
        while let Ok(a) = next_free("p", &s, &used) {
            used.insert(a);
            got.push(a.to_string());
        }
        assert_eq!(got, ["10.0.0.2", "10.0.0.3", "10.0.0.4"]);
        assert_eq!(
            next_free("p", &s, &used),
            Err(AllocError::Exhausted("p".into()))
        );
    }

    #[test]
    fn cidr_entries_reserve_network_and_broadcast_unless_asked() {
        let mut s = spec(&["192.168.1.0/30"], None);
        let used = BTreeSet::new();
        assert_eq!(next_free("p", &s, &used), Ok(ip("192.168.1.1")));
        let used: BTreeSet<IpAddr> = [ip("192.168.1.1"), ip("192.168.1.2")].into();
        assert!(next_free("p", &s, &used).is_err());
        s.allocate_reserved_ip_addresses = true;
        assert_eq!(next_free("p", &s, &used), Ok(ip("192.168.1.0")));
    }

    #[test]
    fn excluded_ranges_and_ipv6() {
        let mut s = spec(&["fd00::10-fd00::20", "fd00::5"], Some("fd00::1"));
        s.excluded_addresses = vec!["fd00::5".into(), "fd00::10-fd00::11".into()];
        assert_eq!(next_free("p", &s, &BTreeSet::new()), Ok(ip("fd00::12")));
        let huge = spec(&["2001:db8::/64"], Some("2001:db8::1"));
        let used: BTreeSet<IpAddr> = [ip("2001:db8::")].into();
        assert_eq!(next_free("p", &huge, &used), Ok(ip("2001:db8::2")));
    }

    #[test]
    fn rejects_garbage_and_mixed_families() {
        assert!(matches!(
            next_free("p", &spec(&["nope"], None), &BTreeSet::new()),
            Err(AllocError::InvalidEntry(_))
        ));
        assert_eq!(
            next_free("p", &spec(&["10.0.0.1", "fd00::1"], None), &BTreeSet::new()),
            Err(AllocError::MixedFamilies)
        );
        assert!(matches!(
            next_free("p", &spec(&["10.0.0.9-10.0.0.1"], None), &BTreeSet::new()),
            Err(AllocError::InvalidEntry(_))
        ));
        assert_eq!(contains(&["10.0.0.0/24".into()], ip("10.0.0.77")), Ok(true));
        assert_eq!(contains(&["10.0.0.0/24".into()], ip("fd00::1")), Ok(false));
    }
}
