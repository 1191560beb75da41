//! Request parameters: merged from the query string and a form or JSON body, then
//! checked against a small per-endpoint schema with PVE's error texts (400
//! `Parameter verification failed.` plus an `errors` map).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::proxmox::form;
use crate::proxmox::sim::error::PveError;
use crate::proxmox::upid::is_valid_node_name;

/// One parameter: a single value, or several (JSON arrays, repeated form keys).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Param {
    /// A scalar.
    One(String),
    /// An array.
    Many(Vec<String>),
}

/// All parameters of a request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Params(BTreeMap<String, Param>);

/// The type of a parameter.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// An integer in a range.
    Int(i64, i64),
    /// `0`/`1` (JSON booleans arrive as those).
    Bool,
    /// Any string.
    Str,
    /// One of these.
    Enum(&'static [&'static str]),
    /// A real array.
    Array,
    /// A node name.
    Node,
}

/// A schema entry.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    /// Name.
    pub name: &'static str,
    /// Type.
    pub kind: Kind,
    /// Must be present.
    pub required: bool,
}

/// An optional field.
pub const fn opt(name: &'static str, kind: Kind) -> Field {
    Field {
        name,
        kind,
        required: false,
    }
}

/// A required field.
pub const fn req(name: &'static str, kind: Kind) -> Field {
    Field {
        name,
        kind,
        required: true,
    }
}

