//! The `email` format: what Go's `net/mail.ParseAddress` takes, a single RFC 5322 address:
//! `user@example.com`, `Name <user@example.com>`, `"quoted local"@[10.0.0.1]`, with comments,
//! and even a group holding one address (`team: a@example.com;`). Go's quirks are kept: a
//! display name may be dotted, and an RFC 2047 word in a charset Go cannot decode
//! (`=?koi8-r?q?x?=`) fails the address where Go fails it.

use base64::Engine;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};

/// Whether `s` is one email address to Go.
pub fn is_email(s: &str) -> bool {
    Parser { s }.single_address()
}

/// A parse failed (Go's error; only whether there was one matters here).
struct Failed;

type Parsed<T> = Result<T, Failed>;

#[derive(Clone, Copy)]
struct Parser<'a> {
    s: &'a str,
}

fn is_vchar(c: char) -> bool {
    ('!'..='~').contains(&c) || !c.is_ascii()
}

fn is_wsp(c: char) -> bool {
    c == ' ' || c == '\t'
}

fn is_atext(c: char, dot: bool) -> bool {
    match c {
        '.' => dot,
        '(' | ')' | '<' | '>' | '[' | ']' | ':' | ';' | '@' | '\\' | ',' | '"' => false,
        _ => is_vchar(c),
    }
}

fn is_qtext(c: char) -> bool {
    c != '\\' && c != '"' && is_vchar(c)
}

