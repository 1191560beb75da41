//! Formatting that matches Go's `fmt`/`strconv`, so that error messages and table cells read
//! byte for byte like kube-apiserver's (clients and users compare them).

use std::fmt::Write as _;

/// `strconv.Quote`: a double-quoted string with Go escapes; printable Unicode stays as is.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if is_printable(c) => out.push(c),
            c if (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if (c as u32) <= 0xFFFF => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08x}", c as u32);
            }
        }
    }
    out.push('"');
    out
}

/// Approximates Go's `strconv.IsPrint`: letters, marks, numbers, punctuation, symbols and the
/// ASCII space. Control, format and separator characters (other than space) are not printable.
fn is_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    !matches!(c,
        '\u{ad}' | '\u{600}'..='\u{605}' | '\u{61c}' | '\u{6dd}' | '\u{70f}' | '\u{180e}'
        | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{206f}'
        | '\u{feff}' | '\u{fff9}'..='\u{fffb}' | '\u{e000}'..='\u{f8ff}')
}

/// `fmt.Sprint(float64)` (the `%v` verb): shortest representation, exponent form when the
/// decimal exponent is below -4 or at least 21.
pub fn format_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    // `{:e}` yields the shortest round-trip digits, e.g. "1.5e-7" or "-2e21".
    let sci = format!("{f:e}");
    let Some((mantissa, exp)) = sci.split_once('e') else {
        return sci;
    };
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if !(-4..21).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let exp_sign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{frac}e{exp_sign}{:02}", exp.abs());
    }
    let point = exp + 1; // digits before the decimal point
    let body = if point <= 0 {
        format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
    } else if point as usize >= digits.len() {
        format!("{digits}{}", "0".repeat(point as usize - digits.len()))
    } else {
        let (int, frac) = digits.split_at(point as usize);
        format!("{int}.{frac}")
    };
    format!("{sign}{body}")
}

/// `json.Marshal` escapes `<`, `>`, `&`, U+2028 and U+2029 inside strings; serde_json does not.
/// These characters can only occur inside JSON strings, so a global replacement is exact.
pub fn go_json_escape(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_matches_go() {
        let cases = [
            ("m1", r#""m1""#),
            ("a\"b", r#""a\"b""#),
            ("back\\slash", r#""back\\slash""#),
            ("tab\there", r#""tab\there""#),
            ("nul\u{0}", r#""nul\x00""#),
            ("héllo ✓", "\"héllo ✓\""),
            ("zero\u{200b}width", r#""zero\u200bwidth""#),
            ("del\u{7f}", r#""del\x7f""#),
        ];
        for (input, want) in cases {
            assert_eq!(quote(input), want, "input {input:?}");
        }
    }

    #[test]
    fn float_matches_go_percent_v() {
        let cases = [
            (1.5, "1.5"),
            (3.0, "3"),
            (-2.25, "-2.25"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1e20, "100000000000000000000"),
            (1e21, "1e+21"),
            (123456789.125, "123456789.125"),
            (-1.5e-7, "-1.5e-07"),
            (6.02214076e23, "6.02214076e+23"),
            (0.1, "0.1"),
        ];
        for (input, want) in cases {
            assert_eq!(format_float(input), want, "input {input}");
        }
    }

    #[test]
    fn json_escape_matches_go() {
        assert_eq!(
            go_json_escape(r#"{"a":"<b>&"}"#),
            r#"{"a":"\u003cb\u003e\u0026"}"#
        );
    }
}
