//! Reads a core/v1 `Secret` sent as Kubernetes protobuf (`application/vnd.kubernetes.protobuf`):
//! kubectl ≥ 1.32 and other typed Go clients send built-in kinds that way (`kubectl create
//! secret generic`), so `dev`'s Secret stand-in must read it. Only what a client sets on a
//! write is read — the envelope (`k8s\0` + `runtime.Unknown`), the Secret's `data`,
//! `stringData`, `type`, `immutable` and the writable `ObjectMeta` fields; server-set
//! fields (uid, timestamps, managedFields) are skipped. Answers are always JSON.

use base64::Engine as _;
use serde_json::{Map, Value, json};

/// Why a body is not a readable Secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the protobuf body cannot be read as a Secret: {0}")]
pub struct ProtobufError(&'static str);

const MAGIC: &[u8] = b"k8s\0";

/// One field of a protobuf message.
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

/// The fields of one message, in order.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }

    fn varint(&mut self) -> Result<u64, ProtobufError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self
                .rest
                .split_first()
                .ok_or(ProtobufError("truncated varint"))?;
            self.rest = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(ProtobufError("varint too long"))
    }

    fn take(&mut self, len: u64) -> Result<&'a [u8], ProtobufError> {
        let len = usize::try_from(len).map_err(|_| ProtobufError("length too large"))?;
        if len > self.rest.len() {
            return Err(ProtobufError("truncated field"));
        }
        let (field, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(field)
    }

    /// The next (field number, value), `None` at the end.
    fn next(&mut self) -> Result<Option<(u64, Field<'a>)>, ProtobufError> {
        if self.rest.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let value = match key & 7 {
            0 => Field::Varint(self.varint()?),
            1 => Field::Bytes(self.take(8)?),
            2 => {
                let len = self.varint()?;
                Field::Bytes(self.take(len)?)
            }
            5 => Field::Bytes(self.take(4)?),
            _ => return Err(ProtobufError("unsupported wire type")),
        };
        Ok(Some((key >> 3, value)))
    }
}

fn text(bytes: &[u8]) -> Result<String, ProtobufError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| ProtobufError("a string is not UTF-8"))
}

/// A `map<string, V>` entry: key (1) and value (2).
fn entry(bytes: &[u8]) -> Result<(String, &[u8]), ProtobufError> {
    let mut reader = Reader::new(bytes);
    let (mut key, mut value) = (String::new(), &[][..]);
    while let Some((number, field)) = reader.next()? {
        match (number, field) {
            (1, Field::Bytes(b)) => key = text(b)?,
            (2, Field::Bytes(b)) => value = b,
            _ => {}
        }
    }
    Ok((key, value))
}

fn insert_entry(map: &mut Map<String, Value>, bytes: &[u8]) -> Result<(), ProtobufError> {
    let (key, value) = entry(bytes)?;
    map.insert(key, Value::String(text(value)?));
    Ok(())
}

fn owner_reference(bytes: &[u8]) -> Result<Value, ProtobufError> {
    let mut reader = Reader::new(bytes);
    let mut owner = Map::new();
    while let Some((number, field)) = reader.next()? {
        let name = match number {
            1 => "kind",
            3 => "name",
            4 => "uid",
            5 => "apiVersion",
            6 => "controller",
            7 => "blockOwnerDeletion",
            _ => continue,
        };
        let value = match field {
            Field::Bytes(b) => Value::String(text(b)?),
            Field::Varint(v) => Value::Bool(v != 0),
        };
        owner.insert(name.to_owned(), value);
    }
    Ok(Value::Object(owner))
}

fn object_meta(bytes: &[u8]) -> Result<Value, ProtobufError> {
    let mut reader = Reader::new(bytes);
    let mut meta = Map::new();
    let (mut labels, mut annotations) = (Map::new(), Map::new());
    let (mut finalizers, mut owners) = (Vec::new(), Vec::new());
    while let Some((number, field)) = reader.next()? {
        let Field::Bytes(b) = field else { continue };
        let scalar = match number {
            1 => "name",
            2 => "generateName",
            3 => "namespace",
            6 => "resourceVersion",
            11 => {
                insert_entry(&mut labels, b)?;
                continue;
            }
            12 => {
                insert_entry(&mut annotations, b)?;
                continue;
            }
            13 => {
                owners.push(owner_reference(b)?);
                continue;
            }
            14 => {
                finalizers.push(Value::String(text(b)?));
                continue;
            }
            _ => continue,
        };
        meta.insert(scalar.to_owned(), Value::String(text(b)?));
    }
    for (name, value) in [("labels", labels), ("annotations", annotations)] {
        if !value.is_empty() {
            meta.insert(name.to_owned(), Value::Object(value));
        }
    }
    for (name, value) in [("finalizers", finalizers), ("ownerReferences", owners)] {
        if !value.is_empty() {
            meta.insert(name.to_owned(), Value::Array(value));
        }
    }
    Ok(Value::Object(meta))
}