fn is_dtext(c: char) -> bool {
    c != '[' && c != ']' && c != '\\' && is_vchar(c)
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().first().copied()
    }

    fn consume(&mut self, c: u8) -> bool {
        let found = self.peek() == Some(c);
        if found {
            self.s = &self.s[1..];
        }
        found
    }

    fn skip_space(&mut self) {
        self.s = self.s.trim_start_matches([' ', '\t']);
    }

    /// Spaces and parenthesized comments; `false` for an unclosed comment.
    fn skip_cfws(&mut self) -> bool {
        self.skip_space();
        while self.consume(b'(') {
            if self.comment().is_none() {
                return false;
            }
            self.skip_space();
        }
        true
    }

    /// The text of a comment whose `(` is consumed, its `\` escapes removed; `None` when it is
    /// not closed.
    fn comment(&mut self) -> Option<String> {
        let mut depth = 1;
        let mut text = Vec::new();
        let bytes = self.s.as_bytes();
        let mut i = 0;
        while i < bytes.len() && depth > 0 {
            match bytes[i] {
                b'\\' if i + 1 < bytes.len() => i += 1,
                b'(' => depth += 1,
                b')' => depth -= 1,
                _ => {}
            }
            if depth > 0 {
                text.push(bytes[i]);
            }
            i += 1;
        }
        self.s = &self.s[i..];
        // Only ASCII backslashes were dropped, so the text is still UTF-8.
        (depth == 0).then(|| String::from_utf8_lossy(&text).into_owned())
    }

    fn single_address(mut self) -> bool {
        let Ok(count) = self.address(true) else {
            return false;
        };
        self.skip_cfws() && self.s.is_empty() && count == 1
    }

    /// An address or (with `group`) a group; how many addresses it holds.
    fn address(&mut self, group: bool) -> Parsed<usize> {
        self.skip_space();
        if self.s.is_empty() {
            return Err(Failed);
        }
        if self.addr_spec().is_ok() {
            self.skip_space();
            if self.peek() == Some(b'(') {
                self.display_name_comment()?;
            }
            return Ok(1);
        }
        if self.peek() != Some(b'<') {
            self.phrase()?;
        }
        self.skip_space();
        if group && self.consume(b':') {
            return self.group_list();
        }
        if !self.consume(b'<') {
            return Err(Failed);
        }
        self.addr_spec()?;
        if self.consume(b'>') {
            Ok(1)
        } else {
            Err(Failed)
        }
    }

    fn group_list(&mut self) -> Parsed<usize> {
        self.skip_space();
        if self.consume(b';') {
            return if self.skip_cfws() { Ok(0) } else { Err(Failed) };
        }
        let mut count = 0;
        loop {
            self.skip_space();
            count += self.address(false)?;
            if !self.skip_cfws() {
                return Err(Failed);
            }
            if self.consume(b';') {
                return if self.skip_cfws() {
                    Ok(count)
                } else {
                    Err(Failed)
                };
            }
            if !self.consume(b',') {
                return Err(Failed);
            }
        }
    }

    /// `local@domain`; on failure nothing is consumed.
    fn addr_spec(&mut self) -> Parsed<()> {
        let start = *self;
        let parsed = self.addr_spec_parts();
        if parsed.is_err() {
            *self = start;
        }
        parsed
    }

    fn addr_spec_parts(&mut self) -> Parsed<()> {
        self.skip_space();
        match self.peek() {
            None => return Err(Failed),
            Some(b'"') => {
                if self.quoted_string()?.is_empty() {
                    return Err(Failed);
                }
            }
            Some(_) => self.atom(true, false).map(drop)?,
        }
        if !self.consume(b'@') {
            return Err(Failed);
        }
        self.skip_space();
        match self.peek() {
            None => Err(Failed),
            Some(b'[') => self.domain_literal(),
            Some(_) => self.atom(true, false).map(drop),
        }
    }

    /// A display name of words; Go gives up at the first word it cannot read, and fails only
    /// when no word came before.
    fn phrase(&mut self) -> Parsed<()> {
        let mut words = 0;
        let mut decoded_pending = 0;
        let failed = loop {
            if words > 0 && !self.skip_cfws() {
                return Err(Failed);
            }
            self.skip_space();
            if self.s.is_empty() {
                break false;
            }
            let word = if self.peek() == Some(b'"') {
                self.quoted_string().map(|_| None)
            } else {
                self.atom(true, true).and_then(encoded_word)
            };
            match word {
                Err(Failed) => break true,
                // Adjacent encoded words join into one word.
                Ok(Some(len)) => decoded_pending += len,
                Ok(None) if decoded_pending > 0 => {
                    words += 2;
                    decoded_pending = 0;
                }
                Ok(None) => words += 1,
            }
        };
        if decoded_pending > 0 {
            words += 1;
        }
        if failed && words == 0 {
            Err(Failed)
        } else {
            Ok(())
        }
    }

    /// A quoted string whose `"` is next; its unquoted text.
    fn quoted_string(&mut self) -> Parsed<String> {
        let mut text = String::new();
        let mut escaped = false;
        for (i, c) in self.s.char_indices().skip(1) {
            if escaped {
                if !is_vchar(c) && !is_wsp(c) {
                    return Err(Failed);
                }
                text.push(c);
                escaped = false;
            } else if is_qtext(c) || is_wsp(c) {
                text.push(c);
            } else if c == '"' {
                self.s = &self.s[i + 1..];
                return Ok(text);
            } else if c == '\\' {
                escaped = true;
            } else {
                return Err(Failed);
            }
        }
        Err(Failed)
    }

    /// An atom (with `dot`, a dot-atom); `permissive` takes stray dots, as Go does in names.
    fn atom(&mut self, dot: bool, permissive: bool) -> Parsed<&'a str> {
        let len = self
            .s
            .char_indices()
            .find(|(_, c)| !is_atext(*c, dot))
            .map_or(self.s.len(), |(i, _)| i);
        if len == 0 {
            return Err(Failed);
        }
        let atom = &self.s[..len];
        self.s = &self.s[len..];
        if !permissive && (atom.starts_with('.') || atom.ends_with('.') || atom.contains("..")) {
            return Err(Failed);
        }
        Ok(atom)
    }

    /// `[address]`, which must be an IP address.
    fn domain_literal(&mut self) -> Parsed<()> {
        self.consume(b'[');
        let len = self
            .s
            .char_indices()
            .find(|(_, c)| !is_dtext(*c))
            .map_or(self.s.len(), |(i, _)| i);
        let text = &self.s[..len];
        self.s = &self.s[len..];
        if !self.consume(b']') {
            return Err(Failed);
        }
        text.parse::<std::net::IpAddr>()
            .map(drop)
            .map_err(|_| Failed)
    }

    /// A comment after an address, read as a display name: its encoded words must decode.
    fn display_name_comment(&mut self) -> Parsed<()> {
        self.consume(b'(');
        let text = self.comment().ok_or(Failed)?;
        text.split([' ', '\t'])
            .filter(|w| !w.is_empty())
            .try_for_each(|w| encoded_word(w).map(drop))
    }
}

