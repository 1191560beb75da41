//! RFC 6902 JSON patch as kube-apiserver applies it (evanphx/json-patch v4: the same
//! operations, pointer rules and error messages, so clients see what a CRD would answer), with
//! the bounds that keep a small patch from doing unbounded work:
//!
//! - at most [`MAX_OPERATIONS`] operations (kube's limit; 413 above it);
//! - `copy` operations may add at most [`MAX_COPY_BYTES`] in total (kube's
//!   `JSONPatchMaxCopyBytes`; 25 self-doubling copies of a 100-byte array would otherwise need
//!   gigabytes);
//! - the patched document nests at most [`MAX_DEPTH`] levels (or as deep as it already was).
//!   kube has no such limit (Go's stacks grow), but every recursive walk here (clone, compare,
//!   drop, serialize) would overflow a thread's stack on the documents that a few thousand
//!   `move`s can build. The depth is bounded without walking the document per operation: an upper bound is carried
//!   along (an `add` of a value places its height at the path's depth; a `move` can at most
//!   carry the deepest part of the document from the source's depth to the target's).
//!
//! Pointer rules of evanphx v4 kept on purpose: a path is split on `/` and its first segment
//! ignored, `~1` and `~0` are the only escapes (`~2` is literally `~2`), array indexes parse
//! like Go's `strconv.Atoi` and may be negative, `replace` of a missing object key adds it, a
//! missing `value` is `null`.

use serde_json::{Map, Value};

use super::shape;

/// kube-apiserver's `maxJSONPatchOperations`.
pub const MAX_OPERATIONS: usize = 10_000;
/// kube-apiserver's default `JSONPatchMaxCopyBytes` (3 MiB, the request body limit).
pub const MAX_COPY_BYTES: usize = 3 * 1024 * 1024;
/// The deepest patched document accepted (as deep as a request body may nest).
pub const MAX_DEPTH: usize = 64;

/// Why a patch cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonPatchError {
    /// The body is not a patch (400).
    Malformed(String),
    /// More operations than [`MAX_OPERATIONS`] (413).
    TooManyOperations(usize),
    /// An operation does not apply to the document, or a bound was reached (422).
    Unapplicable(String),
    /// A `test` operation found another value (422 too; a MutatingAdmissionPolicy's patch
    /// whose test fails leaves the object as it was instead).
    TestFailed(String),
}

impl std::fmt::Display for JsonPatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Malformed(message) | Self::Unapplicable(message) | Self::TestFailed(message) => {
                f.write_str(message)
            }
            Self::TooManyOperations(count) => write!(
                f,
                "The allowed maximum operations in a JSON patch is {MAX_OPERATIONS}, got {count}"
            ),
        }
    }
}

/// A string member of an operation (`op`, `path`, `from`) as sent.
#[derive(Debug, Clone, PartialEq)]
enum Member {
    Missing,
    /// Present but not a string: Go's decoding error names the JSON type.
    NotString(&'static str),
    Text(String),
}

impl Member {
    fn read(operation: &mut Map<String, Value>, name: &str) -> Self {
        match operation.remove(name) {
            None | Some(Value::Null) => Member::Missing,
            Some(Value::String(text)) => Member::Text(text),
            Some(other) => Member::NotString(go_type_name(&other)),
        }
    }

    /// The text, or `context` with evanphx's `missing value` (how `add`, `remove` and the
    /// path of `copy` report any unusable member).
    fn required(&self, context: &str) -> Result<&str, String> {
        match self {
            Member::Text(text) => Ok(text),
            _ => Err(format!("{context}: missing value")),
        }
    }