fn json_scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(if *b { "1" } else { "0" }.to_string()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// Checks one value against a kind; the error is the per-parameter text.
pub fn check_kind(kind: Kind, value: &Param) -> Result<(), String> {
    let scalar = match (kind, value) {
        (Kind::Array, Param::Many(_)) => return Ok(()),
        (Kind::Array, Param::One(v)) => {
            return Err(format!("type check ('array') failed - got '{v}'"));
        }
        (_, Param::Many(_)) => return Err("type check failed - got an array".into()),
        (_, Param::One(v)) => v.as_str(),
    };
    match kind {
        Kind::Int(min, max) => match scalar.trim().parse::<i64>() {
            Ok(n) if n < min => Err(format!("value must have a minimum value of {min}")),
            Ok(n) if n > max => Err(format!("value must have a maximum value of {max}")),
            Ok(_) => Ok(()),
            Err(_) => Err(format!("type check ('integer') failed - got '{scalar}'")),
        },
        Kind::Bool if matches!(scalar, "0" | "1") => Ok(()),
        Kind::Bool => Err(format!("type check ('boolean') failed - got '{scalar}'")),
        Kind::Enum(values) if values.contains(&scalar) => Ok(()),
        Kind::Enum(values) => Err(format!(
            "value '{scalar}' does not have a value in the enumeration '{}'",
            values.join(", ")
        )),
        Kind::Node if is_valid_node_name(scalar) => Ok(()),
        Kind::Node => Err("invalid format - value does not look like a valid node name".into()),
        Kind::Str | Kind::Array => Ok(()),
    }
}

impl Params {
    /// Parses the query string and the body. JSON numbers and booleans become their
    /// string forms; repeated form keys become arrays.
    pub fn parse(query: Option<&str>, content_type: &str, body: &[u8]) -> Result<Self, PveError> {
        let mut params = Self::default();
        for (k, v) in form::decode_pairs(query.unwrap_or("")) {
            params.push(k, v);
        }
        if body.is_empty() {
            return Ok(params);
        }
        let mime = content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match mime.as_str() {
            "application/json" => {
                let value: Value = serde_json::from_slice(body)
                    .map_err(|e| PveError::new(400, format!("failed to parse JSON body - {e}")))?;
                let Value::Object(map) = value else {
                    return Err(PveError::new(400, "JSON body must be an object"));
                };
                for (k, v) in map {
                    match v {
                        Value::Array(items) => {
                            let items = items.iter().filter_map(json_scalar).collect();
                            params.0.insert(k, Param::Many(items));
                        }
                        other => {
                            if let Some(s) = json_scalar(&other) {
                                params.0.insert(k, Param::One(s));
                            }
                        }
                    }
                }
            }
            "application/x-www-form-urlencoded" | "" => {
                for (k, v) in form::decode_pairs(&String::from_utf8_lossy(body)) {
                    params.push(k, v);
                }
            }
            _ => {
                return Err(PveError::new(
                    506,
                    format!("unsupported content type '{mime}'"),
                ));
            }
        }
        Ok(params)
    }

    fn push(&mut self, key: String, value: String) {
        let entry = self.0.remove(&key);
        let merged = match entry {
            None => Param::One(value),
            Some(Param::One(first)) => Param::Many(vec![first, value]),
            Some(Param::Many(mut all)) => {
                all.push(value);
                Param::Many(all)
            }
        };
        self.0.insert(key, merged);
    }

    /// Adds a scalar (multipart fields).
    pub fn insert(&mut self, key: &str, value: &str) {
        self.0
            .insert(key.to_string(), Param::One(value.to_string()));
    }

    /// All parameters as JSON strings and arrays of strings (the request log).
    pub fn to_json(&self) -> serde_json::Map<String, Value> {
        self.0
            .iter()
            .map(|(k, v)| {
                let value = match v {
                    Param::One(s) => Value::String(s.clone()),
                    Param::Many(all) => Value::from(all.clone()),
                };
                (k.clone(), value)
            })
            .collect()
    }

    /// A scalar value.
    pub fn get(&self, key: &str) -> Option<&str> {
        match self.0.get(key)? {
            Param::One(v) => Some(v),
            Param::Many(v) => v.first().map(String::as_str),
        }
    }

    /// A value parsed as a number.
    pub fn int(&self, key: &str) -> Option<i64> {
        self.get(key)?.trim().parse().ok()
    }

    /// A boolean (`1`).
    pub fn flag(&self, key: &str) -> bool {
        self.get(key) == Some("1")
    }

    /// An array value.
    pub fn list(&self, key: &str) -> Option<Vec<String>> {
        match self.0.get(key)? {
            Param::Many(v) => Some(v.clone()),
            Param::One(v) => Some(vec![v.clone()]),
        }
    }

    /// All scalar parameters except the named ones.
    pub fn scalars_except(&self, skip: &[&str]) -> BTreeMap<String, String> {
        self.0
            .iter()
            .filter(|(k, _)| !skip.contains(&k.as_str()))
            .filter_map(|(k, v)| match v {
                Param::One(s) => Some((k.clone(), s.clone())),
                Param::Many(_) => None,
            })
            .collect()
    }

    /// Validates against `fields`; other keys are allowed only if `extra` accepts them.
    pub fn check(&self, fields: &[Field], extra: impl Fn(&str) -> bool) -> Result<(), PveError> {
        let mut errors = BTreeMap::new();
        for field in fields {
            match self.0.get(field.name) {
                Some(value) => {
                    if let Err(e) = check_kind(field.kind, value) {
                        errors.insert(field.name.to_string(), e);
                    }
                }
                None if field.required => {
                    errors.insert(
                        field.name.to_string(),
                        "property is missing and it is not optional".to_string(),
                    );
                }
                None => {}
            }
        }
        for key in self.0.keys() {
            if !fields.iter().any(|f| f.name == key) && !extra(key) {
                errors.insert(
                    key.clone(),
                    "property is not defined in schema and the schema does not allow additional properties".to_string(),
                );
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(PveError::params(errors))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn merges_query_form_and_json() {
        let p = Params::parse(
            Some("a=1&b=x"),
            "application/x-www-form-urlencoded",
            b"c=2&c=3",
        )
        .expect("parses");
        assert_eq!(p.get("a"), Some("1"));
        assert_eq!(p.list("c"), Some(vec!["2".into(), "3".into()]));
        let p = Params::parse(
            None,
            "application/json",
            br#"{"n":5,"t":true,"cmd":["a","b"],"z":null}"#,
        )
        .expect("parses");
        assert_eq!(p.get("n"), Some("5"));
        assert_eq!(p.get("t"), Some("1"));
        assert_eq!(p.list("cmd"), Some(vec!["a".into(), "b".into()]));
        assert_eq!(p.get("z"), None);
        assert_eq!(
            Params::parse(None, "text/plain", b"x").map_err(|e| e.status),
            Err(506)
        );
        assert_eq!(
            Params::parse(None, "application/json", b"[1]").map_err(|e| e.status),
            Err(400)
        );
    }

    #[test]
    fn schema_errors_use_pve_texts() {
        let p = Params::parse(Some("vmid=5&full=true&x=1"), "", b"").expect("parses");
        let e = p
            .check(
                &[
                    req("vmid", Kind::Int(100, 999_999_999)),
                    opt("full", Kind::Bool),
                    req("newid", Kind::Int(100, 999)),
                ],
                |_| false,
            )
            .expect_err("invalid");
        assert_eq!(e.status, 400);
        assert_eq!(e.errors["vmid"], "value must have a minimum value of 100");
        assert_eq!(
            e.errors["full"],
            "type check ('boolean') failed - got 'true'"
        );
        assert_eq!(
            e.errors["newid"],
            "property is missing and it is not optional"
        );
        assert!(e.errors["x"].starts_with("property is not defined"));
    }

    proptest! {
        #[test]
        fn never_panics(q in ".*", body in proptest::collection::vec(any::<u8>(), 0..200), ct in "(application/json|application/x-www-form-urlencoded|text/plain|)") {
            if let Ok(p) = Params::parse(Some(&q), &ct, &body) {
                let _ = p.check(&[opt("a", Kind::Int(0, 9)), opt("b", Kind::Bool), opt("c", Kind::Array)], |_| true);
            }
        }
    }
}
