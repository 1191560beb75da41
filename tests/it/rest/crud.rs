//! Create, read, update, patch and delete with custom-resource semantics: system fields,
//! generation, status and spec reset per endpoint, optimistic concurrency, patches, dry runs,
//! field validation, finalizers and propagation policies, deletecollection.

use serde_json::{Value, json};

use super::{Api, GROUP, collection, item, labelled, machine, named};

const MACHINES: &str = "proxmoxmachines";

fn machines() -> String {
    collection("v1alpha2", "default", MACHINES)
}

fn machine_path(name: &str) -> String {
    item("v1alpha2", "default", MACHINES, name)
}

#[tokio::test(flavor = "multi_thread")]
async fn create_sets_system_fields_and_generation_follows_spec() {
    let api = Api::start().await;
    let mut body = machine("m1");
    body["status"] = json!({"proxmoxNode": "ignored"});
    let created = api.create(&body).await;
    let meta = &created["metadata"];
    assert_eq!(meta["generation"], 1);
    assert_eq!(meta["namespace"], "default");
    assert_eq!(meta["uid"].as_str().map(str::len), Some(36));
    assert!(
        meta["creationTimestamp"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    assert!(meta["resourceVersion"].as_str().is_some());
    assert!(
        created.get("status").is_none(),
        "status is not set on create: {created}"
    );
    // Defaulting ran (upstream's webhook marks net0 as the default IPv4 device).
    assert_eq!(
        created["spec"]["network"]["networkDevices"][0]["defaultIPv4"],
        true
    );
    let read = api.get(&machine_path("m1")).send().await;
    assert_eq!(read.status, 200);
    assert_eq!(read.json(), created);

    // PUT needs the resourceVersion, and a current one.
    let mut update = created.clone();
    update["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("resourceVersion");
    let missing = api.put(&machine_path("m1")).json(&update).send().await;
    assert_eq!(missing.status, 422, "{}", missing.text);
    assert!(
        missing
            .message()
            .contains("metadata.resourceVersion: Invalid value"),
        "{}",
        missing.text
    );
    let mut stale = created.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    let conflict = api.put(&machine_path("m1")).json(&stale).send().await;
    assert_eq!(conflict.status, 409);
    assert_eq!(
        conflict.message(),
        format!(
            "Operation cannot be fulfilled on proxmoxmachines.{GROUP} \"m1\": the object has been modified; please apply your changes to the latest version and try again"
        )
    );

    // Labels alone keep the generation; status through the main resource is ignored.
    let mut labelled = labelled(created.clone(), &[("tier", "web")]);
    labelled["status"] = json!({"proxmoxNode": "pve9"});
    let labelled = api.put(&machine_path("m1")).json(&labelled).send().await;
    assert_eq!(labelled.status, 200, "{}", labelled.text);
    let labelled = labelled.json();
    assert_eq!(labelled["metadata"]["generation"], 1);
    assert_eq!(labelled["metadata"]["labels"]["tier"], "web");
    assert!(labelled.get("status").is_none(), "{labelled}");
    assert_ne!(
        labelled["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );

    // A spec change moves it.
    let mut spec = labelled.clone();
    spec["spec"]["numSockets"] = json!(8);
    let spec = api.put(&machine_path("m1")).json(&spec).send().await.json();
    assert_eq!(spec["metadata"]["generation"], 2);

    // An unchanged PUT writes nothing.
    let same = api.put(&machine_path("m1")).json(&spec).send().await.json();
    assert_eq!(
        same["metadata"]["resourceVersion"],
        spec["metadata"]["resourceVersion"]
    );

    // /status takes only status: spec and metadata changes are ignored, no generation bump.
    let mut status = spec.clone();
    status["spec"]["numSockets"] = json!(1);
    status["metadata"]["labels"]["tier"] = json!("db");
    status["status"] = json!({"proxmoxNode": "pve2"});
    let status = api
        .put(&format!("{}/status", machine_path("m1")))
        .json(&status)
        .send()
        .await;
    assert_eq!(status.status, 200, "{}", status.text);
    let status = status.json();
    assert_eq!(status["status"]["proxmoxNode"], "pve2");
    assert_eq!(status["spec"]["numSockets"], 8);
    assert_eq!(status["metadata"]["labels"]["tier"], "web");
    assert_eq!(status["metadata"]["generation"], 2);
    // GET on /status returns the whole object.
    let read = api
        .get(&format!("{}/status", machine_path("m1")))
        .send()
        .await
        .json();
    assert_eq!(read, status);
    // A schema error in a status write (v1alpha1 conditions need a message): the cause names
    // the field from the object, the message the path from `status`, as kube-apiserver
    // validates the status value alone.
    let v1_status = format!("{}/status", machine_path("m1")).replace("/v1alpha2/", "/v1alpha1/");
    let mut bad = api.get(&v1_status).send().await.json();
    bad["status"]["conditions"] = json!([{"type": "Ready", "status": "True",
        "lastTransitionTime": "2026-12-01T00:00:00Z", "message": ""}]);
    let bad = api.put(&v1_status).json(&bad).send().await;
    assert_eq!(bad.status, 422, "{}", bad.text);
    let cause = &bad.json()["details"]["causes"][0];
    assert_eq!(cause["field"], "status.conditions[0].message", "{cause}");
    assert_eq!(
        cause["message"],
        r#"Invalid value: "": conditions[0].message in body should be at least 1 chars long"#
    );
    // System fields cannot be changed by clients.
    let mut uid = status.clone();
    uid["metadata"]["uid"] = json!("other");
    let uid = api.put(&machine_path("m1")).json(&uid).send().await;
    assert_eq!(uid.status, 422);
    assert_eq!(uid.json()["details"]["causes"][0]["field"], "metadata.uid");
}

#[tokio::test(flavor = "multi_thread")]
async fn create_errors_and_generate_name() {
    let api = Api::start().await;
    api.create(&machine("taken")).await;
    let again = api.post(&machines()).json(&machine("taken")).send().await;
    assert_eq!(again.status, 409);
    assert_eq!(again.reason(), "AlreadyExists");
    assert_eq!(
        again.message(),
        format!("proxmoxmachines.{GROUP} \"taken\" already exists")
    );
    let missing = api.get(&machine_path("nope")).send().await;
    assert_eq!(missing.status, 404);
    assert_eq!(
        missing.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": format!("proxmoxmachines.{GROUP} \"nope\" not found"),
               "reason": "NotFound",
               "details": {"name": "nope", "group": GROUP, "kind": "proxmoxmachines"},
               "code": 404})
    );

    let mut generated = machine("");
    generated["metadata"] = json!({"generateName": "worker-", "namespace": "default"});
    let first = api.create(&generated).await;
    let second = api.create(&generated).await;
    let (a, b) = (
        first["metadata"]["name"].as_str().expect("name"),
        second["metadata"]["name"].as_str().expect("name"),
    );
    assert!(
        a.starts_with("worker-") && a.len() == "worker-".len() + 5,
        "{a}"
    );
    assert_ne!(a, b);

    let mut other_ns = machine("m");
    other_ns["metadata"]["namespace"] = json!("elsewhere");
    let mismatch = api.post(&machines()).json(&other_ns).send().await;
    assert_eq!(mismatch.status, 400);
    assert_eq!(
        mismatch.message(),
        "the namespace of the provided object does not match the namespace sent on the request"
    );
    let mut with_rv = machine("rv");
    with_rv["metadata"]["resourceVersion"] = json!("5");
    assert_eq!(
        api.post(&machines()).json(&with_rv).send().await.status,
        400
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn patches_with_preconditions_and_unsupported_types() {
    let api = Api::start().await;
    let created = api.create(&machine("p")).await;
    let rv = created["metadata"]["resourceVersion"].clone();
    let merged = api
        .patch(&machine_path("p"))
        .merge_patch(&json!({"metadata": {"labels": {"a": "1"}}, "spec": {"numCores": 6}}))
        .send()
        .await;
    assert_eq!(merged.status, 200, "{}", merged.text);
    let merged = merged.json();
    assert_eq!(merged["spec"]["numCores"], 6);
    assert_eq!(merged["metadata"]["generation"], 2);

    // A resourceVersion in a merge patch is a precondition (kubectl apply/diff, the GC).
    let stale = api
        .patch(&machine_path("p"))
        .merge_patch(&json!({"metadata": {"resourceVersion": rv}, "spec": {"numCores": 2}}))
        .send()
        .await;
    assert_eq!((stale.status, stale.reason().as_str()), (409, "Conflict"));
    let fresh = api
        .patch(&machine_path("p"))
        .merge_patch(
            &json!({"metadata": {"resourceVersion": merged["metadata"]["resourceVersion"]},
                             "spec": {"numCores": 2}}),
        )
        .send()
        .await;
    assert_eq!(fresh.status, 200, "{}", fresh.text);

    let json_patch = api
        .patch(&machine_path("p"))
        .json_patch(
            &json!([{"op": "test", "path": "/spec/numCores", "value": 2},
                            {"op": "replace", "path": "/spec/numCores", "value": 3}]),
        )
        .send()
        .await;
    assert_eq!(json_patch.status, 200, "{}", json_patch.text);
    assert_eq!(json_patch.json()["spec"]["numCores"], 3);
    let failed_test = api
        .patch(&machine_path("p"))
        .json_patch(&json!([{"op": "test", "path": "/spec/numCores", "value": 99}]))
        .send()
        .await;
    assert_eq!(failed_test.status, 422, "{}", failed_test.text);
    let malformed = api
        .patch(&machine_path("p"))
        .json_patch(&json!({"op": "add"}))
        .send()
        .await;
    assert_eq!(malformed.status, 400);

    let smp = api
        .patch(&machine_path("p"))
        .raw("application/strategic-merge-patch+json", "{}")
        .send()
        .await;
    assert_eq!(smp.status, 415);
    assert_eq!(smp.reason(), "UnsupportedMediaType");
    assert_eq!(
        smp.message(),
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    );
    let apply = api
        .patch(&format!("{}?fieldManager=me", machine_path("p")))
        .raw("application/apply-patch+yaml", "{}")
        .send()
        .await;
    assert_eq!(apply.status, 400, "an apply without a type: {}", apply.text);
    assert_eq!(apply.message(), "invalid object type: /, Kind=");

    let missing = api
        .patch(&machine_path("absent"))
        .merge_patch(&json!({"spec": {}}))
        .send()
        .await;
    assert_eq!(missing.status, 404);
    let rename = api
        .patch(&machine_path("p"))
        .merge_patch(&json!({"metadata": {"name": "q"}}))
        .send()
        .await;
    assert_eq!(rename.status, 400);

    // A status patch changes status only.
    let status = api
        .patch(&format!("{}/status", machine_path("p")))
        .merge_patch(&json!({"spec": {"numCores": 9}, "status": {"proxmoxNode": "pve3"}}))
        .send()
        .await
        .json();
    assert_eq!(status["status"]["proxmoxNode"], "pve3");
    assert_eq!(status["spec"]["numCores"], 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn dry_run_and_field_validation() {
    let api = Api::start().await;
    let dry = api
        .post(&format!("{}?dryRun=All", machines()))
        .json(&machine("dry"))
        .send()
        .await;
    assert_eq!(dry.status, 201, "{}", dry.text);
    assert!(dry.json()["metadata"]["uid"].is_string());
    assert_eq!(api.get(&machine_path("dry")).send().await.status, 404);
    let bad_dry = api
        .post(&format!("{}?dryRun=Some", machines()))
        .json(&machine("dry"))
        .send()
        .await;
    assert_eq!(bad_dry.status, 422);

    let created = api.create(&machine("v")).await;
    let mut changed = created.clone();
    changed["spec"]["numCores"] = json!(12);
    let dry_update = api
        .put(&format!("{}?dryRun=All", machine_path("v")))
        .json(&changed)
        .send()
        .await
        .json();
    assert_eq!(dry_update["spec"]["numCores"], 12);
    assert_eq!(
        dry_update["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    assert_eq!(
        api.get(&machine_path("v")).send().await.json()["spec"]["numCores"],
        created["spec"]["numCores"]
    );

    let mut unknown = machine("u");
    unknown["spec"]["foo"] = json!(1);
    let strict = api
        .post(&format!("{}?fieldValidation=Strict", machines()))
        .json(&unknown)
        .send()
        .await;
    assert_eq!(strict.status, 400);
    assert_eq!(
        strict.message(),
        "strict decoding error: unknown field \"spec.foo\""
    );
    let warn = api.post(&machines()).json(&unknown).send().await;
    assert_eq!(warn.status, 201);
    assert_eq!(warn.warnings(), ["unknown field \"spec.foo\""]);
    assert!(warn.json()["spec"].get("foo").is_none(), "pruned");
    let ignore = api
        .post(&format!("{}?fieldValidation=Ignore", machines()))
        .json(&named(unknown.clone(), "u2"))
        .send()
        .await;
    assert_eq!(ignore.status, 201);
    assert!(ignore.warnings().is_empty());

    let duplicate = r#"{"apiVersion":"infrastructure.cluster.x-k8s.io/v1alpha2","kind":"ProxmoxMachine",
        "metadata":{"name":"d","name":"d"},"spec":{"sourceNode":"pve1","templateID":100,"bogus":1,
        "network":{"networkDevices":[{"name":"net0","bridge":"vmbr0"}]}}}"#;
    let strict = api
        .post(&format!("{}?fieldValidation=Strict", machines()))
        .raw("application/json", duplicate)
        .send()
        .await;
    assert_eq!(strict.status, 400);
    assert_eq!(
        strict.message(),
        "strict decoding error: unknown field \"spec.bogus\", duplicate field \"metadata.name\""
    );
    let warn = api
        .post(&machines())
        .raw("application/json", duplicate)
        .send()
        .await;
    assert_eq!(warn.status, 201, "{}", warn.text);
    let mut warnings = warn.warnings();
    warnings.sort();
    assert_eq!(
        warnings,
        [
            "duplicate field \"metadata.name\"",
            "unknown field \"spec.bogus\""
        ]
    );
    let bad = api
        .post(&format!("{}?fieldValidation=Loud", machines()))
        .json(&machine("x"))
        .send()
        .await;
    assert_eq!(bad.status, 422);
}

#[tokio::test(flavor = "multi_thread")]
async fn deletion_with_finalizers_and_propagation() {
    let api = Api::start().await;
    let plain = api.create(&machine("plain")).await;
    let deleted = api.delete(&machine_path("plain")).send().await;
    assert_eq!(deleted.status, 200);
    assert_eq!(
        deleted.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
               "details": {"name": "plain", "group": GROUP, "kind": "proxmoxmachines",
                           "uid": plain["metadata"]["uid"]}})
    );
    assert_eq!(api.get(&machine_path("plain")).send().await.status, 404);
    assert_eq!(api.delete(&machine_path("plain")).send().await.status, 404);

    let mut held = machine("held");
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    api.create(&held).await;
    let terminating = api.delete(&machine_path("held")).send().await;
    assert_eq!(terminating.status, 200);
    let terminating = terminating.json();
    assert!(terminating["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(terminating["metadata"]["deletionGracePeriodSeconds"], 0);
    assert_eq!(terminating["metadata"]["generation"], 2);
    // Still readable; a repeated delete changes nothing.
    let again = api.delete(&machine_path("held")).send().await.json();
    assert_eq!(
        again["metadata"]["resourceVersion"],
        terminating["metadata"]["resourceVersion"]
    );
    // No new finalizers while terminating.
    let add = api
        .patch(&machine_path("held"))
        .merge_patch(&json!({"metadata": {"finalizers": ["example.com/hold", "x.io/more"]}}))
        .send()
        .await;
    assert_eq!(add.status, 422, "{}", add.text);
    // Removing the last finalizer removes the object.
    let released = api
        .patch(&machine_path("held"))
        .merge_patch(&json!({"metadata": {"finalizers": null}}))
        .send()
        .await;
    assert_eq!(released.status, 200, "{}", released.text);
    assert_eq!(api.get(&machine_path("held")).send().await.status, 404);

    for (policy, finalizer) in [("Foreground", "foregroundDeletion"), ("Orphan", "orphan")] {
        let name = policy.to_lowercase();
        api.create(&machine(&name)).await;
        let pending = api
            .delete(&machine_path(&name))
            .json(&json!({"propagationPolicy": policy}))
            .send()
            .await;
        assert_eq!(pending.status, 200);
        assert_eq!(pending.json()["metadata"]["finalizers"], json!([finalizer]));
    }
    // Orphaning through the query works the same.
    api.create(&machine("query")).await;
    let query = api
        .delete(&format!(
            "{}?propagationPolicy=Orphan",
            machine_path("query")
        ))
        .send()
        .await
        .json();
    assert_eq!(query["metadata"]["finalizers"], json!(["orphan"]));

    let kept = api.create(&machine("kept")).await;
    let wrong_uid = api
        .delete(&machine_path("kept"))
        .json(&json!({"preconditions": {"uid": "not-it"}}))
        .send()
        .await;
    assert_eq!(
        (wrong_uid.status, wrong_uid.reason().as_str()),
        (409, "Conflict")
    );
    let bad_policy = api
        .delete(&machine_path("kept"))
        .json(&json!({"propagationPolicy": "Sideways"}))
        .send()
        .await;
    assert_eq!(bad_policy.status, 422);
    let dry = api
        .delete(&machine_path("kept"))
        .json(&json!({"dryRun": ["All"]}))
        .send()
        .await;
    assert_eq!(dry.status, 200);
    assert_eq!(api.get(&machine_path("kept")).send().await.status, 200);
    let right = api
        .delete(&machine_path("kept"))
        .json(&json!({"preconditions": {"uid": kept["metadata"]["uid"],
                                        "resourceVersion": kept["metadata"]["resourceVersion"]}}))
        .send()
        .await;
    assert_eq!(right.status, 200, "{}", right.text);
}

#[tokio::test(flavor = "multi_thread")]
async fn delete_collection_follows_selectors() {
    let api = Api::start().await;
    for (name, tier) in [("a", "web"), ("b", "web"), ("c", "db")] {
        api.create(&labelled(machine(name), &[("tier", tier)]))
            .await;
    }
    let deleted = api
        .delete(&format!("{}?labelSelector=tier%3Dweb", machines()))
        .send()
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.text);
    let deleted = deleted.json();
    assert_eq!(deleted["kind"], "ProxmoxMachineList");
    let names: Vec<&str> = deleted["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["a", "b"]);
    let left = api.get(&machines()).send().await.json();
    let left: Vec<Value> = left["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["metadata"]["name"], "c");
}
