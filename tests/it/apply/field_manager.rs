//! The field manager on ProxmoxMachine (v1alpha2): what clients see in
//! `managedFields` and in the stored object after creates, updates,
//! applies and status writes.

use capmox_apiserver::registry::apply::{ApplyError, CAUSE_TYPE, format_time};
use serde_json::{Value, json};

use super::support::{
    API_V2, Store, V2, at, conflict_lines, machine, named, request, status_request,
};

fn spec() -> Value {
    json!({
        "sourceNode": "pve1",
        "templateID": 100,
        "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0"}]}
    })
}

/// A machine config of `manager`'s: `spec` plus `extra` spec fields.
fn config(extra: Value) -> Value {
    let mut spec = spec();
    if let (Some(spec), Value::Object(extra)) = (spec.as_object_mut(), extra) {
        spec.extend(extra);
    }
    machine(V2, spec)
}

fn base_fields() -> Value {
    json!({
        "f:sourceNode": {},
        "f:templateID": {},
        "f:network": {"f:networkDevices": {named("net0"): {".": {}, "f:name": {}, "f:bridge": {}}}}
    })
}

#[test]
fn apply_creates_the_object_and_reapplying_changes_nothing() {
    let mut store = Store::default();
    let created = store
        .apply(config(json!({})), &request("capi-machineset", V2, 0), true)
        .unwrap();
    assert_eq!(created["spec"], spec());
    assert_eq!(
        store.owners(),
        json!({"capi-machineset/Apply/v1alpha2": {"f:spec": base_fields()}})
    );
    assert_eq!(store.time_of("capi-machineset"), Some(format_time(at(0))));
    store.admit().unwrap();

    let before = store.hub.clone();
    let again = store
        .apply(config(json!({})), &request("capi-machineset", V2, 60), true)
        .unwrap();
    assert_eq!(Some(again), before, "a repeated apply is a no-op");
    assert_eq!(store.time_of("capi-machineset"), Some(format_time(at(0))));
}

#[test]
fn a_field_an_applier_stops_applying_is_removed() {
    let mut store = Store::default();
    let r = request("kubectl", V2, 0);
    store
        .apply(
            config(json!({"description": "web", "numCores": 2})),
            &r,
            false,
        )
        .unwrap();
    let after = store
        .apply(
            config(json!({"numCores": 2})),
            &request("kubectl", V2, 5),
            false,
        )
        .unwrap();
    assert_eq!(after["spec"].get("description"), None);
    assert_eq!(after["spec"]["numCores"], 2);
    assert_eq!(store.time_of("kubectl"), Some(format_time(at(5))));
}

#[test]
fn a_removed_field_stays_when_another_manager_owns_it() {
    let mut store = Store::default();
    store
        .apply(
            config(json!({"description": "web"})),
            &request("a", V2, 0),
            false,
        )
        .unwrap();
    store
        .apply(
            machine(V2, json!({"description": "web"})),
            &request("b", V2, 1),
            false,
        )
        .unwrap();
    let after = store
        .apply(config(json!({})), &request("a", V2, 2), false)
        .unwrap();
    assert_eq!(after["spec"]["description"], "web");
    assert_eq!(
        store.owners()["b/Apply/v1alpha2"],
        json!({"f:spec": {"f:description": {}}})
    );
}

#[test]
fn two_appliers_share_a_list_map_item_by_item() {
    let mut store = Store::default();
    store
        .apply(config(json!({})), &request("a", V2, 0), false)
        .unwrap();
    let net1 = machine(
        V2,
        json!({"network": {"networkDevices": [{"name": "net1", "bridge": "vmbr1"}]}}),
    );
    store.apply(net1, &request("b", V2, 1), false).unwrap();
    let after = store
        .apply(config(json!({})), &request("a", V2, 2), false)
        .unwrap();
    assert_eq!(
        after["spec"]["network"]["networkDevices"],
        json!([{"name": "net0", "bridge": "vmbr0"}, {"name": "net1", "bridge": "vmbr1"}])
    );
    assert_eq!(
        store.owners(),
        json!({
            "a/Apply/v1alpha2": {"f:spec": base_fields()},
            "b/Apply/v1alpha2": {"f:spec": {"f:network": {"f:networkDevices": {
                named("net1"): {".": {}, "f:name": {}, "f:bridge": {}}
            }}}}
        })
    );
    store.admit().unwrap();
}

