//! The string formats kube-apiserver checks on custom resources, each as Go parses it: the
//! formats apiextensions supports (`pkg/apiserver/validation/formats.go`), checked by
//! kube-openapi's `strfmt` registry. A CRD's other formats are dropped from its schema when it
//! is read, so nothing checks them, not even the type check (see [`is_checked`]). Names are
//! compared without dashes, as strfmt compares them (`date-time` is `datetime`).
//!
//! `k8s-short-name` and `k8s-long-name` are supported from compatibility version 1.34 on, but
//! kube 1.34 validates custom resources at its minimum compatibility version (1.33), so
//! neither 1.33 nor 1.34 checks them.

mod duration;
mod email;
mod ip;
mod uri;

use std::sync::LazyLock;

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

fn pattern(re: &str) -> Regex {
    Regex::new(re).unwrap_or_else(|e| panic!("format pattern {re}: {e}"))
}

// Go's `\d` and `\s` are ASCII (`[0-9]`, `[\t\n\f\r ]`); Rust's are Unicode, so the patterns
// spell them out.
static UUID: LazyLock<[Regex; 4]> = LazyLock::new(|| ["", "3", "4", "5"].map(uuid_pattern));
static HEX_COLOR: LazyLock<Regex> =
    LazyLock::new(|| pattern("^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"));
static BSON_OBJECT_ID: LazyLock<Regex> = LazyLock::new(|| pattern("^[0-9a-fA-F]{24}$"));
static RGB_COLOR: LazyLock<Regex> = LazyLock::new(|| {
    let channel = "[\t\n\x0C\r ]*(0|[1-9][0-9]?|1[0-9][0-9]?|2[0-4][0-9]|25[0-5])[\t\n\x0C\r ]*";
    pattern(&format!(r"^rgb\({channel},{channel},{channel}\)$"))
});
static BASE64: LazyLock<Regex> = LazyLock::new(|| {
    pattern("^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$")
});
static SSN: LazyLock<Regex> = LazyLock::new(|| pattern("^[0-9]{3}[- ]?[0-9]{2}[- ]?[0-9]{4}$"));
static CREDIT_CARD: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        "^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}\
         |3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35[0-9]{3})[0-9]{11})$",
    )
});
/// strfmt's RFC 1034 host name: labels of letters, digits, symbols and dashes (not at either
/// end), a top-level label of two letters at least; one label alone takes one dash at most.
static HOSTNAME: LazyLock<Regex> = LazyLock::new(|| {
    let char = r"[a-zA-Z0-9\p{S}\p{L}]";
    let inner = r"[a-zA-Z0-9\-\p{S}\p{L}]";
    let single = format!("{char}((-?{char}{{0,62}})?)");
    let dotted = format!(r"({char}(({inner}{{0,61}}{char})?)(\.)){{1,}}([a-zA-Z\p{{L}}]){{2,63}}");
    regex::RegexBuilder::new(&format!("^({single}|{dotted})$"))
        .size_limit(64 << 20)
        .build()
        .expect("hostname pattern")
});

/// strfmt's `IsHostname`: the pattern, 255 bytes at most, labels of 63 bytes at most.
fn is_hostname(s: &str) -> bool {
    HOSTNAME.is_match(s) && s.len() <= 255 && s.split('.').all(|label| label.len() <= 63)
}

/// govalidator's `IsISBN10`/`IsISBN13`: the digits (spaces and dashes dropped) and their check
/// digit.
fn is_isbn(s: &str, version: u8) -> bool {
    let digits: Vec<u8> = s
        .bytes()
        .filter(|b| !matches!(b, b'\t' | b'\n' | 0x0C | b'\r' | b' ' | b'-'))
        .collect();
    let value = |b: &u8| u32::from(b - b'0');
    if version == 10 {
        let shape = digits.len() == 10
            && digits[..9].iter().all(u8::is_ascii_digit)
            && (digits[9].is_ascii_digit() || digits[9] == b'X');
        if !shape {
            return false;
        }
        let last = if digits[9] == b'X' {
            10
        } else {
            value(&digits[9])
        };
        let weighted: u32 = (1..).zip(&digits[..9]).map(|(w, b)| w * value(b)).sum();
        (weighted + 10 * last).is_multiple_of(11)
    } else {
        if digits.len() != 13 || !digits.iter().all(u8::is_ascii_digit) {
            return false;
        }
        let weighted: u32 = (digits[..12].iter())
            .zip([1, 3].into_iter().cycle())
            .map(|(b, w)| w * value(b))
            .sum();
        value(&digits[12]) == (10 - weighted % 10) % 10
    }
}

