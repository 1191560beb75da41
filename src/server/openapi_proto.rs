//! Swagger 2.0 as protobuf (gnostic's `openapi.v2.Document`), which is all kubectl ≤ 1.28 reads
//! from `/openapi/v2` (`Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf`)
//! for `explain`, client-side validation, `diff`, and the patch type of `apply`. Behind
//! kube-apiserver the aggregator does this conversion itself; this serves kubectl talking to
//! the server directly.
//!
//! The document is translated from its JSON form field by field, with gnostic's field numbers.
//! Values gnostic keeps as `Any` (defaults, enums, examples, `x-` extensions) carry their JSON
//! text in `Any.yaml`, which kube-openapi parses as YAML (JSON is YAML).

use serde_json::{Map, Value};

/// The media type kubectl asks for.
pub const MEDIA_TYPE: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// The `Content-Type` kube-openapi answers with: `@` is not allowed in a media type, and
/// clients parse the header strictly.
pub const CONTENT_TYPE: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// A protobuf message being written.
#[derive(Default)]
struct Message(Vec<u8>);

fn varint(buf: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        buf.push((value as u8) | 0x80);
        value >>= 7;
    }
    buf.push(value as u8);
}

impl Message {
    fn key(&mut self, field: u32, wire: u8) {
        varint(&mut self.0, (u64::from(field) << 3) | u64::from(wire));
    }

    fn bytes(&mut self, field: u32, bytes: &[u8]) {
        self.key(field, 2);
        varint(&mut self.0, bytes.len() as u64);
        self.0.extend_from_slice(bytes);
    }

    /// A string field (proto3 leaves empty strings out).
    fn string(&mut self, field: u32, text: &str) {
        if !text.is_empty() {
            self.bytes(field, text.as_bytes());
        }
    }

    fn message(&mut self, field: u32, message: Message) {
        self.bytes(field, &message.0);
    }

    fn boolean(&mut self, field: u32, value: bool) {
        if value {
            self.key(field, 0);
            self.0.push(1);
        }
    }

    fn int64(&mut self, field: u32, value: i64) {
        if value != 0 {
            self.key(field, 0);
            varint(&mut self.0, value as u64);
        }
    }

    fn double(&mut self, field: u32, value: f64) {
        if value != 0.0 {
            self.key(field, 1);
            self.0.extend_from_slice(&value.to_le_bytes());
        }
    }

    /// `field` from `object` as a string field.
    fn string_of(&mut self, field: u32, object: &Map<String, Value>, key: &str) {
        if let Some(text) = object.get(key).and_then(Value::as_str) {
            self.string(field, text);
        }
    }

    fn strings_of(&mut self, field: u32, object: &Map<String, Value>, key: &str) {
        for text in object
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            self.bytes(field, text.as_bytes());
        }
    }

    fn bool_of(&mut self, field: u32, object: &Map<String, Value>, key: &str) {
        self.boolean(
            field,
            object.get(key).and_then(Value::as_bool).unwrap_or(false),
        );
    }

    fn int_of(&mut self, field: u32, object: &Map<String, Value>, key: &str) {
        self.int64(field, object.get(key).and_then(Value::as_i64).unwrap_or(0));
    }

    fn double_of(&mut self, field: u32, object: &Map<String, Value>, key: &str) {
        self.double(
            field,
            object.get(key).and_then(Value::as_f64).unwrap_or(0.0),
        );
    }

    /// `x-…` keys of `object` as `NamedAny` entries.
    fn extensions(&mut self, field: u32, object: &Map<String, Value>) {
        for (name, value) in object.iter().filter(|(k, _)| k.starts_with("x-")) {
            self.message(field, named(name, any(value)));
        }
    }
}

fn entries(value: Option<&Value>) -> impl Iterator<Item = (&String, &Value)> {
    value.and_then(Value::as_object).into_iter().flatten()
}

/// `Any { yaml: <the value as JSON> }`.
fn any(value: &Value) -> Message {
    let mut m = Message::default();
    m.string(2, &value.to_string());
    m
}

