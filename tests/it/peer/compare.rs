//! What two answers to the same request must agree on, and how they differ when they do not.
//!
//! Refusals agree when their HTTP code, reason and field causes (path and message) do;
//! successes when the objects they carry do, once the fields that differ between any two
//! servers (uid, timestamps, resourceVersion, managedFields) and upstream's conversion-data
//! annotation are set aside.

use std::collections::BTreeSet;

use serde_json::Value;

use super::side::Answer;

/// Upstream keeps what a version cannot hold in this annotation (Cluster API's convention);
/// ours converts losslessly without it.
const CONVERSION_DATA: &str = "cluster.x-k8s.io/conversion-data";

/// One way two answers differ: `signature` names the kind of difference (what docs/api.md
/// lists), `detail` shows both sides.
#[derive(Debug, Clone)]
pub struct Difference {
    pub signature: String,
    pub detail: String,
}

/// The differences between our answer and the peer's; `what` is the request, as the start of
/// every signature (e.g. `create ProxmoxMachine v1alpha2`).
pub fn differences(what: &str, ours: &Answer, peer: &Answer) -> Vec<Difference> {
    if ours.ok() != peer.ok() || !ours.ok() && ours.status != peer.status {
        return vec![Difference {
            signature: format!(
                "{what}: code {}{} (peer {}{})",
                ours.status,
                refusal(ours, peer),
                peer.status,
                refusal(peer, ours)
            ),
            detail: format!("ours: {}\npeer: {}", brief(&ours.body), brief(&peer.body)),
        }];
    }
    if ours.ok() {
        return object_differences(what, &ours.body, &peer.body);
    }
    let mut found = Vec::new();
    let (ours_reason, peer_reason) = (&ours.body["reason"], &peer.body["reason"]);
    if ours_reason != peer_reason {
        found.push(Difference {
            signature: format!("{what}: reason {ours_reason} (peer {peer_reason})"),
            detail: format!("ours: {}\npeer: {}", brief(&ours.body), brief(&peer.body)),
        });
    }
    let (ours_causes, peer_causes) = (causes(&ours.body), causes(&peer.body));
    let fields: BTreeSet<&str> = ours_causes
        .symmetric_difference(&peer_causes)
        .map(|(field, _)| field.as_str())
        .collect();
    for field in fields {
        let messages = |all: &BTreeSet<(String, String)>| -> Vec<String> {
            all.iter()
                .filter(|(f, _)| f == field)
                .map(|(_, m)| m.clone())
                .collect()
        };
        let (ours_messages, peer_messages) = (messages(&ours_causes), messages(&peer_causes));
        let mut which = match (ours_messages.is_empty(), peer_messages.is_empty()) {
            (false, true) => "ours only",
            (true, false) => "peer only",
            // An apply conflict names the version of the conflicting entry, which for a
            // co-tenant kind kube-apiserver keeps is its own (docs/api.md).
            _ if same_but_version(&ours_messages, &peer_messages) => {
                "messages differ: conflict at kube's version"
            }
            _ => "messages differ",
        }
        .to_owned();
        // Two consequences of upstream's webhook rewriting the body before the schema sees
        // it, named so that docs/api.md can list them: a null refused here (the rewrite made
        // it a zero value there), and rules one side did not reach because its schema
        // validation failed (kube-apiserver then skips the CEL rules).
        if ours_messages.iter().any(|m| m.ends_with(r#": "null""#)) {
            which.push_str(": null");
        } else if which == "peer only"
            && skipped_rules(&ours_causes)
            && !skipped_rules(&peer_causes)
        {
            which.push_str(": rules not checked here");
        } else if which == "ours only"
            && skipped_rules(&peer_causes)
            && !skipped_rules(&ours_causes)
        {
            which.push_str(": rules not checked there");
        }
        found.push(Difference {
            signature: format!("{what}: cause {} ({which})", generic_path(field)),
            detail: format!("field {field}\nours: {ours_messages:?}\npeer: {peer_messages:?}"),
        });
    }
    found
}

/// What a refusal is about, for a signature: where the other side accepted, the fields of its
/// causes; else (or where it has none) what kind of failure its message names.
fn refusal(answer: &Answer, other: &Answer) -> String {
    if answer.ok() {
        return String::new();
    }
    let fields: BTreeSet<String> = causes(&answer.body)
        .into_iter()
        .filter(|(field, _)| !field.is_empty())
        .map(|(field, _)| generic_path(&field))
        .collect();
    if other.ok() && !fields.is_empty() {
        return format!(" at {}", fields.into_iter().collect::<Vec<_>>().join(", "));
    }
    let message = answer.body["message"].as_str().unwrap_or_default();
    let what = if message.contains("panic:") {
        "webhook panics"
    } else if message.contains("is out of range") {
        "out of range"
    } else if message.contains("internal error occurred during conversion") {
        "conversion fails"
    } else if message.contains("json: cannot unmarshal") {
        if message.contains("conversion webhook") {
            "conversion webhook cannot decode"
        } else {
            "webhook cannot decode"
        }
    } else if fields.is_empty() {
        "no causes"
    } else {
        "with causes"
    };
    format!(" {what}")
}

/// Whether a Status says its CEL rules were not checked.
fn skipped_rules(causes: &BTreeSet<(String, String)>) -> bool {
    causes
        .iter()
        .any(|(field, message)| field == "<nil>" && message.contains("rules were not checked"))
}

/// `(field, message)` of every cause of a Status.
fn causes(status: &Value) -> BTreeSet<(String, String)> {
    status["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|cause| {
            let text = |key: &str| cause[key].as_str().unwrap_or_default().to_owned();
            (text("field"), text("message"))
        })
        .collect()
}

