//! Field errors modelled on k8s.io/apimachinery `util/validation/field`:
//! a path, an error type, the offending value and a detail, rendered exactly
//! as kube-apiserver renders them (`spec.x: Invalid value: 5: detail`).

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::StatusCause;
use serde_json::Value;

use super::Kind;

/// A path to a field, e.g. `spec.network.networkDevices[0].mtu`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Path(String);

impl Path {
    /// The empty (root) path.
    pub fn root() -> Path {
        Path(String::new())
    }

    /// A path of plain field names, e.g. `Path::new(&["spec", "network"])`.
    pub fn new(fields: &[&str]) -> Path {
        fields.iter().fold(Path::root(), |p, f| p.child(f))
    }

    /// A path as rendered (`spec.template.metadata`), for errors found by checks that build
    /// their paths themselves.
    pub fn rendered(text: &str) -> Path {
        Path(text.to_owned())
    }

    /// The path of a field below this one.
    #[must_use]
    pub fn child(&self, name: &str) -> Path {
        if self.0.is_empty() {
            Path(name.to_owned())
        } else {
            self.extended(&[".", name])
        }
    }

    /// The path of a list element below this one.
    #[must_use]
    pub fn index(&self, i: usize) -> Path {
        self.extended(&["[", &i.to_string(), "]"])
    }

    /// The path of a map entry below this one.
    #[must_use]
    pub fn key(&self, key: &str) -> Path {
        self.extended(&["[", key, "]"])
    }

    /// This path with `parts` appended, in one allocation (validation builds a path for
    /// every field it visits).
    fn extended(&self, parts: &[&str]) -> Path {
        let mut path =
            String::with_capacity(self.0.len() + parts.iter().map(|p| p.len()).sum::<usize>());
        path.push_str(&self.0);
        parts.iter().for_each(|part| path.push_str(part));
        Path(path)
    }

    /// The path as kube-apiserver prints it (`<nil>` for the root, as Go's
    /// `(*field.Path)(nil).String()` does).
    pub fn as_str(&self) -> &str {
        if self.0.is_empty() { "<nil>" } else { &self.0 }
    }

    /// Whether this is the root path.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The kind of a field error (`metav1.CauseType` values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorType {
    /// The value is required but missing.
    Required,
    /// The value is invalid.
    Invalid,
    /// The value has the wrong JSON type.
    TypeInvalid,
    /// The value is not one of the supported values.
    NotSupported,
    /// The value repeats another one where values must be unique.
    Duplicate,
    /// The field may not be set or changed.
    Forbidden,
    /// The value is too long.
    TooLong,
    /// The list has too many items.
    TooMany,
    /// The error is the server's fault.
    Internal,
}

impl ErrorType {
    /// The `reason` of a `StatusCause` (e.g. `FieldValueInvalid`).
    pub fn reason(self) -> &'static str {
        match self {
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::TypeInvalid => "FieldValueTypeInvalid",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
            ErrorType::Internal => "InternalError",
        }
    }

    /// The human-readable name used in messages (e.g. `Invalid value`).
    pub fn label(self) -> &'static str {
        match self {
            ErrorType::Required => "Required value",
            ErrorType::Invalid | ErrorType::TypeInvalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
            ErrorType::Internal => "Internal error",
        }
    }

    /// Whether kube-apiserver skips CEL rules when a schema error of this
    /// type is present (apiextensions `hasBlockingErr`).
    pub fn blocks_rules(self) -> bool {
        matches!(
            self,
            ErrorType::NotSupported
                | ErrorType::Required
                | ErrorType::TooLong
                | ErrorType::TooMany
                | ErrorType::TypeInvalid
        )
    }
}

/// The value shown in an error message.
#[derive(Clone, Debug, PartialEq)]
pub enum BadValue {
    /// The message names no value (`Required value`, `Forbidden`, objects
    /// failing a CEL rule, …).
    Omitted,
    /// The offending value.
    Value(Value),
}

/// One field error.
#[derive(Clone, Debug, PartialEq)]
pub struct Error {
    /// What is wrong.
    pub type_: ErrorType,
    /// Where.
    pub field: Path,
    /// The offending value.
    pub bad_value: BadValue,
    /// Why.
    pub detail: String,
}

impl Error {
    fn new(type_: ErrorType, field: Path, bad_value: BadValue, detail: String) -> Error {
        Error {
            type_,
            field,
            bad_value,
            detail,
        }
    }

    /// `Required value` (optionally with a detail).
    pub fn required(field: Path, detail: impl Into<String>) -> Error {
        Error::new(ErrorType::Required, field, BadValue::Omitted, detail.into())
    }