    /// The text, or the error of evanphx's `Path()`/`From()` wrapped in `context`.
    fn text(&self, context: &str, field: &str) -> Result<&str, String> {
        match self {
            Member::Text(text) => Ok(text),
            Member::Missing => Err(format!(
                "{context}: operation missing {field} field: missing value"
            )),
            Member::NotString(kind) => Err(format!(
                "{context}: json: cannot unmarshal {kind} into Go value of type string"
            )),
        }
    }
}

fn go_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Operation {
    op: Option<String>,
    path: Member,
    from: Member,
    /// `None` when the operation has no `value` member (`test` tells the two apart).
    value: Option<Value>,
    /// The height of `value`, measured once at parse time.
    value_height: usize,
}

/// A decoded RFC 6902 patch.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPatch(Vec<Operation>);

impl JsonPatch {
    /// Decodes a patch body: a JSON array of objects (or `null`, no operations).
    pub fn parse(body: &[u8]) -> Result<Self, JsonPatchError> {
        let document: Value = serde_json::from_slice(body)
            .map_err(|e| JsonPatchError::Malformed(format!("invalid JSON patch: {e}")))?;
        let items = match document {
            Value::Null => Vec::new(),
            Value::Array(items) => items,
            other => {
                return Err(JsonPatchError::Malformed(format!(
                    "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
                    go_type_name(&other)
                )));
            }
        };
        if items.len() > MAX_OPERATIONS {
            return Err(JsonPatchError::TooManyOperations(items.len()));
        }
        items
            .into_iter()
            .map(|item| match item {
                Value::Object(mut operation) => {
                    let op = match operation.remove("op") {
                        Some(Value::String(op)) => Some(op),
                        _ => None,
                    };
                    let path = Member::read(&mut operation, "path");
                    let from = Member::read(&mut operation, "from");
                    let value = operation.remove("value");
                    let value_height = value.as_ref().map_or(0, shape::height);
                    Ok(Operation {
                        op,
                        path,
                        from,
                        value,
                        value_height,
                    })
                }
                // A null element decodes to an empty operation in Go.
                Value::Null => Ok(Operation {
                    op: None,
                    path: Member::Missing,
                    from: Member::Missing,
                    value: None,
                    value_height: 0,
                }),
                other => Err(JsonPatchError::Malformed(format!(
                    "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
                    go_type_name(&other)
                ))),
            })
            .collect::<Result<_, _>>()
            .map(JsonPatch)
    }