/// govalidator's `IsCreditCard`: the digits of `s` (anything else dropped) form a card number
/// of a known issuer whose Luhn checksum holds.
fn is_credit_card(s: &str) -> bool {
    let digits: String = s.chars().filter(char::is_ascii_digit).collect();
    let luhn: u32 = digits
        .bytes()
        .rev()
        .zip([false, true].into_iter().cycle())
        .map(|(b, double)| {
            let d = u32::from(b - b'0');
            match (double, d * 2) {
                (false, _) => d,
                (true, twice) if twice >= 10 => twice % 10 + 1,
                (true, twice) => twice,
            }
        })
        .sum();
    CREDIT_CARD.is_match(&digits) && luhn.is_multiple_of(10)
}

/// Go's `time.Parse("2006-01-02", s)`: four-digit year, two-digit month and day, a day the
/// month has.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        b[range.clone()]
            .iter()
            .all(u8::is_ascii_digit)
            .then(|| s[range].parse::<i16>().ok())
            .flatten()
    };
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    match (digits(0..4), digits(5..7), digits(8..10)) {
        (Some(year), Some(month), Some(day)) => {
            let (Ok(month), Ok(day)) = (i8::try_from(month), i8::try_from(day)) else {
                return false;
            };
            jiff::civil::Date::new(year, month, day).is_ok()
        }
        _ => false,
    }
}

