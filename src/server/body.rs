//! Request bodies: the 3 MiB limit (kube-apiserver's `MaxRequestBodyBytes`, answered with a
//! 413 Status), and JSON/YAML decoding into `serde_json::Value` that records duplicate fields
//! (for `fieldValidation`), bounds nesting depth, and reports malformed input as 400.

use std::cell::{Cell, RefCell};
use std::fmt;

use axum::body::Body;
use axum::http::{HeaderMap, header};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::error::ApiError;
use super::negotiation::BodyFormat;

/// kube-apiserver's request body limit: 3 MiB.
pub const MAX_REQUEST_BODY_BYTES: usize = 3 * 1024 * 1024;
/// Deeper documents are rejected (objects of these kinds nest a handful of levels).
pub const MAX_NESTING_DEPTH: usize = 64;

fn too_large(limit: usize) -> ApiError {
    ApiError::request_entity_too_large(&format!("limit is {limit}"))
}

fn too_large_body() -> ApiError {
    ApiError::request_entity_too_large(&format!(
        "the body holds more than {MAX_BODY_VALUES} values"
    ))
}

/// Refuses a declared `Content-Length` over the limit before anything reads the body.
pub fn check_declared_length(headers: &HeaderMap) -> Result<(), ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > MAX_REQUEST_BODY_BYTES as u64) {
        return Err(too_large(MAX_REQUEST_BODY_BYTES));
    }
    Ok(())
}

/// Reads a whole body, failing with 413 as soon as it exceeds `limit` bytes.
pub async fn read_body(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    let mut stream = body.into_data_stream();
    let mut buf = BytesMut::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk
            .map_err(|e| ApiError::bad_request(format!("unable to read request body: {e}")))?;
        if buf.len() + chunk.len() > limit {
            return Err(too_large(limit));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}

/// A decoded body and the paths of fields that appeared more than once (the last one wins).
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedBody {
    pub value: Value,
    pub duplicate_fields: Vec<String>,
}

/// Decodes a body in the given format.
pub fn decode(format: BodyFormat, bytes: &[u8]) -> Result<DecodedBody, ApiError> {
    match format {
        BodyFormat::Json => decode_json(bytes),
        BodyFormat::Yaml => decode_yaml(bytes),
    }
}

/// Decodes JSON. Invalid UTF-8 becomes U+FFFD, one per byte, as Go's decoder (and so
/// kube-apiserver) reads it.
pub fn decode_json(bytes: &[u8]) -> Result<DecodedBody, ApiError> {
    match decode_json_as_is(bytes) {
        // serde_json already checks UTF-8 as it reads: only a body it refused is scanned
        // again, and read once more with the replacements when that was the reason.
        Err(_) if std::str::from_utf8(bytes).is_err() => decode_json_as_is(&go_utf8(bytes)),
        decoded => decoded,
    }
}

fn decode_json_as_is(bytes: &[u8]) -> Result<DecodedBody, ApiError> {
    let tracker = Tracker::default();
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = ValueSeed::root(&tracker)
        .deserialize(&mut deserializer)
        .and_then(|v| deserializer.end().map(|()| v))
        .map_err(|e| tracker.error(|| format!("json parse error: {e}")))?;
    Ok(tracker.finish(value))
}

/// `bytes` with every byte that is not part of valid UTF-8 replaced by U+FFFD.
fn go_utf8(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + 16);
    for chunk in bytes.utf8_chunks() {
        out.extend_from_slice(chunk.valid().as_bytes());
        for _ in chunk.invalid() {
            out.extend_from_slice(
                char::REPLACEMENT_CHARACTER
                    .encode_utf8(&mut [0; 4])
                    .as_bytes(),
            );
        }
    }
    out
}

