//! Validation ratcheting on the write path (`admit`): errors at values left
//! unchanged from the stored object are not held against an update, in
//! either version; what changes is validated as before. The stored objects
//! here are deserialized without validation, as if written before a rule
//! tightened.

use capmox_apiserver::api::decode::FieldValidation;
use capmox_apiserver::api::resource::{
    AdmitError, Admitted, MachineKind, Operation, admit, encode,
};
use capmox_apiserver::api::{Version, v1alpha2};
use serde_json::{Value, json};

use super::support::{machine_v2, messages, warnings};

type Hub = v1alpha2::ProxmoxMachine;

/// A machine as stored, whatever the rules say of it.
fn stored(edit: impl FnOnce(&mut Value)) -> Hub {
    let mut object = machine_v2();
    edit(&mut object);
    serde_json::from_value(object).expect("a typed machine")
}

/// Writes the stored machine back in `version`, edited, through `operation`.
fn write(
    version: Version,
    old: &Hub,
    operation: Operation<'_, Hub>,
    edit: impl FnOnce(&mut Value),
) -> Result<Admitted<Hub>, AdmitError> {
    let mut body = encode::<MachineKind>(version, old).expect("encodes");
    edit(&mut body);
    admit::<MachineKind>(version, body, FieldValidation::Strict, operation)
}

fn update(
    version: Version,
    old: &Hub,
    edit: impl FnOnce(&mut Value),
) -> Result<Admitted<Hub>, AdmitError> {
    write(version, old, Operation::Update(old), edit)
}

/// A VRF on table 254, which the CEL rule on `table` refuses.
fn with_reserved_table(machine: &mut Value) {
    machine["spec"]["network"]["vrfs"] = json!([{ "name": "blue", "table": 254 }]);
}

const TABLE_RULE: &str = r#"spec.network.vrfs[0].table: Invalid value: "integer": Cowardly refusing to insert l3mdev rules into kernel tables"#;

#[test]
fn a_failed_rule_at_an_unchanged_value_is_a_warning() {
    let old = stored(with_reserved_table);
    for version in [Version::V1alpha2, Version::V1alpha1] {
        let result = update(version, &old, |m| m["spec"]["numCores"] = json!(6));
        assert_eq!(messages(&result), Vec::<String>::new(), "{version:?}");
        assert_eq!(warnings(&result), [TABLE_RULE], "{version:?}");
    }
}

#[test]
fn a_changed_value_meets_the_rules() {
    let old = stored(with_reserved_table);
    let result = update(Version::V1alpha2, &old, |m| {
        m["spec"]["network"]["vrfs"][0]["table"] = json!(255);
    });
    assert_eq!(
        messages(&result),
        [
            r#"spec.network.vrfs[0].table: Invalid value: "integer": Cowardly refusing to insert l3mdev rules into kernel tables"#
        ]
    );
    let fixed = update(Version::V1alpha2, &old, |m| {
        m["spec"]["network"]["vrfs"][0]["table"] = json!(300);
    });
    assert_eq!(messages(&fixed), Vec::<String>::new());
    assert_eq!(warnings(&fixed), Vec::<String>::new());
}

#[test]
fn a_creation_is_validated_whole() {
    let old = stored(with_reserved_table);
    let result = write(Version::V1alpha2, &old, Operation::Create, |_| {});
    assert_eq!(messages(&result), [TABLE_RULE]);
}

#[test]
fn the_same_value_in_a_new_map_list_item_is_refused() {
    let old = stored(with_reserved_table);
    let result = update(Version::V1alpha2, &old, |m| {
        let vrfs = m["spec"]["network"]["vrfs"].as_array_mut().expect("VRFs");
        vrfs.push(json!({ "name": "green", "table": 254 }));
    });
    assert_eq!(
        messages(&result),
        [
            r#"spec.network.vrfs[1].table: Invalid value: "integer": Cowardly refusing to insert l3mdev rules into kernel tables"#
        ]
    );
    assert_eq!(warnings(&result), [TABLE_RULE], "the stored item ratchets");
}

#[test]
fn status_writes_ratchet_too() {
    let bad_reason = json!([{
        "type": "Ready", "status": "False", "reason": "not a reason!", "message": "",
        "lastTransitionTime": "2024-01-01T00:00:00Z"
    }]);
    let old = stored(|m| m["status"] = json!({ "conditions": bad_reason }));
    let unchanged = write(
        Version::V1alpha2,
        &old,
        Operation::UpdateStatus(&old),
        |m| {
            m["status"]["vmStatus"] = json!("ready");
        },
    );
    assert_eq!(messages(&unchanged), Vec::<String>::new());
    let changed = write(
        Version::V1alpha2,
        &old,
        Operation::UpdateStatus(&old),
        |m| {
            m["status"]["conditions"][0]["reason"] = json!("still not!");
        },
    );
    let [message] = messages(&changed).try_into().expect("one error");
    assert!(
        message.starts_with(r#"status.conditions[0].reason: Invalid value: "still not!""#),
        "{message}"
    );
}

#[test]
fn list_invariants_ratchet_per_object() {
    // kube-apiserver checks sets and map lists only when the stored object
    // keeps them: a duplicate already stored does not block other edits.
    let old = stored(|m| m["spec"]["allowedNodes"] = json!(["pve1", "pve1"]));
    let result = update(Version::V1alpha2, &old, |m| {
        m["spec"]["numCores"] = json!(6)
    });
    assert_eq!(messages(&result), Vec::<String>::new());

    let clean = stored(|m| m["spec"]["allowedNodes"] = json!(["pve1"]));
    let result = update(Version::V1alpha2, &clean, |m| {
        m["spec"]["allowedNodes"] = json!(["pve1", "pve1"]);
    });
    assert_eq!(
        messages(&result),
        [r#"spec.allowedNodes[1]: Duplicate value: "pve1""#]
    );
}
