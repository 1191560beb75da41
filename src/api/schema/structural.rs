//! A parsed structural schema: the one model that pruning, defaulting and
//! schema validation walk. It is read from the same JSON schema that the
//! OpenAPI documents publish, so what is enforced is what is published.

use std::collections::BTreeMap;

use regex::Regex;
use serde_json::Value;

/// A JSON type of a structural schema node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonType {
    /// `object`
    Object,
    /// `array`
    Array,
    /// `string`
    String,
    /// `integer`
    Integer,
    /// `number`
    Number,
    /// `boolean`
    Boolean,
}

impl JsonType {
    fn parse(name: &str) -> Option<JsonType> {
        Some(match name {
            "object" => JsonType::Object,
            "array" => JsonType::Array,
            "string" => JsonType::String,
            "integer" => JsonType::Integer,
            "number" => JsonType::Number,
            "boolean" => JsonType::Boolean,
            _ => return None,
        })
    }

    /// The name used in schemas and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            JsonType::Object => "object",
            JsonType::Array => "array",
            JsonType::String => "string",
            JsonType::Integer => "integer",
            JsonType::Number => "number",
            JsonType::Boolean => "boolean",
        }
    }
}

/// `x-kubernetes-list-type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListType {
    /// The list is replaced as a whole.
    Atomic,
    /// Scalars that must be unique.
    Set,
    /// Objects identified by `x-kubernetes-list-map-keys`.
    Map,
}

/// `x-kubernetes-map-type`: how server-side apply owns an object's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapType {
    /// Each field is owned separately (the default).
    Granular,
    /// The object is owned and replaced as a whole.
    Atomic,
}

/// One `x-kubernetes-validations` rule.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rule {
    /// The CEL expression (for our own kinds, its Rust equivalent is looked up by this text).
    pub rule: String,
    /// The message reported when the rule does not hold.
    pub message: String,
    /// A CEL expression for the message, used when it yields a non-empty single line.
    pub message_expression: Option<String>,
    /// The error type reported (`FieldValueInvalid` when unset).
    pub reason: Option<String>,
    /// Where below the node the error is reported (`.spec.x`, `['key']`, `[0]`).
    pub field_path: Option<String>,
    /// Whether a transition rule also runs without an old value (`oldSelf` optional).
    pub optional_old_self: bool,
}

/// One node of a structural schema.
#[derive(Clone, Debug, Default)]
pub struct Structural {
    /// The JSON type; `None` accepts anything (used for `metadata`).
    pub type_: Option<JsonType>,
    /// `format` (`int32`, `int64`, `date-time`).
    pub format: Option<String>,
    /// Named properties of an object.
    pub properties: BTreeMap<String, Structural>,
    /// The schema of map values, for objects that are maps.
    pub additional_properties: Option<Box<Structural>>,
    /// The schema of list items.
    pub items: Option<Box<Structural>>,
    /// Properties that must be present.
    pub required: Vec<String>,
    /// The value used when the property is absent.
    pub default: Option<Value>,
    /// The allowed values.
    pub enum_values: Option<Vec<Value>>,
    /// Inclusive lower bound.
    pub minimum: Option<f64>,
    /// Inclusive upper bound.
    pub maximum: Option<f64>,
    /// The value must be a multiple of this.
    pub multiple_of: Option<f64>,
    /// Minimum length of a string, in characters.
    pub min_length: Option<usize>,
    /// Maximum length of a string, in characters.
    pub max_length: Option<usize>,
    /// Pattern a string must match (as written, and compiled).
    pub pattern: Option<(String, Regex)>,
    /// Minimum number of list items.
    pub min_items: Option<usize>,
    /// Maximum number of list items.
    pub max_items: Option<usize>,
    /// Minimum number of object properties.
    pub min_properties: Option<usize>,
    /// Maximum number of object properties.
    pub max_properties: Option<usize>,
    /// `x-kubernetes-list-type`.
    pub list_type: Option<ListType>,
    /// `x-kubernetes-list-map-keys`.
    pub list_map_keys: Vec<String>,
    /// `x-kubernetes-map-type`.
    pub map_type: Option<MapType>,
    /// `x-kubernetes-validations`.
    pub rules: Vec<Rule>,
    /// Unknown fields below this node are kept (no pruning).
    pub preserve_unknown_fields: bool,
    /// `x-kubernetes-int-or-string`: an integer or a string, whatever `type` says.
    pub int_or_string: bool,
    /// `nullable`: `null` is a value (kept, and of the type), not an absent field.
    pub nullable: bool,
    /// `anyOf`: value validations of which one at least must hold (a structural schema's
    /// branches add no types or properties; an int-or-string's name `integer` and `string`).
    pub any_of: Vec<Structural>,
    /// `allOf`: value validations that must all hold.
    pub all_of: Vec<Structural>,
    /// `oneOf`: value validations of which exactly one must hold.
    pub one_of: Vec<Structural>,
    /// `not`: value validations that must not hold.
    pub not: Option<Box<Structural>>,
    /// `x-kubernetes-embedded-resource`: the object is a Kubernetes object of its own, whose
    /// `apiVersion`, `kind` and `metadata` are implied.
    pub embedded_resource: bool,
}

