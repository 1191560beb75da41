//! Field-level validation errors, the Rust twin of apimachinery's `field.Error`.
//!
//! `Display` renders `<path>: <body>` exactly like Go's `(*field.Error).Error()`, and
//! [`FieldError::body`] renders `ErrorBody()`, which is what a `Status` cause carries as its
//! message. Aggregation (`ToAggregate`) lives in [`aggregate_message`].

use std::fmt;

use serde_json::Value;

use super::gofmt;

/// The kind of a field error; the variant set mirrors `field.ErrorType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldErrorType {
    Required,
    Invalid,
    Duplicate,
    NotSupported,
    Forbidden,
    TooLong,
    TooMany,
    TypeInvalid,
    /// The server's own fault (`field.InternalError`).
    Internal,
}

impl FieldErrorType {
    /// The `StatusCause.reason` (Go `CauseType`) for this error type.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Required => "FieldValueRequired",
            Self::Invalid => "FieldValueInvalid",
            Self::Duplicate => "FieldValueDuplicate",
            Self::NotSupported => "FieldValueNotSupported",
            Self::Forbidden => "FieldValueForbidden",
            Self::TooLong => "FieldValueTooLong",
            Self::TooMany => "FieldValueTooMany",
            Self::TypeInvalid => "FieldValueTypeInvalid",
            Self::Internal => "InternalError",
        }
    }

    /// The human label Go prints (`ErrorType.String()`).
    pub fn label(self) -> &'static str {
        match self {
            Self::Required => "Required value",
            Self::Invalid | Self::TypeInvalid => "Invalid value",
            Self::Duplicate => "Duplicate value",
            Self::NotSupported => "Unsupported value",
            Self::Forbidden => "Forbidden",
            Self::TooLong => "Too long",
            Self::TooMany => "Too many",
            Self::Internal => "Internal error",
        }
    }
}

/// The offending value, kept typed because Go formats each type differently.
#[derive(Debug, Clone, PartialEq)]
pub enum BadValue {
    /// Not printed at all (Required, Forbidden, TooLong).
    Omitted,
    /// Printed quoted (`%q`).
    Str(String),
    /// Printed as is (`%v`).
    Int(i64),
    Float(f64),
    Bool(bool),
    /// Anything else is printed as compact JSON.
    Json(Value),
}

impl BadValue {
    /// Classifies a JSON value the way Go would see it after decoding into a typed field.
    pub fn from_json(value: &Value) -> Self {
        match value {
            Value::String(s) => Self::Str(s.clone()),
            Value::Bool(b) => Self::Bool(*b),
            Value::Number(n) => match (n.as_i64(), n.as_f64()) {
                (Some(i), _) => Self::Int(i),
                (None, Some(f)) => Self::Float(f),
                (None, None) => Self::Json(value.clone()),
            },
            other => Self::Json(other.clone()),
        }
    }

    fn render(&self) -> Option<String> {
        match self {
            Self::Omitted => None,
            Self::Str(s) => Some(gofmt::quote(s)),
            Self::Int(i) => Some(i.to_string()),
            Self::Float(f) => Some(gofmt::format_float(*f)),
            Self::Bool(b) => Some(b.to_string()),
            Self::Json(v) => Some(gofmt::go_json_escape(&v.to_string())),
        }
    }
}

impl From<&str> for BadValue {
    fn from(s: &str) -> Self {
        Self::Str(s.to_owned())
    }
}

impl From<String> for BadValue {
    fn from(s: String) -> Self {
        Self::Str(s)
    }
}

impl From<i64> for BadValue {
    fn from(i: i64) -> Self {
        Self::Int(i)
    }
}

impl From<bool> for BadValue {
    fn from(b: bool) -> Self {
        Self::Bool(b)
    }
}

impl From<Value> for BadValue {
    fn from(v: Value) -> Self {
        Self::from_json(&v)
    }
}

/// A path to a field, rendered like `field.Path`: `metadata.labels`, `spec.devices[0]`,
/// `metadata.annotations[example.com/key]`. The empty (nil) path renders as `<nil>`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct FieldPath(String);

impl FieldPath {
    /// A path starting at `name`.
    pub fn new(name: &str) -> Self {
        Self(name.to_owned())
    }

    /// The nil path (Go `nil *field.Path`), used where kube validates without a location.
    pub fn nil() -> Self {
        Self(String::new())
    }

    /// Appends `.name` (or `name` on the nil path, like Go's `Child` on a nil parent).
    pub fn child(&self, name: &str) -> Self {
        if self.0.is_empty() {
            Self(name.to_owned())
        } else {
            Self(format!("{}.{name}", self.0))
        }
    }

    /// Appends `[index]`.
    pub fn index(&self, index: usize) -> Self {
        Self(format!("{}[{index}]", self.0))
    }

    /// Appends `[key]` (map keys are not quoted, as in Go).
    pub fn key(&self, key: &str) -> Self {
        Self(format!("{}[{key}]", self.0))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("<nil>")
        } else {
            f.write_str(&self.0)
        }
    }
}