/// The `Named…` pair messages: `name = 1`, `value = 2`.
fn named(name: &str, value: Message) -> Message {
    let mut m = Message::default();
    m.string(1, name);
    m.message(2, value);
    m
}

fn info(object: &Map<String, Value>) -> Message {
    let mut m = Message::default();
    m.string_of(1, object, "title");
    m.string_of(2, object, "version");
    m.string_of(3, object, "description");
    m.extensions(7, object);
    m
}

fn schema(value: &Value) -> Message {
    let mut m = Message::default();
    let Some(s) = value.as_object() else {
        return m;
    };
    m.string_of(1, s, "$ref");
    m.string_of(2, s, "format");
    m.string_of(3, s, "title");
    m.string_of(4, s, "description");
    if let Some(default) = s.get("default") {
        m.message(5, any(default));
    }
    m.double_of(6, s, "multipleOf");
    m.double_of(7, s, "maximum");
    m.bool_of(8, s, "exclusiveMaximum");
    m.double_of(9, s, "minimum");
    m.bool_of(10, s, "exclusiveMinimum");
    m.int_of(11, s, "maxLength");
    m.int_of(12, s, "minLength");
    m.string_of(13, s, "pattern");
    m.int_of(14, s, "maxItems");
    m.int_of(15, s, "minItems");
    m.bool_of(16, s, "uniqueItems");
    m.int_of(17, s, "maxProperties");
    m.int_of(18, s, "minProperties");
    m.strings_of(19, s, "required");
    for value in s
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(20, any(value));
    }
    match s.get("additionalProperties") {
        Some(Value::Bool(allowed)) => {
            let mut item = Message::default();
            // `boolean = 2` of a oneof: written even when false.
            item.key(2, 0);
            item.0.push(u8::from(*allowed));
            m.message(21, item);
        }
        Some(nested @ Value::Object(_)) => {
            let mut item = Message::default();
            item.message(1, schema(nested));
            m.message(21, item);
        }
        _ => {}
    }
    let mut types = Message::default();
    match s.get("type") {
        Some(Value::String(t)) => types.string(1, t),
        Some(Value::Array(ts)) => {
            for t in ts.iter().filter_map(Value::as_str) {
                types.bytes(1, t.as_bytes());
            }
        }
        _ => {}
    }
    if !types.0.is_empty() {
        m.message(22, types);
    }
    let mut items = Message::default();
    match s.get("items") {
        Some(nested @ Value::Object(_)) => items.message(1, schema(nested)),
        Some(Value::Array(all)) => {
            for nested in all {
                items.message(1, schema(nested));
            }
        }
        _ => {}
    }
    if !items.0.is_empty() {
        m.message(23, items);
    }
    for nested in s
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(24, schema(nested));
    }
    let mut properties = Message::default();
    for (name, nested) in entries(s.get("properties")) {
        properties.message(1, named(name, schema(nested)));
    }
    if !properties.0.is_empty() {
        m.message(25, properties);
    }
    m.string_of(26, s, "discriminator");
    m.bool_of(27, s, "readOnly");
    if let Some(example) = s.get("example") {
        m.message(30, any(example));
    }
    m.extensions(31, s);
    m
}

/// A non-body parameter's sub-schema (query, path or header; their numbering differs).
fn parameter_sub_schema(p: &Map<String, Value>, location: &str) -> Message {
    let mut m = Message::default();
    m.bool_of(1, p, "required");
    m.string_of(2, p, "in");
    m.string_of(3, p, "description");
    m.string_of(4, p, "name");
    // Query and form parameters have `allow_empty_value = 5`, shifting the rest by one.
    let with_empty_value = matches!(location, "query" | "formData");
    let shift = u32::from(with_empty_value);
    if with_empty_value {
        m.bool_of(5, p, "allowEmptyValue");
    }
    m.string_of(5 + shift, p, "type");
    m.string_of(6 + shift, p, "format");
    m.bool_of(19 + shift, p, "uniqueItems");
    m.extensions(22 + shift, p);
    m
}