    /// Applies every operation in order to `doc`; on an error `doc` is left half-patched (the
    /// caller patches a copy).
    pub fn apply(&self, doc: &mut Value) -> Result<(), JsonPatchError> {
        let height = shape::height(doc);
        let mut run = Run {
            depth_bound: height,
            // A stored object deeper than the bound (none of our kinds nests near it) may
            // still be patched as long as the patch makes it no deeper.
            depth_limit: height.max(MAX_DEPTH),
            copied: 0,
            test_failed: false,
        };
        for operation in &self.0 {
            run.operation(doc, operation).map_err(|message| {
                if run.test_failed {
                    JsonPatchError::TestFailed(message)
                } else {
                    JsonPatchError::Unapplicable(message)
                }
            })?;
        }
        Ok(())
    }
}

/// The state carried across the operations of one application.
struct Run {
    /// An upper bound of the document's height.
    depth_bound: usize,
    /// The height the document may reach.
    depth_limit: usize,
    /// Bytes added by `copy` so far.
    copied: usize,
    /// Whether the failing operation was a `test` that found another value.
    test_failed: bool,
}

impl Run {
    fn operation(&mut self, doc: &mut Value, operation: &Operation) -> Result<(), String> {
        let kind = operation.op.as_deref().unwrap_or("unknown");
        let value = || operation.value.clone().unwrap_or(Value::Null);
        match kind {
            "add" => {
                let path = operation
                    .path
                    .required("add operation failed to decode path")?;
                self.place(path, operation.value_height)?;
                let Some((container, key)) = find_container(doc, path) else {
                    return Err(format!(
                        "add operation does not apply: doc is missing path: \"{path}\": missing value"
                    ));
                };
                insert(container, &key, value())
                    .map_err(|e| format!("error in add for path: '{path}': {e}"))
            }
            "remove" => {
                let path = operation
                    .path
                    .required("remove operation failed to decode path")?;
                let Some((container, key)) = find_container(doc, path) else {
                    return Err(format!(
                        "remove operation does not apply: doc is missing path: \"{path}\": missing value"
                    ));
                };
                remove(container, &key)
                    .map(drop)
                    .map_err(|e| format!("error in remove for path: '{path}': {e}"))
            }
            "replace" => {
                let path = operation
                    .path
                    .text("replace operation failed to decode path", "path")?;
                if path.is_empty() {
                    // evanphx replaces the whole document only with an object or an array,
                    // and silently ignores any other value.
                    if let Some(new @ (Value::Object(_) | Value::Array(_))) = &operation.value {
                        if operation.value_height > self.depth_limit {
                            return Err(too_deep(self.depth_limit, path));
                        }
                        self.depth_bound = operation.value_height;
                        *doc = new.clone();
                    }
                    return Ok(());
                }
                self.place(path, operation.value_height)?;
                let Some((container, key)) = find_container(doc, path) else {
                    return Err(format!(
                        "replace operation does not apply: doc is missing path: {path}: missing value"
                    ));
                };
                set(container, &key, value()).map_err(|_| {
                    format!(
                        "replace operation does not apply: doc is missing key: {path}: missing value"
                    )
                })
            }
            "move" => {
                let from = operation
                    .from
                    .text("move operation failed to decode from", "from")?;
                let path = operation
                    .path
                    .text("move operation failed to decode path", "path")?;
                let Some((container, key)) = find_container(doc, from) else {
                    return Err(format!(
                        "move operation does not apply: doc is missing from path: {from}: missing value"
                    ));
                };
                let moved = remove(container, &key)
                    .map_err(|e| format!("error in move for path: '{key}': {e}"))?;
                // What moves is at most as high as the document below the source.
                let carried = self.depth_bound.saturating_sub(segments(from));
                self.place(path, carried)?;
                let Some((container, key)) = find_container(doc, path) else {
                    return Err(format!(
                        "move operation does not apply: doc is missing destination path: {path}: missing value"
                    ));
                };
                insert(container, &key, moved)
                    .map_err(|e| format!("error in move for path: '{path}': {e}"))
            }
            "test" => {
                let path = operation
                    .path
                    .text("test operation failed to decode path", "path")?;
                let failed = || format!("testing value {path} failed: test failed");
                if path.is_empty() {
                    return match &operation.value {
                        Some(expected) if shape::equal(doc, expected) => Ok(()),
                        _ => {
                            self.test_failed = true;
                            Err(failed())
                        }
                    };
                }
                let Some((container, key)) = find_container(doc, path) else {
                    return Err(format!(
                        "test operation does not apply: is missing path: {path}: missing value"
                    ));
                };
                let actual = get(container, &key)
                    .map_err(|e| format!("error in test for path: '{path}': {e}"))?;
                match (actual, &operation.value) {
                    (None, Some(Value::Null)) => Ok(()),
                    (Some(actual), Some(expected)) if shape::equal(actual, expected) => Ok(()),
                    _ => {
                        self.test_failed = true;
                        Err(failed())
                    }
                }
            }
            "copy" => {
                let from = operation
                    .from
                    .text("copy operation failed to decode from", "from")?;
                let Some((container, key)) = find_container(doc, from) else {
                    return Err(format!(
                        "copy operation does not apply: doc is missing from path: {from}: missing value"
                    ));
                };
                let source = get(container, &key)
                    .map_err(|e| format!("error in copy for from: '{from}': {e}"))?;
                let (copy, height) = self.charge_copy(source)?;
                let path = operation
                    .path
                    .required("copy operation failed to decode path")?;
                self.place(path, height)?;
                let Some((container, key)) = find_container(doc, path) else {
                    return Err(format!(
                        "copy operation does not apply: doc is missing destination path: {path}: missing value"
                    ));
                };
                insert(container, &key, copy)
                    .map_err(|e| format!("error while adding value during copy: {e}"))
            }
            other => Err(format!("Unexpected kind: {other}")),
        }
    }

    /// Records that a value of `height` is placed at `path`, refusing a document that would
    /// nest deeper than its limit.
    fn place(&mut self, path: &str, height: usize) -> Result<(), String> {
        let bound = self.depth_bound.max(segments(path) + height);
        if bound > self.depth_limit {
            return Err(too_deep(self.depth_limit, path));
        }
        self.depth_bound = bound;
        Ok(())
    }