    /// `Invalid value: <value>: <detail>`.
    pub fn invalid(field: Path, value: impl Into<Value>, detail: impl Into<String>) -> Error {
        Error::new(
            ErrorType::Invalid,
            field,
            BadValue::Value(value.into()),
            detail.into(),
        )
    }

    /// `Invalid value: <detail>` without a value (objects and lists failing a
    /// rule).
    pub fn invalid_omitted(field: Path, detail: impl Into<String>) -> Error {
        Error::new(ErrorType::Invalid, field, BadValue::Omitted, detail.into())
    }

    /// `Invalid value: <value>: <detail>` for a value of the wrong JSON type.
    pub fn type_invalid(field: Path, value: impl Into<Value>, detail: impl Into<String>) -> Error {
        Error::new(
            ErrorType::TypeInvalid,
            field,
            BadValue::Value(value.into()),
            detail.into(),
        )
    }

    /// `Unsupported value: <value>: supported values: "a", "b"`.
    pub fn not_supported(field: Path, value: impl Into<Value>, supported: &[String]) -> Error {
        let detail = if supported.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Error::new(
            ErrorType::NotSupported,
            field,
            BadValue::Value(value.into()),
            detail,
        )
    }

    /// `Duplicate value: <value>`.
    pub fn duplicate(field: Path, value: impl Into<Value>) -> Error {
        Error::new(
            ErrorType::Duplicate,
            field,
            BadValue::Value(value.into()),
            String::new(),
        )
    }

    /// `Forbidden: <detail>`.
    pub fn forbidden(field: Path, detail: impl Into<String>) -> Error {
        Error::new(
            ErrorType::Forbidden,
            field,
            BadValue::Omitted,
            detail.into(),
        )
    }

    /// `Too long: may not be more than <max> bytes`.
    pub fn too_long(field: Path, max: usize) -> Error {
        let unit = if max == 1 { "byte" } else { "bytes" };
        Error::new(
            ErrorType::TooLong,
            field,
            BadValue::Omitted,
            format!("may not be more than {max} {unit}"),
        )
    }

    /// `Too many: <actual>: must have at most <max> items`.
    pub fn too_many(field: Path, actual: usize, max: usize) -> Error {
        let unit = if max == 1 { "item" } else { "items" };
        Error::new(
            ErrorType::TooMany,
            field,
            BadValue::Value(Value::from(actual)),
            format!("must have at most {max} {unit}"),
        )
    }

    /// `Internal error: <detail>`.
    pub fn internal(field: Path, detail: impl Into<String>) -> Error {
        Error::new(ErrorType::Internal, field, BadValue::Omitted, detail.into())
    }