fn parameters_item(value: &Value) -> Message {
    let mut item = Message::default();
    let Some(p) = value.as_object() else {
        return item;
    };
    if let Some(reference) = p.get("$ref").and_then(Value::as_str) {
        let mut json_reference = Message::default();
        json_reference.string(1, reference);
        json_reference.string_of(2, p, "description");
        item.message(2, json_reference);
        return item;
    }
    let location = p.get("in").and_then(Value::as_str).unwrap_or_default();
    let mut parameter = Message::default();
    if location == "body" {
        let mut body = Message::default();
        body.string_of(1, p, "description");
        body.string_of(2, p, "name");
        body.string_of(3, p, "in");
        body.bool_of(4, p, "required");
        if let Some(nested) = p.get("schema") {
            body.message(5, schema(nested));
        }
        body.extensions(6, p);
        parameter.message(1, body);
    } else {
        let field = match location {
            "header" => 1,
            "formData" => 2,
            "path" => 4,
            _ => 3,
        };
        let mut non_body = Message::default();
        non_body.message(field, parameter_sub_schema(p, location));
        parameter.message(2, non_body);
    }
    item.message(1, parameter);
    item
}

fn responses(value: Option<&Value>) -> Message {
    let mut m = Message::default();
    for (code, response) in entries(value) {
        if code.starts_with("x-") {
            m.message(2, named(code, any(response)));
            continue;
        }
        let mut r = Message::default();
        if let Some(object) = response.as_object() {
            r.string_of(1, object, "description");
            if let Some(nested) = object.get("schema") {
                let mut schema_item = Message::default();
                schema_item.message(1, schema(nested));
                r.message(2, schema_item);
            }
            r.extensions(5, object);
        }
        let mut response_value = Message::default();
        response_value.message(1, r);
        m.message(1, named(code, response_value));
    }
    m
}

fn operation(value: &Value) -> Message {
    let mut m = Message::default();
    let Some(op) = value.as_object() else {
        return m;
    };
    m.strings_of(1, op, "tags");
    m.string_of(2, op, "summary");
    m.string_of(3, op, "description");
    m.string_of(5, op, "operationId");
    m.strings_of(6, op, "produces");
    m.strings_of(7, op, "consumes");
    for parameter in op
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(8, parameters_item(parameter));
    }
    m.message(9, responses(op.get("responses")));
    m.strings_of(10, op, "schemes");
    m.bool_of(11, op, "deprecated");
    m.extensions(13, op);
    m
}

fn path_item(value: &Value) -> Message {
    let mut m = Message::default();
    let Some(item) = value.as_object() else {
        return m;
    };
    m.string_of(1, item, "$ref");
    for (field, method) in [
        (2, "get"),
        (3, "put"),
        (4, "post"),
        (5, "delete"),
        (6, "options"),
        (7, "head"),
        (8, "patch"),
    ] {
        if let Some(op) = item.get(method) {
            m.message(field, operation(op));
        }
    }
    for parameter in item
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(9, parameters_item(parameter));
    }
    m.extensions(10, item);
    m
}

