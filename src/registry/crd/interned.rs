//! Names and schemas of kinds defined at run time, made to live as long as the program.
//!
//! The registry's descriptors name kinds with `&'static str` and the field manager's paths
//! borrow field names from `&'static` schemas (that is what keeps them cheap for this
//! server's own kinds). A kind read from a CRD gets the same by interning: each distinct name
//! and each distinct schema is kept once, for good. Memory grows only with what is new —
//! another CRD, or a CRD whose schema changed — never with how often a CRD is read again
//! (the informer re-reads them all on every change and resync).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{LazyLock, Mutex};

use serde_json::Value;

use crate::api::schema::Structural;
use crate::api::schema::structural::SchemaError;

static NAMES: LazyLock<Mutex<HashSet<&'static str>>> = LazyLock::new(Default::default);

static NAME_LISTS: LazyLock<Mutex<HashSet<&'static [&'static str]>>> =
    LazyLock::new(Default::default);

static SCHEMAS: LazyLock<Mutex<HashMap<String, &'static Structural>>> =
    LazyLock::new(Default::default);

/// `name`, kept once.
pub fn name(name: &str) -> &'static str {
    let mut names = NAMES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(found) = names.get(name) {
        return found;
    }
    let kept: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.insert(kept);
    kept
}

/// `names`, kept once.
pub fn names(names: &[String]) -> &'static [&'static str] {
    let interned: Vec<&'static str> = names.iter().map(|n| name(n)).collect();
    let mut lists = NAME_LISTS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(found) = lists.get(interned.as_slice()) {
        return found;
    }
    let kept: &'static [&'static str] = Box::leak(interned.into_boxed_slice());
    lists.insert(kept);
    kept
}

/// The structural schema of a CRD version's `openAPIV3Schema`, parsed once per distinct
/// schema.
pub fn schema(json: &Value) -> Result<&'static Structural, SchemaError> {
    let text = json.to_string();
    let mut schemas = SCHEMAS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(found) = schemas.get(&text) {
        return Ok(found);
    }
    let mut parsed = Structural::from_json(json)?;
    // `metadata` is ObjectMeta's, whatever the CRD says of it: kube prunes and validates it
    // as ObjectMeta. A CRD may only restrict `name` and `generateName` in it, which kube's
    // schema validation then checks like any field (`metadata.name in body should match …`).
    if let Some(metadata) = parsed.properties.remove("metadata") {
        let names: BTreeMap<String, Structural> = metadata
            .properties
            .into_iter()
            .filter(|(name, _)| name == "name" || name == "generateName")
            .collect();
        if !names.is_empty() {
            let restrictions = Structural {
                properties: names,
                ..Structural::default()
            };
            parsed
                .properties
                .insert("metadata".to_owned(), restrictions);
        }
    }
    let kept: &'static Structural = Box::leak(Box::new(parsed));
    schemas.insert(text, kept);
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_same_text_is_kept_once() {
        let a = name(&String::from("openstackservers"));
        let b = name("openstackservers");
        assert!(std::ptr::eq(a, b));
        let list = names(&["oss".to_owned(), "osss".to_owned()]);
        assert!(std::ptr::eq(
            list,
            names(&["oss".to_owned(), "osss".to_owned()])
        ));
        let schema_json = json!({"type": "object", "properties": {"spec": {"type": "object"}}});
        let first = schema(&schema_json).unwrap();
        assert!(std::ptr::eq(first, schema(&schema_json.clone()).unwrap()));
        assert!(schema(&json!({"type": "nonsense"})).is_err());
    }
}