/// The Secret in `body` (envelope included) as the JSON a client would have sent.
pub fn decode_secret(body: &[u8]) -> Result<Value, ProtobufError> {
    let unknown = body
        .strip_prefix(MAGIC)
        .ok_or(ProtobufError("missing the k8s protobuf prefix"))?;
    let mut envelope = Reader::new(unknown);
    let (mut type_meta, mut raw) = (None, None);
    while let Some((number, field)) = envelope.next()? {
        match (number, field) {
            (1, Field::Bytes(b)) => type_meta = Some(b),
            (2, Field::Bytes(b)) => raw = Some(b),
            _ => {}
        }
    }
    let (mut api_version, mut kind) = (String::new(), String::new());
    let mut reader = Reader::new(type_meta.unwrap_or_default());
    while let Some((number, field)) = reader.next()? {
        match (number, field) {
            (1, Field::Bytes(b)) => api_version = text(b)?,
            (2, Field::Bytes(b)) => kind = text(b)?,
            _ => {}
        }
    }
    let mut secret = json!({"apiVersion": api_version, "kind": kind});
    let (mut data, mut string_data) = (Map::new(), Map::new());
    let mut reader = Reader::new(raw.ok_or(ProtobufError("no object in the envelope"))?);
    while let Some((number, field)) = reader.next()? {
        match (number, field) {
            (1, Field::Bytes(b)) => secret["metadata"] = object_meta(b)?,
            (2, Field::Bytes(b)) => {
                let (key, value) = entry(b)?;
                let encoded = base64::engine::general_purpose::STANDARD.encode(value);
                data.insert(key, Value::String(encoded));
            }
            (3, Field::Bytes(b)) => secret["type"] = Value::String(text(b)?),
            (4, Field::Bytes(b)) => insert_entry(&mut string_data, b)?,
            (5, Field::Varint(v)) => secret["immutable"] = Value::Bool(v != 0),
            _ => {}
        }
    }
    if !data.is_empty() {
        secret["data"] = Value::Object(data);
    }
    if !string_data.is_empty() {
        secret["stringData"] = Value::Object(string_data);
    }
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(number: u64, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut key = (number << 3) | 2;
        let mut len = bytes.len() as u64;
        for value in [&mut key, &mut len] {
            loop {
                let byte = (*value & 0x7f) as u8;
                *value >>= 7;
                if *value == 0 {
                    out.push(byte);
                    break;
                }
                out.push(byte | 0x80);
            }
        }
        out.extend_from_slice(bytes);
        out
    }

    fn pair(key: &str, value: &[u8]) -> Vec<u8> {
        [field(1, key.as_bytes()), field(2, value)].concat()
    }

    #[test]
    fn reads_what_kubectl_sends() {
        let meta = [
            field(1, b"lit"),
            field(3, b"ns"),
            field(11, &pair("app", b"x")),
            field(14, b"f/one"),
        ]
        .concat();
        let secret = [
            field(1, &meta),
            field(2, &pair("password", b"hunter2")),
            field(3, b"Opaque"),
        ]
        .concat();
        let type_meta = [field(1, b"v1"), field(2, b"Secret")].concat();
        let body = [MAGIC.to_vec(), field(1, &type_meta), field(2, &secret)].concat();
        assert_eq!(
            decode_secret(&body),
            Ok(json!({
                "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": "lit", "namespace": "ns", "labels": {"app": "x"}, "finalizers": ["f/one"]},
                "data": {"password": "aHVudGVyMg=="},
            }))
        );
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode_secret(b"{}").is_err());
        assert!(decode_secret(b"k8s\0\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff").is_err());
        assert!(decode_secret(b"k8s\0\x12\x05ab").is_err());
    }
}
