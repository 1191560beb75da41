//! String validators with kube's messages (apimachinery `validate/content` and
//! `api/validation`). Each returns the list of problems; empty means valid.

use std::sync::LazyLock;

use regex::Regex;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric \
     characters or '-', and must start and end with an alphanumeric character";
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;

const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
     alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;

const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_ERR: &str = "a DNS-1035 label must consist of lower case alphanumeric \
     characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const DNS1035_LABEL_MAX_LENGTH: usize = 63;

const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must \
     start and end with an alphanumeric character";
const LABEL_KEY_MAX_LENGTH: usize = 63;

const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric \
     characters, '-', '_' or '.', and must start and end with an alphanumeric character";
pub const LABEL_VALUE_MAX_LENGTH: usize = 63;

fn anchored(fmt: &str) -> Regex {
    // The patterns are constants of this module; a failure here is a programming error caught
    // by the unit tests, never input-dependent.
    Regex::new(&format!("^{fmt}$")).unwrap_or_else(|e| panic!("invalid built-in regex {fmt}: {e}"))
}

static DNS1123_LABEL: LazyLock<Regex> = LazyLock::new(|| anchored(DNS1123_LABEL_FMT));
static DNS1123_SUBDOMAIN: LazyLock<Regex> = LazyLock::new(|| anchored(DNS1123_SUBDOMAIN_FMT));
static DNS1035_LABEL: LazyLock<Regex> = LazyLock::new(|| anchored(DNS1035_LABEL_FMT));
static LABEL_KEY: LazyLock<Regex> = LazyLock::new(|| anchored(LABEL_KEY_FMT));
static LABEL_VALUE: LazyLock<Regex> = LazyLock::new(|| anchored(LABEL_VALUE_FMT));

/// `content.MaxLenError`.
pub fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} bytes")
}

/// `content.RegexError`: the message, examples and the regex used.
pub fn regex_error(msg: &str, re: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{re}')");
    }
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{msg} (e.g. {}regex used for validation is '{re}')",
        examples.join(" or ")
    )
}