/// Decodes YAML (one document). YAML 1.1 spellings like unquoted `yes`/`on` become booleans,
/// as with sigs.k8s.io/yaml; quoted strings stay strings.
pub fn decode_yaml(bytes: &[u8]) -> Result<DecodedBody, ApiError> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        ApiError::bad_request(format!("error converting YAML to JSON: invalid UTF-8: {e}"))
    })?;
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = MAX_NESTING_DEPTH;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::LastWins;
    let tracker = Tracker::default();
    let value = serde_saphyr::with_deserializer_from_str_with_options(text, options, |de| {
        ValueSeed::root(&tracker).deserialize(de)
    })
    .map_err(|e| {
        tracker.error(|| format!("error converting YAML to JSON: {}", yaml_problem(&e)))
    })?;
    Ok(tracker.finish(value))
}

/// What is wrong with a YAML body, in words about the input: the parser's own text for
/// syntax errors (its first line, without the snippet), go-yaml's words where kube's
/// decoder has them, never the library's advice to its programmers.
fn yaml_problem(error: &serde_saphyr::Error) -> String {
    use serde_saphyr::Error;
    use serde_saphyr::budget::BudgetBreach;
    let mut error = error;
    while let Error::WithSnippet { error: inner, .. } | Error::AliasError { error: inner, .. } =
        error
    {
        error = inner;
    }
    match error {
        Error::MultipleDocuments { .. } => "yaml: the body holds more than one document".to_owned(),
        Error::Budget { breach, .. } => match breach {
            BudgetBreach::Depth { .. } => {
                format!("yaml: exceeded max depth of {MAX_NESTING_DEPTH} nested objects or arrays")
            }
            BudgetBreach::Aliases { .. }
            | BudgetBreach::Anchors { .. }
            | BudgetBreach::AliasAnchorRatio { .. }
            | BudgetBreach::RecordedAnchorEvents { .. }
            | BudgetBreach::RecordedAnchorBytes { .. }
            | BudgetBreach::MergeKeys { .. } => {
                "yaml: document contains excessive aliasing".to_owned()
            }
            _ => "yaml: document is too large or too complex".to_owned(),
        },
        other => {
            let message = other.to_string();
            message.lines().next().unwrap_or("invalid YAML").to_owned()
        }
    }
}

/// At most this many JSON values (objects, arrays and scalars) in one body. JSON cannot
/// exceed about 1.5 million in 3 MiB, but YAML aliases repeat what they name without costing
/// input; and our kinds' objects hold hundreds. The bound keeps a body's decoded form within
/// a few megabytes.
pub const MAX_BODY_VALUES: usize = 100_000;

/// What decoding one body collected: duplicate keys, and how many values it built.
#[derive(Default)]
struct Tracker {
    duplicates: RefCell<Vec<String>>,
    values: Cell<usize>,
}

impl Tracker {
    /// Counts one more value, failing past [`MAX_BODY_VALUES`].
    fn count<E: de::Error>(&self) -> Result<(), E> {
        let values = self.values.get() + 1;
        self.values.set(values);
        if values > MAX_BODY_VALUES {
            return Err(E::custom("too many values"));
        }
        Ok(())
    }

    /// The error of a failed decode: 413 when the value budget ran out, else a 400 with
    /// `message`.
    fn error(&self, message: impl FnOnce() -> String) -> ApiError {
        if self.values.get() > MAX_BODY_VALUES {
            return too_large_body();
        }
        ApiError::bad_request(message())
    }

    fn finish(self, value: Value) -> DecodedBody {
        DecodedBody {
            value,
            duplicate_fields: self.duplicates.into_inner(),
        }
    }
}

/// Where a value sits, as a chain of borrowed segments: rendered (`spec.x[0].n`) only when a
/// duplicate key is found, so decoding allocates no paths.
#[derive(Clone, Copy)]
enum Segment<'p> {
    Root,
    Key(&'p Segment<'p>, &'p str),
    Index(&'p Segment<'p>, usize),
}

impl Segment<'_> {
    fn render(&self) -> String {
        match self {
            Segment::Root => String::new(),
            Segment::Key(parent, key) => match parent.render() {
                p if p.is_empty() => (*key).to_owned(),
                p => format!("{p}.{key}"),
            },
            Segment::Index(parent, index) => format!("{}[{index}]", parent.render()),
        }
    }
}

