//! Strategies generating schema-plausible objects of each kind in each
//! version: optional fields present or absent, empty strings next to absent
//! ones, several devices, duplicate and position-named devices.

pub mod hub;
pub mod spoke;

use std::collections::BTreeMap;

use capmox_apiserver::api::common::{
    MachineAddress, SecretReference, TemplateObjectMeta, TypedLocalObjectReference,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;

/// Defines the strategies of a kind with spec and status and of its
/// template kind, from the strategies of the spec and status.
macro_rules! kind_and_template {
    (
        $api_version:expr,
        $object:ident: $kind:ident { spec: $spec:expr, status: $status:expr $(,)? },
        $template:ident: $template_kind:ident { $template_spec:ident, $template_resource:ident $(,)? } $(,)?
    ) => {
        pub fn $object() -> BoxedStrategy<$kind> {
            (object_meta(), $spec, $status)
                .prop_map(|(metadata, spec, status)| $kind {
                    api_version: $api_version.into(),
                    kind: stringify!($kind).into(),
                    metadata,
                    spec,
                    status,
                })
                .boxed()
        }

        pub fn $template() -> BoxedStrategy<$template_kind> {
            (object_meta(), template_meta(), $spec)
                .prop_map(|(metadata, template_metadata, spec)| $template_kind {
                    api_version: $api_version.into(),
                    kind: stringify!($template_kind).into(),
                    metadata,
                    spec: $template_spec {
                        template: $template_resource {
                            metadata: template_metadata,
                            spec,
                        },
                    },
                })
                .boxed()
        }
    };
}

pub(crate) use kind_and_template;

/// One of a few strings (values from small pools collide often, which is
/// what exercises pairing by name).
pub fn one_of(options: &'static [&'static str]) -> BoxedStrategy<String> {
    select(options).prop_map(String::from).boxed()
}

/// A short list of strings from a pool.
pub fn strings(options: &'static [&'static str], max: usize) -> BoxedStrategy<Vec<String>> {
    vec(one_of(options), 0..=max).boxed()
}

pub fn maybe_string(options: &'static [&'static str]) -> BoxedStrategy<Option<String>> {
    option::of(one_of(options)).boxed()
}

pub fn object_meta() -> BoxedStrategy<ObjectMeta> {
    (
        one_of(&["a", "b"]),
        option::of(one_of(&["default", "team"])),
        option::of(btree_map(
            one_of(&["note", "owner"]),
            one_of(&["", "x"]),
            0..=2,
        )),
        option::of(btree_map(
            one_of(&["cluster.x-k8s.io/cluster-name"]),
            one_of(&["c1"]),
            0..=1,
        )),
        option::of(0i64..4),
    )
        .prop_map(
            |(name, namespace, annotations, labels, generation)| ObjectMeta {
                name: Some(name),
                namespace,
                annotations,
                labels,
                generation,
                ..ObjectMeta::default()
            },
        )
        .boxed()
}

pub fn template_meta() -> BoxedStrategy<TemplateObjectMeta> {
    (
        btree_map(one_of(&["l"]), one_of(&["", "v"]), 0..=1),
        btree_map(one_of(&["a"]), one_of(&["", "v"]), 0..=1),
    )
        .prop_map(|(labels, annotations)| TemplateObjectMeta {
            labels,
            annotations,
        })
        .boxed()
}

/// A time; `epoch` allows the Unix epoch, which stands for "unknown" in
/// hub conditions.
pub fn time(epoch: bool) -> BoxedStrategy<Time> {
    let first = if epoch { 0 } else { 1 };
    (first..2_000_000_000i64)
        .prop_map(|s| Time(Timestamp::from_second(s).expect("in range")))
        .boxed()
}

pub fn pool_ref() -> BoxedStrategy<TypedLocalObjectReference> {
    (
        option::of(one_of(&["ipam.cluster.x-k8s.io"])),
        one_of(&["InClusterIPPool", "GlobalInClusterIPPool"]),
        one_of(&[
            "a",
            "b",
            "c-v4-icip",
            "c-v6-icip",
            "pool-inet",
            "pool-inet6",
            "",
        ]),
    )
        .prop_map(|(api_group, kind, name)| TypedLocalObjectReference {
            api_group,
            kind,
            name,
        })
        .boxed()
}

pub fn secret_ref() -> BoxedStrategy<SecretReference> {
    (one_of(&["", "creds"]), one_of(&["", "ns"]))
        .prop_map(|(name, namespace)| SecretReference { name, namespace })
        .boxed()
}

pub fn machine_address() -> BoxedStrategy<MachineAddress> {
    (
        one_of(&["InternalIP", "Hostname"]),
        one_of(&["10.0.0.1", "node"]),
    )
        .prop_map(|(type_, address)| MachineAddress { type_, address })
        .boxed()
}

/// Device names of both versions, keyed for `status.ipAddresses`.
pub fn net_names() -> BoxedStrategy<Vec<String>> {
    proptest::collection::btree_set(one_of(&["default", "net0", "net1", "net2", ""]), 0..=3)
        .prop_map(|set| set.into_iter().collect())
        .boxed()
}

/// A map built from unique keys and a value strategy.
pub fn keyed<V: std::fmt::Debug + 'static>(
    keys: BoxedStrategy<Vec<String>>,
    value: impl Fn() -> BoxedStrategy<V> + 'static,
) -> BoxedStrategy<BTreeMap<String, V>> {
    keys.prop_flat_map(move |keys| {
        let n = keys.len();
        vec(value(), n).prop_map(move |values| keys.clone().into_iter().zip(values).collect())
    })
    .boxed()
}