/// `IsDNS1123Label`.
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !DNS1123_LABEL.is_match(value) {
        if DNS1123_SUBDOMAIN.is_match(value) {
            errs.push("must not contain dots".to_owned());
        } else {
            errs.push(regex_error(
                DNS1123_LABEL_ERR,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// A length limit and a pattern, each violation with kube's message.
fn bounded_pattern(
    value: &str,
    max: usize,
    pattern: &Regex,
    message: &str,
    fmt: &str,
    examples: &[&str],
) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > max {
        errs.push(max_len_error(max));
    }
    if !pattern.is_match(value) {
        errs.push(regex_error(message, fmt, examples));
    }
    errs
}

/// `IsDNS1035Label`.
pub fn is_dns1035_label(value: &str) -> Vec<String> {
    bounded_pattern(
        value,
        DNS1035_LABEL_MAX_LENGTH,
        &DNS1035_LABEL,
        DNS1035_LABEL_ERR,
        DNS1035_LABEL_FMT,
        &["my-name", "abc-123"],
    )
}

/// `IsDNS1123Subdomain`.
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    bounded_pattern(
        value,
        DNS1123_SUBDOMAIN_MAX_LENGTH,
        &DNS1123_SUBDOMAIN,
        DNS1123_SUBDOMAIN_ERR,
        DNS1123_SUBDOMAIN_FMT,
        &["example.com"],
    )
}

/// `IsLabelKey` / `IsQualifiedName`: `[prefix/]name`.
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_owned());
            } else {
                errs.extend(
                    is_dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. \
                 'example.com/MyName')",
                regex_error(
                    LABEL_KEY_ERR,
                    LABEL_KEY_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_owned());
    } else if name.len() > LABEL_KEY_MAX_LENGTH {
        errs.push(format!("name part {}", max_len_error(LABEL_KEY_MAX_LENGTH)));
    }
    if !LABEL_KEY.is_match(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                LABEL_KEY_ERR,
                LABEL_KEY_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// `IsLabelValue`.
pub fn is_label_value(value: &str) -> Vec<String> {
    bounded_pattern(
        value,
        LABEL_VALUE_MAX_LENGTH,
        &LABEL_VALUE,
        LABEL_VALUE_ERR,
        LABEL_VALUE_FMT,
        &["MyValue", "my_value", "12345"],
    )
}

/// `IsPathSegmentName`: a name usable as one URL path segment.
pub fn is_path_segment_name(name: &str) -> Vec<String> {
    if name == "." || name == ".." {
        return vec![format!("may not be '{name}'")];
    }
    ["/", "%"]
        .iter()
        .filter(|bad| name.contains(**bad))
        .map(|bad| format!("may not contain '{bad}'"))
        .collect()
}

/// `ValidatePathSegmentName`: a name, or with `prefix` a `generateName`, usable in a URL path
/// (a prefix may be `.`).
pub fn name_is_path_segment(name: &str, prefix: bool) -> Vec<String> {
    if prefix && (name == "." || name == "..") {
        return Vec::new();
    }
    is_path_segment_name(name)
}

/// A `generateName` prefix is valid when the prefix plus any suffix could be valid; kube
/// checks this by replacing a trailing dash with a letter. (Upstream's `maskTrailingDash`
/// also drops the character before the dash; we replace only the dash itself.)
fn mask_trailing_dash(name: &str) -> String {
    match name.strip_suffix('-') {
        Some(stem) if name.len() > 1 => format!("{stem}a"),
        _ => name.to_owned(),
    }
}

/// `NameIsDNSSubdomain`: the name rule of custom resources (and of most kinds).
pub fn name_is_dns_subdomain(name: &str, prefix: bool) -> Vec<String> {
    if prefix {
        is_dns1123_subdomain(&mask_trailing_dash(name))
    } else {
        is_dns1123_subdomain(name)
    }
}

/// `NameIsDNS1035Label`.
pub fn name_is_dns1035_label(name: &str, prefix: bool) -> Vec<String> {
    if prefix {
        is_dns1035_label(&mask_trailing_dash(name))
    } else {
        is_dns1035_label(name)
    }
}

/// `NameIsDNSLabel`, which is also `ValidateNamespaceName`.
pub fn name_is_dns_label(name: &str, prefix: bool) -> Vec<String> {
    if prefix {
        is_dns1123_label(&mask_trailing_dash(name))
    } else {
        is_dns1123_label(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
        alphanumeric characters, '-' or '.', and must start and end with an alphanumeric \
        character (e.g. 'example.com', regex used for validation is \
        '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

    #[test]
    fn subdomain_names() {
        assert!(name_is_dns_subdomain("m1", false).is_empty());
        assert!(name_is_dns_subdomain("a.b-c.d", false).is_empty());
        assert_eq!(
            name_is_dns_subdomain("Foo", false),
            vec![SUBDOMAIN_MSG.to_owned()]
        );
        assert_eq!(
            name_is_dns_subdomain("a_b", false),
            vec![SUBDOMAIN_MSG.to_owned()]
        );
        let long = "a".repeat(254);
        assert_eq!(
            name_is_dns_subdomain(&long, false),
            vec!["must be no more than 253 bytes".to_owned()]
        );
        // generateName prefixes may end in a dash, but not start with one.
        assert!(name_is_dns_subdomain("web-", true).is_empty());
        assert!(name_is_dns_subdomain("a-", true).is_empty());
        assert_eq!(
            name_is_dns_subdomain("-web", true),
            vec![SUBDOMAIN_MSG.to_owned()]
        );
        assert_eq!(
            name_is_dns_subdomain("web-", false),
            vec![SUBDOMAIN_MSG.to_owned()]
        );
    }

    #[test]
    fn labels_of_namespaces() {
        assert!(name_is_dns_label("default", false).is_empty());
        assert_eq!(
            name_is_dns_label("a.b", false),
            vec!["must not contain dots".to_owned()]
        );
        assert_eq!(
            name_is_dns_label("A", false),
            vec![
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters \
                 or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  \
                 or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
                    .to_owned()
            ]
        );
    }

    // Expected texts copied from apimachinery's own tests (note Go's double space before "or").
    const NAME_PART_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or \
        '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or \
        'my.name',  or '123-abc', regex used for validation is \
        '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

    #[test]
    fn qualified_names() {
        assert!(is_qualified_name("app").is_empty());
        assert!(is_qualified_name("cluster.x-k8s.io/cluster-name").is_empty());
        assert_eq!(
            is_qualified_name("/a"),
            vec!["prefix part must be non-empty"]
        );
        assert_eq!(
            is_qualified_name("a/"),
            vec![
                "name part must be non-empty".to_owned(),
                NAME_PART_MSG.to_owned()
            ]
        );
        assert_eq!(
            is_qualified_name("example/foo/bar"),
            vec![
                "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and \
                 must start and end with an alphanumeric character (e.g. 'MyName',  or \
                 'my.name',  or '123-abc', regex used for validation is \
                 '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain \
                 prefix and '/' (e.g. 'example.com/MyName')"
                    .to_owned()
            ]
        );
        assert_eq!(
            is_qualified_name(&"a".repeat(64)),
            vec!["name part must be no more than 63 bytes"]
        );
        assert_eq!(
            is_qualified_name("Bad_/x"),
            vec![format!("prefix part {SUBDOMAIN_MSG}")]
        );
    }

    #[test]
    fn label_values() {
        assert!(is_label_value("").is_empty());
        assert!(is_label_value("v1.2_3-x").is_empty());
        assert_eq!(is_label_value("-x").len(), 1);
        assert_eq!(
            is_label_value(&"a".repeat(64)),
            vec!["must be no more than 63 bytes"]
        );
    }

    #[test]
    fn path_segments() {
        assert!(is_path_segment_name("ok").is_empty());
        assert_eq!(is_path_segment_name(".."), vec!["may not be '..'"]);
        assert_eq!(
            is_path_segment_name("a/%"),
            vec!["may not contain '/'", "may not contain '%'"]
        );
    }
}
