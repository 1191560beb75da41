//! Kubernetes' CEL format library: `format.dns1123Label()` and the other named formats,
//! `format.named(name)` (an optional format), and `<format>.validate(text)`, which is
//! `optional.none()` for a valid text and otherwise an optional list of kube's messages:
//! `!format.dns1123Label().validate(object.metadata.name).hasValue()`.

use std::sync::{Arc, LazyLock};

use cel::extractors::This;
use cel::objects::OptionalValue;
use cel::{Context, ExecutionError, Value};
use regex::Regex;

use crate::registry::validation as names;

/// A named format, an opaque value of its own type as in kube.
#[derive(Debug, PartialEq, Eq)]
struct Format(&'static str);

impl cel::objects::Opaque for Format {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.NamedFormat"
    }
}

/// Each format's name in the library and its validator: kube's messages for a bad text.
type Validator = fn(&str) -> Vec<String>;

const FORMATS: [(&str, Validator); 13] = [
    ("dns1123Label", |s| names::name_is_dns_label(s, false)),
    ("dns1123Subdomain", |s| {
        names::name_is_dns_subdomain(s, false)
    }),
    ("dns1035Label", |s| names::name_is_dns1035_label(s, false)),
    ("qualifiedName", names::is_qualified_name),
    ("dns1123LabelPrefix", |s| names::name_is_dns_label(s, true)),
    ("dns1123SubdomainPrefix", |s| {
        names::name_is_dns_subdomain(s, true)
    }),
    ("dns1035LabelPrefix", |s| {
        names::name_is_dns1035_label(s, true)
    }),
    ("labelValue", names::is_label_value),
    ("uri", uri),
    ("uuid", |s| {
        unless(UUID.is_match(s), "does not match the UUID format")
    }),
    ("byte", |s| unless(BASE64.is_match(s), "invalid base64")),
    ("date", |s| unless(is_date(s), "invalid date")),
    ("datetime", |s| unless(is_date_time(s), "invalid datetime")),
];

fn unless(valid: bool, message: &str) -> Vec<String> {
    if valid {
        Vec::new()
    } else {
        vec![message.to_owned()]
    }
}

static UUID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
        .expect("the UUID pattern is valid")
});

/// govalidator's `IsBase64`: standard alphabet, padded.
static BASE64: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$")
        .expect("the base64 pattern is valid")
});

/// The time of an RFC 3339 date-time, as kube-openapi's `strfmt` matches it.
static TIME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
        .expect("the time pattern is valid")
});

/// An RFC 3339 full date that exists (`2024-02-30` does not).
fn is_date(text: &str) -> bool {
    text.len() == 10 && jiff::civil::Date::strptime("%Y-%m-%d", text).is_ok()
}

/// `strfmt.IsDateTime`: a date, `t`, and a time whose hours, minutes and seconds are in range.
fn is_date_time(text: &str) -> bool {
    if text.len() < 4 {
        return false;
    }
    let lower = text.to_lowercase();
    let mut parts = lower.split('t');
    let (Some(date), Some(time)) = (parts.next(), parts.next()) else {
        return false;
    };
    if !is_date(date) {
        return false;
    }
    TIME.captures(time).is_some_and(|m| {
        let field = |i: usize| m.get(i).map_or("", |g| g.as_str());
        field(1) <= "23" && field(2) <= "59" && field(3) <= "59"
    })
}

/// Go's `url.ParseRequestURI`: an absolute URL, or an absolute path.
fn uri(text: &str) -> Vec<String> {
    let valid = if text.starts_with('/') {
        !text.contains(char::is_whitespace)
    } else {
        reqwest::Url::parse(text).is_ok()
    };
    unless(valid, &format!("parse {text:?}: invalid URI for request"))
}

fn format_value(name: &'static str) -> Value {
    Value::Opaque(Arc::new(Format(name)))
}

fn optional(value: Option<Value>) -> Value {
    Value::Opaque(Arc::new(match value {
        Some(value) => OptionalValue::of(value),
        None => OptionalValue::none(),
    }))
}

pub fn register(context: &mut Context) {
    let add = |result: Result<(), cel::DeclarationError>| {
        debug_assert!(result.is_ok(), "{result:?}");
    };
    for (name, _) in FORMATS {
        add(context.add_function(&format!("format.{name}"), move || format_value(name)));
    }
    add(
        context.add_function("format.named", |name: Arc<String>| -> Value {
            let found = FORMATS.iter().find(|(n, _)| *n == name.as_str());
            optional(found.map(|(n, _)| format_value(n)))
        }),
    );
    add(context.add_function(
        "validate",
        |This(format): This<Value>, text: Arc<String>| -> Result<Value, ExecutionError> {
            let name = match &format {
                Value::Opaque(opaque) => opaque.downcast_ref::<Format>().map(|f| f.0),
                _ => None,
            };
            let Some((_, validator)) = name.and_then(|n| FORMATS.iter().find(|(f, _)| *f == n))
            else {
                return Err(ExecutionError::function_error(
                    "validate",
                    "validate is called on a format",
                ));
            };
            let errors = validator(&text);
            Ok(optional((!errors.is_empty()).then(|| {
                Value::List(Arc::new(errors.into_iter().map(Value::from).collect()))
            })))
        },
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validators_read_as_kube_reads_them() {
        assert!(is_date("2024-02-29") && !is_date("2023-02-29") && !is_date("2024-2-1"));
        assert!(
            is_date_time("2024-02-29T12:30:00Z") && is_date_time("2024-02-29t12:30:00.5+02:00")
        );
        assert!(!is_date_time("2024-02-29T24:00:00Z") && !is_date_time("2024-02-29"));
        assert_eq!(uri("https://example.com/a"), Vec::<String>::new());
        assert_eq!(uri("/healthz"), Vec::<String>::new());
        assert_eq!(
            uri("example"),
            vec!["parse \"example\": invalid URI for request".to_owned()]
        );
        assert!(UUID.is_match("3C2A8D6B-0000-4000-8000-00000000000A"));
        assert!(BASE64.is_match("aGVsbG8=") && !BASE64.is_match("aGVsbG8"));
    }
}
