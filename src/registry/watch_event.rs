//! Watch event framing as kube-apiserver streams it for JSON: one
//! `{"type":"…","object":{…}}` document per event, each followed by `\n`.

use bytes::Bytes;
use serde_json::{Map, Value, json};

/// The annotation a WatchList bookmark carries after the initial events.
pub const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

/// A watch event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
    Bookmark,
    Error,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
            Self::Bookmark => "BOOKMARK",
            Self::Error => "ERROR",
        }
    }
}

/// One framed event: the JSON document (`type` first, as kube-apiserver writes it) and its
/// trailing newline. `object` is a JSON value or an already serialized object.
pub fn encode_event<T: serde::Serialize + ?Sized>(event_type: EventType, object: &T) -> Bytes {
    #[derive(serde::Serialize)]
    struct Framed<'a, T: ?Sized> {
        #[serde(rename = "type")]
        event_type: &'static str,
        object: &'a T,
    }
    let mut line = Vec::with_capacity(256);
    let framed = Framed {
        event_type: event_type.as_str(),
        object,
    };
    if serde_json::to_writer(&mut line, &framed).is_err() {
        // Only a map with non-string keys fails to serialize, and objects have none.
        line.clear();
        line.extend_from_slice(br#"{"type":"ERROR","object":{}}"#);
    }
    line.push(b'\n');
    Bytes::from(line)
}

/// The object of a BOOKMARK event: the watched kind carrying only the revision (and, after the
/// initial events of a WatchList, the `k8s.io/initial-events-end` annotation).
pub fn bookmark_object(
    api_version: &str,
    kind: &str,
    resource_version: u64,
    initial_events_end: bool,
) -> Value {
    let mut metadata = Map::new();
    metadata.insert(
        "resourceVersion".to_owned(),
        Value::String(resource_version.to_string()),
    );
    if initial_events_end {
        metadata.insert(
            "annotations".to_owned(),
            json!({INITIAL_EVENTS_END_ANNOTATION: "true"}),
        );
    }
    json!({"apiVersion": api_version, "kind": kind, "metadata": metadata})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_one_json_document_per_line() {
        let obj = json!({"kind": "ProxmoxMachine", "metadata": {"name": "m1"}});
        let added = encode_event(EventType::Added, &obj);
        assert_eq!(
            std::str::from_utf8(&added).expect("utf8"),
            "{\"type\":\"ADDED\",\"object\":{\"kind\":\"ProxmoxMachine\",\"metadata\":{\"name\":\"m1\"}}}\n"
        );
        let parsed: Value = serde_json::from_slice(&added).expect("json");
        assert_eq!(parsed["type"], "ADDED");
        for t in [
            EventType::Modified,
            EventType::Deleted,
            EventType::Bookmark,
            EventType::Error,
        ] {
            let line = encode_event(t, &obj);
            assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1);
            assert!(line.ends_with(b"\n"));
        }
    }

    #[test]
    fn bookmarks() {
        let b = bookmark_object(
            "infrastructure.cluster.x-k8s.io/v1alpha2",
            "ProxmoxMachine",
            42,
            false,
        );
        assert_eq!(
            b,
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2", "kind": "ProxmoxMachine",
                   "metadata": {"resourceVersion": "42"}})
        );
        let end = bookmark_object("g/v", "K", 7, true);
        assert_eq!(
            end["metadata"]["annotations"]["k8s.io/initial-events-end"],
            "true"
        );
    }
}
