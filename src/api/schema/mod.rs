//! The schema builder: structural schemas generated from the Rust types,
//! one per (version, kind), and helpers the types use to attach rules.
//!
//! The JSON form ([`object_schema`]) is what the OpenAPI documents publish;
//! the parsed form ([`structural()`]) is what pruning, defaulting and
//! validation walk. Both come from the same generation, so they cannot drift.

pub mod generate;
pub mod prune;
pub mod structural;

use std::collections::HashMap;
use std::sync::LazyLock;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::Schema;
use serde_json::{Value, json};

pub use structural::{JsonType, ListType, MapType, Rule, Structural};

use super::{Kind, Version, v1alpha1, v1alpha2};

struct Entry {
    json: Value,
    structural: Structural,
}

static SCHEMAS: LazyLock<HashMap<(Version, Kind), Entry>> = LazyLock::new(|| {
    let mut map = HashMap::new();
    for kind in Kind::ALL {
        for version in kind.descriptor().served_versions() {
            let json = generate_for(version, kind);
            let structural = Structural::from_json(&json).unwrap_or_else(|e| {
                panic!("generated schema of {version} {kind} is not structural: {e}")
            });
            map.insert((version, kind), Entry { json, structural });
        }
    }
    map
});

static OBJECT_META: LazyLock<Structural> = LazyLock::new(|| {
    let json = generate::structural_schema_of::<ObjectMeta>();
    let mut structural = Structural::from_json(&json)
        .unwrap_or_else(|e| panic!("ObjectMeta schema is not structural: {e}"));
    mark_opaque_objects(&mut structural);
    structural
});

fn generate_for(version: Version, kind: Kind) -> Value {
    use generate::structural_schema_of as of;
    match (version, kind) {
        (Version::V1alpha1, Kind::ProxmoxCluster) => of::<v1alpha1::ProxmoxCluster>(),
        (Version::V1alpha1, Kind::ProxmoxClusterTemplate) => {
            of::<v1alpha1::ProxmoxClusterTemplate>()
        }
        (Version::V1alpha1, Kind::ProxmoxMachine) => of::<v1alpha1::ProxmoxMachine>(),
        (Version::V1alpha1, Kind::ProxmoxMachineTemplate) => {
            of::<v1alpha1::ProxmoxMachineTemplate>()
        }
        (Version::V1alpha2, Kind::ProxmoxCluster) => of::<v1alpha2::ProxmoxCluster>(),
        (Version::V1alpha2, Kind::ProxmoxClusterTemplate) => {
            of::<v1alpha2::ProxmoxClusterTemplate>()
        }
        (Version::V1alpha2, Kind::ProxmoxMachine) => of::<v1alpha2::ProxmoxMachine>(),
        (Version::V1alpha2, Kind::ProxmoxMachineTemplate) => {
            of::<v1alpha2::ProxmoxMachineTemplate>()
        }
        (Version::V1alpha2, Kind::ProxmoxKubernetesRelease) => {
            of::<v1alpha2::ProxmoxKubernetesRelease>()
        }
        (Version::V1alpha1, Kind::ProxmoxKubernetesRelease) => {
            unreachable!("{kind} is not served in {version}")
        }
    }
}

/// Objects without declared fields in ObjectMeta (`fieldsV1`) hold free-form
/// data that must not be pruned.
fn mark_opaque_objects(node: &mut Structural) {
    if node.type_ == Some(JsonType::Object)
        && node.properties.is_empty()
        && node.additional_properties.is_none()
    {
        node.preserve_unknown_fields = true;
    }
    for child in node.properties.values_mut() {
        mark_opaque_objects(child);
    }
    for child in [&mut node.items, &mut node.additional_properties]
        .into_iter()
        .flatten()
    {
        mark_opaque_objects(child);
    }
}

/// The schema of a kind in a version, as JSON with descriptions: the
/// equivalent of a CRD version's `openAPIV3Schema`.
pub fn object_schema(version: Version, kind: Kind) -> &'static Value {
    &SCHEMAS[&(version, kind)].json
}

/// The parsed structural schema of a kind in a version.
pub fn structural(version: Version, kind: Kind) -> &'static Structural {
    &SCHEMAS[&(version, kind)].structural
}

/// The structural schema of `metadata` (ObjectMeta), used to find unknown
/// metadata fields.
pub fn object_meta_structural() -> &'static Structural {
    &OBJECT_META
}

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
    edit_validations(schema, property, |existing| {
        let mut list = rule_list(rules);
        list.append(existing);
        *existing = list;
    });
}

/// Adds `x-kubernetes-validations` rules after the ones a property's schema
/// already has.
pub fn append_validations(schema: &mut Schema, property: &str, rules: &[(&str, &str)]) {
    edit_validations(schema, property, |existing| {
        existing.extend(rule_list(rules))
    });
}

fn edit_validations(schema: &mut Schema, property: &str, edit: impl FnOnce(&mut Vec<Value>)) {
    let Some(prop) = schema
        .get_mut("properties")
        .and_then(|p| p.get_mut(property))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let list = prop
        .entry("x-kubernetes-validations")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(list) = list {
        edit(list);
    }
}
