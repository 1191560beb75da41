//! Decoding a request body into a typed object of one version: unknown-field
//! handling by `fieldValidation`, schema defaulting, and type errors as field
//! errors with paths.

use std::str::FromStr;

use serde_json::Value;

use super::field::{Error, ErrorList, Path, aggregate};
use super::object::ApiObject;
use super::{Kind, Version, defaults, schema, validation};

/// What to do with fields the schema does not know (the `fieldValidation`
/// query parameter).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// Reject the request, naming every unknown field.
    Strict,
    /// Drop unknown fields and warn about each (the server default).
    #[default]
    Warn,
    /// Drop unknown fields silently.
    Ignore,
}

impl FromStr for FieldValidation {
    type Err = DecodeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "Strict" => Ok(FieldValidation::Strict),
            "Warn" | "" => Ok(FieldValidation::Warn),
            "Ignore" => Ok(FieldValidation::Ignore),
            other => Err(DecodeError::BadFieldValidation(other.to_owned())),
        }
    }
}

/// Why a body could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The `fieldValidation` parameter has an unknown value (HTTP 400).
    #[error(r#"fieldValidation must be one of "Ignore", "Warn", or "Strict", got {0:?}"#)]
    BadFieldValidation(String),
    /// The body is not a JSON object (HTTP 400).
    #[error("the object is not a JSON object")]
    NotAnObject,
    /// `apiVersion` or `kind` is missing (HTTP 400).
    #[error("Object '{0}' is missing in the body")]
    MissingTypeField(&'static str),
    /// The body is of another group/version than the request (HTTP 400).
    #[error(
        "the API version in the data ({found}) does not match the expected API version ({expected})"
    )]
    WrongApiVersion {
        /// The version of the request.
        expected: String,
        /// The body's `apiVersion`.
        found: String,
    },
    /// The body is of another kind than the request (HTTP 400).
    #[error("the kind in the data ({found}) does not match the expected kind ({expected})")]
    WrongKind {
        /// The kind of the request.
        expected: String,
        /// The body's `kind`.
        found: String,
    },
    /// Unknown fields under `fieldValidation=Strict` (HTTP 400).
    #[error("strict decoding error: {}", unknown_field_list(.0))]
    UnknownFields(Vec<String>),
    /// Fields of the wrong type or out of range (HTTP 422).
    #[error("{}", aggregate(.0))]
    Invalid(ErrorList),
}

fn unknown_field_list(paths: &[String]) -> String {
    paths
        .iter()
        .map(|p| unknown_field(p))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The warning or error text for one unknown field.
pub fn unknown_field(path: &str) -> String {
    format!("unknown field {}", crate::api::field::go_quote(path))
}

/// A decoded object, the JSON it was decoded from (pruned and defaulted:
/// what the schema validation of the request version runs on), and the
/// warnings for the client.
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded<T> {
    /// The typed object.
    pub object: T,
    /// The pruned and defaulted JSON of the object, in the request version.
    pub value: Value,
    /// Warnings (unknown fields under `fieldValidation=Warn`).
    pub warnings: Vec<String>,
}

/// The body is an object whose `apiVersion` and `kind` are the request's (kube's decoder
/// messages, 400).
pub fn check_type_fields(value: &Value, api_version: &str, kind: &str) -> Result<(), DecodeError> {
    let Value::Object(map) = value else {
        return Err(DecodeError::NotAnObject);
    };
    let field = |name: &'static str| match map.get(name) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        _ => Err(DecodeError::MissingTypeField(name)),
    };
    let found = field("apiVersion")?;
    if found != api_version {
        return Err(DecodeError::WrongApiVersion {
            expected: api_version.to_owned(),
            found,
        });
    }
    let found = field("kind")?;
    if found != kind {
        return Err(DecodeError::WrongKind {
            expected: kind.to_owned(),
            found,
        });
    }
    Ok(())
}

/// Checks the type fields, prunes unknown fields (per `mode`) and applies
/// the schema defaults of `kind` in `version`. Returns the JSON and the
/// warnings.
pub fn prepare(
    version: Version,
    kind: Kind,
    mut value: Value,
    mode: FieldValidation,
) -> Result<(Value, Vec<String>), DecodeError> {
    let warnings = check_and_prune(version, kind, &mut value, mode)?;
    defaults::apply(version, kind, &mut value);
    Ok((value, warnings))
}

/// Checks the type fields and prunes unknown fields (per `mode`); the warnings.
fn check_and_prune(
    version: Version,
    kind: Kind,
    value: &mut Value,
    mode: FieldValidation,
) -> Result<Vec<String>, DecodeError> {
    check_type_fields(value, version.api_version(), kind.as_str())?;
    let unknown = schema::prune::prune_object(value, schema::structural(version, kind));
    match mode {
        FieldValidation::Strict if !unknown.is_empty() => Err(DecodeError::UnknownFields(unknown)),
        FieldValidation::Warn => Ok(unknown.iter().map(|p| unknown_field(p)).collect()),
        FieldValidation::Strict | FieldValidation::Ignore => Ok(Vec::new()),
    }
}

