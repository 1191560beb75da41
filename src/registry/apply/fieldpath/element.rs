//! One step of a field path: a struct field or map key (`f:`), a list-map
//! item by its key fields (`k:`), a set item by its value (`v:`) or a list
//! item by position (`i:`).

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;

use serde_json::{Map, Value};

use super::value::{self as json_value, write_go_json, write_go_json_string};

/// One step of a field path.
#[derive(Clone, Debug)]
pub enum PathElement {
    /// A field of a struct or a key of a map (`f:name`). Names taken from
    /// a schema are borrowed from it rather than copied.
    Field(Cow<'static, str>),
    /// An item of a list map, by its key fields sorted by name
    /// (`k:{"name":"net1"}`).
    Key(Vec<(String, Value)>),
    /// An item of a set, by its value (`v:"a"`).
    Value(Value),
    /// An item of a list by position (`i:0`).
    Index(i64),
}

/// A FieldsV1 key that is not a path element.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElementError {
    /// Shorter than `x:`.
    #[error("key must be 2 characters long: {0:?}")]
    TooShort(String),
    /// The second character is not `:`.
    #[error("missing colon: {0:?}")]
    MissingColon(String),
    /// The JSON after `k:` or `v:` does not parse (or is not an object for `k:`).
    #[error("{0:?}: {1}")]
    BadJson(String, String),
    /// The number after `i:` does not parse.
    #[error("{0:?}: not an index")]
    BadIndex(String),
}

impl PathElement {
    /// A field element.
    pub fn field(name: &str) -> PathElement {
        PathElement::Field(Cow::Owned(name.to_owned()))
    }

    /// A key element from key fields in any order.
    pub fn key(mut fields: Vec<(String, Value)>) -> PathElement {
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        PathElement::Key(fields)
    }

    /// The field name, for field elements.
    pub fn as_field(&self) -> Option<&str> {
        match self {
            PathElement::Field(name) => Some(name.as_ref()),
            _ => None,
        }
    }

    /// The element as a FieldsV1 key (`f:spec`, `k:{"name":"net1"}`),
    /// written as the Go implementation writes it.
    pub fn to_fields_key(&self) -> String {
        let mut out = String::new();
        match self {
            PathElement::Field(name) => {
                out.push_str("f:");
                out.push_str(name);
            }
            PathElement::Key(fields) => {
                out.push_str("k:{");
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_go_json_string(name, &mut out);
                    out.push(':');
                    write_go_json(value, &mut out);
                }
                out.push('}');
            }
            PathElement::Value(value) => {
                out.push_str("v:");
                write_go_json(value, &mut out);
            }
            PathElement::Index(i) => {
                out.push_str("i:");
                out.push_str(&i.to_string());
            }
        }
        out
    }

    /// Parses a FieldsV1 key. `Ok(None)` for a key of an unknown element
    /// type, which readers skip (so newer writers can add types).
    pub fn from_fields_key(key: &str) -> Result<Option<PathElement>, ElementError> {
        let bytes = key.as_bytes();
        if bytes.len() < 2 {
            return Err(ElementError::TooShort(key.to_owned()));
        }
        if bytes[1] != b':' {
            return Err(ElementError::MissingColon(key.to_owned()));
        }
        // The first two bytes are ASCII here, so slicing at 2 is on a
        // character boundary.
        let rest = &key[2..];
        let bad_json = |e: serde_json::Error| ElementError::BadJson(key.to_owned(), e.to_string());
        Ok(Some(match bytes[0] {
            b'f' => PathElement::Field(Cow::Owned(rest.to_owned())),
            b'v' => PathElement::Value(serde_json::from_str(rest).map_err(bad_json)?),
            b'k' => {
                let fields: Map<String, Value> = serde_json::from_str(rest).map_err(bad_json)?;
                PathElement::key(fields.into_iter().collect())
            }
            b'i' => PathElement::Index(
                parse_go_int(rest).ok_or_else(|| ElementError::BadIndex(key.to_owned()))?,
            ),
            _ => return Ok(None),
        }))
    }

    fn rank(&self) -> u8 {
        match self {
            PathElement::Field(_) => 0,
            PathElement::Key(_) => 1,
            PathElement::Value(_) => 2,
            PathElement::Index(_) => 3,
        }
    }
}