#[test]
fn unnamed_devices_are_keyed_by_position() {
    let mut store = Store::default();
    let unnamed = machine(
        V2,
        json!({"sourceNode": "pve1", "templateID": 100,
               "network": {"networkDevices": [{"bridge": "vmbr0"}, {"bridge": "vmbr1"}]}}),
    );
    store
        .apply(unnamed.clone(), &request("a", V2, 0), false)
        .unwrap();
    let devices = &store.owners()["a/Apply/v1alpha2"]["f:spec"]["f:network"]["f:networkDevices"];
    assert_eq!(
        devices,
        &json!({
            named("net0"): {".": {}, "f:name": {}, "f:bridge": {}},
            named("net1"): {".": {}, "f:name": {}, "f:bridge": {}}
        })
    );
    let again = store.hub.clone();
    assert_eq!(
        Some(store.apply(unnamed, &request("a", V2, 1), false).unwrap()),
        again
    );
}

#[test]
fn changing_a_field_another_applier_owns_is_a_conflict_unless_forced() {
    let mut store = Store::default();
    store
        .apply(
            config(json!({"numCores": 2})),
            &request("capi-machineset", V2, 0),
            true,
        )
        .unwrap();
    let mine = machine(V2, json!({"numCores": 4}));
    let Err(ApplyError::Conflicts(conflicts)) =
        store.apply(mine.clone(), &request("kubectl", V2, 1), false)
    else {
        panic!("expected a conflict");
    };
    assert_eq!(
        conflicts.message(),
        r#"Apply failed with 1 conflict: conflict with "capi-machineset": .spec.numCores"#
    );
    let causes = conflicts.causes();
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].reason.as_deref(), Some(CAUSE_TYPE));
    assert_eq!(
        causes[0].message.as_deref(),
        Some(r#"conflict with "capi-machineset""#)
    );
    assert_eq!(causes[0].field.as_deref(), Some(".spec.numCores"));
    assert_eq!(
        store.hub.as_ref().unwrap()["spec"]["numCores"],
        2,
        "nothing stored"
    );

    let forced = store.apply(mine, &request("kubectl", V2, 2), true).unwrap();
    assert_eq!(forced["spec"]["numCores"], 4);
    assert_eq!(
        store.owners()["kubectl/Apply/v1alpha2"],
        json!({"f:spec": {"f:numCores": {}}})
    );
    assert_eq!(
        store.owners()["capi-machineset/Apply/v1alpha2"],
        json!({"f:spec": base_fields()})
    );
}

#[test]
fn several_conflicts_name_each_field_and_manager() {
    let mut store = Store::default();
    store
        .apply(
            config(json!({"numCores": 2, "numSockets": 1})),
            &request("a", V2, 0),
            false,
        )
        .unwrap();
    let edited = config(json!({"numCores": 2, "numSockets": 1, "memoryMiB": 2048}));
    store.write(edited, &request("kubectl-edit", V2, 1));
    let mine = machine(
        V2,
        json!({"numCores": 4, "numSockets": 2, "memoryMiB": 4096}),
    );
    let Err(ApplyError::Conflicts(conflicts)) = store.apply(mine, &request("b", V2, 2), false)
    else {
        panic!("expected conflicts");
    };
    assert_eq!(
        conflicts.message(),
        format!(
            "Apply failed with 3 conflicts: conflicts with \"a\":\n- .spec.numCores\n- .spec.numSockets\nconflicts with \"kubectl-edit\" using {API_V2}:\n- .spec.memoryMiB"
        )
    );
    let fields: Vec<_> = conflicts
        .causes()
        .into_iter()
        .filter_map(|c| c.field)
        .collect();
    assert_eq!(
        fields,
        [".spec.numCores", ".spec.numSockets", ".spec.memoryMiB"]
    );
}

#[test]
fn set_lists_are_owned_item_by_item() {
    let mut store = Store::default();
    store
        .apply(
            config(json!({"allowedNodes": ["pve1", "pve2"]})),
            &request("a", V2, 0),
            false,
        )
        .unwrap();
    store
        .apply(
            machine(V2, json!({"allowedNodes": ["pve3"]})),
            &request("b", V2, 1),
            false,
        )
        .unwrap();
    let after = store
        .apply(
            config(json!({"allowedNodes": ["pve1"]})),
            &request("a", V2, 2),
            false,
        )
        .unwrap();
    assert_eq!(after["spec"]["allowedNodes"], json!(["pve1", "pve3"]));
    assert_eq!(
        store.owners()["b/Apply/v1alpha2"],
        json!({"f:spec": {"f:allowedNodes": {"v:\"pve3\"": {}}}})
    );
}

