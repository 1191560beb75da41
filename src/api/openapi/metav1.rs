//! The `meta/v1` definitions a group-version document carries (as
//! kube-apiserver includes them for CRDs), from k8s-openapi's schemas plus
//! the list semantics kube-apiserver publishes for ObjectMeta.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    DeleteOptions, ListMeta, ObjectMeta, Patch, Status, WatchEvent,
};
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use super::Flavor;

/// Every metav1 definition (and what they reference), by definition name.
pub fn definitions(flavor: Flavor) -> Map<String, Value> {
    let settings = match flavor {
        Flavor::V3 => SchemaSettings::openapi3(),
        Flavor::V2 => SchemaSettings::draft07(),
    }
    .with(|s| {
        s.meta_schema = None;
        s.definitions_path = match flavor {
            Flavor::V3 => "/components/schemas".into(),
            Flavor::V2 => "/definitions".into(),
        };
    });
    let mut generator = settings.into_generator();
    generator.subschema_for::<ObjectMeta>();
    generator.subschema_for::<ListMeta>();
    generator.subschema_for::<Status>();
    generator.subschema_for::<DeleteOptions>();
    generator.subschema_for::<Patch>();
    generator.subschema_for::<WatchEvent<ObjectMeta>>();
    let mut definitions: Map<String, Value> =
        generator.take_definitions(true).into_iter().collect();
    for definition in definitions.values_mut() {
        tidy(definition, flavor);
    }
    if let Some(object_meta) =
        definitions.get_mut("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
    {
        add_list_semantics(object_meta);
    }
    definitions
}

/// In OpenAPI 3.0 a `$ref` has no siblings: a described reference becomes
/// `allOf: [{$ref}]` beside its description, as kube-apiserver writes it.
fn tidy(value: &mut Value, flavor: Flavor) {
    match value {
        Value::Object(node) => {
            if flavor == Flavor::V3
                && node.len() > 1
                && let Some(reference) = node.remove("$ref")
            {
                node.insert("allOf".into(), json!([{ "$ref": reference }]));
            }
            for child in node.values_mut() {
                tidy(child, flavor);
            }
        }
        Value::Array(items) => {
            for item in items {
                tidy(item, flavor);
            }
        }
        _ => {}
    }
}

/// Server-side apply treats `finalizers` as a set, `ownerReferences` as a
/// map keyed by `uid` and `managedFields` as atomic; kube-apiserver says so
/// in its ObjectMeta schema.
fn add_list_semantics(object_meta: &mut Value) {
    let extensions = [
        ("finalizers", json!({ "x-kubernetes-list-type": "set" })),
        (
            "ownerReferences",
            json!({ "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["uid"] }),
        ),
        (
            "managedFields",
            json!({ "x-kubernetes-list-type": "atomic" }),
        ),
    ];
    for (field, extension) in extensions {
        if let (Some(Value::Object(property)), Value::Object(extension)) = (
            object_meta.pointer_mut(&format!("/properties/{field}")),
            extension,
        ) {
            property.extend(extension);
        }
    }
}
