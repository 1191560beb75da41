//! The invariants of `x-kubernetes-list-type: set` and `map` lists
//! (apiextensions `listtype.ValidateListSetsAndMaps`).

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::api::field::{Error, ErrorList, Path};
use crate::api::schema::{ListType, Structural};

/// Validates every set and map list in `value`.
pub fn validate(value: &Value, schema: &Structural, path: &Path, errors: &mut ErrorList) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if let Some(sub) = schema.property(key) {
                    validate(child, sub, &path.child(key), errors);
                } else if let Some(values) = &schema.additional_properties {
                    validate(child, values, &path.key(key), errors);
                }
            }
        }
        Value::Array(items) => {
            match schema.list_type {
                Some(ListType::Set) => {
                    for i in duplicate_indices(items.iter()) {
                        errors.push(Error::duplicate(path.index(i), items[i].clone()));
                    }
                }
                Some(ListType::Map) => validate_map_list(items, schema, path, errors),
                Some(ListType::Atomic) | None => {}
            }
            if let Some(item_schema) = &schema.items {
                for (i, item) in items.iter().enumerate() {
                    validate(item, item_schema, &path.index(i), errors);
                }
            }
        }
        _ => {}
    }
}

/// Whether `value` breaks a set or map list invariant anywhere.
pub fn is_broken(value: &Value, schema: &Structural) -> bool {
    let mut errors = ErrorList::new();
    validate(value, schema, &Path::root(), &mut errors);
    !errors.is_empty()
}

/// Indices of the second occurrence of every value that occurs more than
/// once (later repeats are not reported again, as in Go). Values are
/// compared by their JSON text, so long lists stay cheap.
fn duplicate_indices<'a>(values: impl Iterator<Item = &'a Value>) -> Vec<usize> {
    let mut times: HashMap<String, usize> = HashMap::new();
    let mut duplicates = Vec::new();
    for (i, value) in values.enumerate() {
        let count = times.entry(value.to_string()).or_insert(0);
        *count += 1;
        if *count == 2 {
            duplicates.push(i);
        }
    }
    duplicates
}

fn validate_map_list(items: &[Value], schema: &Structural, path: &Path, errors: &mut ErrorList) {
    for (i, item) in items.iter().enumerate() {
        if !item.is_object() && !item.is_null() {
            errors.push(Error::invalid(
                path.index(i),
                item.clone(),
                "must be an object for an array of list-type map",
            ));
            return;
        }
    }
    let keys: Vec<Value> = items
        .iter()
        .map(|item| {
            let mut key = Map::new();
            if let Value::Object(item) = item {
                for name in &schema.list_map_keys {
                    if let Some(v) = item.get(name) {
                        key.insert(name.clone(), v.clone());
                    }
                }
            }
            Value::Object(key)
        })
        .collect();
    for i in duplicate_indices(keys.iter()) {
        errors.push(Error::duplicate(path.index(i), keys[i].clone()));
    }
}
