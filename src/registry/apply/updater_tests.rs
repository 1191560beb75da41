//! Table-driven tests of the updater, after the scenarios structured-merge-
//! diff documents: appliers and updaters taking turns on a schema with
//! every kind of list and map, in two versions where one field is renamed
//! (`struct.value` in v1alpha1 is `struct.count` in v1alpha2).

use std::sync::LazyLock;

use serde_json::{Value, json};

use super::*;
use crate::api::Kind;
use crate::api::schema::Structural;
use crate::registry::apply::managed::Operation;

fn schema(value_field: &str) -> Structural {
    let item = json!({"type": "object", "properties": {
        "name": {"type": "string"}, "value": {"type": "integer"}, "other": {"type": "string"}
    }});
    let json = json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "list": {"type": "array", "x-kubernetes-list-type": "map",
                     "x-kubernetes-list-map-keys": ["name"], "items": item},
            "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "atomicList": {"type": "array", "items": {"type": "string"}},
            "struct": {"type": "object", "properties": {
                "name": {"type": "string"}, value_field: {"type": "integer"}
            }},
            "atomicStruct": {"type": "object", "x-kubernetes-map-type": "atomic", "properties": {
                "a": {"type": "string"}, "b": {"type": "string"}
            }},
            "map": {"type": "object", "additionalProperties": {"type": "string"}},
            "string": {"type": "string"},
            "status": {"type": "object", "properties": {"phase": {"type": "string"}}}
        }
    });
    Structural::from_json(&json).unwrap_or_else(|e| panic!("test schema: {e}"))
}

static V1: LazyLock<Structural> = LazyLock::new(|| schema("value"));
static V2: LazyLock<Structural> = LazyLock::new(|| schema("count"));

/// The test kind: v1alpha1 calls `struct.count` `value`.
struct TestVersions;

fn rename(object: &Value, from: &str, to: &str) -> Value {
    let mut object = object.clone();
    if let Some(Value::Object(fields)) = object.get_mut("struct")
        && let Some(value) = fields.remove(from)
    {
        fields.insert(to.to_owned(), value);
    }
    object
}

impl KindVersions for TestVersions {
    fn kind_name(&self) -> &str {
        Kind::ProxmoxMachine.as_str()
    }

    fn serves(&self, _: Version) -> bool {
        true
    }

    fn schema(&self, version: Version) -> &'static Structural {
        match version {
            Version::V1alpha1 => &V1,
            Version::V1alpha2 => &V2,
        }
    }

    fn has_status(&self, _: Version) -> bool {
        true
    }

    fn convert(
        &self,
        object: &Value,
        from: Version,
        _to: Version,
    ) -> Result<Value, ConversionError> {
        Ok(match from {
            Version::V1alpha1 => rename(object, "value", "count"),
            Version::V1alpha2 => rename(object, "count", "value"),
        })
    }
}

const A: Version = Version::V1alpha1;
const B: Version = Version::V1alpha2;

