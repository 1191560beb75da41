//! Lenient decoding of PVE's loosely typed JSON.
//!
//! Perl stringifies numbers at random places (`nextid` is `"105"`, `memory` is `"4096"`,
//! `loadavg` is `["0.42", ...]`, `cpuinfo.mhz` is `"2999.998"`), booleans are `0`/`1`
//! numbers or strings, and older releases differ from newer ones. These helpers accept
//! every spelling seen in the wild and never panic; a value that cannot be interpreted
//! is a decode error for required fields and `None` for optional ones.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// Reads an unsigned integer from a number (integral float included) or numeric string.
pub fn as_u64(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= u64::MAX as f64)
                .map(|f| f as u64)
        }),
        Value::String(s) => {
            let t = s.trim();
            t.parse::<u64>()
                .ok()
                .or_else(|| as_u64(&Value::from(t.parse::<f64>().ok()?)))
        }
        Value::Bool(b) => Some(u64::from(*b)),
        _ => None,
    }
}

/// Reads a signed integer from a number or numeric string.
pub fn as_i64(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() <= i64::MAX as f64)
                .map(|f| f as i64)
        }),
        Value::String(s) => s.trim().parse::<i64>().ok(),
        Value::Bool(b) => Some(i64::from(*b)),
        _ => None,
    }
}

/// Reads a float from a number or numeric string (finite values only).
pub fn as_f64(v: &Value) -> Option<f64> {
    let f = match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }?;
    f.is_finite().then_some(f)
}

/// Reads PVE's booleans: `0`/`1` (numbers or strings), JSON `true`/`false`, and the
/// spellings `yes`/`no`/`on`/`off`/`true`/`false` some endpoints echo back.
pub fn as_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::Number(_) => as_i64(v).map(|n| n != 0),
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => Some(true),
            "0" | "false" | "no" | "off" | "" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// Reads a string; numbers and booleans are printed the way Perl would.
pub fn as_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(if *b { "1" } else { "0" }.to_string()),
        _ => None,
    }
}

fn required<'de, D, T>(d: D, what: &str, read: fn(&Value) -> Option<T>) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
{
    let v = Value::deserialize(d)?;
    read(&v).ok_or_else(|| serde::de::Error::custom(format!("expected {what}, got {v}")))
}

fn optional<'de, D, T>(d: D, read: fn(&Value) -> Option<T>) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
{
    let v = Option::<Value>::deserialize(d)?;
    Ok(v.as_ref().and_then(read))
}

/// `deserialize_with` for a required unsigned integer.
pub fn u64_req<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    required(d, "an unsigned integer", as_u64)
}
/// `deserialize_with` for a required `u32` (VM ids).
pub fn u32_req<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    required(d, "a 32-bit unsigned integer", |v| {
        as_u64(v).and_then(|n| u32::try_from(n).ok())
    })
}
/// `deserialize_with` for a required signed integer.
pub fn i64_req<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    required(d, "an integer", as_i64)
}
/// `deserialize_with` for a required string (numbers are accepted and printed).
pub fn string_req<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    required(d, "a string", as_string)
}
/// `deserialize_with` for an optional unsigned integer (unreadable → `None`).
pub fn u64_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    optional(d, as_u64)
}
/// `deserialize_with` for an optional `u32`.
pub fn u32_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    optional(d, |v| as_u64(v).and_then(|n| u32::try_from(n).ok()))
}
/// `deserialize_with` for an optional signed integer.
pub fn i64_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    optional(d, as_i64)
}
/// `deserialize_with` for an optional float.
pub fn f64_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    optional(d, as_f64)
}
/// `deserialize_with` for an optional boolean.
pub fn bool_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    optional(d, as_bool)
}
/// `deserialize_with` for a boolean that defaults to `false` when absent or unreadable.
pub fn bool_or_false<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(optional(d, as_bool)?.unwrap_or(false))
}
/// `deserialize_with` for an optional string.
pub fn string_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    optional(d, as_string)
}
/// `deserialize_with` for a list of floats given as numbers or strings (`loadavg`);
/// unreadable elements are dropped.
pub fn f64_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    let v = Option::<Value>::deserialize(d)?;
    Ok(match v {
        Some(Value::Array(items)) => items.iter().filter_map(as_f64).collect(),
        _ => Vec::new(),
    })
}

/// go-proxmox's rule for `template` in VM lists: present and not `""`/`0` means template.
pub fn template_flag<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    let v = Option::<Value>::deserialize(d)?;
    Ok(match v {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) => !(s.is_empty() || s == "0"),
        Some(other) => as_bool(&other).unwrap_or(true),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn reads_the_pve_spellings() {
        assert_eq!(as_u64(&json!("105")), Some(105));
        assert_eq!(as_u64(&json!(105)), Some(105));
        assert_eq!(as_u64(&json!(4096.0)), Some(4096));
        assert_eq!(as_u64(&json!(-1)), None);
        assert_eq!(as_u64(&json!("1.5")), None);
        assert_eq!(as_f64(&json!("2999.998")), Some(2999.998));
        assert_eq!(as_f64(&json!("NaN")), None);
        assert_eq!(as_bool(&json!(1)), Some(true));
        assert_eq!(as_bool(&json!("0")), Some(false));
        assert_eq!(as_bool(&json!(true)), Some(true));
        assert_eq!(as_bool(&json!("maybe")), None);
        assert_eq!(as_string(&json!(4096)), Some("4096".into()));
    }

    #[derive(Deserialize, Debug)]
    #[allow(dead_code)] // fields exist to be decoded
    struct Sample {
        #[serde(deserialize_with = "u64_req")]
        n: u64,
        #[serde(default, deserialize_with = "bool_opt")]
        b: Option<bool>,
        #[serde(default, deserialize_with = "template_flag")]
        template: bool,
        #[serde(default, deserialize_with = "f64_list")]
        loadavg: Vec<f64>,
    }

    #[test]
    fn struct_fields_decode_leniently() {
        let s: Sample = serde_json::from_value(
            json!({"n":"7","b":"1","template":1,"loadavg":["0.42",0.5,"x"]}),
        )
        .expect("decodes");
        assert_eq!(s.n, 7);
        assert_eq!(s.b, Some(true));
        assert!(s.template);
        assert_eq!(s.loadavg, vec![0.42, 0.5]);
        let s: Sample = serde_json::from_value(json!({"n":1,"template":""})).expect("decodes");
        assert!(!s.template);
        assert!(serde_json::from_value::<Sample>(json!({"n":"x"})).is_err());
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            ".*".prop_map(Value::String),
            "[-+]?[0-9]{0,25}(\\.[0-9]{0,5})?(e[-+]?[0-9]{1,3})?".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z]{1,3}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn readers_never_panic(v in arb_json()) {
            let _ = (as_u64(&v), as_i64(&v), as_f64(&v), as_bool(&v), as_string(&v));
            let _ = serde_json::from_value::<Sample>(json!({"n": v.clone(), "b": v.clone(),
                "template": v.clone(), "loadavg": v}));
        }

        #[test]
        fn numeric_strings_read_as_numbers(n: u64) {
            prop_assert_eq!(as_u64(&json!(n.to_string())), Some(n));
            prop_assert_eq!(as_u64(&json!(n)), Some(n));
        }
    }
}
