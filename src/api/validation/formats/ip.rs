//! IP addresses as kube-openapi's `ipv4` and `cidr` formats read them: through
//! `k8s.io/utils/net`'s "sloppy" parsers, Go 1.16's `net.ParseIP` and `net.ParseCIDR` kept
//! for addresses stored before Go 1.17 tightened them. They take leading zeros
//! (`010.0.0.1`, `0001::1`) that Rust's parsers, like Go's today, refuse.

/// Go's `dtoi`: the decimal number at the start of `s` and its length; `None` without a digit
/// or from 0xFFFFFF on.
fn decimal_prefix(s: &[u8]) -> Option<(u32, usize)> {
    let mut n: u32 = 0;
    let mut len = 0;
    for &b in s.iter().take_while(|b| b.is_ascii_digit()) {
        n = n * 10 + u32::from(b - b'0');
        if n >= 0xFF_FFFF {
            return None;
        }
        len += 1;
    }
    (len > 0).then_some((n, len))
}

/// Go's `xtoi`, likewise in hexadecimal.
fn hex_prefix(s: &[u8]) -> Option<(u32, usize)> {
    let mut n: u32 = 0;
    let mut len = 0;
    for &b in s {
        let Some(digit) = char::from(b).to_digit(16) else {
            break;
        };
        n = n * 16 + digit;
        if n >= 0xFF_FFFF {
            return None;
        }
        len += 1;
    }
    (len > 0).then_some((n, len))
}

fn parse_ipv4(s: &[u8]) -> bool {
    let mut rest = s;
    for octet in 0..4 {
        if octet > 0 {
            let Some(after) = rest.strip_prefix(b".") else {
                return false;
            };
            rest = after;
        }
        match decimal_prefix(rest) {
            Some((n, len)) if n <= 0xFF => rest = &rest[len..],
            _ => return false,
        }
    }
    rest.is_empty()
}

fn parse_ipv6(s: &[u8]) -> bool {
    const GROUPS_BYTES: usize = 16;
    let mut rest = s;
    let mut ellipsis = false;
    if rest.starts_with(b"::") {
        ellipsis = true;
        rest = &rest[2..];
        if rest.is_empty() {
            return true;
        }
    }
    let mut filled = 0;
    while filled < GROUPS_BYTES {
        let Some((_, len)) = hex_prefix(rest).filter(|(n, _)| *n <= 0xFFFF) else {
            return false;
        };
        if rest.get(len) == Some(&b'.') {
            // A trailing IPv4 address, in the last four bytes or beside an ellipsis.
            if (!ellipsis && filled != GROUPS_BYTES - 4)
                || filled + 4 > GROUPS_BYTES
                || !parse_ipv4(rest)
            {
                return false;
            }
            rest = &[];
            filled += 4;
            break;
        }
        filled += 2;
        rest = &rest[len..];
        if rest.is_empty() {
            break;
        }
        if rest[0] != b':' || rest.len() == 1 {
            return false;
        }
        rest = &rest[1..];
        if rest[0] == b':' {
            if ellipsis {
                return false;
            }
            ellipsis = true;
            rest = &rest[1..];
            if rest.is_empty() {
                break;
            }
        }
    }
    // The ellipsis must stand for one group at least.
    rest.is_empty() && (filled < GROUPS_BYTES) == ellipsis
}

/// Go 1.16's `net.ParseIP`: IPv4 or IPv6 by the first `.` or `:`.
pub fn parse_ip(s: &str) -> bool {
    match s.bytes().find(|b| matches!(b, b'.' | b':')) {
        Some(b'.') => parse_ipv4(s.as_bytes()),
        Some(_) => parse_ipv6(s.as_bytes()),
        None => false,
    }
}

/// Go 1.16's `net.ParseCIDR`: an address, `/`, a decimal prefix length no longer than the
/// address.
pub fn parse_cidr(s: &str) -> bool {
    let Some((address, prefix)) = s.split_once('/') else {
        return false;
    };
    let bits = if parse_ipv4(address.as_bytes()) {
        32
    } else if parse_ipv6(address.as_bytes()) {
        128
    } else {
        return false;
    };
    matches!(decimal_prefix(prefix.as_bytes()), Some((n, len)) if len == prefix.len() && n <= bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_read_as_go_1_16_read_them() {
        for good in [
            "10.0.0.5",
            "010.000.0.0001",
            "fd00::5",
            "::",
            "0001::1",
            "::ffff:10.0.0.5",
            "1:2:3:4:5:6:10.0.0.1",
        ] {
            assert!(parse_ip(good), "{good}");
        }
        for bad in [
            "10.0.0.256",
            "10.0.0",
            "10.0.0.5.",
            "1:2:3:4:5:6:7:8::",
            "1::2::3",
            "1:2:3:4:5:10.0.0.1",
            "10000::1",
            "fd00::5%eth0",
            "",
        ] {
            assert!(!parse_ip(bad), "{bad}");
        }
        assert!(parse_cidr("010.0.0.0/024"));
        assert!(parse_cidr("fd00::/128"));
        assert!(!parse_cidr("10.0.0.0/33"));
        assert!(!parse_cidr("10.0.0.0/"));
        assert!(!parse_cidr("10.0.0.0"));
    }
}