static TIME_OF_DAY: LazyLock<Regex> = LazyLock::new(|| {
    pattern("^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
});

/// strfmt's `IsDateTime`: lowercased and split at each `t`, a date before the first and a
/// time of day with a zone after it (hours to 23, minutes and seconds to 59; the offset
/// unchecked).
fn is_date_time(s: &str) -> bool {
    let lower = s.to_lowercase();
    let mut parts = lower.split('t');
    let (Some(date), Some(time)) = (parts.next(), parts.next()) else {
        return false;
    };
    s.len() >= 4
        && is_date(date)
        && TIME_OF_DAY
            .captures(time)
            .is_some_and(|c| &c[1] <= "23" && &c[2] <= "59" && &c[3] <= "59")
}

type Check = fn(&str) -> bool;

/// The check of a format kube checks, by its name without dashes.
fn check(format: &str) -> Option<Check> {
    Some(match format.replace('-', "").as_str() {
        "uuid" => |s| UUID[0].is_match(s),
        "uuid3" => |s| UUID[1].is_match(s),
        "uuid4" => |s| UUID[2].is_match(s),
        "uuid5" => |s| UUID[3].is_match(s),
        // What k8s.io/utils' sloppy net.ParseIP takes, with a `.` in it.
        "ipv4" => |s| ip::parse_ip(s) && s.contains('.'),
        // What Go's net.ParseIP takes (no zone), with a `:` in it.
        "ipv6" => |s| s.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => ip::parse_cidr,
        "mac" => is_mac,
        "byte" => |s| BASE64.is_match(s),
        "date" => is_date,
        "datetime" => is_date_time,
        "duration" => duration::is_duration,
        "hexcolor" => |s| HEX_COLOR.is_match(s),
        "rgbcolor" => |s| RGB_COLOR.is_match(s),
        "bsonobjectid" => |s| BSON_OBJECT_ID.is_match(s),
        "uri" => uri::is_request_uri,
        "email" => email::is_email,
        "hostname" => is_hostname,
        "isbn" => |s| is_isbn(s, 10) || is_isbn(s, 13),
        "isbn10" => |s| is_isbn(s, 10),
        "isbn13" => |s| is_isbn(s, 13),
        "creditcard" => is_credit_card,
        // Eleven bytes: nine digits and both separators.
        "ssn" => |s| s.len() == 11 && SSN.is_match(s),
        "password" => |_| true,
        _ => return None,
    })
}

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

/// Whether kube checks `format` (the others are dropped from a CRD's schema).
pub fn is_checked(format: &str) -> bool {
    check(format).is_some()
}

/// Whether `s` is of `format`; `None` for a format kube does not check.
pub fn holds(format: &str, s: &str) -> Option<bool> {
    check(format).map(|check| check(s))
}

#[cfg(test)]
mod tests {
    use super::{holds, is_checked};

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
            ("ipv4", "010.0.0.5", "fd00::5"),
            ("ipv4", "::ffff:10.0.0.5", "10.0.0"),
            ("ipv6", "fd00::5", "10.0.0.5"),
            ("ipv6", "::ffff:10.0.0.5", "fe80::1%eth0"),
            ("cidr", "10.0.0.0/24", "10.0.0.0/33"),
            ("cidr", "fd00::/64", "10.0.0.0"),
            ("mac", "aa:bb:cc:dd:ee:ff", "aa:bb:cc:dd:ee"),
            ("mac", "aabb.ccdd.eeff", "aa:bb:cc:dd:ee:fg"),
            ("byte", "eA==", "eA="),
            ("byte", "eB==", ""),
            ("date", "2024-02-29", "2023-02-29"),
            ("date", "2026-12-01", "2026-12-1"),
            ("date-time", "2026-12-01T00:00:00Z", "2026-12-01"),
            (
                "date-time",
                "2026-12-01t23:59:59.5+99:99",
                "2026-12-01T24:00:00Z",
            ),
            (
                "datetime",
                "2026-12-01T00:00:00+01:00",
                "2026-12-01 00:00:00Z",
            ),
            ("hexcolor", "#fff", "#ffff"),
            ("rgbcolor", "rgb( 0 ,128,255)", "rgb(256,0,0)"),
            ("rgbcolor", "rgb(0,0,0)", "rgb(0,0,0,0)"),
            (
                "bsonobjectid",
                "507f1f77bcf86cd799439011",
                "507f1f77bcf86cd79943901",
            ),
            ("hostname", "example.com", "-example.com"),
            // strfmt's pattern takes one dash only right after a lone label's first character.
            ("hostname", "a-host", "my-host"),
            ("hostname", "münchen.de", "example.c"),
            ("hostname", "a.b-c.io", "a_b.io"),
            ("isbn10", "0-321-75104-3", "0321751044"),
            ("isbn10", "080442957X", "080442957x"),
            ("isbn13", "978-0321751041", "9780321751042"),
            ("isbn", "978 0321751041", "97803217510"),
            ("isbn", "0321751043", "isbn0321751043"),
            ("creditcard", "4111 1111 1111 1111", "4111 1111 1111 1112"),
            ("creditcard", "5500-0000-0000-0004", "1234567812345670"),
            ("ssn", "123-45-6789", "123456789"),
            ("ssn", "123 45 6789", "123-456-789"),
            ("duration", "1h30m", "forever"),
            ("uri", "https://example.com/x", "example.com/x"),
            ("email", "Jane <jane@example.com>", "jane@"),
            ("password", "anything", "anything"),
        ] {
            assert_eq!(holds(format, good), Some(true), "{format} {good}");
            if format != "password" {
                assert_eq!(holds(format, bad), Some(false), "{format} {bad}");
            }
        }
    }

    #[test]
    fn formats_kube_drops_are_not_checked() {
        for format in [
            "int32",
            "int64",
            "double",
            "k8s-short-name",
            "k8s-long-name",
            "color",
        ] {
            assert!(!is_checked(format), "{format}");
            assert_eq!(holds(format, "anything"), None);
        }
        assert!(is_checked("date-time") && is_checked("datetime") && is_checked("is-bn"));
    }
}
