//! The `duration` format: what kube-openapi's `strfmt.ParseDuration` takes. That is Go's
//! `time.ParseDuration` (`1h30m`, `1.5s`, `-0`), or else, leniently, any text holding a number
//! followed by a unit word it knows (`3 days`, `every 5 minutes`).

use std::sync::LazyLock;

use regex::Regex;

/// Go's `\d+\s*[A-Za-zµ]+` (ASCII digits and spaces, as RE2 has them).
static NUMBER_AND_UNIT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new("([0-9]+)[\t\n\x0C\r ]*([A-Za-z\u{b5}]+)").expect("duration pattern")
});

/// The unit words of the lenient form, each with its variants: the last one is also taken as
/// a prefix (`minutes`, `hours`).
const UNIT_WORDS: &[&[&str]] = &[
    &["ns", "nano"],
    &["us", "\u{b5}s", "micro"],
    &["ms", "milli"],
    &["s", "sec"],
    &["m", "min"],
    &["h", "hr", "hour"],
    &["d", "day"],
    &["w", "wk", "week"],
];

/// Whether `s` is a duration to strfmt.
pub fn is_duration(s: &str) -> bool {
    go_parse_duration(s) || lenient(s)
}

/// The lenient form: every number must fit an `int` (Go's `strconv.Atoi` fails the whole
/// parse otherwise), and one of them at least must carry a known unit.
fn lenient(s: &str) -> bool {
    let mut known = false;
    for found in NUMBER_AND_UNIT.captures_iter(s) {
        if found[1].parse::<i64>().is_err() {
            return false;
        }
        let unit = found[2].to_lowercase();
        known |= UNIT_WORDS.iter().any(|variants| {
            let last = variants.len() - 1;
            variants
                .iter()
                .enumerate()
                .any(|(i, v)| unit == *v || (i == last && unit.starts_with(v)))
        });
    }
    known
}

const NANOS_PER: &[(&str, u64)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),  // the micro sign
    ("\u{3bc}s", 1_000), // the Greek mu
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

const LIMIT: u64 = 1 << 63;

/// Go's `time.ParseDuration`: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+` with its units, `0`, and a total
/// that fits an `int64` of nanoseconds.
fn go_parse_duration(s: &str) -> bool {
    let (negative, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return true;
    }
    if rest.is_empty() {
        return false;
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let Some(part) = component(rest) else {
            return false;
        };
        rest = part.rest;
        let Some(&(_, unit)) = NANOS_PER.iter().find(|(name, _)| *name == part.unit) else {
            return false;
        };
        if part.whole > LIMIT / unit {
            return false;
        }
        let mut value = part.whole * unit;
        if part.fraction > 0 {
            // Go's float arithmetic, truncated, as it adds the fraction.
            value += (part.fraction as f64 * (unit as f64 / part.scale)) as u64;
            if value > LIMIT {
                return false;
            }
        }
        total += value;
        if total > LIMIT {
            return false;
        }
    }
    negative || total < LIMIT
}

/// One `number unit` of a Go duration.
struct Component<'a> {
    whole: u64,
    fraction: u64,
    scale: f64,
    unit: &'a str,
    rest: &'a str,
}

fn component(s: &str) -> Option<Component<'_>> {
    let bytes = s.as_bytes();
    if !(bytes[0] == b'.' || bytes[0].is_ascii_digit()) {
        return None;
    }
    let whole_digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    let mut whole: u64 = 0;
    for &b in &bytes[..whole_digits] {
        if whole > LIMIT / 10 {
            return None;
        }
        whole = whole * 10 + u64::from(b - b'0');
        if whole > LIMIT {
            return None;
        }
    }
    let mut at = whole_digits;
    let (mut fraction, mut scale, mut fraction_digits) = (0u64, 1f64, 0);
    if bytes.get(at) == Some(&b'.') {
        at += 1;
        let mut overflow = false;
        for &b in bytes[at..].iter().take_while(|b| b.is_ascii_digit()) {
            fraction_digits += 1;
            // Past 63 bits Go stops gathering precision but keeps consuming digits.
            if overflow || fraction > (LIMIT - 1) / 10 {
                overflow = true;
                continue;
            }
            let next = fraction * 10 + u64::from(b - b'0');
            if next > LIMIT {
                overflow = true;
                continue;
            }
            fraction = next;
            scale *= 10.0;
        }
        at += fraction_digits;
    }
    if whole_digits == 0 && fraction_digits == 0 {
        return None;
    }
    let unit_len = bytes[at..]
        .iter()
        .take_while(|b| !(**b == b'.' || b.is_ascii_digit()))
        .count();
    if unit_len == 0 {
        return None;
    }
    Some(Component {
        whole,
        fraction,
        scale,
        unit: &s[at..at + unit_len],
        rest: &s[at + unit_len..],
    })
}

#[cfg(test)]
mod tests {
    use super::is_duration;

    #[test]
    fn go_durations_and_lenient_unit_words_hold() {
        for good in [
            "0",
            "-0",
            "1h30m",
            "1.5s",
            "1.s",
            ".5ms",
            "3\u{3bc}s",
            "3\u{b5}s",
            "-9223372036854775808ns",
            "3 days",
            "every 5 minutes",
            "2 wk",
            "1h-2m",
            "1.5.5s",
        ] {
            assert!(is_duration(good), "{good}");
        }
        for bad in [
            "",
            "1",
            "5 months",
            "s",
            ".s",
            "1x",
            "9223372036854775808ns",
            "5s 99999999999999999999s",
            "+",
        ] {
            assert!(!is_duration(bad), "{bad}");
        }
    }
}
