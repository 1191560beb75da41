//! The OpenAPI value validations of a structural schema (type, required,
//! bounds, lengths, patterns, enums, item and property counts, formats), with
//! the paths and messages kube-apiserver produces for custom resources
//! (kube-openapi `validate` errors mapped by apiextensions
//! `kubeOpenAPIResultToFieldErrors`).

use serde_json::{Map, Value};

use super::ratchet::Correlation;
use super::{combinators, formats};
use crate::api::field::{Error, ErrorList, Path, go_float, go_quote};
use crate::api::schema::{JsonType, Structural};

/// Validates `value` against `schema`, appending errors for `path`. What is
/// found at or below a value unchanged from the stored object (`at`) is
/// dropped: ratcheting (see [`super::ratchet`]).
pub fn validate<'a>(
    value: &'a Value,
    schema: &'a Structural,
    at: Correlation<'a>,
    path: &Path,
    errors: &mut ErrorList,
) -> usize {
    let before = errors.len();
    let count = validate_node(value, schema, at, path, errors);
    if errors.len() > before && at.unchanged() {
        errors.truncate(before);
    }
    count
}

/// Validates one value against one schema node, appending its errors, and returns
/// kube-openapi's match count for it: how many validators applied, with what the value's
/// children and chosen branches counted. `anyOf` and `oneOf` report the failing branch that
/// counted most, so the count is kept exactly as kube-openapi keeps it.
pub(super) fn validate_node<'a>(
    value: &'a Value,
    schema: &'a Structural,
    at: Correlation<'a>,
    path: &Path,
    errors: &mut ErrorList,
) -> usize {
    // kube-openapi runs every validator that applies to the value's JSON kind after the type
    // check, failed or not; of those a wrong type can meet, the combinators and `enum` say more.
    let type_error = type_error(value, schema, path);
    let typed = type_error.is_none();
    errors.extend(type_error);
    if value.is_null() {
        // Only the type and enum checks run on null, and count without a step of their own.
        validate_enum(value, schema, path, errors);
        return usize::from(typed);
    }
    let mut count = if applies_type_check(schema) {
        usize::from(typed) + 1
    } else {
        0
    };
    // The combinators' validator counts itself once inside and once as a validator.
    count += combinators::validate(value, schema, at, path, errors) + 2;
    count += match value {
        Value::Array(items) => {
            let below = if typed {
                validate_array(items, schema, at, path, errors)
            } else {
                0
            };
            below + 1
        }
        Value::String(s) => {
            if typed {
                validate_string(s, schema, path, errors);
            }
            usize::from(schema.format.as_deref().is_some_and(formats::is_checked))
        }
        Value::Number(n) => {
            if typed && let Some(f) = n.as_f64() {
                validate_number(value, f, schema, path, errors);
            }
            2
        }
        Value::Object(_) | Value::Bool(_) | Value::Null => 0,
    };
    validate_enum(value, schema, path, errors);
    // Objects are checked after the enum, as kube-openapi orders its validators.
    if let Value::Object(map) = value
        && typed
    {
        count += validate_object(map, schema, at, path, errors);
    }
    // The kind's own validator, the enum check and the node itself.
    let kind_validator = usize::from(value.is_object() || value.is_array() || value.is_string());
    count + kind_validator + 2
}

/// kube-openapi's type validator applies where the schema names a type or a format it checks.
fn applies_type_check(schema: &Structural) -> bool {
    schema.type_.is_some()
        || schema.int_or_string
        || schema.format.as_deref().is_some_and(formats::is_checked)
}

fn validate_enum(value: &Value, schema: &Structural, path: &Path, errors: &mut ErrorList) {
    if let Some(allowed) = &schema.enum_values
        && !allowed.contains(value)
    {
        let names: Vec<String> = allowed
            .iter()
            .map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        errors.push(Error::not_supported(path.clone(), value.clone(), &names));
    }
}

/// `<path> in body <message>`, the detail kube-openapi writes.
fn in_body(path: &Path, message: &str) -> String {
    format!("{} in body {message}", path.as_str())
}

/// The JSON type of a value and the Go format kube-openapi infers for it.
fn data_type(value: &Value) -> (&'static str, &'static str) {
    match value {
        Value::Null => ("null", ""),
        Value::Bool(_) => ("boolean", ""),
        Value::String(_) => ("string", ""),
        Value::Number(n) if n.is_f64() => ("number", "float64"),
        Value::Number(_) => ("integer", "int64"),
        Value::Array(_) => ("array", ""),
        Value::Object(_) => ("object", ""),
    }
}

