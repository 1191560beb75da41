//! Properties on generated input: applying the same configuration twice
//! changes nothing the second time, FieldsV1 reads back what it wrote, and
//! no input — objects, configurations, managedFields — makes the field
//! manager panic.

use capmox_apiserver::registry::apply::fieldpath::{Path, PathElement, Set};
use capmox_apiserver::registry::apply::{FieldManager, HubVersions, Managed, Subresource};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::support::{MachineKind, Store, V1, V2, machine, request};

/// A ProxmoxMachine configuration within the v1alpha2 schema: scalars,
/// sets, a list map of up to 20 devices with atomic pool lists, labels.
fn arb_config() -> impl Strategy<Value = Value> {
    let device = (
        proptest::sample::select(&["vmbr0", "vmbr1", "vmbr2"][..]),
        proptest::option::of(prop_oneof![Just(1), 1280..9000i32]),
        proptest::collection::btree_set("10\\.0\\.0\\.[1-9]", 0..3),
        proptest::option::of("[a-z]{1,6}"),
    );
    (
        proptest::option::of("[a-z ]{0,12}"),
        proptest::option::of(1..16i32),
        proptest::option::of((1..64i32).prop_map(|n| n * 8)),
        proptest::collection::btree_set("pve[0-9]", 0..4),
        proptest::collection::vec(device, 1..20),
        proptest::collection::btree_map("[a-z]{1,5}", "[a-z0-9]{0,5}", 0..4),
    )
        .prop_map(|(description, cores, memory, nodes, devices, labels)| {
            let mut spec = Map::new();
            spec.insert("sourceNode".into(), json!("pve1"));
            spec.insert("templateID".into(), json!(100));
            if let Some(d) = description {
                spec.insert("description".into(), json!(d));
            }
            if let Some(c) = cores {
                spec.insert("numCores".into(), json!(c));
            }
            if let Some(m) = memory {
                spec.insert("memoryMiB".into(), json!(m));
            }
            if !nodes.is_empty() {
                spec.insert("allowedNodes".into(), json!(nodes));
            }
            let devices: Vec<Value> = devices
                .into_iter()
                .enumerate()
                .map(|(i, (bridge, mtu, dns, pool))| {
                    let mut d = Map::new();
                    d.insert("name".into(), json!(format!("net{i}")));
                    d.insert("bridge".into(), json!(bridge));
                    if let Some(mtu) = mtu {
                        d.insert("mtu".into(), json!(mtu));
                    }
                    if !dns.is_empty() {
                        d.insert("dnsServers".into(), json!(dns));
                    }
                    if let Some(pool) = pool {
                        d.insert(
                            "ipPoolRef".into(),
                            json!([{"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": pool}]),
                        );
                    }
                    Value::Object(d)
                })
                .collect();
            if !devices.is_empty() {
                spec.insert("network".into(), json!({"networkDevices": devices}));
            }
            let mut object = machine(V2, Value::Object(spec));
            if !labels.is_empty() {
                object["metadata"]["labels"] = json!(labels);
            }
            object
        })
}

fn arb_element() -> impl Strategy<Value = PathElement> {
    prop_oneof![
        "[a-z:./ ]{0,6}".prop_map(|name| PathElement::field(&name)),
        (
            "[a-z]{1,4}",
            prop_oneof![
                "[a-z<&]{0,4}".prop_map(Value::from),
                any::<i64>().prop_map(Value::from)
            ]
        )
            .prop_map(|(k, v)| PathElement::key(vec![(k, v)])),
        prop_oneof![
            "[a-z\"\\\\]{0,4}".prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<bool>().prop_map(Value::from)
        ]
        .prop_map(PathElement::Value),
        (0..100i64).prop_map(PathElement::Index),
    ]
}

