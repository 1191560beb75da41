//! Every Proxmox object of the upstream cluster flavors must still be
//! accepted, with the new optional v1alpha2 fields in place.

use capmox_apiserver::api::Kind;
use serde_json::Value;

use super::support::{admit_create, fixture};

#[test]
fn every_upstream_flavor_object_is_admitted() {
    let flavors = fixture("upstream_flavors.json");
    let objects = flavors["objects"].as_array().expect("objects");
    assert!(
        objects.len() >= 20,
        "the fixture holds the flavors' objects"
    );
    for entry in objects {
        let object = entry["object"].clone();
        let kind =
            Kind::from_name(object["kind"].as_str().unwrap_or_default()).expect("a Proxmox kind");
        let errors = admit_create(kind, object);
        assert!(
            errors.is_empty(),
            "{} {kind} refused: {errors:?}",
            entry["flavor"]
        );
    }
}

#[test]
fn flavor_objects_keep_their_shape_through_the_typed_form() {
    let flavors = fixture("upstream_flavors.json");
    for entry in flavors["objects"].as_array().expect("objects") {
        let object: Value = entry["object"].clone();
        let kind = Kind::from_name(object["kind"].as_str().unwrap_or_default()).expect("kind");
        let stored = super::support::admitted_value(kind, object.clone());
        // Every field the flavor sets survives (defaults may add fields;
        // empty lists are left out, as Go's `omitempty` does).
        assert_subset(&object, &stored, String::new());
    }
}

fn assert_subset(expected: &Value, actual: &Value, path: String) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (key, value) in e {
                if value.as_array().is_some_and(Vec::is_empty) {
                    continue;
                }
                let child = format!("{path}.{key}");
                let other = a.get(key).unwrap_or_else(|| panic!("{child} was dropped"));
                assert_subset(value, other, child);
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            assert_eq!(e.len(), a.len(), "{path} length");
            for (i, (x, y)) in e.iter().zip(a).enumerate() {
                assert_subset(x, y, format!("{path}[{i}]"));
            }
        }
        _ => assert_eq!(expected, actual, "{path}"),
    }
}