#[test]
fn atomic_lists_are_owned_and_replaced_whole() {
    let pool = |name: &str| json!([{"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": name}]);
    let network = |name: &str| json!({"networkDevices": [{"name": "net0", "bridge": "vmbr0", "ipPoolRef": pool(name)}]});
    let mut store = Store::default();
    let first = machine(
        V2,
        json!({"sourceNode": "pve1", "templateID": 100, "network": network("p1")}),
    );
    store.apply(first, &request("a", V2, 0), false).unwrap();
    let second = machine(V2, json!({"network": network("p2")}));
    assert_eq!(
        conflict_lines(store.apply(second.clone(), &request("b", V2, 1), false)),
        [r#"a .spec.network.networkDevices[name="net0"].ipPoolRef"#]
    );
    let after = store.apply(second, &request("b", V2, 2), true).unwrap();
    assert_eq!(
        after["spec"]["network"]["networkDevices"][0]["ipPoolRef"],
        pool("p2")
    );
    let device = |manager: &str| {
        store.owners()[manager]["f:spec"]["f:network"]["f:networkDevices"][named("net0")].clone()
    };
    assert_eq!(
        device("b/Apply/v1alpha2"),
        json!({".": {}, "f:name": {}, "f:bridge": {}, "f:ipPoolRef": {}})
    );
    assert_eq!(
        device("a/Apply/v1alpha2"),
        json!({".": {}, "f:name": {}, "f:bridge": {}})
    );
}

#[test]
fn an_update_takes_the_fields_it_changes_from_the_applier() {
    let mut store = Store::default();
    store
        .apply(
            config(json!({"numCores": 2})),
            &request("kubectl", V2, 0),
            false,
        )
        .unwrap();
    let mut edited = store.read(V2).unwrap();
    edited["spec"]["numCores"] = json!(4);
    store.write(edited, &request("kubectl-edit", V2, 1));
    assert_eq!(
        store.owners(),
        json!({
            "kubectl/Apply/v1alpha2": {"f:spec": base_fields()},
            "kubectl-edit/Update/v1alpha2": {"f:spec": {"f:numCores": {}}}
        })
    );
    assert_eq!(
        store
            .apply(
                config(json!({"numCores": 2})),
                &request("kubectl", V2, 2),
                false
            )
            .unwrap_err()
            .to_string(),
        format!(
            r#"Apply failed with 1 conflict: conflict with "kubectl-edit" using {API_V2}: .spec.numCores"#
        )
    );
}

#[test]
fn the_time_of_an_entry_changes_only_when_its_fields_change() {
    let mut store = Store::default();
    store.write(config(json!({"numCores": 2})), &request("editor", V2, 0));
    assert_eq!(store.time_of("editor"), Some(format_time(at(0))));
    let same = store.read(V2).unwrap();
    store.write(same, &request("editor", V2, 5));
    assert_eq!(store.time_of("editor"), Some(format_time(at(0))));
    let mut changed = store.read(V2).unwrap();
    changed["spec"]["numCores"] = json!(3);
    store.write(changed, &request("editor", V2, 9));
    assert_eq!(store.time_of("editor"), Some(format_time(at(9))));
}

#[test]
fn status_writes_are_owned_separately_and_only_for_status() {
    let mut store = Store::default();
    store
        .apply(config(json!({})), &request("kubectl", V2, 0), false)
        .unwrap();
    let mut status = store.read(V2).unwrap();
    status["status"] = json!({"vmStatus": "pending"});
    status["spec"]["numCores"] = json!(8);
    store.write(status, &status_request("capmox-controller", 1));
    assert_eq!(
        store.owners()["capmox-controller/Update/v1alpha2/status"],
        json!({"f:status": {".": {}, "f:vmStatus": {}}})
    );
    assert_eq!(store.hub.as_ref().unwrap()["spec"].get("numCores"), None);

    let status_apply = json!({
        "apiVersion": API_V2, "kind": "ProxmoxMachine", "metadata": {"name": "m"},
        "spec": {"numCores": 16},
        "status": {"vmStatus": "ready", "proxmoxNode": "pve1"}
    });
    store
        .apply(status_apply, &status_request("capmox-controller", 2), true)
        .unwrap();
    assert_eq!(
        store.owners()["capmox-controller/Apply/v1alpha2/status"],
        json!({"f:status": {"f:vmStatus": {}, "f:proxmoxNode": {}}})
    );
    let stored = store.hub.clone().unwrap();
    assert_eq!(stored["status"]["proxmoxNode"], "pve1");
    assert_eq!(stored["spec"].get("numCores"), None);

    // The main resource neither conflicts with nor takes status fields.
    let main = config(json!({"numCores": 2}))
        .as_object()
        .cloned()
        .map(|mut m| {
            m.insert("status".into(), json!({"vmStatus": "notfound"}));
            Value::Object(m)
        });
    store
        .apply(main.unwrap_or_default(), &request("kubectl", V2, 3), false)
        .unwrap();
    assert_eq!(store.hub.as_ref().unwrap()["status"]["vmStatus"], "ready");
    assert_eq!(
        store.owners()["kubectl/Apply/v1alpha2"]["f:spec"]["f:numCores"],
        json!({})
    );
    assert_eq!(
        store.owners()["kubectl/Apply/v1alpha2"].get("f:status"),
        None
    );
}

#[test]
fn the_first_apply_to_an_untracked_object_gives_its_fields_to_before_first_apply() {
    let mut store = Store::default();
    store.write(
        config(json!({"numCores": 2})),
        &request("kubectl-create", V2, 0),
    );
    assert!(
        store
            .owners()
            .get("kubectl-create/Update/v1alpha2")
            .is_some()
    );
    let mut reset = store.read(V2).unwrap();
    reset["metadata"]["managedFields"] = json!([{}]);
    let written = store.write(reset, &request("kubectl-edit", V2, 1));
    assert_eq!(
        written["metadata"].get("managedFields"),
        None,
        "[{{}}] clears them"
    );

    assert_eq!(
        conflict_lines(store.apply(
            machine(V2, json!({"numCores": 4})),
            &request("kubectl", V2, 2),
            false
        )),
        ["before-first-apply .spec.numCores"]
    );
    store
        .apply(
            machine(V2, json!({"numCores": 2})),
            &request("kubectl", V2, 3),
            false,
        )
        .unwrap();
    let owners = store.owners();
    assert_eq!(
        owners["kubectl/Apply/v1alpha2"],
        json!({"f:spec": {"f:numCores": {}}})
    );
    // An Update from nothing: every node was added, so each is a member.
    assert_eq!(
        owners["before-first-apply/Update/v1alpha2"],
        json!({"f:spec": {
            ".": {},
            "f:sourceNode": {},
            "f:templateID": {},
            "f:numCores": {},
            "f:network": {".": {}, "f:networkDevices": {
                ".": {},
                named("net0"): {".": {}, "f:name": {}, "f:bridge": {}}
            }}
        }})
    );
}

#[test]
fn updaters_beyond_ten_are_merged_into_ancient_changes() {
    let mut store = Store::default();
    store.write(config(json!({})), &request("creator", V2, 0));
    for i in 0..11 {
        let mut object = store.read(V2).unwrap();
        object["metadata"]["labels"][format!("l{i}")] = json!("x");
        let manager = format!("u{i}");
        store.write(object, &request(&manager, V2, i64::from(i) + 1));
    }
    let owners = store.owners();
    let updaters: Vec<&String> = owners
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| k.contains("/Update/"))
        .collect();
    assert_eq!(updaters.len(), 10, "{owners}");
    let ancient = &owners["ancient-changes/Update/v1alpha2"];
    // u0 added the labels map itself, so it owns it as a member too.
    assert_eq!(
        ancient["f:metadata"]["f:labels"],
        json!({".": {}, "f:l0": {}, "f:l1": {}})
    );
    assert_eq!(ancient["f:spec"]["f:sourceNode"], json!({}));
    assert_eq!(store.time_of("ancient-changes"), Some(format_time(at(2))));
    assert!(owners.get("u2/Update/v1alpha2").is_some());
}