fn arb_set() -> impl Strategy<Value = Set> {
    proptest::collection::vec(proptest::collection::vec(arb_element(), 1..5), 0..12)
        .prop_map(|paths| Set::from_paths(&paths.into_iter().map(Path).collect::<Vec<_>>()))
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        proptest::sample::select(
            &[
                "f:spec",
                "k:{\"name\":\"net0\"}",
                "v:1",
                "i:0",
                ".",
                "Apply",
                "Update",
                "FieldsV1",
                "infrastructure.cluster.x-k8s.io/v1alpha2",
                "ProxmoxMachine",
                "net0",
                "2026-01-01T00:00:00Z",
            ][..]
        )
        .prop_map(Value::from),
        ".{0,8}".prop_map(Value::from),
    ];
    let keys = prop_oneof![
        3 => proptest::sample::select(
            &[
                "apiVersion", "kind", "metadata", "spec", "status", "managedFields", "manager",
                "operation", "fieldsType", "fieldsV1", "time", "network", "networkDevices", "name",
                "bridge", "allowedNodes", "labels", "f:spec", "f:name", "k:{\"name\":\"net0\"}", ".",
            ][..]
        )
        .prop_map(str::to_owned),
        1 => "[a-z:]{0,5}",
    ];
    leaf.prop_recursive(5, 80, 6, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(keys.clone(), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Readable managedFields with generated sets, so that pruning and
/// conflicts run against arbitrary owners.
fn arb_managed() -> impl Strategy<Value = Value> {
    let entry = (
        proptest::sample::select(&["fuzz", "other", "before-first-apply"][..]),
        proptest::sample::select(&["Apply", "Update"][..]),
        proptest::sample::select(
            &[
                "infrastructure.cluster.x-k8s.io/v1alpha1",
                "infrastructure.cluster.x-k8s.io/v1alpha2",
                "example.com/v9",
            ][..],
        ),
        arb_set(),
        any::<bool>(),
    )
        .prop_map(|(manager, operation, api_version, set, status)| {
            let mut entry = json!({
                "manager": manager, "operation": operation, "apiVersion": api_version,
                "fieldsType": "FieldsV1", "fieldsV1": set.to_fields_v1()
            });
            if status {
                entry["subresource"] = json!("status");
            }
            entry
        });
    proptest::collection::vec(entry, 0..4).prop_map(Value::Array)
}

/// `object` with its `apiVersion`, `kind` and `metadata.managedFields`
/// replaced, so that generated values reach past the type check.
fn typed(mut object: Value, managed: Value) -> Value {
    if let Value::Object(map) = &mut object {
        map.insert("apiVersion".into(), json!(V2.api_version()));
        map.insert("kind".into(), json!("ProxmoxMachine"));
        let meta = map.entry("metadata").or_insert_with(|| json!({}));
        if let Value::Object(meta) = meta {
            meta.insert("managedFields".into(), managed);
        }
    }
    object
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::hostile::fuzz::fuzz_cases(64)))]

    #[test]
    fn applying_the_same_configuration_again_changes_nothing(config in arb_config(), other in arb_config()) {
        let mut store = Store::default();
        store.apply(config.clone(), &request("a", V2, 0), false).unwrap();
        let stored = store.hub.clone();
        let again = store.apply(config.clone(), &request("a", V2, 1), false).unwrap();
        prop_assert_eq!(Some(again), stored);

        store.apply(other.clone(), &request("b", V2, 2), true).unwrap();
        let stored = store.hub.clone();
        let again = store.apply(other, &request("b", V2, 3), true).unwrap();
        prop_assert_eq!(Some(again), stored);
        store.admit().map_err(|e| TestCaseError::fail(e.to_string()))?;
    }

    #[test]
    fn fields_v1_reads_back_what_it_wrote(set in arb_set()) {
        let json = set.to_fields_v1();
        prop_assert_eq!(Set::from_fields_v1(&json).unwrap(), set);
    }

    #[test]
    fn fuzz_no_input_panics(
        live in arb_json(),
        config in arb_json(),
        live_managed in arb_json(),
        sent_managed in arb_json(),
        valid in arb_config(),
        owners in arb_managed(),
        force in any::<bool>(),
        status in any::<bool>(),
    ) {
        let _ = Set::from_fields_v1(&live_managed);
        let _ = Managed::decode(&live_managed);
        let versions = HubVersions::<MachineKind>::new(None);
        let manager = FieldManager::new(&versions);
        for version in [V1, V2] {
            let mut r = request("fuzz", version, 0);
            if status {
                r.subresource = Subresource::Status;
            }
            let live = typed(live.clone(), live_managed.clone());
            let owned = typed(live.clone(), owners.clone());
            for candidate in [config.clone(), typed(config.clone(), Value::Null), valid.clone()] {
                let _ = manager.apply(Some(live.clone()), &candidate, &r, force);
                let _ = manager.apply(Some(owned.clone()), &candidate, &r, force);
                let _ = manager.apply(None, &candidate, &r, force);
            }
            let _ = manager.update(Some(live.clone()), typed(config.clone(), sent_managed.clone()), &r);
            let _ = manager.update(Some(owned.clone()), typed(valid.clone(), owners.clone()), &r);
            let _ = manager.update(None, config.clone(), &r);
        }
    }
}