/// Decodes a body into `T`: [`prepare`], then typed deserialization. Values
/// of the wrong type are reported as the schema validation reports them;
/// anything else the typed form cannot hold (an integer out of range of its
/// field) as an `Invalid` error at its path.
pub fn decode<T: ApiObject>(
    value: Value,
    mode: FieldValidation,
) -> Result<Decoded<T>, DecodeError> {
    let (value, warnings) = prepare(T::VERSION, T::KIND, value, mode)?;
    typed(value, warnings)
}

/// Decodes an object as written, without the schema defaults: [`decode`] for a manifest
/// that is converted, not stored (`capmox-apiserver convert`), so that the output says
/// what the input said and nothing the server would add.
pub fn decode_as_written<T: ApiObject>(
    mut value: Value,
    mode: FieldValidation,
) -> Result<Decoded<T>, DecodeError> {
    let warnings = check_and_prune(T::VERSION, T::KIND, &mut value, mode)?;
    typed(value, warnings)
}

/// The typed form of checked JSON, or why it has none.
fn typed<T: ApiObject>(value: Value, warnings: Vec<String>) -> Result<Decoded<T>, DecodeError> {
    match T::deserialize(&value) {
        Ok(object) => Ok(Decoded {
            object,
            value,
            warnings,
        }),
        Err(plain) => {
            // The schema names wrong types the way kube-apiserver does; the
            // typed error stands alone only where the schema has nothing to
            // say (an integer out of its field's range).
            let errors = validation::validate_schema(T::VERSION, T::KIND, &value, None).errors;
            if errors.is_empty() {
                Err(DecodeError::Invalid(vec![typed_error::<T>(&value, plain)]))
            } else {
                Err(DecodeError::Invalid(errors))
            }
        }
    }
}

/// Why `value` does not deserialize into `T` (`plain` says why, without a path), as a field
/// error at the path where it happened. Decoding again with the path tracked (an allocation
/// per field) is left to this failure, so that successful decodes do not pay for it.
fn typed_error<T: ApiObject>(value: &Value, plain: serde_json::Error) -> Error {
    use serde_path_to_error::Segment;
    let error = match serde_path_to_error::deserialize::<_, T>(value) {
        Err(error) => error,
        Ok(_) => return Error::invalid(Path::root(), "", plain.to_string()),
    };
    let mut path = Path::root();
    let mut at = Some(value);
    for segment in error.path().iter() {
        match segment {
            Segment::Seq { index } => {
                path = path.index(*index);
                at = at.and_then(|v| v.get(*index));
            }
            Segment::Map { key } => {
                path = path.child(key);
                at = at.and_then(|v| v.get(key));
            }
            Segment::Enum { variant } => path = path.child(variant),
            Segment::Unknown => {}
        }
    }
    let detail = error.inner().to_string();
    // Fields flattened into their parent (Go's inlined structs) hide the last
    // steps of the path; find the offending number below the reported spot.
    if let (Some(bad), Some(number)) = (at, offending_integer(&detail))
        && let Some((rest, found)) = find_number(bad, number)
    {
        let path = rest.into_iter().fold(path, |p, step| match step {
            Step::Key(k) => p.child(&k),
            Step::Index(i) => p.index(i),
        });
        return Error::invalid(path, found.clone(), detail);
    }
    match at {
        Some(bad) => Error::invalid(path, bad.clone(), detail),
        None => Error::invalid(path, "", detail),
    }
}

/// The integer a serde range error names (``invalid value: integer `-1`, …``).
fn offending_integer(detail: &str) -> Option<i128> {
    let rest = detail.split_once("integer `")?.1;
    rest.split_once('`')?.0.parse().ok()
}

enum Step {
    Key(String),
    Index(usize),
}

/// The first number equal to `n` below `value` (in key order) and the steps
/// leading to it.
fn find_number(value: &Value, n: i128) -> Option<(Vec<Step>, &Value)> {
    match value {
        Value::Number(x) => {
            let x = x.as_i64().map(i128::from).or(x.as_u64().map(i128::from));
            (x == Some(n)).then(|| (Vec::new(), value))
        }
        Value::Object(map) => map.iter().find_map(|(k, v)| {
            find_number(v, n).map(|(mut steps, found)| {
                steps.insert(0, Step::Key(k.clone()));
                (steps, found)
            })
        }),
        Value::Array(items) => items.iter().enumerate().find_map(|(i, v)| {
            find_number(v, n).map(|(mut steps, found)| {
                steps.insert(0, Step::Index(i));
                (steps, found)
            })
        }),
        _ => None,
    }
}
