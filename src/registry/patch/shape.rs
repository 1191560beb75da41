//! Measures of JSON values that patches need before they trust a value: its height and its
//! serialized size, both walked with an explicit stack (a value may be deeper than a thread's
//! stack allows to recurse), and equality as Go's decoder sees it.

use serde_json::Value;

/// How many containers nest in `value` (a scalar is 0, `[]` is 1, `[[]]` is 2).
pub fn height(value: &Value) -> usize {
    let mut highest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((value, above)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        highest = highest.max(above + 1);
        stack.extend(children.map(|child| (child, above + 1)));
    }
    highest
}

/// A value's compact JSON size (as Go's `json.Marshal` writes it) and height.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measured {
    pub bytes: usize,
    pub height: usize,
}

/// Measures `value`, stopping as soon as the size exceeds `budget` (then `bytes` is only
/// known to be over it), so the work is bounded by the budget, not by the value.
pub fn measure(value: &Value, budget: usize) -> Measured {
    let mut bytes = 0usize;
    let mut highest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((value, above)) = stack.pop() {
        if bytes > budget {
            break;
        }
        bytes += match value {
            Value::Null => 4,
            Value::Bool(true) => 4,
            Value::Bool(false) => 5,
            Value::Number(n) => n.to_string().len(),
            Value::String(s) => string_size(s),
            Value::Array(items) => {
                highest = highest.max(above + 1);
                stack.extend(items.iter().map(|item| (item, above + 1)));
                // Brackets and the commas between items.
                2 + items.len().saturating_sub(1)
            }
            Value::Object(map) => {
                highest = highest.max(above + 1);
                stack.extend(map.values().map(|item| (item, above + 1)));
                // Braces, commas, and each key with its colon.
                2 + map.len().saturating_sub(1)
                    + map.keys().map(|k| string_size(k) + 1).sum::<usize>()
            }
        };
    }
    Measured {
        bytes,
        height: highest,
    }
}

/// A JSON string's encoded size, with Go's escapes (`\"`, `\\`, control characters, and the
/// HTML-safe `\u003c` `\u003e` `\u0026`, U+2028, U+2029).
fn string_size(s: &str) -> usize {
    2 + s
        .chars()
        .map(|c| match c {
            '"' | '\\' | '\n' | '\r' | '\t' => 2,
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => 6,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        })
        .sum::<usize>()
}

/// Equality as evanphx's `test` sees it: numbers by value (Go decodes them all as float64,
/// so `1` equals `1.0`), objects regardless of key order.
pub fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| equal(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn heights() {
        assert_eq!(height(&json!(1)), 0);
        assert_eq!(height(&json!([])), 1);
        assert_eq!(height(&json!({"a": [1, {"b": []}], "c": 2})), 4);
    }

    #[test]
    fn sizes_match_compact_json() {
        for value in [
            json!(null),
            json!(true),
            json!(false),
            json!(-12.5),
            json!("a\"b\\c\nd"),
            json!([1, "x", [null, {}]]),
            json!({"a": 1, "bb": {"c": [true, false]}}),
        ] {
            assert_eq!(
                measure(&value, usize::MAX).bytes,
                serde_json::to_string(&value).expect("json").len(),
                "{value}"
            );
        }
        assert_eq!(measure(&json!("<&>"), usize::MAX).bytes, 2 + 18);
    }

    #[test]
    fn measuring_stops_at_the_budget() {
        let big = Value::Array(vec![json!("x".repeat(100)); 10_000]);
        // Over the budget, and far short of the million bytes a full walk would count.
        let measured = measure(&big, 1_000);
        assert!(
            measured.bytes > 1_000 && measured.bytes < 20_000,
            "{measured:?}"
        );
    }

    #[test]
    fn deep_values_do_not_overflow_the_stack() {
        let mut deep = json!(1);
        for _ in 0..200_000 {
            deep = Value::Array(vec![deep]);
        }
        assert_eq!(height(&deep), 200_000);
        assert_eq!(measure(&deep, usize::MAX).height, 200_000);
        // Dropping it recursively would overflow: take it apart level by level.
        while let Value::Array(mut items) = deep {
            deep = items.pop().unwrap_or(Value::Null);
        }
    }

    #[test]
    fn equality_like_go() {
        assert!(equal(
            &json!({"a": 1, "b": [2]}),
            &json!({"b": [2.0], "a": 1.0})
        ));
        assert!(!equal(&json!([1, 2]), &json!([2, 1])));
        assert!(!equal(&json!("1"), &json!(1)));
    }
}