/// A field path with its list indices and map keys made generic: `spec.network.networkDevices[2].name`
/// and `…[0].name` are the same kind of difference.
fn generic_path(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut in_index = false;
    for c in field.chars() {
        match c {
            '[' => {
                in_index = true;
                out.push_str("[*]");
            }
            ']' => in_index = false,
            _ if !in_index => out.push(c),
            _ => {}
        }
    }
    out
}

/// The object of a successful answer with what may differ between servers removed.
pub fn normalized(object: &Value) -> Value {
    let mut object = object.clone();
    if object["kind"] == "Status"
        && let Some(details) = object.get_mut("details").and_then(Value::as_object_mut)
    {
        details.remove("uid");
    }
    let is_list = object.get("items").is_some_and(Value::is_array);
    let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return object;
    };
    if is_list {
        // A list's metadata holds only resourceVersion and continue, both server-specific.
        meta.clear();
        if let Some(items) = object.get_mut("items").and_then(Value::as_array_mut) {
            let mut sorted: Vec<Value> = items.iter().map(normalized).collect();
            sorted.sort_by_key(|item| item["metadata"]["name"].to_string());
            *items = sorted;
        }
        return object;
    }
    for key in [
        "uid",
        "creationTimestamp",
        "resourceVersion",
        "managedFields",
        "deletionTimestamp",
    ] {
        meta.remove(key);
    }
    if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
        annotations.remove(CONVERSION_DATA);
        if annotations.is_empty() {
            meta.remove("annotations");
        }
    }
    object
}

fn object_differences(what: &str, ours: &Value, peer: &Value) -> Vec<Difference> {
    let mut paths = Vec::new();
    diff_values(
        &normalized(ours),
        &normalized(peer),
        String::new(),
        &mut paths,
    );
    paths
        .into_iter()
        .map(|(path, ours, peer)| Difference {
            signature: format!(
                "{what}: object {}{}",
                generic_path(&path),
                emptiness(&ours, &peer)
            ),
            detail: format!("at {path}\nours: {}\npeer: {}", brief(&ours), brief(&peer)),
        })
        .collect()
}

/// Where one side has no value and the other an empty one (`""`, `[]`, `{}`): how Go's JSON
/// encoding and ours differ, named so that docs/api.md can list it as such.
fn emptiness(ours: &Value, peer: &Value) -> &'static str {
    let empty = |v: &Value| match v {
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    };
    match (ours, peer) {
        (Value::Null, p) if empty(p) => " (absent; peer empty)",
        (o, Value::Null) if empty(o) => " (empty; peer absent)",
        _ => "",
    }
}

/// Every path where the two differ, with both values (`null` where absent).
fn diff_values(ours: &Value, peer: &Value, path: String, out: &mut Vec<(String, Value, Value)>) {
    match (ours, peer) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => diff_values(x, y, child, out),
                    (x, y) => out.push((
                        child,
                        x.cloned().unwrap_or(Value::Null),
                        y.cloned().unwrap_or(Value::Null),
                    )),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff_values(x, y, format!("{path}[{i}]"), out);
            }
        }
        _ if ours != peer => out.push((path, ours.clone(), peer.clone())),
        _ => {}
    }
}

/// A value shown in a report: Status messages whole, anything else cut short.
fn brief(value: &Value) -> String {
    let text = match value.get("message") {
        Some(Value::String(message)) if value["kind"] == "Status" => {
            format!("{} {}: {message}", value["code"], value["reason"])
        }
        _ => value.to_string(),
    };
    if text.chars().count() > 600 {
        format!("{}…", text.chars().take(600).collect::<String>())
    } else {
        text
    }
}

/// Whether two sets of messages are the same but for the versions `using <group>/<version>`
/// names.
fn same_but_version(ours: &[String], peer: &[String]) -> bool {
    let unversioned = |messages: &[String]| -> Vec<String> {
        messages
            .iter()
            .map(|m| match m.split_once(" using ") {
                Some((head, _)) => head.to_owned(),
                None => m.clone(),
            })
            .collect()
    };
    ours != peer && unversioned(ours) == unversioned(peer)
}