/// One validation error at a field. Named `FieldError` in the registry layer; the API types
/// carry an equivalent type and convert with the same four parts.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// Rendered path, e.g. `metadata.name` (`<nil>` for the nil path).
    pub path: String,
    pub kind: FieldErrorType,
    pub value: BadValue,
    /// The explanation after the value (Go `Detail`), may be empty.
    pub detail: String,
}

impl FieldError {
    fn new(path: &FieldPath, kind: FieldErrorType, value: BadValue, detail: String) -> Self {
        Self {
            path: path.to_string(),
            kind,
            value,
            detail,
        }
    }

    pub fn required(path: &FieldPath, detail: impl Into<String>) -> Self {
        Self::new(
            path,
            FieldErrorType::Required,
            BadValue::Omitted,
            detail.into(),
        )
    }

    pub fn invalid(
        path: &FieldPath,
        value: impl Into<BadValue>,
        detail: impl Into<String>,
    ) -> Self {
        Self::new(path, FieldErrorType::Invalid, value.into(), detail.into())
    }

    pub fn type_invalid(
        path: &FieldPath,
        value: impl Into<BadValue>,
        detail: impl Into<String>,
    ) -> Self {
        Self::new(
            path,
            FieldErrorType::TypeInvalid,
            value.into(),
            detail.into(),
        )
    }

    pub fn duplicate(path: &FieldPath, value: impl Into<BadValue>) -> Self {
        Self::new(path, FieldErrorType::Duplicate, value.into(), String::new())
    }

