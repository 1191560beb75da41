//! Conversion never panics: generated objects of both versions are turned
//! into JSON, mutated at random nodes (out-of-range and negative numbers,
//! odd strings, nulls, removed fields), decoded back where they still decode
//! (also as upstream's conversion-data annotation), and converted every way.
//! Errors are fine; panics are not.

use capmox_apiserver::api::conversion::{Spoke, UPSTREAM_CONVERSION_DATA};
use capmox_apiserver::api::v1alpha1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use proptest::collection::vec;
use proptest::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::CASES;
use super::generate::{hub, one_of, spoke};

#[derive(Clone, Debug)]
enum Mutation {
    Replace(usize, Value),
    Remove(usize),
}

fn odd_value() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop_oneof![
            Just(-1i64),
            Just(0),
            Just(65_536),
            Just(i64::from(i32::MAX) + 1),
            Just(i64::from(u32::MAX) + 1),
            Just(i64::MIN),
        ]
        .prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        one_of(&[
            "",
            "net0",
            "net1",
            "default",
            "inet6",
            "APIConversionReason",
            "1970-01-01T00:00:00Z"
        ])
        .prop_map(Value::from),
        Just(json!([])),
        Just(json!({})),
        Just(json!([{}])),
    ]
    .boxed()
}

fn mutation() -> BoxedStrategy<Mutation> {
    prop_oneof![
        3 => (any::<usize>(), odd_value()).prop_map(|(at, value)| Mutation::Replace(at, value)),
        1 => any::<usize>().prop_map(Mutation::Remove),
    ]
    .boxed()
}

/// The number of nodes below (and including) `value`.
fn node_count(value: &Value) -> usize {
    1 + match value {
        Value::Array(items) => items.iter().map(node_count).sum(),
        Value::Object(fields) => fields.values().map(node_count).sum(),
        _ => 0,
    }
}

/// Applies the mutation to node `target` of a pre-order walk, counting from
/// `*seen`. Returns true once applied.
fn mutate_at(value: &mut Value, target: usize, seen: &mut usize, mutation: &Mutation) -> bool {
    let children: Vec<&mut Value> = match value {
        Value::Array(items) => items.iter_mut().collect(),
        Value::Object(fields) => fields.values_mut().collect(),
        _ => Vec::new(),
    };
    for child in children {
        *seen += 1;
        if *seen == target {
            match mutation {
                Mutation::Replace(_, new) => *child = new.clone(),
                Mutation::Remove(_) => *child = Value::Null,
            }
            return true;
        }
        if mutate_at(child, target, seen, mutation) {
            return true;
        }
    }
    false
}

fn mutate(mut value: Value, mutations: &[Mutation]) -> Value {
    for mutation in mutations {
        let (Mutation::Replace(at, _) | Mutation::Remove(at)) = mutation;
        let count = node_count(&value);
        if count > 1 {
            // Node 0 is the document itself; mutate one below it.
            let target = 1 + at % (count - 1);
            mutate_at(&mut value, target, &mut 0, mutation);
        }
    }
    value
}

/// Nulls left by removals are removed from objects, so that "absent" is
/// tried as well as "null".
fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            fields.retain(|_, v| !v.is_null());
            fields.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

fn converts_without_panicking<S>(
    spoke: &impl Serialize,
    hub: &impl Serialize,
    spoke_mutations: &[Mutation],
    hub_mutations: &[Mutation],
    absent_for_null: bool,
) where
    S: Spoke + DeserializeOwned + Clone + HasMetadata,
    S::Hub: DeserializeOwned,
{
    let prepare = |value: Value, mutations: &[Mutation]| {
        let mut value = mutate(value, mutations);
        if absent_for_null {
            drop_nulls(&mut value);
        }
        value
    };
    let spoke_json = prepare(
        serde_json::to_value(spoke).expect("serializes"),
        spoke_mutations,
    );
    let hub_json = prepare(
        serde_json::to_value(hub).expect("serializes"),
        hub_mutations,
    );

    let stored: Option<S::Hub> = serde_json::from_value(hub_json.clone()).ok();
    if let Some(stored) = &stored {
        let _ = S::from_hub(stored);
    }
    let Ok(object) = serde_json::from_value::<S>(spoke_json) else {
        return;
    };
    let _ = object.clone().to_hub(None);
    let _ = object.clone().to_hub(stored.as_ref());

    // The mutated hub as upstream's annotation, decodable or not.
    let mut annotated = object;
    annotated
        .metadata_mut()
        .annotations
        .get_or_insert_with(Default::default)
        .insert(UPSTREAM_CONVERSION_DATA.into(), hub_json.to_string());
    let _ = annotated.clone().to_hub(None);
    let _ = annotated.to_hub(stored.as_ref());
}

trait HasMetadata {
    fn metadata_mut(&mut self) -> &mut ObjectMeta;
}

macro_rules! has_metadata {
    ($($kind:ident),*) => {$(
        impl HasMetadata for v1alpha1::$kind {
            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    )*};
}
has_metadata!(
    ProxmoxCluster,
    ProxmoxClusterTemplate,
    ProxmoxMachine,
    ProxmoxMachineTemplate
);

macro_rules! never_panics {
    ($test:ident, $kind:ident, $spoke:expr, $hub:expr) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(CASES))]

            #[test]
            fn $test(
                spoke in $spoke,
                hub in $hub,
                spoke_mutations in vec(mutation(), 0..=4),
                hub_mutations in vec(mutation(), 0..=4),
                absent_for_null in any::<bool>(),
            ) {
                converts_without_panicking::<v1alpha1::$kind>(
                    &spoke,
                    &hub,
                    &spoke_mutations,
                    &hub_mutations,
                    absent_for_null,
                );
            }
        }
    };
}

never_panics!(
    cluster_conversion_never_panics,
    ProxmoxCluster,
    spoke::cluster(),
    hub::cluster()
);
never_panics!(
    cluster_template_conversion_never_panics,
    ProxmoxClusterTemplate,
    spoke::cluster_template(),
    hub::cluster_template()
);
never_panics!(
    machine_conversion_never_panics,
    ProxmoxMachine,
    spoke::machine(),
    hub::machine()
);
never_panics!(
    machine_template_conversion_never_panics,
    ProxmoxMachineTemplate,
    spoke::machine_template(),
    hub::machine_template()
);
