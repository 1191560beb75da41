//! The schema builder: structural schemas generated from the Rust types.

use schemars::Schema;
use serde_json::{Value, json};

fn rule_list(rules: &[(&str, &str)]) -> Vec<Value> {
    rules
        .iter()
        .map(|(rule, message)| json!({ "rule": rule, "message": message }))
        .collect()
}

/// Adds `x-kubernetes-validations` rules to the item schema of an array
/// (kubebuilder's `items:XValidation`).
pub fn append_item_validations(schema: &mut Schema, rules: &[(&str, &str)]) {
    let Some(items) = schema.get_mut("items").and_then(Value::as_object_mut) else {
        return;
    };
    let list = items
        .entry("x-kubernetes-validations")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(list) = list {
        list.extend(rule_list(rules));
    }
}

/// Puts `x-kubernetes-validations` rules in front of the ones a property's
/// schema already has (used where upstream attaches rules to a field rather
/// than to its type, so that they come first as in the upstream CRD).
pub fn prepend_validations(schema: &mut Schema, property: &str, rules: &[(&str, &str)]) {
    let Some(prop) = schema
        .get_mut("properties")
        .and_then(|p| p.get_mut(property))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let mut list = rule_list(rules);
    if let Some(Value::Array(existing)) = prop.remove("x-kubernetes-validations") {
        list.extend(existing);
    }
    prop.insert("x-kubernetes-validations".into(), Value::Array(list));
}