/// Go's `base64.StdEncoding`: padded, lenient about the unused bits, blind to line breaks.
const GO_BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
);

/// How `net/mail` takes a word that may be RFC 2047 encoded (`=?utf-8?q?text?=`): `None` for a
/// plain word (an encoding that does not decode is one), the length of the decoded text, or
/// a failure for a charset Go cannot convert.
fn encoded_word(word: &str) -> Parsed<Option<usize>> {
    let inner = match word.strip_prefix("=?").and_then(|w| w.strip_suffix("?=")) {
        Some(inner) if word.len() >= 8 && word.matches('?').count() == 4 => inner,
        _ => return Ok(None),
    };
    let mut parts = inner.splitn(3, '?');
    let (charset, encoding, text) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    if charset.is_empty() || encoding.len() != 1 {
        return Ok(None);
    }
    let content = match encoding {
        "B" | "b" => {
            let text: String = text.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
            GO_BASE64.decode(text).ok().map(|c| c.len())
        }
        "Q" | "q" => q_decoded_len(text),
        _ => None,
    };
    let Some(len) = content else {
        return Ok(None);
    };
    let known = ["utf-8", "iso-8859-1", "us-ascii"]
        .iter()
        .any(|known| charset.eq_ignore_ascii_case(known));
    if known { Ok(Some(len)) } else { Err(Failed) }
}

/// The length of a "Q"-encoded text once decoded, if it decodes.
fn q_decoded_len(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut len = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'=' => {
                let hex = |at: usize| bytes.get(at).is_some_and(u8::is_ascii_hexdigit);
                if !(hex(i + 1) && hex(i + 2)) {
                    return None;
                }
                i += 2;
            }
            b' '..=b'~' | b'\n' | b'\r' | b'\t' => {}
            _ => return None,
        }
        len += 1;
        i += 1;
    }
    Some(len)
}

#[cfg(test)]
mod tests {
    use super::is_email;

    #[test]
    fn addresses_are_read_as_go_reads_them() {
        for good in [
            "user@example.com",
            "first.last+tag@sub.example.com",
            "Jane Doe <jane@example.com>",
            "\"Jane D.\" <jane@example.com>",
            "\"quoted local\"@example.com",
            "user@[10.0.0.1]",
            "user@[::1]",
            "jane@example.com (Jane Doe)",
            "team: jane@example.com;",
            "J.R. <jr@example.com>",
            "=?utf-8?q?J=C3=A9r=C3=B4me?= <j@example.com>",
            "Jane =?koi8-r?q?x?= <jane@example.com>",
            "user@localhost",
            "ünïcode@example.com",
        ] {
            assert!(is_email(good), "{good}");
        }
        for bad in [
            "",
            "plainaddress",
            "@example.com",
            "user@",
            "user@@example.com",
            ".user@example.com",
            "user.@example.com",
            "us..er@example.com",
            "user@example..com",
            "Jane Doe",
            "Jane Doe <jane@example.com",
            "a@example.com, b@example.com",
            "team: ;",
            "team: a@example.com, b@example.com;",
            "user@[10.0.0.256]",
            "\"\"@example.com",
            "=?koi8-r?q?x?= <jane@example.com>",
            "jane@example.com (=?koi8-r?q?x?=)",
            "jane@example.com (unclosed",
            "user name@example.com",
        ] {
            assert!(!is_email(bad), "{bad}");
        }
    }
}