/// A schema that cannot be used as a structural schema.
#[derive(Debug, thiserror::Error)]
#[error("schema at {path}: {reason}")]
pub struct SchemaError {
    /// Where in the schema.
    pub path: String,
    /// What is wrong.
    pub reason: String,
}

impl Structural {
    /// Parses a JSON schema node (and everything below it).
    pub fn from_json(value: &Value) -> Result<Structural, SchemaError> {
        parse(value, "")
    }

    /// The property schema, if the property is known.
    pub fn property(&self, name: &str) -> Option<&Structural> {
        self.properties.get(name)
    }

    /// Whether this node or one below it has `x-kubernetes-validations`.
    pub fn has_rules(&self) -> bool {
        !self.rules.is_empty()
            || self.properties.values().any(Structural::has_rules)
            || self
                .additional_properties
                .as_ref()
                .is_some_and(|s| s.has_rules())
            || self.items.as_ref().is_some_and(|s| s.has_rules())
    }
}

fn err(path: &str, reason: impl Into<String>) -> SchemaError {
    SchemaError {
        path: if path.is_empty() {
            "<root>".into()
        } else {
            path.into()
        },
        reason: reason.into(),
    }
}

fn usize_of(
    node: &serde_json::Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Option<usize>, SchemaError> {
    match node.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| err(path, format!("{key} is not a count"))),
    }
}

fn f64_of(
    node: &serde_json::Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Option<f64>, SchemaError> {
    match node.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_f64()
            .map(Some)
            .ok_or_else(|| err(path, format!("{key} is not a number"))),
    }
}

fn strings_of(
    node: &serde_json::Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Vec<String>, SchemaError> {
    match node.get(key) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| err(path, format!("{key} holds a non-string")))
            })
            .collect(),
        Some(_) => Err(err(path, format!("{key} is not a list"))),
    }
}