    /// `supported values: "a", "b"` like `field.NotSupported`.
    pub fn not_supported(path: &FieldPath, value: impl Into<BadValue>, valid: &[&str]) -> Self {
        let detail = if valid.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = valid.iter().map(|v| gofmt::quote(v)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(path, FieldErrorType::NotSupported, value.into(), detail)
    }

    pub fn forbidden(path: &FieldPath, detail: impl Into<String>) -> Self {
        Self::new(
            path,
            FieldErrorType::Forbidden,
            BadValue::Omitted,
            detail.into(),
        )
    }

    /// `may not be more than N bytes` like `field.TooLong`.
    pub fn too_long(path: &FieldPath, max_bytes: usize) -> Self {
        let unit = if max_bytes == 1 { "byte" } else { "bytes" };
        Self::new(
            path,
            FieldErrorType::TooLong,
            BadValue::Omitted,
            format!("may not be more than {max_bytes} {unit}"),
        )
    }

    /// `must have at most N items` like `field.TooMany`.
    pub fn too_many(path: &FieldPath, actual: usize, max: usize) -> Self {
        let unit = if max == 1 { "item" } else { "items" };
        Self::new(
            path,
            FieldErrorType::TooMany,
            BadValue::Int(i64::try_from(actual).unwrap_or(i64::MAX)),
            format!("must have at most {max} {unit}"),
        )
    }

    /// Go's `ErrorBody()`: the message without the path, as used in `StatusCause.message`.
    pub fn body(&self) -> String {
        let mut s = self.kind.label().to_owned();
        if let Some(value) = self.value.render() {
            s.push_str(": ");
            s.push_str(&value);
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

/// The API layer's field errors (schema, CEL and webhook validation) as registry errors, so
/// both kinds of errors end up in one `Invalid` Status.
impl From<&crate::api::field::Error> for FieldError {
    fn from(e: &crate::api::field::Error) -> Self {
        use crate::api::field::{BadValue as ApiValue, ErrorType};
        let kind = match e.type_ {
            ErrorType::Required => FieldErrorType::Required,
            ErrorType::Invalid => FieldErrorType::Invalid,
            ErrorType::TypeInvalid => FieldErrorType::TypeInvalid,
            ErrorType::NotSupported => FieldErrorType::NotSupported,
            ErrorType::Duplicate => FieldErrorType::Duplicate,
            ErrorType::Forbidden => FieldErrorType::Forbidden,
            ErrorType::TooLong => FieldErrorType::TooLong,
            ErrorType::TooMany => FieldErrorType::TooMany,
            ErrorType::Internal => FieldErrorType::Internal,
        };
        // Required, Forbidden, TooLong and Internal never show a value.
        let shows_value = !matches!(
            kind,
            FieldErrorType::Required
                | FieldErrorType::Forbidden
                | FieldErrorType::TooLong
                | FieldErrorType::Internal
        );
        let value = match &e.bad_value {
            ApiValue::Value(_) if !shows_value => BadValue::Omitted,
            ApiValue::Omitted => BadValue::Omitted,
            // A JSON null prints bare, as kube-apiserver ≥ 1.34 prints a nil bad value.
            ApiValue::Value(v) => BadValue::from_json(v),
        };
        Self {
            path: e.field.as_str().to_owned(),
            kind,
            value,
            detail: e.detail.clone(),
        }
    }
}

/// Registry errors (the `metadata` checks) as API errors, for those found inside an object's
/// body, which join the schema's errors.
impl From<&FieldError> for crate::api::field::Error {
    fn from(e: &FieldError) -> Self {
        use crate::api::field::{BadValue as ApiValue, Error, ErrorType, Path};
        let type_ = match e.kind {
            FieldErrorType::Required => ErrorType::Required,
            FieldErrorType::Invalid => ErrorType::Invalid,
            FieldErrorType::TypeInvalid => ErrorType::TypeInvalid,
            FieldErrorType::NotSupported => ErrorType::NotSupported,
            FieldErrorType::Duplicate => ErrorType::Duplicate,
            FieldErrorType::Forbidden => ErrorType::Forbidden,
            FieldErrorType::TooLong => ErrorType::TooLong,
            FieldErrorType::TooMany => ErrorType::TooMany,
            FieldErrorType::Internal => ErrorType::Internal,
        };
        let bad_value = match &e.value {
            BadValue::Omitted => ApiValue::Omitted,
            BadValue::Str(s) => ApiValue::Value(Value::from(s.as_str())),
            BadValue::Int(i) => ApiValue::Value(Value::from(*i)),
            BadValue::Float(f) => ApiValue::Value(Value::from(*f)),
            BadValue::Bool(b) => ApiValue::Value(Value::from(*b)),
            BadValue::Json(v) => ApiValue::Value(v.clone()),
        };
        Error {
            type_,
            field: Path::rendered(&e.path),
            bad_value,
            detail: e.detail.clone(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.body())
    }
}

impl std::error::Error for FieldError {}

/// Go's `ErrorList.ToAggregate().Error()`: de-duplicated messages, one plain, several as
/// `[a, b]`. `None` for an empty list.
pub fn aggregate_message(errors: &[FieldError]) -> Option<String> {
    let mut seen: Vec<String> = Vec::new();
    for message in errors.iter().map(ToString::to_string) {
        if !seen.contains(&message) {
            seen.push(message);
        }
    }
    match seen.len() {
        0 => None,
        1 => seen.pop(),
        _ => Some(format!("[{}]", seen.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bodies_match_kube() {
        let path = FieldPath::new("metadata").child("name");
        let cases = [
            (
                FieldError::required(&path, "name or generateName is required"),
                "metadata.name: Required value: name or generateName is required",
            ),
            (
                FieldError::invalid(&path, "Foo", "must be lower case"),
                r#"metadata.name: Invalid value: "Foo": must be lower case"#,
            ),
            (
                FieldError::invalid(&FieldPath::new("spec").child("n"), 0i64, "too small"),
                "spec.n: Invalid value: 0: too small",
            ),
            (
                FieldError::invalid(&path, json!(["a", "b"]), "bad"),
                r#"metadata.name: Invalid value: ["a","b"]: bad"#,
            ),
            (
                FieldError::not_supported(&FieldPath::new("dryRun"), json!(["x"]), &["All"]),
                r#"dryRun: Unsupported value: ["x"]: supported values: "All""#,
            ),
            (
                FieldError::forbidden(
                    &FieldPath::new("force"),
                    "may not be specified for non-apply patch",
                ),
                "force: Forbidden: may not be specified for non-apply patch",
            ),
            (
                FieldError::too_long(&FieldPath::new("metadata").child("annotations"), 262144),
                "metadata.annotations: Too long: may not be more than 262144 bytes",
            ),
            (
                FieldError::too_many(&FieldPath::new("spec").child("items"), 5, 1),
                "spec.items: Too many: 5: must have at most 1 item",
            ),
            (
                FieldError::duplicate(&FieldPath::new("spec").child("x").index(2), "a"),
                r#"spec.x[2]: Duplicate value: "a""#,
            ),
            (
                FieldError::invalid(&FieldPath::nil(), "a b", "bad key"),
                r#"<nil>: Invalid value: "a b": bad key"#,
            ),
        ];
        for (err, want) in cases {
            assert_eq!(err.to_string(), want);
        }
    }

    #[test]
    fn paths_render_like_go() {
        let p = FieldPath::new("metadata")
            .child("annotations")
            .key("example.com/a");
        assert_eq!(p.to_string(), "metadata.annotations[example.com/a]");
        assert_eq!(
            FieldPath::nil().child("values").index(0).to_string(),
            "values[0]"
        );
        assert_eq!(FieldPath::nil().to_string(), "<nil>");
    }

    #[test]
    fn aggregate_dedupes_and_brackets() {
        let a = FieldError::required(&FieldPath::new("a"), "");
        let b = FieldError::required(&FieldPath::new("b"), "");
        assert_eq!(aggregate_message(&[]), None);
        assert_eq!(
            aggregate_message(std::slice::from_ref(&a)).as_deref(),
            Some("a: Required value")
        );
        assert_eq!(
            aggregate_message(&[a.clone(), b, a]).as_deref(),
            Some("[a: Required value, b: Required value]")
        );
    }
}