/// Go's `strconv.Atoi`: an optional sign and decimal digits.
fn parse_go_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn compare_keys(a: &[(String, Value)], b: &[(String, Value)]) -> Ordering {
    for ((an, av), (bn, bv)) in a.iter().zip(b) {
        let c = an.cmp(bn).then_with(|| json_value::compare(av, bv));
        if c != Ordering::Equal {
            return c;
        }
    }
    a.len().cmp(&b.len())
}

impl Ord for PathElement {
    /// Fields, then keys, then values, then indices; within a type by name,
    /// key fields, value or position.
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => a.cmp(b),
            (PathElement::Key(a), PathElement::Key(b)) => compare_keys(a, b),
            (PathElement::Value(a), PathElement::Value(b)) => json_value::compare(a, b),
            (PathElement::Index(a), PathElement::Index(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for PathElement {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for PathElement {}

impl fmt::Display for PathElement {
    /// The element in a field path of a message: `.spec`, `[name="net1"]`,
    /// `[="a"]`, `[0]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                let parts: Vec<String> = fields
                    .iter()
                    .map(|(name, value)| format!("{name}={}", json_value::display(value)))
                    .collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(value) => write!(f, "[={}]", json_value::display(value)),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A field path from the root of an object.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Path(pub Vec<PathElement>);

impl Path {
    /// A path of field names (for tests and fixed paths).
    pub fn fields(names: &[&str]) -> Path {
        Path(names.iter().map(|n| PathElement::field(n)).collect())
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|e| write!(f, "{e}"))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(key: &str) -> PathElement {
        PathElement::from_fields_key(key)
            .unwrap_or_else(|e| panic!("{key}: {e}"))
            .unwrap_or_else(|| panic!("{key}: unknown type"))
    }

    #[test]
    fn fields_keys_round_trip() {
        for key in [
            "f:spec",
            "f:",
            "f:kubectl.kubernetes.io/last-applied-configuration",
            r#"k:{"name":"net1"}"#,
            r#"k:{"containerPort":80,"protocol":"TCP"}"#,
            r#"v:"kubernetes""#,
            "v:5",
            "i:3",
        ] {
            assert_eq!(parse(key).to_fields_key(), key);
        }
    }

    #[test]
    fn key_fields_are_sorted_by_name() {
        assert_eq!(
            parse(r#"k:{"protocol":"TCP","containerPort":80}"#).to_fields_key(),
            r#"k:{"containerPort":80,"protocol":"TCP"}"#
        );
    }

    #[test]
    fn malformed_keys_are_errors_and_unknown_types_are_skipped() {
        assert!(PathElement::from_fields_key("f").is_err());
        assert!(PathElement::from_fields_key("fx").is_err());
        assert!(PathElement::from_fields_key("k:[1]").is_err());
        assert!(PathElement::from_fields_key("v:1 2").is_err());
        assert!(PathElement::from_fields_key("i:x").is_err());
        assert_eq!(PathElement::from_fields_key("z:anything"), Ok(None));
    }

    #[test]
    fn order_is_fields_keys_values_indices() {
        let mut elements = [
            PathElement::Index(0),
            PathElement::Value(json!("a")),
            PathElement::key(vec![("name".into(), json!("a"))]),
            PathElement::field("z"),
            PathElement::field("a"),
        ];
        elements.sort();
        let keys: Vec<String> = elements.iter().map(PathElement::to_fields_key).collect();
        assert_eq!(keys, ["f:a", "f:z", r#"k:{"name":"a"}"#, r#"v:"a""#, "i:0"]);
    }

    #[test]
    fn paths_display_like_kube() {
        let path = Path(vec![
            PathElement::field("spec"),
            PathElement::field("network"),
            PathElement::field("networkDevices"),
            PathElement::key(vec![("name".into(), json!("net1"))]),
            PathElement::field("bridge"),
        ]);
        assert_eq!(
            path.to_string(),
            r#".spec.network.networkDevices[name="net1"].bridge"#
        );
        let set_item = Path(vec![
            PathElement::field("tags"),
            PathElement::Value(json!("a")),
        ]);
        assert_eq!(set_item.to_string(), r#".tags[="a"]"#);
    }
}
