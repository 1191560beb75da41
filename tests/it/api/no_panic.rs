//! No input panics: arbitrary JSON, and arbitrary mutations of valid
//! objects, go through decoding, defaulting and validation (schema, rules
//! and webhooks, create and update) of every kind in both versions.

use capmox_apiserver::api::resource::{
    ClusterKind, ClusterTemplateKind, HubConversion, KubernetesReleaseKind, MachineKind,
    MachineTemplateKind,
};
use capmox_apiserver::api::validation::validate_schema;
use capmox_apiserver::api::{Kind, Version};
use proptest::prelude::*;
use serde_json::{Map, Value};

use super::support::{
    check_v1alpha1, cluster_template_v1, cluster_template_v2, cluster_v1, cluster_v2, create,
    machine_template_v1, machine_template_v2, machine_v1, machine_v2, update,
};

/// Field names of the API, so that generated objects reach deep into the
/// schemas, mixed with arbitrary ones.
const KEYS: &[&str] = &[
    "spec",
    "status",
    "metadata",
    "network",
    "networkDevices",
    "name",
    "bridge",
    "mtu",
    "linkMtu",
    "vlan",
    "routes",
    "routingPolicy",
    "to",
    "via",
    "from",
    "table",
    "priority",
    "is6",
    "vrfs",
    "ipPoolRef",
    "apiGroup",
    "kind",
    "defaultIPv4",
    "dhcp4",
    "template",
    "templateID",
    "sourceNode",
    "templateSelector",
    "matchTags",
    "full",
    "format",
    "storage",
    "tags",
    "disks",
    "bootVolume",
    "sizeGb",
    "vmIDRange",
    "start",
    "end",
    "controlPlaneEndpoint",
    "host",
    "port",
    "ipv4Config",
    "ipv6Config",
    "addresses",
    "prefix",
    "gateway",
    "dnsServers",
    "zoneConfig",
    "zone",
    "conditions",
    "type",
    "reason",
    "lastTransitionTime",
    "labels",
    "default",
    "additionalDevices",
    "ipv4PoolRef",
    "controlPlaneEndpointIPPoolRef",
    "externalManagedControlPlane",
];

fn arb_key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(KEYS).prop_map(str::to_owned),
        1 => "[a-zA-Z]{0,6}",
    ]
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e12f64..1e12).prop_map(Value::from),
        proptest::sample::select(
            &[
                "net0",
                "net1",
                "net10",
                "default",
                "all",
                "10.10.10.12",
                "2001:db8::1",
                "10.0.0.0/8",
                "10.0.0.1-10.0.0.9",
                "InClusterIPPool",
                "ipam.cluster.x-k8s.io",
                "2026-01-01T00:00:00Z",
                "virtio",
                "",
                "\u{0}\u{7f}é",
            ][..]
        )
        .prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 96, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            proptest::collection::btree_map(arb_key(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

const VALID: [fn() -> Value; 8] = [
    cluster_v1,
    cluster_template_v1,
    machine_v1,
    machine_template_v1,
    cluster_v2,
    cluster_template_v2,
    machine_v2,
    machine_template_v2,
];

/// Writes `body` through the path of `old`'s version and kind (the body may
/// claim anything); only panics matter here, results are ignored.
fn exercise(body: Value, old: &Value) {
    let Some(kind) = Kind::from_name(old["kind"].as_str().unwrap_or_default()) else {
        return;
    };
    if old["apiVersion"] == "infrastructure.cluster.x-k8s.io/v1alpha1" {
        let _ = check_v1alpha1(kind, body.clone(), None);
        let _ = check_v1alpha1(kind, body, Some(old.clone()));
        return;
    }
    fn both<R: HubConversion>(body: Value, old: &Value) {
        let _ = create::<R>(body.clone());
        let _ = update::<R>(body, old.clone());
    }
    match kind {
        Kind::ProxmoxCluster => both::<ClusterKind>(body, old),
        Kind::ProxmoxClusterTemplate => both::<ClusterTemplateKind>(body, old),
        Kind::ProxmoxKubernetesRelease => both::<KubernetesReleaseKind>(body, old),
        Kind::ProxmoxMachine => both::<MachineKind>(body, old),
        Kind::ProxmoxMachineTemplate => both::<MachineTemplateKind>(body, old),
    }
}

/// Every JSON pointer inside a value.
fn pointers(value: &Value, at: String, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let p = format!("{at}/{k}");
                out.push(p.clone());
                pointers(v, p, out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                let p = format!("{at}/{i}");
                out.push(p.clone());
                pointers(v, p, out);
            }
        }
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn arbitrary_objects_do_not_panic(which in 0..VALID.len(), spec in arb_json(), extra in arb_json()) {
        let valid = VALID[which]();
        let mut body = valid.clone();
        body["spec"] = spec;
        if let (Value::Object(body), Value::Object(extra)) = (&mut body, extra) {
            for (k, v) in extra {
                if k != "apiVersion" && k != "kind" {
                    body.insert(k, v);
                }
            }
        }
        exercise(body, &valid);
    }

    #[test]
    fn mutated_valid_objects_do_not_panic(
        which in 0..VALID.len(),
        pick in any::<prop::sample::Index>(),
        replacement in arb_json(),
        delete in any::<bool>(),
    ) {
        let valid = VALID[which]();
        let mut body = valid.clone();
        let mut all = Vec::new();
        pointers(&body, String::new(), &mut all);
        let target = pick.get(&all).clone();
        let (parent, key) = target.rsplit_once('/').unwrap_or(("", ""));
        match body.pointer_mut(parent) {
            Some(Value::Object(map)) if delete => { map.remove(key); }
            Some(Value::Array(items)) if delete => {
                if let Ok(i) = key.parse::<usize>() { items.remove(i); }
            }
            _ => {
                if let Some(slot) = body.pointer_mut(&target) { *slot = replacement; }
            }
        }
        exercise(body, &valid);
    }

    #[test]
    fn schema_validation_of_any_value_does_not_panic(object in arb_json(), old in arb_json()) {
        for version in Version::ALL {
            for kind in Kind::served_in(version) {
                let _ = validate_schema(version, kind, &object, Some(&old));
            }
        }
    }
}
