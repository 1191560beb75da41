//! The string formats kube-apiserver checks on custom resources (kube-openapi's `strfmt`
//! registry, as the CRD documentation lists them), each as Go parses it.

use std::net::IpAddr;
use std::sync::LazyLock;

use base64::Engine;
use regex::Regex;

fn uuid_pattern(version: &str) -> Regex {
    let third = if version.is_empty() {
        "[0-9a-f]{4}".to_owned()
    } else {
        format!("{version}[0-9a-f]{{3}}")
    };
    let fourth = if matches!(version, "4" | "5") {
        "[89ab][0-9a-f]{3}"
    } else {
        "[0-9a-f]{4}"
    };
    Regex::new(&format!(
        "(?i)^[0-9a-f]{{8}}-?[0-9a-f]{{4}}-?{third}-?{fourth}-?[0-9a-f]{{12}}$"
    ))
    .expect("uuid pattern")
}

static UUID: LazyLock<[Regex; 4]> = LazyLock::new(|| ["", "3", "4", "5"].map(uuid_pattern));
static HEX_COLOR: LazyLock<Regex> =
    LazyLock::new(|| Regex::new("^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$").expect("hex color"));
static BSON_OBJECT_ID: LazyLock<Regex> =
    LazyLock::new(|| Regex::new("^[0-9a-fA-F]{24}$").expect("bson object id"));

/// Go's `net.ParseMAC`: 6, 8 or 20 octets as `xx:xx:…` or `xx-xx-…`, or dotted groups of four
/// hex digits.
fn is_mac(s: &str) -> bool {
    let hex = |group: &str, len: usize| {
        group.len() == len && group.bytes().all(|b| b.is_ascii_hexdigit())
    };
    let octets = |sep: char| {
        let groups: Vec<&str> = s.split(sep).collect();
        matches!(groups.len(), 6 | 8 | 20) && groups.iter().all(|g| hex(g, 2))
    };
    let dotted = || {
        let groups: Vec<&str> = s.split('.').collect();
        matches!(groups.len(), 3 | 4 | 10) && groups.iter().all(|g| hex(g, 4))
    };
    octets(':') || octets('-') || dotted()
}

/// Go's `net.ParseCIDR`: an address, `/`, a prefix length no longer than the address.
fn is_cidr(s: &str) -> bool {
    let Some((address, prefix)) = s.split_once('/') else {
        return false;
    };
    let bits = match address.parse::<IpAddr>() {
        Ok(IpAddr::V4(_)) => 32,
        Ok(IpAddr::V6(_)) => 128,
        Err(_) => return false,
    };
    !prefix.is_empty()
        && prefix.bytes().all(|b| b.is_ascii_digit())
        && prefix.parse::<u32>().is_ok_and(|p| p <= bits)
}

/// Whether `s` is of `format`; `None` for a format not checked here (kube checks `uri`,
/// `email`, `hostname`, `isbn`, `creditcard`, `ssn`, `rgbcolor` and `duration` too; docs/api.md
/// lists them as not checked).
pub fn holds(format: &str, s: &str) -> Option<bool> {
    Some(match format {
        "uuid" => UUID[0].is_match(s),
        "uuid3" => UUID[1].is_match(s),
        "uuid4" => UUID[2].is_match(s),
        "uuid5" => UUID[3].is_match(s),
        // strfmt: what net.ParseIP takes, with a `.` (ipv4) or a `:` (ipv6) in it.
        "ipv4" => s.parse::<IpAddr>().is_ok() && s.contains('.'),
        "ipv6" => s.parse::<IpAddr>().is_ok() && s.contains(':'),
        "cidr" => is_cidr(s),
        "mac" => is_mac(s),
        "byte" => base64::engine::general_purpose::STANDARD.decode(s).is_ok(),
        "date" => s.parse::<jiff::civil::Date>().is_ok() && s.len() == 10,
        "date-time" | "datetime" => s.parse::<jiff::Timestamp>().is_ok(),
        "hexcolor" => HEX_COLOR.is_match(s),
        "bsonobjectid" => BSON_OBJECT_ID.is_match(s),
        "password" => true,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::holds;

    #[test]
    fn formats_hold_as_go_parses_them() {
        for (format, good, bad) in [
            (
                "uuid",
                "0A000000-0000-0000-0000-000000000001",
                "not-formatted",
            ),
            (
                "uuid",
                "0a0000000000000000000000000000a1",
                "0a00000-0000-0000-0000-000000000001",
            ),
            (
                "uuid4",
                "00000000-0000-4000-8000-000000000001",
                "00000000-0000-0000-0000-000000000001",
            ),
            ("ipv4", "10.0.0.5", "10.0.0.256"),
            ("ipv4", "::ffff:10.0.0.5", "fd00::5"),
            ("ipv6", "fd00::5", "10.0.0.5"),
            ("cidr", "10.0.0.0/24", "10.0.0.0/33"),
            ("cidr", "fd00::/64", "10.0.0.0"),
            ("mac", "aa:bb:cc:dd:ee:ff", "aa:bb:cc:dd:ee"),
            ("mac", "aabb.ccdd.eeff", "aa:bb:cc:dd:ee:fg"),
            ("byte", "eA==", "eA="),
            ("date", "2026-12-01", "2026-12-1"),
            ("date-time", "2026-12-01T00:00:00Z", "2026-12-01"),
            ("hexcolor", "#fff", "#ffff"),
        ] {
            assert_eq!(holds(format, good), Some(true), "{format} {good}");
            assert_eq!(holds(format, bad), Some(false), "{format} {bad}");
        }
        assert_eq!(holds("uri", "x"), None);
    }
}
