//! kubectl's last-applied annotation during server-side apply. For the
//! manager `kubectl` (what `kubectl apply --server-side` sends), conflicts
//! on fields that the annotation shows were last set by a client-side
//! apply and still hold that value are overridden, and an existing
//! annotation is kept up to date with the applied configuration, so that
//! switching between client-side and server-side apply works.

use serde_json::{Map, Value};

use super::fieldpath::Set;
use super::fieldpath::value::write_go_json;
use super::typed::{Ty, compare, to_field_set, validate_config};
use crate::api::Version;

/// The annotation client-side apply records the applied configuration in.
pub const ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The manager name `kubectl apply --server-side` uses.
pub const KUBECTL: &str = "kubectl";

/// The most the keys and values of an object's annotations may hold.
const ANNOTATIONS_SIZE_LIMIT: usize = 256 * 1024;

fn annotation(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/annotations")?
        .get(ANNOTATION)?
        .as_str()
        .filter(|text| !text.is_empty())
}

/// The fields of the live object (in `version`, read with `ty`) that the
/// last-applied annotation set and that still have the value it gives; a
/// conflict on them does not stop kubectl. `None` when there is no usable
/// annotation.
pub fn fields_kubectl_may_take(live: &Value, version: Version, ty: Ty<'static>) -> Option<Set> {
    let last: Value = serde_json::from_str(annotation(live)?).ok()?;
    if !last.is_object()
        || last.get("apiVersion").and_then(Value::as_str) != Some(version.api_version())
    {
        return None;
    }
    if !validate_config(&last, ty).is_empty() {
        return None;
    }
    let changed = compare(&last, live, ty);
    Some(
        to_field_set(&last, ty)
            .difference(&changed.modified)
            .difference(&changed.added)
            .difference(&changed.removed),
    )
}

/// After an apply by kubectl, sets the annotation of `object` (when it has
/// one) to `config` without the annotation itself, as Go's JSON encoder
/// writes it; drops it when the annotations would grow too large.
pub fn refresh(object: &mut Value, config: &Value) {
    if annotation(object).is_none() {
        return;
    }
    let mut config = config.clone();
    if let Some(Value::Object(annotations)) = config.pointer_mut("/metadata/annotations") {
        annotations.remove(ANNOTATION);
    }
    let mut text = String::new();
    write_go_json(&config, &mut text);
    text.push('\n');
    let Some(Value::Object(annotations)) = object.pointer_mut("/metadata/annotations") else {
        return;
    };
    annotations.insert(ANNOTATION.to_owned(), Value::String(text));
    if annotations_size(annotations) > ANNOTATIONS_SIZE_LIMIT {
        annotations.remove(ANNOTATION);
    }
}

fn annotations_size(annotations: &Map<String, Value>) -> usize {
    annotations
        .iter()
        .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
        .sum()
}
