//! Values drawn from a CRD's OpenAPI schema: valid ones (to build objects both sides should
//! accept) and ones that cross exactly one of the schema's rules (a bound, a pattern, an enum,
//! a format, a type, a required property, a map key), for the same edit on both sides.

use regex::Regex;
use serde_json::{Map, Value, json};

use crate::peer::mutate::{Edit, Rng, Step, paths, wrong_type};

/// How deep optional properties are still drawn: the KubeVirt VM template nests dozens of
/// levels, and an object with everything in it would be megabytes.
const OPTIONAL_DEPTH: usize = 4;

/// Strings a pattern or format may accept, tried in order.
const CANDIDATES: [&str; 18] = [
    "x1",
    "a",
    "abc",
    "ab-cd",
    "10.0.0.5",
    "10.0.0.0/24",
    "fd00::5",
    "2026-12-01T00:00:00Z",
    "1",
    "80",
    "1Gi",
    "example.com",
    "aa:bb:cc:dd:ee:ff",
    "00000000-0000-0000-0000-000000000001",
    "A",
    "/path",
    "Name",
    "10s",
];

/// The sample of a string `format` kube checks, where it has one.
fn formatted(format: &str) -> Option<&'static str> {
    Some(match format {
        "date-time" => "2026-12-01T00:00:00Z",
        "date" => "2026-12-01",
        "ipv4" => "10.0.0.5",
        "ipv6" => "fd00::5",
        "cidr" => "10.0.0.0/24",
        "uuid" => "00000000-0000-0000-0000-000000000001",
        "mac" => "aa:bb:cc:dd:ee:ff",
        "hostname" => "example.com",
        "uri" => "https://example.com/x",
        "email" => "a@example.com",
        "byte" => "eA==",
        "duration" => "10s",
        _ => return None,
    })
}

fn string_fits(schema: &Value, candidate: &str) -> bool {
    let length = candidate.chars().count() as u64;
    schema["minLength"].as_u64().is_none_or(|min| length >= min)
        && schema["maxLength"].as_u64().is_none_or(|max| length <= max)
        && schema["pattern"]
            .as_str()
            .is_none_or(|pattern| Regex::new(pattern).is_ok_and(|re| re.is_match(candidate)))
}

fn valid_string(schema: &Value) -> Value {
    if let Some(sample) = schema["format"].as_str().and_then(formatted) {
        return json!(sample);
    }
    let fitting = CANDIDATES.iter().find(|c| string_fits(schema, c));
    let text = fitting.map_or_else(
        || "x".repeat(schema["minLength"].as_u64().unwrap_or(1) as usize),
        |c| (*c).to_owned(),
    );
    json!(text)
}

fn valid_number(schema: &Value, rng: &mut Rng) -> Value {
    let (min, max) = (schema["minimum"].as_f64(), schema["maximum"].as_f64());
    let mut n = match (min, max) {
        (Some(min), _) if rng.below(2) == 0 => {
            min.ceil() + f64::from(schema["exclusiveMinimum"] == true)
        }
        (_, Some(max)) if rng.below(2) == 0 => {
            max.floor() - f64::from(schema["exclusiveMaximum"] == true)
        }
        (Some(min), _) => min.ceil() + 1.0,
        _ => 1.0,
    };
    if let Some(max) = max {
        n = n.min(max);
    }
    json!(n as i64)
}

/// A value `schema` accepts (its CEL rules aside), optional properties drawn at random.
pub fn valid(schema: &Value, rng: &mut Rng, depth: usize) -> Value {
    if schema["x-kubernetes-int-or-string"] == true {
        return if rng.below(2) == 0 {
            json!(1)
        } else {
            json!("50%")
        };
    }
    if let Some(values) = schema["enum"].as_array().filter(|v| !v.is_empty()) {
        return rng.pick(values).clone();
    }
    match schema["type"].as_str().unwrap_or_default() {
        "object" => valid_object(schema, rng, depth),
        "array" => {
            let count = schema["minItems"]
                .as_u64()
                .unwrap_or(0)
                .max(u64::from(depth < OPTIONAL_DEPTH && rng.below(2) == 0));
            let mut items: Vec<Value> = (0..count)
                .map(|_| valid(&schema["items"], rng, depth + 1))
                .collect();
            items.dedup();
            Value::Array(items)
        }
        "string" => valid_string(schema),
        "integer" | "number" => valid_number(schema, rng),
        "boolean" => json!(rng.below(2) == 0),
        _ => json!({}),
    }
}

fn valid_object(schema: &Value, rng: &mut Rng, depth: usize) -> Value {
    let required: Vec<&str> = required(schema);
    let mut object = Map::new();
    let (min, max) = (
        schema["minProperties"].as_u64().unwrap_or(0) as usize,
        schema["maxProperties"]
            .as_u64()
            .map_or(usize::MAX, |m| m as usize),
    );
    if let Some(properties) = schema["properties"].as_object() {
        for (key, property) in properties {
            let wanted = required.contains(&key.as_str())
                || object.len() < min
                || depth < OPTIONAL_DEPTH && rng.below(depth + 3) == 0;
            if wanted && object.len() < max {
                object.insert(key.clone(), valid(property, rng, depth + 1));
            }
        }
    } else if schema["additionalProperties"].is_object() && rng.below(2) == 0 {
        object.insert(
            "k1".into(),
            valid(&schema["additionalProperties"], rng, depth + 1),
        );
    }
    Value::Object(object)
}