enum Op {
    Apply(&'static str, Version, Value),
    ForceApply(&'static str, Version, Value),
    Update(&'static str, Version, Value),
}

struct State {
    live: Value,
    version: Version,
    fields: Fields,
    /// Whether the last apply changed nothing.
    last_was_noop: bool,
}

fn id(manager: &str, operation: Operation, version: Version) -> ManagerId {
    ManagerId::new(manager, operation, version.api_version(), "")
}

fn run(ops: Vec<Op>) -> Result<State, ApplyError> {
    let updater = Updater {
        versions: &TestVersions,
        subresource: Subresource::Main,
    };
    let mut state = State {
        live: json!({}),
        version: B,
        fields: Fields::new(),
        last_was_noop: false,
    };
    for op in ops {
        let (manager, version, object, force, apply) = match op {
            Op::Apply(m, v, o) => (m, v, o, false, true),
            Op::ForceApply(m, v, o) => (m, v, o, true, true),
            Op::Update(m, v, o) => (m, v, o, false, false),
        };
        let live = updater
            .convert(&state.live, state.version, version)?
            .into_owned();
        if apply {
            let applier = id(manager, Operation::Apply, version);
            let new = updater.apply(&live, version, &object, &mut state.fields, &applier, force)?;
            state.last_was_noop = new.is_none();
            state.live = new.unwrap_or(live);
        } else {
            let writer = id(manager, Operation::Update, version);
            updater.update(&live, &object, version, &mut state.fields, &writer)?;
            state.live = object;
        }
        state.version = version;
    }
    Ok(state)
}

fn run_ok(ops: Vec<Op>) -> State {
    run(ops).unwrap_or_else(|e| panic!("unexpected error: {e}"))
}

impl State {
    /// The live object in `version`.
    fn object(&self, version: Version) -> Value {
        if version == self.version {
            return self.live.clone();
        }
        TestVersions
            .convert(&self.live, self.version, version)
            .unwrap_or(Value::Null)
    }

    /// Every manager's fields as `name/operation/version: fieldsV1`.
    fn owners(&self) -> Value {
        let mut out = serde_json::Map::new();
        for (id, owned) in &self.fields {
            let version = owned.api_version.rsplit('/').next().unwrap_or_default();
            let operation = if owned.applied { "Apply" } else { "Update" };
            out.insert(
                format!("{}/{operation}/{version}", id.manager()),
                owned.set.to_fields_v1(),
            );
        }
        Value::Object(out)
    }
}

fn conflicts(result: Result<State, ApplyError>) -> Vec<String> {
    match result {
        Err(ApplyError::Conflicts(conflicts)) => conflicts
            .0
            .iter()
            .map(|c| format!("{} {}", c.manager.manager(), c.path))
            .collect(),
        Err(other) => panic!("expected conflicts, got {other}"),
        Ok(state) => panic!("expected conflicts, got {}", state.live),
    }
}

fn item(name: &str) -> String {
    format!("k:{{\"name\":\"{name}\"}}")
}

#[test]
fn apply_creates_and_reapply_is_a_noop() {
    let config = json!({"list": [{"name": "a", "value": 1}], "string": "s"});
    let state = run_ok(vec![
        Op::Apply("a", B, config.clone()),
        Op::Apply("a", B, config.clone()),
    ]);
    assert!(state.last_was_noop);
    assert_eq!(state.object(B), config);
    assert_eq!(
        state.owners(),
        json!({"a/Apply/v1alpha2": {
            "f:list": {item("a"): {".": {}, "f:name": {}, "f:value": {}}},
            "f:string": {}
        }})
    );
}

#[test]
fn an_applier_removing_an_item_keeps_the_items_of_others() {
    let state = run_ok(vec![
        Op::Apply("one", B, json!({"list": [{"name": "a"}, {"name": "b"}]})),
        Op::Apply("two", B, json!({"list": [{"name": "c"}]})),
        Op::Apply("one", B, json!({"list": [{"name": "a"}]})),
    ]);
    assert_eq!(
        state.object(B),
        json!({"list": [{"name": "a"}, {"name": "c"}]})
    );
    assert_eq!(
        state.owners(),
        json!({
            "one/Apply/v1alpha2": {"f:list": {item("a"): {".": {}, "f:name": {}}}},
            "two/Apply/v1alpha2": {"f:list": {item("c"): {".": {}, "f:name": {}}}}
        })
    );
}

#[test]
fn applying_the_same_value_shares_ownership() {
    let config = json!({"list": [{"name": "a", "value": 0}]});
    let state = run_ok(vec![
        Op::Apply("one", B, config.clone()),
        Op::Apply("two", B, config),
    ]);
    let owned = json!({"f:list": {item("a"): {".": {}, "f:name": {}, "f:value": {}}}});
    assert_eq!(
        state.owners(),
        json!({"one/Apply/v1alpha2": owned, "two/Apply/v1alpha2": owned})
    );
}

#[test]
fn changing_a_value_another_applier_owns_conflicts_unless_forced() {
    let first = Op::Apply("one", B, json!({"list": [{"name": "a", "value": 0}]}));
    let second = json!({"list": [{"name": "a", "value": 1}]});
    assert_eq!(
        conflicts(run(vec![first, Op::Apply("two", B, second.clone())])),
        [r#"one .list[name="a"].value"#]
    );
    let state = run_ok(vec![
        Op::Apply("one", B, json!({"list": [{"name": "a", "value": 0}]})),
        Op::ForceApply("two", B, second.clone()),
    ]);
    assert_eq!(state.object(B), second);
    assert_eq!(
        state.owners(),
        json!({
            "one/Apply/v1alpha2": {"f:list": {item("a"): {".": {}, "f:name": {}}}},
            "two/Apply/v1alpha2": {"f:list": {item("a"): {".": {}, "f:name": {}, "f:value": {}}}}
        })
    );
}

#[test]
fn fields_an_updater_added_survive_when_the_applier_lets_go_of_the_struct() {
    let state = run_ok(vec![
        Op::Apply("default", B, json!({"struct": {"name": "a"}})),
        Op::Update(
            "controller",
            B,
            json!({"struct": {"name": "a", "count": 1}}),
        ),
        Op::Apply("default", B, json!({"struct": {}})),
    ]);
    assert_eq!(state.object(B), json!({"struct": {"count": 1}}));
}

#[test]
fn applying_null_to_a_struct_keeps_what_others_own() {
    let state = run_ok(vec![
        Op::Apply("default", B, json!({"struct": {"name": "a"}})),
        Op::Update(
            "controller",
            B,
            json!({"struct": {"name": "b", "count": 1}}),
        ),
        Op::Apply("default", B, json!({"struct": null})),
    ]);
    assert_eq!(
        state.object(B),
        json!({"struct": {"name": "b", "count": 1}})
    );
    assert_eq!(
        state.owners(),
        json!({
            "controller/Update/v1alpha2": {"f:struct": {"f:name": {}, "f:count": {}}},
            "default/Apply/v1alpha2": {"f:struct": {}}
        })
    );
}

#[test]
fn set_items_are_owned_one_by_one() {
    let state = run_ok(vec![
        Op::Apply("one", B, json!({"set": ["a", "b"]})),
        Op::Apply("two", B, json!({"set": ["c"]})),
        Op::Apply("one", B, json!({"set": ["a"]})),
    ]);
    assert_eq!(state.object(B), json!({"set": ["a", "c"]}));
    assert_eq!(
        state.owners(),
        json!({
            "one/Apply/v1alpha2": {"f:set": {"v:\"a\"": {}}},
            "two/Apply/v1alpha2": {"f:set": {"v:\"c\"": {}}}
        })
    );
}

#[test]
fn atomic_lists_and_structs_are_owned_whole() {
    let first = || {
        Op::Apply(
            "one",
            B,
            json!({"atomicList": ["a", "b"], "atomicStruct": {"a": "x"}}),
        )
    };
    let second = json!({"atomicList": ["c"], "atomicStruct": {"b": "y"}});
    assert_eq!(
        conflicts(run(vec![first(), Op::Apply("two", B, second.clone())])),
        ["one .atomicList", "one .atomicStruct"]
    );
    let state = run_ok(vec![first(), Op::ForceApply("two", B, second.clone())]);
    assert_eq!(state.object(B), second);
    assert_eq!(
        state.owners(),
        json!({"two/Apply/v1alpha2": {"f:atomicList": {}, "f:atomicStruct": {}}})
    );
}

#[test]
fn granular_maps_merge_entries_of_several_appliers() {
    let state = run_ok(vec![
        Op::Apply("one", B, json!({"map": {"x": "1"}})),
        Op::Apply("two", B, json!({"map": {"y": "2"}})),
        Op::Apply("one", B, json!({})),
    ]);
    assert_eq!(state.object(B), json!({"map": {"y": "2"}}));
}

#[test]
fn an_update_takes_ownership_from_the_applier() {
    let state = run_ok(vec![
        Op::Apply(
            "kubectl",
            B,
            json!({"string": "x", "struct": {"name": "a"}}),
        ),
        Op::Update("editor", B, json!({"string": "y", "struct": {"name": "a"}})),
    ]);
    assert_eq!(
        state.owners(),
        json!({
            "kubectl/Apply/v1alpha2": {"f:struct": {"f:name": {}}},
            "editor/Update/v1alpha2": {"f:string": {}}
        })
    );
    assert_eq!(
        conflicts(run(vec![
            Op::Apply("kubectl", B, json!({"string": "x"})),
            Op::Update("editor", B, json!({"string": "y"})),
            Op::Apply("kubectl", B, json!({"string": "x"})),
        ])),
        ["editor .string"]
    );
}

#[test]
fn status_is_not_owned_through_the_main_resource() {
    let state = run_ok(vec![Op::Apply(
        "one",
        B,
        json!({"string": "x", "status": {"phase": "up"}}),
    )]);
    assert_eq!(
        state.owners(),
        json!({"one/Apply/v1alpha2": {"f:string": {}}})
    );
}

#[test]
fn shared_list_items_follow_the_configuration_order() {
    let state = run_ok(vec![
        Op::Update(
            "controller",
            B,
            json!({"list": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}),
        ),
        Op::Apply("one", B, json!({"list": [{"name": "c"}, {"name": "a"}]})),
    ]);
    assert_eq!(
        state.object(B),
        json!({"list": [{"name": "b"}, {"name": "c"}, {"name": "a"}]})
    );
}

#[test]
fn conflicts_are_found_in_the_owners_version() {
    let first = || Op::Apply("old", A, json!({"struct": {"value": 1}}));
    assert_eq!(
        conflicts(run(vec![
            first(),
            Op::Apply("new", B, json!({"struct": {"count": 2}}))
        ])),
        ["old .struct.value"]
    );
    let state = run_ok(vec![
        first(),
        Op::ForceApply("new", B, json!({"struct": {"count": 2}})),
    ]);
    assert_eq!(state.object(A), json!({"struct": {"value": 2}}));
    assert_eq!(
        state.owners(),
        json!({"new/Apply/v1alpha2": {"f:struct": {"f:count": {}}}})
    );
}

#[test]
fn an_applier_switching_versions_prunes_in_its_old_version() {
    let state = run_ok(vec![
        Op::Apply("one", A, json!({"struct": {"name": "a", "value": 1}})),
        Op::Apply("one", B, json!({"struct": {"name": "a"}})),
    ]);
    assert_eq!(state.object(B), json!({"struct": {"name": "a"}}));
    assert_eq!(
        state.owners(),
        json!({"one/Apply/v1alpha2": {"f:struct": {"f:name": {}}}})
    );
}

#[test]
fn managers_of_unserved_versions_are_dropped() {
    let updater = Updater {
        versions: &TestVersions,
        subresource: Subresource::Main,
    };
    let mut fields = Fields::new();
    fields.insert(
        ManagerId::new("gone", Operation::Update, "example.com/v9", ""),
        VersionedSet {
            set: Set::from_paths(&[crate::registry::apply::fieldpath::Path::fields(&["string"])]),
            api_version: "example.com/v9".into(),
            applied: false,
        },
    );
    let old = json!({"string": "x"});
    let new = json!({"string": "x", "map": {"k": "v"}});
    let writer = id("w", Operation::Update, B);
    updater.update(&old, &new, B, &mut fields, &writer).unwrap();
    assert_eq!(fields.keys().collect::<Vec<_>>(), [&writer]);
}

/// A kind served in v1alpha2 only, as ProxmoxKubernetesRelease: nothing converts to v1alpha1.
struct V1alpha2Only;

impl KindVersions for V1alpha2Only {
    fn kind_name(&self) -> &str {
        Kind::ProxmoxKubernetesRelease.as_str()
    }

    fn serves(&self, version: Version) -> bool {
        version == Version::V1alpha2
    }

    fn schema(&self, _: Version) -> &'static Structural {
        &V2
    }

    fn has_status(&self, _: Version) -> bool {
        true
    }

    fn convert(&self, _: &Value, _: Version, _: Version) -> Result<Value, ConversionError> {
        Err(ConversionError::NotServed {
            kind: Kind::ProxmoxKubernetesRelease,
        })
    }
}

#[test]
fn managers_of_a_version_the_kind_is_not_served_in_are_dropped_not_converted() {
    let updater = Updater {
        versions: &V1alpha2Only,
        subresource: Subresource::Main,
    };
    let old_client = id("old-client", Operation::Update, A);
    let entry = || VersionedSet {
        set: Set::from_paths(&[crate::registry::apply::fieldpath::Path::fields(&["count"])]),
        api_version: A.api_version().into(),
        applied: false,
    };
    let live = json!({"count": 1});
    let applier = id("me", Operation::Apply, B);
    let mut fields = Fields::new();
    fields.insert(old_client.clone(), entry());
    updater
        .apply(&live, B, &json!({"count": 2}), &mut fields, &applier, false)
        .expect("apply");
    assert!(!fields.contains_key(&old_client));
    let writer = id("w", Operation::Update, B);
    let mut fields = Fields::new();
    fields.insert(old_client.clone(), entry());
    updater
        .update(&live, &json!({"count": 3}), B, &mut fields, &writer)
        .expect("update");
    assert_eq!(fields.keys().collect::<Vec<_>>(), [&writer]);
}

mod shortcut {
    //! An applier that still applies everything it applied last time has
    //! nothing pruned: the full pruning returns the merged object unchanged,
    //! which is why [`Updater::apply`] skips it then.

    use proptest::prelude::*;
    use serde_json::{Map, Value, json};

    use super::*;
    use crate::registry::apply::typed::merge;

    fn arb_object() -> impl Strategy<Value = Value> {
        let item = (
            proptest::sample::select(&["a", "b", "c"][..]),
            proptest::option::of(0..3i64),
            proptest::option::of("[xy]"),
        );
        (
            proptest::option::of("[pq]"),
            proptest::collection::vec(item, 0..3),
            proptest::option::of(proptest::collection::btree_set("[xyz]", 0..3)),
            proptest::option::of(proptest::collection::vec("[xy]", 0..2)),
            proptest::option::of((proptest::option::of("[mn]"), proptest::option::of(0..2i64))),
            proptest::option::of(proptest::collection::btree_map("[kl]", "[uv]", 0..2)),
        )
            .prop_map(|(string, items, set, atomic, structure, map)| {
                let mut object = Map::new();
                if let Some(s) = string {
                    object.insert("string".into(), json!(s));
                }
                let mut seen = std::collections::BTreeSet::new();
                let list: Vec<Value> = items
                    .into_iter()
                    .filter(|(name, _, _)| seen.insert(*name))
                    .map(|(name, value, other)| {
                        let mut item = Map::new();
                        item.insert("name".into(), json!(name));
                        if let Some(v) = value {
                            item.insert("value".into(), json!(v));
                        }
                        if let Some(o) = other {
                            item.insert("other".into(), json!(o));
                        }
                        Value::Object(item)
                    })
                    .collect();
                if !list.is_empty() {
                    object.insert("list".into(), Value::Array(list));
                }
                if let Some(set) = set {
                    object.insert("set".into(), json!(set));
                }
                if let Some(atomic) = atomic {
                    object.insert("atomicList".into(), json!(atomic));
                }
                if let Some((name, count)) = structure {
                    let mut s = Map::new();
                    if let Some(n) = name {
                        s.insert("name".into(), json!(n));
                    }
                    if let Some(c) = count {
                        s.insert("count".into(), json!(c));
                    }
                    object.insert("struct".into(), Value::Object(s));
                }
                if let Some(map) = map {
                    object.insert("map".into(), json!(map));
                }
                Value::Object(object)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn pruning_changes_nothing_when_the_applier_keeps_all_its_fields(
            first in arb_object(),
            other in arb_object(),
            extra in arb_object(),
        ) {
            let updater = Updater { versions: &TestVersions, subresource: Subresource::Main };
            let ty = updater.ty(B);
            let applier = id("a", Operation::Apply, B);
            let mut fields = Fields::new();
            let mut live = json!({});
            if let Some(new) = updater.apply(&live, B, &first, &mut fields, &applier, true).unwrap() {
                live = new;
            }
            let edited = merge(Some(&live), Some(&other), ty).unwrap_or_else(|| json!({}));
            updater
                .update(&live, &edited, B, &mut fields, &id("u", Operation::Update, B))
                .unwrap();
            let live = edited;
            let second = merge(Some(&first), Some(&extra), ty).unwrap_or_else(|| json!({}));
            let mut set = to_field_set(&second, ty);
            updater.ignore(&mut set, B);
            let Some(last) = fields.get(&applier).cloned() else {
                return Ok(());
            };
            if !last.set.difference(&set).is_empty() {
                return Ok(());
            }
            let merged = merge(Some(&live), Some(&second), ty).unwrap_or_else(|| json!({}));
            fields.insert(
                applier.clone(),
                VersionedSet { set, api_version: B.api_version().to_owned(), applied: true },
            );
            prop_assert_eq!(updater.prune(merged.clone(), B, &fields, &last).unwrap(), merged);
        }
    }
}
