//! `application/x-www-form-urlencoded` and path-segment percent-encoding.
//!
//! reqwest 0.13 keeps its `form`/`query` helpers behind features this crate does not
//! enable, and the simulator must decode what any PVE client sends, so both sides use
//! this one small codec.

/// Characters left as-is in form values (the WHATWG `application/x-www-form-urlencoded`
/// set): everything else is `%XX`-escaped and a space becomes `+`.
fn is_form_safe(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'*' | b'-' | b'.' | b'_')
}

/// Characters allowed raw in a path segment. PVE accepts UPIDs (`:`, `@`, `!`) and
/// volume ids (`:`) unescaped, so those stay readable in logs and recorded exchanges.
fn is_path_safe(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'-' | b'.'
                | b'_'
                | b'~'
                | b':'
                | b'@'
                | b'!'
                | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
        )
}

fn escape(out: &mut String, b: u8) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push('%');
    out.push(HEX[usize::from(b >> 4)] as char);
    out.push(HEX[usize::from(b & 0xF)] as char);
}

/// Encodes one form component (key or value).
pub fn encode_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if is_form_safe(b) {
            out.push(b as char);
        } else if b == b' ' {
            out.push('+');
        } else {
            escape(&mut out, b);
        }
    }
    out
}

/// Encodes key/value pairs as a form body or query string (`k=v&k2=v2`).
pub fn encode_pairs<K: AsRef<str>, V: AsRef<str>>(pairs: &[(K, V)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                encode_component(k.as_ref()),
                encode_component(v.as_ref())
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// Encodes one path segment; with `keep_slash` a `/` stays raw (PVE's "rest of the URI"
/// volume parameter).
pub fn encode_path(s: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if is_path_safe(b) || (keep_slash && b == b'/') {
            out.push(b as char);
        } else {
            escape(&mut out, b);
        }
    }
    out
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn decode_bytes(s: &str, plus_is_space: bool) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hi = bytes.get(i + 1).copied().and_then(hex_value);
                let lo = bytes.get(i + 2).copied().and_then(hex_value);
                if let (Some(hi), Some(lo)) = (hi, lo) {
                    out.push(hi << 4 | lo);
                    i += 3;
                    continue;
                }
                // A stray `%` is kept literally, as browsers and Perl's CGI do.
                out.push(b'%');
            }
            b'+' if plus_is_space => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Decodes a percent-encoded path segment (`+` stays a plus).
pub fn decode_path(s: &str) -> String {
    decode_bytes(s, false)
}

/// Decodes a form body or query string into pairs, in order. Empty pieces are skipped;
/// a piece without `=` is a key with an empty value.
pub fn decode_pairs(s: &str) -> Vec<(String, String)> {
    s.split('&')
        .filter(|piece| !piece.is_empty())
        .map(|piece| match piece.split_once('=') {
            Some((k, v)) => (decode_bytes(k, true), decode_bytes(v, true)),
            None => (decode_bytes(piece, true), String::new()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn encodes_like_a_browser_form() {
        assert_eq!(
            encode_pairs(&[("net0", "virtio,bridge=vmbr0"), ("name", "a b")]),
            "net0=virtio%2Cbridge%3Dvmbr0&name=a+b"
        );
    }

    #[test]
    fn path_keeps_upid_and_volume_characters() {
        let upid = "UPID:pve1:0000ABCD:00001234:66F0A1B2:qmclone:9000:capmox@pve!capi:";
        assert_eq!(encode_path(upid, false), upid);
        assert_eq!(
            encode_path("local:iso/a b.iso", true),
            "local:iso/a%20b.iso"
        );
        assert_eq!(encode_path("a/b", false), "a%2Fb");
    }

    #[test]
    fn stray_percent_is_literal() {
        assert_eq!(
            decode_pairs("a=%zz&b=%4"),
            vec![
                ("a".to_string(), "%zz".to_string()),
                ("b".to_string(), "%4".to_string())
            ]
        );
    }

    proptest! {
        #[test]
        fn pairs_round_trip(pairs in proptest::collection::vec(("\\PC*", "\\PC*"), 0..6)) {
            prop_assert_eq!(decode_pairs(&encode_pairs(&pairs)), pairs);
        }

        #[test]
        fn path_round_trip(s in "\\PC*") {
            prop_assert_eq!(decode_path(&encode_path(&s, false)), s);
        }

        #[test]
        fn decoding_never_panics(s in any::<String>()) {
            let _ = decode_pairs(&s);
            let _ = decode_path(&s);
        }
    }
}