/// Builds a `Value` while tracking the path, the depth and duplicate keys.
struct ValueSeed<'t, 'p> {
    tracker: &'t Tracker,
    path: Segment<'p>,
    depth: usize,
}

impl<'t> ValueSeed<'t, '_> {
    fn root(tracker: &'t Tracker) -> Self {
        Self {
            tracker,
            path: Segment::Root,
            depth: 0,
        }
    }

    fn check_depth<E: de::Error>(&self) -> Result<(), E> {
        if self.depth >= MAX_NESTING_DEPTH {
            return Err(E::custom(format!(
                "exceeded max depth of {MAX_NESTING_DEPTH} nested objects or arrays"
            )));
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_, '_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.tracker.count()?;
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.check_depth()?;
        let mut items = Vec::new();
        loop {
            let seed = ValueSeed {
                tracker: self.tracker,
                path: Segment::Index(&self.path, items.len()),
                depth: self.depth + 1,
            };
            match seq.next_element_seed(seed)? {
                Some(item) => items.push(item),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        self.check_depth()?;
        let mut map = Map::new();
        while let Some(key) = access.next_key_seed(KeySeed)? {
            let seed = ValueSeed {
                tracker: self.tracker,
                path: Segment::Key(&self.path, &key),
                depth: self.depth + 1,
            };
            let value = access.next_value_seed(seed)?;
            if map.contains_key(&key) {
                let path = Segment::Key(&self.path, &key).render();
                self.tracker.duplicates.borrow_mut().push(path);
            }
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }
}

/// Map keys: strings, and (in YAML) scalars that JSON turns into strings.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = String;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl Visitor<'_> for KeySeed {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a scalar map key")
    }

    fn visit_str<E>(self, v: &str) -> Result<String, E> {
        Ok(v.to_owned())
    }

    fn visit_string<E>(self, v: String) -> Result<String, E> {
        Ok(v)
    }

    fn visit_bool<E>(self, v: bool) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_i64<E>(self, v: i64) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_u64<E>(self, v: u64) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_f64<E>(self, v: f64) -> Result<String, E> {
        Ok(crate::registry::gofmt::format_float(v))
    }

    fn visit_unit<E>(self) -> Result<String, E> {
        Ok("null".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_with_duplicates() {
        let body =
            decode_json(br#"{"a":1,"spec":{"x":[{"n":1,"n":2}],"y":true},"a":3}"#).expect("json");
        assert_eq!(
            body.value,
            json!({"a": 3, "spec": {"x": [{"n": 2}], "y": true}})
        );
        assert_eq!(body.duplicate_fields, ["spec.x[0].n", "a"]);
    }

    #[test]
    fn malformed_json_is_bad_request() {
        for input in [
            &b"{"[..],
            b"",
            b"{\"a\":}",
            b"[1,2",
            b"{} trailing",
            b"\xff",
        ] {
            let err = decode_json(input).expect_err("malformed");
            assert_eq!(err.code().as_u16(), 400, "{input:?}");
            assert!(err.to_string().starts_with("json parse error: "), "{err}");
        }
    }

    #[test]
    fn depth_is_bounded() {
        let ok = format!(
            "{}{}",
            "[".repeat(MAX_NESTING_DEPTH),
            "]".repeat(MAX_NESTING_DEPTH)
        );
        assert!(decode_json(ok.as_bytes()).is_ok());
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let err = decode_json(deep.as_bytes()).expect_err("too deep");
        assert_eq!(err.code().as_u16(), 400);
        let deep_yaml = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
        assert_eq!(
            decode_yaml(deep_yaml.as_bytes())
                .expect_err("too deep")
                .code()
                .as_u16(),
            400
        );
    }

    #[test]
    fn yaml_bodies() {
        let body = decode_yaml(
            b"apiVersion: v1\nkind: Thing\nmetadata:\n  name: a\n  labels: {x: 'yes'}\nspec:\n  enabled: yes\n  count: 3\n  f: 1.5\n  s: \"010\"\n  list: [a, 1, null]\n  1: numeric-key\n",
        )
        .expect("yaml");
        assert_eq!(
            body.value,
            json!({"apiVersion": "v1", "kind": "Thing",
                   "metadata": {"name": "a", "labels": {"x": "yes"}},
                   "spec": {"enabled": true, "count": 3, "f": 1.5, "s": "010", "list": ["a", 1, null], "1": "numeric-key"}})
        );
        let dup = decode_yaml(b"a: 1\nb:\n  c: 1\n  c: 2\n").expect("yaml");
        assert_eq!(dup.duplicate_fields, ["b.c"]);
        assert_eq!(dup.value, json!({"a": 1, "b": {"c": 2}}));
    }

    #[test]
    fn yaml_multi_document_bodies_are_rejected() {
        let err = decode_yaml(b"a: 1\n---\nb: 2\n").expect_err("two documents");
        assert_eq!(err.code().as_u16(), 400);
    }

    /// The YAML 1.1 caveat, shared with kube-apiserver (sigs.k8s.io/yaml into unstructured):
    /// plain `on`/`yes`/`n` are booleans, also as keys, where they become "true"/"false".
    #[test]
    fn yaml_1_1_booleans_like_kube() {
        let body = decode_yaml(b"on: yes\nn: 3\nquoted: 'on'\n").expect("yaml");
        assert_eq!(
            body.value,
            json!({"true": true, "false": 3, "quoted": "on"})
        );
    }

    #[test]
    fn malformed_yaml_is_bad_request() {
        for input in [&b"a: [1, 2"[..], b"a: b: c", b"\t- x\n  y: [", b"\xff\xfe"] {
            let err = decode_yaml(input).expect_err("malformed");
            assert_eq!(err.code().as_u16(), 400, "{input:?}");
            assert!(
                err.to_string()
                    .starts_with("error converting YAML to JSON: "),
                "{err}"
            );
            assert!(!err.to_string().contains('\n'), "one line: {err}");
        }
    }

    #[test]
    fn invalid_utf8_reads_as_go_does() {
        let body = decode_json(b"{\"a\":\"x\xffy\xe2\x82\"}").expect("lenient like Go");
        assert_eq!(body.value, json!({"a": "x\u{fffd}y\u{fffd}\u{fffd}"}));
    }

    #[test]
    fn values_are_bounded_in_json_and_through_yaml_aliases() {
        let at_limit = format!("[{}]", vec!["0"; MAX_BODY_VALUES - 1].join(","));
        assert!(decode_json(at_limit.as_bytes()).is_ok());
        let over = format!("[{}]", vec!["0"; MAX_BODY_VALUES].join(","));
        assert_eq!(
            decode_json(over.as_bytes())
                .expect_err("over")
                .code()
                .as_u16(),
            413
        );
        // Nine levels of ten aliases each: a billion values from a few hundred bytes.
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for level in 1..9 {
            let prev = level - 1;
            let refs = vec![format!("*a{prev}"); 10].join(", ");
            bomb.push_str(&format!("a{level}: &a{level} [{refs}]\n"));
        }
        let err = decode_yaml(bomb.as_bytes()).expect_err("bomb");
        assert!(matches!(err.code().as_u16(), 400 | 413), "{err}");
        assert!(!err.to_string().contains("budget"), "{err}");
    }

    #[tokio::test]
    async fn bodies_over_the_limit_are_413() {
        let ok = read_body(Body::from(vec![b'x'; 10]), 10)
            .await
            .expect("within limit");
        assert_eq!(ok.len(), 10);
        let err = read_body(Body::from(vec![b'x'; 11]), 10)
            .await
            .expect_err("over");
        assert_eq!(err.code().as_u16(), 413);
        assert_eq!(err.to_string(), "Request entity too large: limit is 10");
    }
}