    /// A copy of `source` and its height, after charging its serialized size to the copy
    /// budget. The measuring walk stops once the budget is exceeded, so it is bounded too;
    /// an absent object key copies `null`, as in evanphx.
    fn charge_copy(&mut self, source: Option<&Value>) -> Result<(Value, usize), String> {
        let Some(value) = source else {
            return Ok((Value::Null, 0));
        };
        let measured = shape::measure(value, MAX_COPY_BYTES.saturating_sub(self.copied));
        self.copied += measured.bytes;
        if self.copied > MAX_COPY_BYTES {
            return Err(format!(
                "Unable to complete the copy, the accumulated size increase of copy is {}, exceeding the limit {MAX_COPY_BYTES}",
                self.copied
            ));
        }
        Ok((value.clone(), measured.height))
    }
}

fn too_deep(limit: usize, path: &str) -> String {
    format!("the patched object would nest more than {limit} levels deep at {path:?}")
}

/// The number of reference tokens of a pointer as evanphx splits it.
fn segments(path: &str) -> usize {
    path.matches('/').count()
}

/// RFC 6901 unescaping as evanphx does it: `~1` is `/`, `~0` is `~`, anything else stays.
fn decode_token(token: &str) -> String {
    let mut out = String::with_capacity(token.len());
    let mut chars = token.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('~', Some('1')) => {
                chars.next();
                out.push('/');
            }
            ('~', Some('0')) => {
                chars.next();
                out.push('~');
            }
            _ => out.push(c),
        }
    }
    out
}

/// The container that holds the last token of `path`, and that token: evanphx's
/// `findObject` (the first segment is ignored; every intermediate value must be an object
/// or an array).
fn find_container<'d>(doc: &'d mut Value, path: &str) -> Option<(&'d mut Value, String)> {
    let mut tokens = path.split('/');
    tokens.next();
    let mut tokens: Vec<&str> = tokens.collect();
    let last = decode_token(tokens.pop()?);
    let mut current = doc;
    for token in tokens {
        let key = decode_token(token);
        let next = match current {
            Value::Object(map) => map.get_mut(&key)?,
            Value::Array(items) => {
                let index = existing_index(&key, items.len()).ok()?;
                &mut items[index]
            }
            _ => return None,
        };
        if !(next.is_object() || next.is_array()) {
            return None;
        }
        current = next;
    }
    Some((current, last))
}

/// Go's `strconv.Atoi`, with its error text.
fn atoi(key: &str) -> Result<i64, String> {
    let digits = key.strip_prefix(['+', '-']).unwrap_or(key);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("strconv.Atoi: parsing \"{key}\": invalid syntax"));
    }
    key.parse::<i64>()
        .map_err(|_| format!("strconv.Atoi: parsing \"{key}\": value out of range"))
}

fn invalid_index(index: i64) -> String {
    format!("Unable to access invalid index: {index}: invalid index referenced")
}

/// An index into an array of `len` items (negative counts from the end).
fn existing_index(key: &str, len: usize) -> Result<usize, String> {
    resolve_index(atoi(key)?, len)
}

fn resolve_index(index: i64, len: usize) -> Result<usize, String> {
    let len_i = i64::try_from(len).unwrap_or(i64::MAX);
    let resolved = if index < 0 { index + len_i } else { index };
    if resolved < 0 || resolved >= len_i {
        return Err(invalid_index(index));
    }
    usize::try_from(resolved).map_err(|_| invalid_index(index))
}

fn get<'v>(container: &'v Value, key: &str) -> Result<Option<&'v Value>, String> {
    match container {
        Value::Object(map) => Ok(map.get(key)),
        Value::Array(items) => existing_index(key, items.len()).map(|i| Some(&items[i])),
        _ => Ok(None),
    }
}