fn parse(value: &Value, path: &str) -> Result<Structural, SchemaError> {
    let Value::Object(node) = value else {
        return Err(err(path, "not an object"));
    };
    let type_ = match node.get("type") {
        None => None,
        Some(Value::String(t)) => {
            Some(JsonType::parse(t).ok_or_else(|| err(path, format!("unknown type {t}")))?)
        }
        Some(_) => return Err(err(path, "type is not a string")),
    };
    let mut properties = BTreeMap::new();
    if let Some(props) = node.get("properties") {
        let Value::Object(props) = props else {
            return Err(err(path, "properties is not an object"));
        };
        for (name, prop) in props {
            properties.insert(name.clone(), parse(prop, &format!("{path}.{name}"))?);
        }
    }
    let additional_properties = match node.get("additionalProperties") {
        Some(v @ Value::Object(_)) => Some(Box::new(parse(v, &format!("{path}[*]"))?)),
        _ => None,
    };
    let items = match node.get("items") {
        Some(v) => Some(Box::new(parse(v, &format!("{path}[]"))?)),
        None => None,
    };
    let pattern = match node.get("pattern") {
        None => None,
        Some(Value::String(p)) => {
            let re = Regex::new(p).map_err(|e| err(path, format!("pattern {p}: {e}")))?;
            Some((p.clone(), re))
        }
        Some(_) => return Err(err(path, "pattern is not a string")),
    };
    let list_type = match node.get("x-kubernetes-list-type").and_then(Value::as_str) {
        None => None,
        Some("atomic") => Some(ListType::Atomic),
        Some("set") => Some(ListType::Set),
        Some("map") => Some(ListType::Map),
        Some(other) => return Err(err(path, format!("unknown list type {other}"))),
    };
    let map_type = match node.get("x-kubernetes-map-type").and_then(Value::as_str) {
        None => None,
        Some("granular") => Some(MapType::Granular),
        Some("atomic") => Some(MapType::Atomic),
        Some(other) => return Err(err(path, format!("unknown map type {other}"))),
    };
    let rules = match node.get("x-kubernetes-validations") {
        None => Vec::new(),
        Some(Value::Array(list)) => list
            .iter()
            .map(|r| {
                let text = |key: &str| r.get(key).and_then(Value::as_str).map(str::to_owned);
                text("rule")
                    .map(|rule| Rule {
                        rule,
                        message: text("message").unwrap_or_default(),
                        message_expression: text("messageExpression"),
                        reason: text("reason"),
                        field_path: text("fieldPath"),
                        optional_old_self: r.get("optionalOldSelf").and_then(Value::as_bool)
                            == Some(true),
                    })
                    .ok_or_else(|| err(path, "validation without a rule"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(err(path, "x-kubernetes-validations is not a list")),
    };
    let not = match node.get("not") {
        Some(v) => Some(Box::new(parse(v, &format!("{path}.not"))?)),
        None => None,
    };
    Ok(Structural {
        type_,
        format: node
            .get("format")
            .and_then(Value::as_str)
            .map(str::to_owned),
        properties,
        additional_properties,
        items,
        required: strings_of(node, "required", path)?,
        default: node.get("default").cloned(),
        enum_values: node.get("enum").and_then(Value::as_array).cloned(),
        minimum: f64_of(node, "minimum", path)?,
        maximum: f64_of(node, "maximum", path)?,
        multiple_of: f64_of(node, "multipleOf", path)?,
        min_length: usize_of(node, "minLength", path)?,
        max_length: usize_of(node, "maxLength", path)?,
        pattern,
        min_items: usize_of(node, "minItems", path)?,
        max_items: usize_of(node, "maxItems", path)?,
        min_properties: usize_of(node, "minProperties", path)?,
        max_properties: usize_of(node, "maxProperties", path)?,
        list_type,
        list_map_keys: strings_of(node, "x-kubernetes-list-map-keys", path)?,
        map_type,
        rules,
        preserve_unknown_fields: node
            .get("x-kubernetes-preserve-unknown-fields")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        int_or_string: node.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)),
        nullable: node.get("nullable") == Some(&Value::Bool(true)),
        any_of: branches(node, "anyOf", path)?,
        all_of: branches(node, "allOf", path)?,
        one_of: branches(node, "oneOf", path)?,
        not,
        embedded_resource: node.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true)),
    })
}

/// The schemas of `anyOf`, `allOf` or `oneOf`.
fn branches(
    node: &serde_json::Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Vec<Structural>, SchemaError> {
    match node.get(key) {
        None => Ok(Vec::new()),
        Some(Value::Array(branches)) => branches
            .iter()
            .enumerate()
            .map(|(i, b)| parse(b, &format!("{path}.{key}[{i}]")))
            .collect(),
        Some(_) => Err(err(path, format!("{key} is not a list"))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn map_types_are_read() {
        let parsed = Structural::from_json(&json!({
            "type": "object",
            "properties": {
                "atomic": {"type": "object", "x-kubernetes-map-type": "atomic"},
                "granular": {"type": "object", "x-kubernetes-map-type": "granular"},
                "unset": {"type": "object"}
            }
        }))
        .unwrap();
        let map_type = |name: &str| parsed.property(name).and_then(|p| p.map_type);
        assert_eq!(map_type("atomic"), Some(MapType::Atomic));
        assert_eq!(map_type("granular"), Some(MapType::Granular));
        assert_eq!(map_type("unset"), None);
        assert!(Structural::from_json(&json!({"x-kubernetes-map-type": "other"})).is_err());
    }
}