/// kube-openapi's `typeValidator`: the expected type (or format) is named,
/// and the data's type (or Go format) is given as the bad value.
pub fn type_error(value: &Value, schema: &Structural, path: &Path) -> Option<Error> {
    let (data_type, data_format) = data_type(value);
    let fail = |name: &str, data: &str| {
        let detail = in_body(path, &format!("must be of type {name}: {}", go_quote(data)));
        Some(Error::type_invalid(path.clone(), data, detail))
    };
    if value.is_null() && schema.nullable {
        return None;
    }
    // apiextensions gives an int-or-string the OpenAPI type `[integer, string]`.
    if schema.int_or_string {
        let fits = value.is_string() || data_type == "integer" || is_whole_number(value);
        return if fits {
            None
        } else {
            fail("integer,string", data_type)
        };
    }
    let expected = schema.type_?;
    if value.is_null() {
        return fail(expected.as_str(), "null");
    }
    let matches_type = expected.as_str() == data_type
        || (expected == JsonType::Integer && is_whole_number(value))
        || (expected == JsonType::Number && data_type == "integer");
    // kube-apiserver strips the formats it does not validate (StripUnsupportedFormats), the
    // numeric ones among them: an `int32` field given `true` is "must be of type integer".
    let format = schema.format.as_deref().filter(|f| formats::is_checked(f));
    let textual = value.is_string() || value.is_array();
    if let Some(format) = format {
        let numeric = matches!(expected, JsonType::Integer | JsonType::Number);
        if !(textual || matches_type || data_format == format) {
            return fail(format, data_format);
        }
        if !numeric && textual {
            return None;
        }
    }
    if !matches_type {
        return fail(expected.as_str(), data_type);
    }
    None
}

fn is_whole_number(value: &Value) -> bool {
    value
        .as_f64()
        .is_some_and(|f| value.is_f64() && f.fract() == 0.0)
}

/// The property count, required properties and the properties' values; their match counts.
fn validate_object<'a>(
    map: &'a Map<String, Value>,
    schema: &'a Structural,
    at: Correlation<'a>,
    path: &Path,
    errors: &mut ErrorList,
) -> usize {
    let count = map.len();
    if let Some(max) = schema.max_properties
        && count > max
    {
        errors.push(Error::too_many(path.clone(), count, max));
    }
    if let Some(min) = schema.min_properties
        && count < min
    {
        let detail = in_body(path, &format!("should have at least {min} properties"));
        errors.push(Error::invalid(path.clone(), count, detail));
    }
    for name in &schema.required {
        if !map.contains_key(name) {
            errors.push(Error::required(path.child(name), ""));
        }
    }
    let mut below = 0;
    for (key, child) in map {
        if let Some(sub) = schema
            .property(key)
            .or(schema.additional_properties.as_deref())
        {
            below += validate(
                child,
                sub,
                at.child(key, child, sub),
                &path.child(key),
                errors,
            );
        }
    }
    below
}

/// The items, then the item count, as kube-openapi's slice validator checks them; the items'
/// match counts.
fn validate_array<'a>(
    items: &'a [Value],
    schema: &'a Structural,
    at: Correlation<'a>,
    path: &Path,
    errors: &mut ErrorList,
) -> usize {
    let mut below = 0;
    if let Some(item_schema) = &schema.items {
        for (i, item) in items.iter().enumerate() {
            below += validate(
                item,
                item_schema,
                at.item(schema, item),
                &path.index(i),
                errors,
            );
        }
    }
    let count = items.len();
    if let Some(min) = schema.min_items
        && count < min
    {
        let detail = in_body(path, &format!("should have at least {min} items"));
        errors.push(Error::invalid(path.clone(), count, detail));
    }
    if let Some(max) = schema.max_items
        && count > max
    {
        errors.push(Error::too_many(path.clone(), count, max));
    }
    below
}

fn validate_string(s: &str, schema: &Structural, path: &Path, errors: &mut ErrorList) {
    // kube-openapi's string validator reports the first of its checks that fails, in this
    // order (a one-letter device name is too short, and its pattern is not checked).
    let length = s.chars().count();
    if let Some(max) = schema.max_length
        && length > max
    {
        errors.push(Error::too_long(path.clone(), max));
    } else if let Some(min) = schema.min_length
        && length < min
    {
        let detail = in_body(path, &format!("should be at least {min} chars long"));
        errors.push(Error::invalid(path.clone(), s, detail));
    } else if let Some((pattern, regex)) = &schema.pattern
        && !regex.is_match(s)
    {
        let detail = in_body(path, &format!("should match '{pattern}'"));
        errors.push(Error::invalid(path.clone(), s, detail));
    }
    if let Some(format) = schema.format.as_deref()
        && formats::holds(format, s) == Some(false)
    {
        let detail = in_body(path, &format!("must be of type {format}: {}", go_quote(s)));
        errors.push(Error::type_invalid(path.clone(), s, detail));
    }
}

fn validate_number(
    value: &Value,
    f: f64,
    schema: &Structural,
    path: &Path,
    errors: &mut ErrorList,
) {
    if let Some(factor) = schema.multiple_of
        && factor > 0.0
        && (f / factor).fract() != 0.0
    {
        let detail = in_body(
            path,
            &format!("should be a multiple of {}", go_float(factor)),
        );
        errors.push(Error::invalid(path.clone(), value.clone(), detail));
    }
    if let Some(max) = schema.maximum
        && f > max
    {
        let detail = in_body(
            path,
            &format!("should be less than or equal to {}", go_float(max)),
        );
        errors.push(Error::invalid(path.clone(), value.clone(), detail));
    }
    if let Some(min) = schema.minimum
        && f < min
    {
        let detail = in_body(
            path,
            &format!("should be greater than or equal to {}", go_float(min)),
        );
        errors.push(Error::invalid(path.clone(), value.clone(), detail));
    }
}