/// The protobuf encoding of a Swagger 2.0 document given as JSON.
pub fn encode(document: &Value) -> Vec<u8> {
    let mut m = Message::default();
    let Some(doc) = document.as_object() else {
        return m.0;
    };
    m.string_of(1, doc, "swagger");
    if let Some(object) = doc.get("info").and_then(Value::as_object) {
        m.message(2, info(object));
    }
    m.string_of(3, doc, "host");
    m.string_of(4, doc, "basePath");
    m.strings_of(5, doc, "schemes");
    m.strings_of(6, doc, "consumes");
    m.strings_of(7, doc, "produces");
    let mut paths = Message::default();
    for (path, item) in entries(doc.get("paths")) {
        if path.starts_with("x-") {
            paths.message(1, named(path, any(item)));
        } else {
            paths.message(2, named(path, path_item(item)));
        }
    }
    m.message(8, paths);
    let mut definitions = Message::default();
    for (name, nested) in entries(doc.get("definitions")) {
        definitions.message(1, named(name, schema(nested)));
    }
    m.message(9, definitions);
    m.extensions(16, doc);
    m.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Reads the fields of one message: (field number, wire type, payload).
    fn fields(mut bytes: &[u8]) -> Vec<(u32, u8, Vec<u8>)> {
        fn read_varint(bytes: &mut &[u8]) -> u64 {
            let mut value = 0u64;
            let mut shift = 0;
            while let Some((&b, rest)) = bytes.split_first() {
                *bytes = rest;
                value |= u64::from(b & 0x7f) << shift;
                shift += 7;
                if b < 0x80 {
                    break;
                }
            }
            value
        }
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let key = read_varint(&mut bytes);
            let (field, wire) = ((key >> 3) as u32, (key & 7) as u8);
            let payload = match wire {
                0 => read_varint(&mut bytes).to_le_bytes().to_vec(),
                1 => {
                    let (head, rest) = bytes.split_at(8);
                    bytes = rest;
                    head.to_vec()
                }
                _ => {
                    let len = read_varint(&mut bytes) as usize;
                    let (head, rest) = bytes.split_at(len);
                    bytes = rest;
                    head.to_vec()
                }
            };
            out.push((field, wire, payload));
        }
        out
    }

    fn field(message: &[u8], number: u32) -> Vec<Vec<u8>> {
        fields(message)
            .into_iter()
            .filter(|(f, _, _)| *f == number)
            .map(|(_, _, p)| p)
            .collect()
    }

    #[test]
    fn documents_carry_kubectl_s_fields() {
        let document = json!({
            "swagger": "2.0",
            "info": {"title": "t", "version": "1"},
            "paths": {"/apis/g/v1/namespaces/{namespace}/things/{name}": {"patch": {
                "consumes": ["application/merge-patch+json"],
                "parameters": [{"name": "fieldValidation", "in": "query", "type": "string", "uniqueItems": true}],
                "responses": {"200": {"description": "OK", "schema": {"$ref": "#/definitions/T"}}},
                "x-kubernetes-group-version-kind": {"group": "g", "version": "v1", "kind": "Thing"},
            }}},
            "definitions": {"T": {"type": "object", "description": "a thing",
                "properties": {"n": {"type": "integer", "format": "int32", "minimum": 1}},
                "x-kubernetes-group-version-kind": [{"group": "g", "version": "v1", "kind": "Thing"}]}},
        });
        let bytes = encode(&document);
        assert_eq!(field(&bytes, 1), [b"2.0".to_vec()]);
        let definitions = &field(&bytes, 9)[0];
        let named_schema = &field(definitions, 1)[0];
        assert_eq!(field(named_schema, 1), [b"T".to_vec()]);
        let t = &field(named_schema, 2)[0];
        assert_eq!(field(t, 4), [b"a thing".to_vec()]);
        assert_eq!(field(&field(t, 22)[0], 1), [b"object".to_vec()]);
        let extension = &field(t, 31)[0];
        assert_eq!(
            field(&field(extension, 2)[0], 2),
            [br#"[{"group":"g","kind":"Thing","version":"v1"}]"#.to_vec()]
        );
        let property = &field(&field(t, 25)[0], 1)[0];
        let n = &field(property, 2)[0];
        assert_eq!(field(n, 9), [1.0f64.to_le_bytes().to_vec()]);

        let paths = &field(&bytes, 8)[0];
        let item = &field(&field(paths, 2)[0], 2)[0];
        let patch = &field(item, 8)[0];
        assert_eq!(field(patch, 7), [b"application/merge-patch+json".to_vec()]);
        let parameter = &field(&field(patch, 8)[0], 1)[0];
        let query = &field(&field(parameter, 2)[0], 3)[0];
        assert_eq!(field(query, 4), [b"fieldValidation".to_vec()]);
        assert_eq!(field(query, 2), [b"query".to_vec()]);
        assert_eq!(field(query, 6), [b"string".to_vec()]);
        assert_eq!(field(patch, 13).len(), 1, "the operation's GVK extension");
    }
}