pub fn required(schema: &Value) -> Vec<&str> {
    schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// Values that break exactly one rule of `schema` (its bounds, pattern, enum, format, type),
/// for a value at a place it governs.
pub fn crossing(schema: &Value, rng: &mut Rng) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(max) = schema["maxLength"].as_u64() {
        out.push(json!("x".repeat(max as usize + 1)));
    }
    if schema["minLength"].as_u64().is_some_and(|min| min > 0) {
        out.push(json!(""));
    }
    if schema["pattern"].is_string() {
        out.push(json!("Not A Match!"));
    }
    if schema["enum"].is_array() {
        out.push(json!("NotInTheEnum"));
    }
    if schema["format"].as_str().and_then(formatted).is_some() {
        out.push(json!("not-formatted"));
    }
    for (bound, step) in [("maximum", 1.0), ("minimum", -1.0)] {
        if let Some(limit) = schema[bound].as_f64() {
            out.push(json!((limit + step) as i64));
            out.push(json!(limit as i64));
        }
    }
    if let Some(max) = schema["maxItems"].as_u64() {
        let item = valid(&schema["items"], rng, OPTIONAL_DEPTH);
        out.push(Value::Array(vec![item; max as usize + 1]));
    }
    if schema["minItems"].as_u64().is_some_and(|min| min > 0) {
        out.push(json!([]));
    }
    if let Some(max) = schema["maxProperties"].as_u64() {
        let entries: Map<String, Value> = (0..=max)
            .map(|i| {
                (
                    format!("k{i}"),
                    valid(&schema["additionalProperties"], rng, OPTIONAL_DEPTH),
                )
            })
            .collect();
        out.push(Value::Object(entries));
    }
    if schema["x-kubernetes-int-or-string"] == true {
        out.push(json!(true));
        out.push(json!(1.5));
    }
    out
}

/// The schema that governs the value at `path` below the object's schema, where the schema
/// says (`None` below preserved unknown fields).
pub fn at<'a>(schema: &'a Value, path: &[Step]) -> Option<&'a Value> {
    path.iter().try_fold(schema, |node, step| {
        let next = match step {
            Step::Key(key) => node["properties"]
                .get(key)
                .or_else(|| node.get("additionalProperties").filter(|a| a.is_object())),
            Step::Index(_) => node.get("items"),
        };
        next.filter(|n| n.is_object())
    })
}

/// A random edit below `root` (`spec`, `status`) that the schema makes meaningful: an optional
/// property added with a valid or a rule-crossing value, a required one removed, a bound
/// crossed where a value is, a list-map or set item duplicated, an unknown field added, a
/// value of the wrong type.
pub fn schema_edit(rng: &mut Rng, object: &Value, root: &str, schema: &Value) -> Option<Edit> {
    let below = object.get(root)?;
    let mut all = Vec::new();
    paths(below, vec![Step::Key(root.to_owned())], &mut all);
    let governed: Vec<(Vec<Step>, &Value, &Value)> = all
        .into_iter()
        .filter_map(|(path, value)| at(schema, &path).map(|s| (path, value, s)))
        .collect();
    let (path, value, node) = rng.pick(&governed).clone();
    let child = |key: &str| {
        let mut path = path.clone();
        path.push(Step::Key(key.to_owned()));
        path
    };
    match (value, rng.below(6)) {
        (Value::Object(_), 0 | 1) if node["properties"].is_object() => {
            let properties: Vec<(&String, &Value)> = node["properties"]
                .as_object()
                .into_iter()
                .flatten()
                .collect();
            let (key, property) = *rng.pick(&properties);
            let mut choices = crossing(property, rng);
            choices.push(valid(property, rng, OPTIONAL_DEPTH - 1));
            Some(Edit::set(child(key), rng.pick(&choices).clone()))
        }
        (Value::Object(map), 2) if !required(node).is_empty() => {
            let present: Vec<&str> = required(node)
                .into_iter()
                .filter(|k| map.contains_key(*k))
                .collect();
            (!present.is_empty()).then(|| Edit::remove(child(present[rng.below(present.len())])))
        }
        (Value::Array(items), 2) if !items.is_empty() => {
            Some(Edit::duplicate(path.clone(), rng.below(items.len())))
        }
        (Value::Object(_), 3) if node["x-kubernetes-preserve-unknown-fields"] != true => {
            Some(Edit::set(child("unknownField"), json!("x")))
        }
        (_, 3 | 4) => {
            let choices = crossing(node, rng);
            (!choices.is_empty()).then(|| Edit::set(path.clone(), rng.pick(&choices).clone()))
        }
        _ => Some(Edit::set(path.clone(), wrong_type(rng, value))),
    }
}
