//! Turns the schemars output of a type into a Kubernetes structural schema:
//! everything inline, no `nullable`, Go-like integer formats, `required`
//! lists and defaults taken from the explicit field markers only.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

/// Field marker: the property is required (listed in the parent's `required`).
/// schemars cannot express "required but may be omitted when serializing",
/// which is what Go's `omitempty` on a required field means.
pub const REQUIRED_MARK: &str = "x-capmox-required";

/// Field marker: the schema default. schemars derives defaults from
/// `#[serde(default)]`, which every type uses for lenient decoding, so only
/// defaults stated with this marker are published.
pub const DEFAULT_MARK: &str = "x-capmox-default";

/// The structural schema of `T` as a JSON value (descriptions included).
pub fn structural_schema_of<T: JsonSchema>() -> Value {
    let settings = SchemaSettings::openapi3().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    let mut value = settings
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    structuralize(&mut value);
    value
}

/// Rewrites one schema node and everything below it.
fn structuralize(value: &mut Value) {
    let Value::Object(node) = value else {
        return;
    };
    for key in ["nullable", "title", "$schema", "default", "components"] {
        node.remove(key);
    }
    if let Some(default) = node.remove(DEFAULT_MARK) {
        node.insert("default".into(), default);
    }
    normalize_integer_format(node);

    if let Some(Value::Object(properties)) = node.get_mut("properties") {
        let mut required: Vec<String> = Vec::new();
        for (name, property) in properties.iter_mut() {
            if let Value::Object(prop) = property
                && prop.remove(REQUIRED_MARK).is_some()
            {
                required.push(name.clone());
            }
            structuralize(property);
        }
        if !required.is_empty() {
            required.sort();
            node.insert(
                "required".into(),
                Value::Array(required.into_iter().map(Value::String).collect()),
            );
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = node.get_mut(key) {
            structuralize(child);
        }
    }
    // Objects without properties (e.g. the placeholder for `metadata`) keep
    // only what they say; empty `properties` maps are noise.
    if matches!(node.get("properties"), Some(Value::Object(p)) if p.is_empty()) {
        node.remove("properties");
    }
}

/// controlpler-gen publishes `uint32` as `int32`, `uint64` as `int64` and
/// `uint16` without a format, and states no implicit bounds; schemars adds
/// the Rust type's range, which the Kubernetes schema does not have.
fn normalize_integer_format(node: &mut Map<String, Value>) {
    let Some(Value::String(format)) = node.get("format") else {
        return;
    };
    let (replacement, implicit_max) = match format.as_str() {
        "uint8" => (None, Some(u64::from(u8::MAX))),
        "uint16" => (None, Some(u64::from(u16::MAX))),
        "uint32" => (Some("int32"), None),
        "uint64" | "uint" => (Some("int64"), None),
        _ => return,
    };
    match replacement {
        Some(f) => node.insert("format".into(), Value::String(f.into())),
        None => node.remove("format"),
    };
    if node.get("minimum").and_then(Value::as_u64) == Some(0) {
        node.remove("minimum");
    }
    if implicit_max.is_some() && node.get("maximum").and_then(Value::as_u64) == implicit_max {
        node.remove("maximum");
    }
}