#[test]
fn managed_fields_sent_with_an_update_replace_the_stored_ones_when_valid() {
    let mut store = Store::default();
    store.write(config(json!({"numCores": 2})), &request("creator", V2, 0));
    let mut object = store.read(V2).unwrap();
    object["metadata"]["managedFields"] = json!([{
        "manager": "imported", "operation": "Update", "apiVersion": API_V2,
        "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:numCores": {}}}
    }]);
    store.write(object, &request("mover", V2, 1));
    assert_eq!(
        store.owners(),
        json!({"imported/Update/v1alpha2": {"f:spec": {"f:numCores": {}}}})
    );

    let mut garbage = store.read(V2).unwrap();
    garbage["metadata"]["managedFields"] = json!([{"manager": "x", "operation": "Patch"}]);
    store.write(garbage, &request("mover", V2, 2));
    assert_eq!(
        store.owners(),
        json!({"imported/Update/v1alpha2": {"f:spec": {"f:numCores": {}}}}),
        "unreadable managedFields are ignored"
    );
}

#[test]
fn kubectl_migrating_from_client_side_apply_takes_over_the_fields() {
    const LAST: &str = "kubectl.kubernetes.io/last-applied-configuration";
    let mut store = Store::default();
    let mut created = config(json!({"description": "web"}));
    created["metadata"]["annotations"] = json!({LAST: "{}"});
    store.write(created, &request("kubectl-client-side-apply", V2, 0));
    // kubectl's migration: a JSON patch replacing managedFields, turning
    // the client-side entry into kubectl's Apply entry.
    let mut migrated = store.read(V2).unwrap();
    let fields = store.owners()["kubectl-client-side-apply/Update/v1alpha2"].clone();
    migrated["metadata"]["managedFields"] = json!([{
        "manager": "kubectl", "operation": "Apply", "apiVersion": API_V2,
        "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields
    }]);
    store.write(migrated, &request("kubectl", V2, 1));
    assert_eq!(
        store
            .owners()
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["kubectl/Apply/v1alpha2"]
    );

    let mut applied = config(json!({}));
    applied["metadata"]["annotations"] = json!({LAST: "{}"});
    let after = store
        .apply(applied, &request("kubectl", V2, 2), false)
        .unwrap();
    assert_eq!(
        after["spec"].get("description"),
        None,
        "pruned as kubectl's own"
    );
    let recorded: Value =
        serde_json::from_str(after["metadata"]["annotations"][LAST].as_str().unwrap()).unwrap();
    assert_eq!(recorded["spec"], spec());
    assert_eq!(recorded["metadata"].get("annotations"), Some(&json!({})));
}

