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
    /// Replaces the node at this pre-order position.
    Replace(usize, Value),
    /// Removes the node at this pre-order position.
    Remove(usize),
    /// Replaces the number at this position among the numbers: a value that
    /// still decodes but may not fit the other version.
    Number(usize, i64),
}

impl Mutation {
    fn position(&self) -> usize {
        match self {
            Mutation::Replace(at, _) | Mutation::Remove(at) | Mutation::Number(at, _) => *at,
        }
    }

    /// Whether the mutation can apply to this node.
    fn applies_to(&self, node: &Value) -> bool {
        !matches!(self, Mutation::Number(..)) || node.is_number()
    }
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
    let boundary = prop_oneof![
        Just(-1i64),
        Just(i64::from(i32::MIN)),
        Just(i64::from(u16::MAX) + 1),
        Just(i64::from(i32::MAX) + 1),
        Just(i64::from(u32::MAX)),
        Just(i64::MAX),
    ];
    prop_oneof![
        3 => (any::<usize>(), odd_value()).prop_map(|(at, value)| Mutation::Replace(at, value)),
        1 => any::<usize>().prop_map(Mutation::Remove),
        3 => (any::<usize>(), boundary).prop_map(|(at, value)| Mutation::Number(at, value)),
    ]
    .boxed()
}

/// The number of nodes below `value` the mutation can apply to.
fn targets(value: &Value, mutation: &Mutation) -> usize {
    let children: Box<dyn Iterator<Item = &Value>> = match value {
        Value::Array(items) => Box::new(items.iter()),
        Value::Object(fields) => Box::new(fields.values()),
        _ => Box::new(std::iter::empty()),
    };
    children
        .map(|child| usize::from(mutation.applies_to(child)) + targets(child, mutation))
        .sum()
}

/// Applies the mutation to target `target` (counting from 0 in a pre-order
/// walk below `value`, `*seen` targets passed so far). Returns true once
/// applied.
fn mutate_at(value: &mut Value, target: usize, seen: &mut usize, mutation: &Mutation) -> bool {
    let children: Vec<&mut Value> = match value {
        Value::Array(items) => items.iter_mut().collect(),
        Value::Object(fields) => fields.values_mut().collect(),
        _ => Vec::new(),
    };
    for child in children {
        if mutation.applies_to(child) {
            if *seen == target {
                *child = match mutation {
                    Mutation::Replace(_, new) => new.clone(),
                    Mutation::Remove(_) => Value::Null,
                    Mutation::Number(_, number) => Value::from(*number),
                };
                return true;
            }
            *seen += 1;
        }
        if mutate_at(child, target, seen, mutation) {
            return true;
        }
    }
    false
}

fn mutate(mut value: Value, mutations: &[Mutation]) -> Value {
    for mutation in mutations {
        let count = targets(&value, mutation);
        if count > 0 {
            mutate_at(&mut value, mutation.position() % count, &mut 0, mutation);
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
            #![proptest_config(ProptestConfig::with_cases(crate::hostile::fuzz::fuzz_cases(CASES)))]

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
