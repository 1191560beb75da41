//! The `uri` format: what Go's `net/url.ParseRequestURI` takes (govalidator's `IsRequestURI`),
//! as in the Go release kube 1.33 and 1.34 are built with (1.24: bracketed hosts must be IPv6
//! addresses; colons elsewhere in a host are not yet refused, as Go 1.26 does for `http`).
//! An absolute URI (`scheme:…`) or an absolute path (`/…`), well-formed `%` escapes, and a
//! host of the characters Go allows with an optional numeric port.

use std::net::Ipv6Addr;

/// Where in a URI text is unescaped: Go checks hosts and IPv6 zones more strictly.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Host,
    Zone,
    Other,
}

/// The ASCII bytes Go leaves unescaped in a host (RFC 3986 sub-delims, `:`, brackets, and the
/// `<`, `>`, `"` it tolerates).
fn allowed_in_host(b: u8) -> bool {
    b.is_ascii_alphanumeric() || br#"!$&'()*+,;=:[]<>"-_.~"#.contains(&b)
}

/// Go's `unescape`: the text with its `%XX` escapes decoded, or `None` where Go errs.
fn unescape(s: &str, part: Part) -> Option<Vec<u8>> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hex = |at: usize| bytes.get(at).and_then(|h| char::from(*h).to_digit(16));
            let (Some(high), Some(low)) = (hex(i + 1), hex(i + 2)) else {
                return None;
            };
            let decoded = ((high << 4) | low) as u8;
            let percent = &s[i..i + 3] == "%25";
            // A host escapes only non-ASCII bytes (and `%` in an IPv6 zone); a zone only what
            // could stand in a host anyway, or a space.
            match part {
                Part::Host if high < 8 && !percent => return None,
                Part::Zone if !percent && decoded != b' ' && !allowed_in_host(decoded) => {
                    return None;
                }
                _ => {}
            }
            out.push(decoded);
            i += 3;
        } else {
            if part != Part::Other && b < 0x80 && !allowed_in_host(b) {
                return None;
            }
            out.push(b);
            i += 1;
        }
    }
    Some(out)
}

fn valid_optional_port(port: &str) -> bool {
    port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|digits| digits.bytes().all(|b| b.is_ascii_digit()))
}

/// An IPv6 address, optionally with a non-empty `%zone`, as `netip.ParseAddr` reads it.
fn is_ipv6_with_zone(text: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(text) else {
        return false;
    };
    let (address, zone) = match text.split_once('%') {
        Some((address, zone)) => (address, Some(zone)),
        None => (text, None),
    };
    // netip reads an address as IPv6 only when a `:` comes before any `.` or `%`.
    text.bytes().find(|b| matches!(b, b'.' | b':' | b'%')) == Some(b':')
        && address.parse::<Ipv6Addr>().is_ok()
        && zone.is_none_or(|z| !z.is_empty())
}

fn valid_host(host: &str) -> bool {
    match host.rfind('[') {
        Some(0) => {
            let Some(close) = host.rfind(']') else {
                return false;
            };
            let port = &host[close + 1..];
            if !valid_optional_port(port) || unescape(port, Part::Host).is_none() {
                return false;
            }
            let inner = &host[1..close];
            let address = match inner.find("%25") {
                Some(zone) => unescape(&inner[..zone], Part::Host)
                    .zip(unescape(&inner[zone..], Part::Zone))
                    .map(|(mut a, z)| {
                        a.extend(z);
                        a
                    }),
                None => unescape(inner, Part::Host),
            };
            address.is_some_and(|a| is_ipv6_with_zone(&a))
        }
        Some(_) => false,
        None => {
            host.rfind(':')
                .is_none_or(|colon| valid_optional_port(&host[colon..]))
                && unescape(host, Part::Host).is_some()
        }
    }
}

fn valid_userinfo(userinfo: &str) -> bool {
    userinfo
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-._:~!$&'()*+,;=%@".contains(&b))
        && unescape(userinfo, Part::Other).is_some()
}

fn valid_authority(authority: &str) -> bool {
    match authority.rfind('@') {
        Some(at) => valid_host(&authority[at + 1..]) && valid_userinfo(&authority[..at]),
        None => valid_host(authority),
    }
}

/// The scheme (`None` where Go errs: a `:` first), and the rest.
fn split_scheme(s: &str) -> Option<(&str, &str)> {
    for (i, b) in s.bytes().enumerate() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b':' if i == 0 => return None,
            b':' => return Some((&s[..i], &s[i + 1..])),
            _ => break,
        }
    }
    Some(("", s))
}

/// Whether Go's `url.ParseRequestURI` takes `s`.
pub fn is_request_uri(s: &str) -> bool {
    if s.is_empty() || s.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return false;
    }
    if s == "*" {
        return true;
    }
    let Some((scheme, rest)) = split_scheme(s) else {
        return false;
    };
    // The query is not checked.
    let rest = rest.split('?').next().unwrap_or_default();
    if !rest.starts_with('/') {
        // `scheme:opaque`; without a scheme a request needs an absolute path.
        return !scheme.is_empty();
    }
    let path = match rest.strip_prefix("//").filter(|_| !scheme.is_empty()) {
        Some(after) => {
            let (authority, path) = after.split_at(after.find('/').unwrap_or(after.len()));
            if !valid_authority(authority) {
                return false;
            }
            path
        }
        None => rest,
    };
    unescape(path, Part::Other).is_some()
}

#[cfg(test)]
mod tests {
    use super::is_request_uri;

    #[test]
    fn request_uris_are_read_as_go_reads_them() {
        for good in [
            "https://example.com/a%20b?q=%zz",
            "http://user:p@ss@host:8080/x",
            "mailto:someone@example.com",
            "urn:isbn:0451450523",
            "/absolute/path",
            "//not-a-host/path",
            "*",
            "http://[fe80::1%25en0]:80/",
            "http://[::ffff:10.0.0.1]/",
            "http://h\u{e9}te/",
            "http://a:b:80/",
            "s3:",
        ] {
            assert!(is_request_uri(good), "{good}");
        }
        for bad in [
            "",
            "relative/path",
            "example.com",
            ":nope",
            "1http://x",
            "http://host:80a/",
            "http://[10.0.0.1]/",
            "http://[fe80::1%25]/",
            "http://a[::1]/",
            "http://ho st/",
            "http://host#frag/",
            "http://%41.com/",
            "http://us{er@host/",
            "/a%2",
            "http://x/\u{7f}",
        ] {
            assert!(!is_request_uri(bad), "{bad}");
        }
    }
}