#[test]
fn kubectl_overrides_conflicts_on_fields_its_last_client_side_apply_set() {
    const LAST: &str = "kubectl.kubernetes.io/last-applied-configuration";
    let mut store = Store::default();
    let mut created = config(json!({"numCores": 2}));
    let last_applied = created.to_string();
    created["metadata"]["annotations"] = json!({LAST: last_applied});
    store.write(created, &request("kubectl-client-side-apply", V2, 0));
    let applied = config(json!({"numCores": 4}));
    assert_eq!(
        conflict_lines(store.apply(applied.clone(), &request("not-kubectl", V2, 1), false)),
        ["kubectl-client-side-apply .spec.numCores"],
        "only kubectl may take what its client-side apply set"
    );
    let after = store
        .apply(applied.clone(), &request("kubectl", V2, 1), false)
        .unwrap();
    assert_eq!(after["spec"]["numCores"], 4);
    let recorded: Value =
        serde_json::from_str(after["metadata"]["annotations"][LAST].as_str().unwrap()).unwrap();
    assert_eq!(
        recorded, applied,
        "the annotation follows the applied configuration"
    );
    assert_eq!(
        conflict_lines(store.apply(
            machine(V2, json!({"numCores": 6})),
            &request("other", V2, 2),
            false
        )),
        ["kubectl .spec.numCores"]
    );
}

#[test]
fn apply_configurations_are_checked() {
    let mut store = Store::default();
    let r = request("kubectl", V2, 0);
    let mut wrong_kind = config(json!({}));
    wrong_kind["kind"] = json!("ProxmoxCluster");
    assert_eq!(
        store.apply(wrong_kind, &r, false).unwrap_err().to_string(),
        format!("invalid object type: {API_V2}, Kind=ProxmoxCluster")
    );
    let mut with_managed = config(json!({}));
    with_managed["metadata"]["managedFields"] = json!([]);
    assert_eq!(
        store
            .apply(with_managed, &r, false)
            .unwrap_err()
            .to_string(),
        "metadata.managedFields must be nil"
    );
    let unknown = config(json!({"bogus": 1}));
    assert_eq!(
        store.apply(unknown, &r, false).unwrap_err().to_string(),
        "spec.bogus: Forbidden: field not declared in schema"
    );
    let twice = machine(
        V2,
        json!({"network": {"networkDevices": [{"name": "net0"}, {"name": "net0"}]}}),
    );
    let Err(ApplyError::Invalid(errors)) = store.apply(twice, &r, false) else {
        panic!("expected a duplicate");
    };
    assert_eq!(
        errors[0].to_string(),
        r#"spec.network.networkDevices[1]: Duplicate value: {"name":"net0"}"#
    );
    let wrong_shape = machine(V2, json!({"network": "vmbr0"}));
    assert_eq!(
        store.apply(wrong_shape, &r, false).unwrap_err().to_string(),
        r#"spec.network: Invalid value: "string": spec.network in body must be of type object: "string""#
    );
    assert!(store.hub.is_none(), "nothing was created");
}