fn insert(container: &mut Value, key: &str, value: Value) -> Result<(), String> {
    match container {
        Value::Object(map) => {
            map.insert(key.to_owned(), value);
            Ok(())
        }
        Value::Array(items) if key == "-" => {
            items.push(value);
            Ok(())
        }
        Value::Array(items) => {
            let index = atoi(key)
                .map_err(|e| format!("value was not a proper array index: '{key}': {e}"))?;
            // Inserting may also address the position just past the end.
            let at = resolve_index(index, items.len() + 1)?;
            items.insert(at, value);
            Ok(())
        }
        _ => Err("unknown object type".to_owned()),
    }
}

fn set(container: &mut Value, key: &str, value: Value) -> Result<(), String> {
    match container {
        Value::Object(map) => {
            map.insert(key.to_owned(), value);
            Ok(())
        }
        Value::Array(items) => {
            let index = existing_index(key, items.len())?;
            items[index] = value;
            Ok(())
        }
        _ => Err("unknown object type".to_owned()),
    }
}

fn remove(container: &mut Value, key: &str) -> Result<Value, String> {
    match container {
        Value::Object(map) => map
            .remove(key)
            .ok_or_else(|| format!("Unable to remove nonexistent key: {key}: missing value")),
        Value::Array(items) => {
            let index = existing_index(key, items.len())?;
            Ok(items.remove(index))
        }
        _ => Err("unknown object type".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn patched(doc: Value, patch: Value) -> Result<Value, JsonPatchError> {
        let patch = JsonPatch::parse(patch.to_string().as_bytes())?;
        let mut doc = doc;
        patch.apply(&mut doc)?;
        Ok(doc)
    }

    fn unapplicable(doc: Value, patch: Value) -> String {
        match patched(doc, patch) {
            Err(JsonPatchError::Unapplicable(message)) => message,
            other => panic!("expected a 422, got {other:?}"),
        }
    }

    #[test]
    fn the_six_operations() {
        let doc = json!({"spec": {"n": 1, "list": [1, 2, 3]}, "a~b": {"c/d": 1}});
        let out = patched(
            doc,
            json!([
                {"op": "test", "path": "/spec/n", "value": 1.0},
                {"op": "replace", "path": "/spec/n", "value": 2},
                {"op": "add", "path": "/spec/list/0", "value": 0},
                {"op": "add", "path": "/spec/list/-", "value": 4},
                {"op": "remove", "path": "/spec/list/-1"},
                {"op": "copy", "from": "/spec/list", "path": "/spec/copy"},
                {"op": "move", "from": "/a~0b/c~1d", "path": "/spec/moved"},
            ]),
        )
        .expect("applies");
        assert_eq!(
            out,
            json!({"spec": {"n": 2, "list": [0, 1, 2, 3], "copy": [0, 1, 2, 3], "moved": 1}, "a~b": {}})
        );
    }

    #[test]
    fn evanphx_pointer_rules() {
        // `~2` is no escape: the key is literally `a~2b`.
        assert_eq!(
            unapplicable(
                json!({"metadata": {"labels": {}}}),
                json!([{"op": "remove", "path": "/metadata/labels/a~2b"}])
            ),
            "error in remove for path: '/metadata/labels/a~2b': Unable to remove nonexistent key: a~2b: missing value"
        );
        // replace of an absent object key adds it; a missing value is null.
        assert_eq!(
            patched(
                json!({"spec": {}}),
                json!([{"op": "replace", "path": "/spec/x", "value": 1}, {"op": "add", "path": "/spec/y"}])
            )
            .expect("applies"),
            json!({"spec": {"x": 1, "y": null}})
        );
        assert_eq!(
            unapplicable(json!({}), json!([{"op": "add", "path": "", "value": {}}])),
            "add operation does not apply: doc is missing path: \"\": missing value"
        );
        assert_eq!(
            unapplicable(
                json!({"l": [1]}),
                json!([{"op": "add", "path": "/l/x", "value": 1}])
            ),
            "error in add for path: '/l/x': value was not a proper array index: 'x': strconv.Atoi: parsing \"x\": invalid syntax"
        );
        assert_eq!(
            unapplicable(
                json!({"l": [1]}),
                json!([{"op": "replace", "path": "/l/5", "value": 1}])
            ),
            "replace operation does not apply: doc is missing key: /l/5: missing value"
        );
        assert_eq!(
            patched(
                json!({"n": 1}),
                json!([{"op": "test", "path": "/n", "value": 2}])
            ),
            Err(JsonPatchError::TestFailed(
                "testing value /n failed: test failed".to_owned()
            ))
        );
        assert_eq!(
            unapplicable(
                json!({}),
                json!([{"op": "test", "path": "/a/n", "value": 2}])
            ),
            "test operation does not apply: is missing path: /a/n: missing value",
            "a missing path is not a failed test"
        );
        assert_eq!(
            unapplicable(json!({}), json!([{"op": "jump", "path": "/n"}])),
            "Unexpected kind: jump"
        );
        assert_eq!(
            unapplicable(json!({}), json!([{"path": "/n"}])),
            "Unexpected kind: unknown"
        );
    }

    #[test]
    fn malformed_patches_are_400() {
        for body in [&b"{}"[..], b"[1]", b"[", b"\"x\""] {
            assert!(
                matches!(JsonPatch::parse(body), Err(JsonPatchError::Malformed(_))),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        assert_eq!(JsonPatch::parse(b"null").expect("no operations").0.len(), 0);
    }

    #[test]
    fn more_than_ten_thousand_operations_are_413() {
        let ops = |n: usize| {
            let op = json!({"op": "test", "path": "/a", "value": 1});
            Value::Array(vec![op; n]).to_string()
        };
        assert!(JsonPatch::parse(ops(MAX_OPERATIONS).as_bytes()).is_ok());
        let err = JsonPatch::parse(ops(MAX_OPERATIONS + 1).as_bytes()).expect_err("too many");
        assert_eq!(
            err.to_string(),
            "The allowed maximum operations in a JSON patch is 10000, got 10001"
        );
    }

    /// The attack: a 100-byte array doubled by copying it into itself.
    #[test]
    fn self_doubling_copies_stop_at_the_copy_limit() {
        let mut ops = vec![json!({"op": "add", "path": "/spec/zz", "value": ["x".repeat(96)]})];
        ops.extend(
            (0..25).map(|_| json!({"op": "copy", "from": "/spec/zz", "path": "/spec/zz/-"})),
        );
        let message = unapplicable(json!({"spec": {}}), Value::Array(ops));
        assert!(
            message.starts_with(
                "Unable to complete the copy, the accumulated size increase of copy is "
            ),
            "{message}"
        );
        assert!(
            message.ends_with("exceeding the limit 3145728"),
            "{message}"
        );
    }

    #[test]
    fn moves_cannot_build_a_deep_document() {
        // Each pair nests the document one level deeper: a stack overflow later, unbounded.
        let mut ops = Vec::new();
        for i in 0..2_000 {
            ops.push(json!({"op": "add", "path": format!("/n{}", i + 1), "value": {}}));
            ops.push(
                json!({"op": "move", "from": format!("/n{i}"), "path": format!("/n{}/x", i + 1)}),
            );
        }
        let message = unapplicable(json!({"n0": {}}), Value::Array(ops));
        assert!(message.contains("more than 64 levels deep"), "{message}");
        // A copy into its own child nests the document deeper each time: refused at the
        // bound too.
        let mut ops = vec![json!({"op": "add", "path": "/a", "value": {"x": {}}})];
        ops.extend((0..40).map(|_| json!({"op": "copy", "from": "/a", "path": "/a/x/y"})));
        let message = unapplicable(json!({}), Value::Array(ops));
        assert!(message.contains("more than 64 levels deep"), "{message}");
    }

    #[test]
    fn ordinary_moves_stay_within_the_depth_bound() {
        let doc = json!({"metadata": {"labels": {"a": "1"}, "annotations": {}}});
        let ops: Vec<Value> = (0..1_000)
            .map(|i| {
                let (from, to) = if i % 2 == 0 {
                    ("/metadata/labels/a", "/metadata/annotations/a")
                } else {
                    ("/metadata/annotations/a", "/metadata/labels/a")
                };
                json!({"op": "move", "from": from, "path": to})
            })
            .collect();
        assert_eq!(
            patched(doc.clone(), Value::Array(ops)).expect("applies"),
            doc
        );
    }
}
