//! JSON values as structured merge sees them: a total order (so that set
//! elements and keys can be sorted), equality where `1` equals `1.0`, the
//! text Go's `encoding/json` writes (used inside `k:` and `v:` keys) and the
//! text used in field paths of messages (`[name="net1"]`).

use std::cmp::Ordering;

use serde_json::{Map, Number, Value};

use crate::api::field::{go_float, go_quote};

/// A number as Go's unstructured decoding sees it: an integer or a float.
enum Num {
    Int(i128),
    Float(f64),
}

fn num(n: &Number) -> Num {
    if let Some(i) = n.as_i64() {
        Num::Int(i128::from(i))
    } else if let Some(u) = n.as_u64() {
        Num::Int(i128::from(u))
    } else {
        Num::Float(n.as_f64().unwrap_or(f64::NAN))
    }
}

fn compare_numbers(a: &Number, b: &Number) -> Ordering {
    match (num(a), num(b)) {
        (Num::Int(x), Num::Int(y)) => x.cmp(&y),
        // Integers and floats compare numerically; NaN cannot come from JSON.
        (Num::Int(x), Num::Float(y)) => (x as f64).total_cmp(&y),
        (Num::Float(x), Num::Int(y)) => x.total_cmp(&(y as f64)),
        (Num::Float(x), Num::Float(y)) => x.total_cmp(&y),
    }
}

/// The rank of a value's type in the order: numbers, strings, booleans,
/// lists, maps, null.
fn rank(value: &Value) -> u8 {
    match value {
        Value::Number(_) => 0,
        Value::String(_) => 1,
        Value::Bool(_) => 2,
        Value::Array(_) => 3,
        Value::Object(_) => 4,
        Value::Null => 5,
    }
}

/// The total order of values used to sort set elements and keys.
pub fn compare(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => compare_numbers(x, y),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (l, r) in x.iter().zip(y) {
                let c = compare(l, r);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => compare_maps(x, y),
        (Value::Null, Value::Null) => Ordering::Equal,
        _ => rank(a).cmp(&rank(b)),
    }
}

/// Maps compare key by key in lexical key order; a map that runs out of
/// keys first, or lacks a key the other has, sorts according to which side
/// is shorter or missing the key.
fn compare_maps(x: &Map<String, Value>, y: &Map<String, Value>) -> Ordering {
    let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
    keys.sort();
    keys.dedup();
    for (i, key) in keys.into_iter().enumerate() {
        if i == x.len() {
            return Ordering::Less;
        }
        if i == y.len() {
            return Ordering::Greater;
        }
        let c = match (x.get(key), y.get(key)) {
            (None, _) => Ordering::Greater,
            (_, None) => Ordering::Less,
            (Some(l), Some(r)) => compare(l, r),
        };
        if c != Ordering::Equal {
            return c;
        }
    }
    Ordering::Equal
}

/// Whether two values are equal, numbers compared numerically.
pub fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => compare_numbers(x, y) == Ordering::Equal,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(l, r)| equal(l, r))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, l)| y.get(k).is_some_and(|r| equal(l, r)))
        }
        _ => a == b,
    }
}

/// Writes `value` as Go's `encoding/json` does: compact, keys sorted,
/// `<`, `>` and `&` escaped, floats in Go's shortest form.
pub fn write_go_json(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match num(n) {
            Num::Int(i) => out.push_str(&i.to_string()),
            Num::Float(f) => out.push_str(&go_json_float(f)),
        },
        Value::String(s) => write_go_json_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_json_string(key, out);
                out.push(':');
                write_go_json(item, out);
            }
            out.push('}');
        }
    }
}

/// A JSON string literal as Go's `encoding/json` writes it.
pub fn write_go_json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Go's `encoding/json` float: plain decimal for magnitudes in [1e-6, 1e21),
/// exponent form (`1e+21`, `1e-07`) otherwise.
fn go_json_float(f: f64) -> String {
    let abs = f.abs();
    if abs == 0.0 || (1e-6..1e21).contains(&abs) {
        return format!("{f}");
    }
    let s = format!("{f:e}");
    let Some((mantissa, exponent)) = s.split_once('e') else {
        return s;
    };
    let (sign, digits) = match exponent.strip_prefix('-') {
        Some(d) => ('-', d),
        None => ('+', exponent),
    };
    let digits = if digits.len() < 2 {
        format!("0{digits}")
    } else {
        digits.to_owned()
    };
    format!("{mantissa}e{sign}{digits}")
}

/// A value as it appears in a field path of a message: strings quoted the
/// Go way, numbers and booleans plainly, lists in brackets.
pub fn display(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match num(n) {
            Num::Int(i) => i.to_string(),
            Num::Float(f) => go_float(f),
        },
        Value::String(s) => go_quote(s),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(display).collect();
            format!("[{}]", parts.join(","))
        }
        // Structured merge writes map entries back to back.
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| format!("{k}={}", display(v)))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn numbers_sort_before_strings_booleans_lists_maps_and_null() {
        let mut values = vec![
            Value::Null,
            json!({"a": 1}),
            json!([1]),
            json!(true),
            json!("a"),
            json!(2.5),
            json!(1),
        ];
        values.sort_by(compare);
        assert_eq!(
            values,
            vec![
                json!(1),
                json!(2.5),
                json!("a"),
                json!(true),
                json!([1]),
                json!({"a": 1}),
                Value::Null
            ]
        );
    }

    #[test]
    fn integers_and_floats_compare_numerically() {
        assert!(equal(&json!(1), &json!(1.0)));
        assert_eq!(compare(&json!(2), &json!(10)), Ordering::Less);
        assert_eq!(compare(&json!(1.5), &json!(1)), Ordering::Greater);
        assert!(!equal(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
    }

    #[test]
    fn go_json_escapes_html_and_formats_floats_like_go() {
        let mut out = String::new();
        write_go_json(
            &json!({"b": "x<y&z", "a": [1.5, 1e21, 0.0000001, 3.0]}),
            &mut out,
        );
        assert_eq!(out, r#"{"a":[1.5,1e+21,1e-07,3],"b":"x\u003cy\u0026z"}"#);
    }

    #[test]
    fn display_quotes_strings_the_go_way() {
        assert_eq!(display(&json!("net\n1")), r#""net\n1""#);
        assert_eq!(display(&json!([1, "a"])), r#"[1,"a"]"#);
        assert_eq!(display(&json!(0.5)), "0.5");
    }
}
