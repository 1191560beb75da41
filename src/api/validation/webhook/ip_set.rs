//! IP address pools as upstream's webhook reads them (`buildSetFromAddresses`):
//! entries with `-` are ranges, entries with `/` are prefixes, anything else
//! is a single address.

use std::net::IpAddr;

use ipnet::IpNet;

/// A set of IP addresses, as inclusive ranges.
#[derive(Debug, Default)]
pub struct IpSet {
    ranges: Vec<(IpAddr, IpAddr)>,
}

impl IpSet {
    /// Parses pool entries; `None` if any entry is not an address, range or
    /// prefix.
    pub fn parse(entries: &[String]) -> Option<IpSet> {
        let ranges = entries
            .iter()
            .map(|entry| parse_entry(entry))
            .collect::<Option<Vec<_>>>()?;
        Some(IpSet { ranges })
    }

    /// Whether the set holds `addr`.
    pub fn contains(&self, addr: IpAddr) -> bool {
        self.ranges
            .iter()
            .any(|(from, to)| in_range(addr, *from, *to))
    }
}

fn parse_entry(entry: &str) -> Option<(IpAddr, IpAddr)> {
    if let Some((from, to)) = entry.split_once('-') {
        let (from, to): (IpAddr, IpAddr) = (from.parse().ok()?, to.parse().ok()?);
        let same_family = from.is_ipv4() == to.is_ipv4();
        (same_family && from <= to).then_some((from, to))
    } else if entry.contains('/') {
        let net: IpNet = entry.parse().ok()?;
        Some((net.network(), net.broadcast()))
    } else {
        let addr: IpAddr = entry.parse().ok()?;
        Some((addr, addr))
    }
}

fn in_range(addr: IpAddr, from: IpAddr, to: IpAddr) -> bool {
    addr.is_ipv4() == from.is_ipv4() && from <= addr && addr <= to
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(entries: &[&str]) -> Option<IpSet> {
        IpSet::parse(&entries.iter().map(|e| (*e).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn ranges_prefixes_and_addresses() {
        let pool = set(&[
            "10.0.0.10-10.0.0.20",
            "192.168.1.0/24",
            "172.16.0.1",
            "2001:db8::/64",
        ])
        .expect("valid pool");
        for inside in [
            "10.0.0.10",
            "10.0.0.20",
            "192.168.1.77",
            "172.16.0.1",
            "2001:db8::5",
        ] {
            assert!(pool.contains(inside.parse().expect("ip")), "{inside}");
        }
        for outside in ["10.0.0.21", "192.168.2.1", "172.16.0.2", "2001:db9::1"] {
            assert!(!pool.contains(outside.parse().expect("ip")), "{outside}");
        }
    }

    #[test]
    fn malformed_entries_are_rejected() {
        for bad in [
            "10.0.0.20-10.0.0.10",
            "10.0.0.1-2001:db8::1",
            "10.0.0.0/33",
            "nope",
            "",
        ] {
            assert!(set(&[bad]).is_none(), "{bad}");
        }
    }
}
