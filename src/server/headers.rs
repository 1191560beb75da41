//! Response header helpers: kube-style `Warning` headers and SHA-512 ETags.

use axum::http::{HeaderMap, HeaderValue, header};

/// kube-apiserver keeps warnings of one response under this many bytes.
const MAX_WARNING_BYTES: usize = 4 * 1024;

/// A `Warning` value as kube writes it: `299 - "<text>"` with `"` and `\` escaped. Control
/// characters (not allowed in headers) become spaces.
pub fn warning_value(text: &str) -> HeaderValue {
    let mut quoted = String::with_capacity(text.len() + 8);
    quoted.push_str("299 - \"");
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                quoted.push('\\');
                quoted.push(c);
            }
            c if c.is_control() => quoted.push(' '),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    // Only printable characters remain, so this cannot fail; fall back to a generic text.
    HeaderValue::from_str(&quoted).unwrap_or_else(|_| HeaderValue::from_static("299 - \"warning\""))
}

/// The text of a `Warning` value (`299 - "<text>"`, RFC 7234's form, which kube writes):
/// what [`warning_value`] quoted, unescaped; `None` for a value of another form.
pub fn warning_text(value: &str) -> Option<String> {
    let (_, quoted) = value.split_once('"')?;
    let mut text = String::with_capacity(quoted.len());
    let mut chars = quoted.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => text.push(chars.next()?),
            '"' => return Some(text),
            c => text.push(c),
        }
    }
    None
}

/// Appends one `Warning` header per distinct, non-empty text, within kube's size budget.
pub fn add_warnings<S: AsRef<str>>(headers: &mut HeaderMap, warnings: &[S]) {
    let mut seen: Vec<&str> = Vec::new();
    let mut total = 0;
    for text in warnings.iter().map(AsRef::as_ref) {
        if text.is_empty() || seen.contains(&text) {
            continue;
        }
        let value = warning_value(text);
        total += value.len();
        if total > MAX_WARNING_BYTES {
            break;
        }
        seen.push(text);
        headers.append(header::WARNING, value);
    }
}

/// Lower-case hex SHA-512 of `bytes` (discovery ETags).
pub fn sha512_hex(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA512, bytes);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// A strong ETag header value for `hash` (`"<hash>"`).
pub fn etag_value(hash: &str) -> HeaderValue {
    HeaderValue::from_str(&format!("\"{hash}\""))
        .unwrap_or_else(|_| HeaderValue::from_static("\"\""))
}

/// Whether `If-None-Match` names this entity (`*`, or the tag, strong or weak), so a 304 applies.
pub fn if_none_match(headers: &HeaderMap, hash: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .any(|tag| tag == "*" || tag.trim_start_matches("W/").trim_matches('"') == hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warning_texts_are_read_back() {
        for text in [
            "unknown field \"spec.foo\"",
            "a\\b",
            "v1alpha1 is deprecated ✓",
        ] {
            let value = warning_value(text);
            let value = std::str::from_utf8(value.as_bytes()).expect("UTF-8");
            assert_eq!(warning_text(value).as_deref(), Some(text));
        }
        assert_eq!(warning_text("299 - \"unterminated"), None);
        assert_eq!(warning_text("no quotes"), None);
    }

    #[test]
    fn warnings_are_quoted_like_kube() {
        assert_eq!(
            warning_value("unknown field \"spec.foo\""),
            "299 - \"unknown field \\\"spec.foo\\\"\""
        );
        assert_eq!(warning_value("a\\b\nc"), "299 - \"a\\\\b c\"");
        assert_eq!(
            warning_value("v1alpha1 is deprecated ✓"),
            "299 - \"v1alpha1 is deprecated ✓\""
        );
        let mut headers = HeaderMap::new();
        add_warnings(&mut headers, &["one", "", "two", "one"]);
        let values: Vec<_> = headers.get_all(header::WARNING).iter().collect();
        assert_eq!(values, ["299 - \"one\"", "299 - \"two\""]);
        let mut many = HeaderMap::new();
        let long: Vec<String> = (0..100)
            .map(|i| format!("{i}{}", "x".repeat(100)))
            .collect();
        add_warnings(&mut many, &long);
        let total: usize = many
            .get_all(header::WARNING)
            .iter()
            .map(HeaderValue::len)
            .sum();
        assert!(total <= MAX_WARNING_BYTES && total > 0);
    }

    #[test]
    fn etags() {
        let hash = sha512_hex(b"abc");
        assert_eq!(&hash[..16], "ddaf35a193617aba");
        assert_eq!(hash.len(), 128);
        let mut headers = HeaderMap::new();
        assert!(!if_none_match(&headers, &hash));
        headers.insert(
            header::IF_NONE_MATCH,
            HeaderValue::from_str(&format!("\"x\", W/\"{hash}\"")).expect("hv"),
        );
        assert!(if_none_match(&headers, &hash));
        assert_eq!(etag_value("ab"), "\"ab\"");
        headers.insert(header::IF_NONE_MATCH, HeaderValue::from_static("*"));
        assert!(if_none_match(&headers, "anything"));
    }
}