    /// The message without the path (`ErrorBody` in Go).
    pub fn body(&self) -> String {
        let mut s = self.type_.label().to_owned();
        let shows_value = !matches!(
            self.type_,
            ErrorType::Required | ErrorType::Forbidden | ErrorType::TooLong | ErrorType::Internal
        );
        if let (true, BadValue::Value(value)) = (shows_value, &self.bad_value) {
            s.push_str(": ");
            s.push_str(&render_value(value));
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

impl std::error::Error for Error {}

/// A list of field errors, as returned by validation.
pub type ErrorList = Vec<Error>;

impl Error {
    /// The `StatusCause` of this error in a 422 `Status` (as
    /// `apierrors.NewInvalid` builds it).
    pub fn cause(&self) -> StatusCause {
        StatusCause {
            reason: Some(self.type_.reason().to_owned()),
            message: Some(self.body()),
            field: Some(self.field.as_str().to_owned()),
        }
    }
}

/// Go's aggregate error text: one error plainly, several in brackets,
/// repeated messages once.
pub fn aggregate(errors: &[Error]) -> String {
    let mut messages: Vec<String> = Vec::with_capacity(errors.len());
    for error in errors {
        let message = error.to_string();
        if !messages.contains(&message) {
            messages.push(message);
        }
    }
    match messages.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// The message of a 422 `Status` for an invalid object
/// (`ProxmoxMachine.infrastructure.cluster.x-k8s.io "m" is invalid: …`).
pub fn invalid_message(kind: Kind, name: &str, errors: &[Error]) -> String {
    format!(
        "{}.{} {} is invalid: {}",
        kind.as_str(),
        crate::api::GROUP,
        go_quote(name),
        aggregate(errors)
    )
}

/// Renders a bad value as Go's `field.Error` does for values decoded from
/// JSON: numbers and booleans plainly, strings quoted, everything else as
/// JSON.
fn render_value(value: &Value) -> String {
    match value {
        Value::String(s) => go_quote(s),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => go_float(f),
            _ => n.to_string(),
        },
        Value::Bool(b) => b.to_string(),
        // kube-apiserver ≥ 1.34 prints a nil bad value bare (1.33 and older quoted it).
        Value::Null => "null".to_owned(),
        other => other.to_string(),
    }
}

/// Go's `%q` / `strconv.Quote`: a double-quoted string with Go escapes.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => {
                let code = c as u32;
                if code <= 0xffff {
                    out.push_str(&format!("\\u{code:04x}"));
                } else {
                    out.push_str(&format!("\\U{code:08x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `%v` for a float64: the shortest digits, in exponent form when the
/// decimal exponent is below -4 or at least 6 (`9.99999999e+08`). Schema
/// bounds appear in messages this way because Go keeps them as float64.
pub fn go_float(f: f64) -> String {
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".into()
        } else if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // Rust's `{:e}` gives the shortest round-tripping digits, like Go.
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        format!("{f}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_read_like_kube_apiserver() {
        let path = Path::new(&["spec", "network", "networkDevices"])
            .index(0)
            .child("mtu");
        assert_eq!(
            Error::invalid(path.clone(), 100, "invalid MTU value").to_string(),
            "spec.network.networkDevices[0].mtu: Invalid value: 100: invalid MTU value"
        );
        assert_eq!(
            Error::required(Path::new(&["spec", "dnsServers"]), "").to_string(),
            "spec.dnsServers: Required value"
        );
        let supported = ["a".to_owned(), "b".to_owned()];
        assert_eq!(
            Error::not_supported(Path::new(&["spec", "x"]), "x", &supported).to_string(),
            r#"spec.x: Unsupported value: "x": supported values: "a", "b""#
        );
        assert_eq!(
            Error::duplicate(Path::new(&["spec"]).index(1), json!({"name": "net0"})).to_string(),
            r#"spec[1]: Duplicate value: {"name":"net0"}"#
        );
        assert_eq!(
            Error::too_long(Path::new(&["spec", "host"]), 512).to_string(),
            "spec.host: Too long: may not be more than 512 bytes"
        );
        assert_eq!(
            Error::too_many(Path::new(&["status", "conditions"]), 33, 32).to_string(),
            "status.conditions: Too many: 33: must have at most 32 items"
        );
        assert_eq!(
            Error::invalid(Path::root(), Value::Null, "x").to_string(),
            "<nil>: Invalid value: null: x"
        );
        assert_eq!(
            Error::forbidden(Path::new(&["spec"]), "immutable").to_string(),
            "spec: Forbidden: immutable"
        );
        assert_eq!(
            Error::invalid_omitted(Path::new(&["spec"]), "rule").to_string(),
            "spec: Invalid value: rule"
        );
    }

    #[test]
    fn invalid_objects_read_like_kube_apiserver() {
        let errors = [
            Error::required(Path::new(&["spec", "network"]), ""),
            Error::invalid_omitted(Path::new(&["spec"]), "x"),
            Error::invalid_omitted(Path::new(&["spec"]), "x"),
        ];
        assert_eq!(
            invalid_message(Kind::ProxmoxMachine, "m", &errors),
            r#"ProxmoxMachine.infrastructure.cluster.x-k8s.io "m" is invalid: [spec.network: Required value, spec: Invalid value: x]"#
        );
        assert_eq!(
            invalid_message(Kind::ProxmoxCluster, "c", &errors[..1]),
            r#"ProxmoxCluster.infrastructure.cluster.x-k8s.io "c" is invalid: spec.network: Required value"#
        );
        let cause = errors[0].cause();
        assert_eq!(cause.reason.as_deref(), Some("FieldValueRequired"));
        assert_eq!(cause.message.as_deref(), Some("Required value"));
        assert_eq!(cause.field.as_deref(), Some("spec.network"));
    }

    #[test]
    fn floats_print_like_go() {
        assert_eq!(go_float(4_294_967_295.0), "4.294967295e+09");
        assert_eq!(go_float(999_999_999.0), "9.99999999e+08");
        assert_eq!(go_float(4094.0), "4094");
        assert_eq!(go_float(123_456.0), "123456");
        assert_eq!(go_float(1_234_567.0), "1.234567e+06");
        assert_eq!(go_float(0.0001), "0.0001");
        assert_eq!(go_float(0.00001), "1e-05");
        assert_eq!(go_float(1.5), "1.5");
    }

    #[test]
    fn strings_quote_like_go() {
        assert_eq!(go_quote("a\"b\n\tü\u{1}"), r#""a\"b\n\tü\x01""#);
    }
}
