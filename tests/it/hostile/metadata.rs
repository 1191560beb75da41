//! Names and metadata on every write: create, update, each patch type and apply, with
//! kube-apiserver's ObjectMeta rules (`validateCommonFields` on updates too).

use reqwest::Method;
use serde_json::{Value, json};

use super::{Case, Fixture, TARGET, machines, read_target, target};
use crate::rest::machine;

const JSON_PATCH: &str = "application/json-patch+json";
const MERGE_PATCH: &str = "application/merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

fn invalid_names() -> Vec<String> {
    let mut names: Vec<String> = [
        "Bad_Name",
        "UPPER",
        "-leading",
        "trailing-",
        "a..b",
        ".dot",
        "dot.",
        "under_score",
        "spa ce",
        "a/b",
        "colon:",
        "percent%20",
        "ünicode",
        "a*",
        "tab\t",
        "new\nline",
        "{}",
        "a@b",
        "#hash",
        "a;b",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    names.push("a".repeat(254));
    names
}

fn bad_labels() -> Vec<Value> {
    vec![
        json!({"bad key!": "v"}),
        json!({"a": "bad value!"}),
        json!({"a": "x".repeat(64)}),
        json!({"x".repeat(64): "v"}),
        json!({"/leading-slash": "v"}),
        json!({"too/many/slashes": "v"}),
        json!({"Prefix_With_Caps.io/a": "v"}),
        json!({"": "v"}),
        json!({"a": "-starts-with-dash"}),
        json!({"a": 5}),
    ]
}

fn bad_finalizers() -> Vec<Value> {
    vec![
        json!(["Bad Finalizer!"]),
        json!(["a/b/c"]),
        json!(["-x.io/y"]),
        json!(["orphan", "foregroundDeletion"]),
    ]
}

fn bad_owner_references() -> Vec<Value> {
    let owner = |edit: &dyn Fn(&mut Value)| {
        let mut reference = json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                                   "name": "m", "uid": "2c8f1a4e-0d7b-4c55-9c1c-8e1f3e3a7a10"});
        edit(&mut reference);
        json!([reference])
    };
    vec![
        owner(&|r| r["uid"] = json!("")),
        owner(&|r| r["apiVersion"] = json!("")),
        owner(&|r| r["kind"] = json!("")),
        owner(&|r| r["name"] = json!("")),
        owner(&|r| r["apiVersion"] = json!("v1/v2/v3")),
        {
            let mut two = owner(&|r| r["controller"] = json!(true));
            let mut second = two[0].clone();
            second["uid"] = json!("5e3f3a4b-9c9d-4f0e-8a55-77cf0d2f3b21");
            second["name"] = json!("other");
            two.as_array_mut().expect("list").push(second);
            two
        },
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn names_and_metadata_on_every_write() {
    let fixture = Fixture::start().await;
    let stored = read_target(&fixture.api, "v1alpha2").await;
    let mut cases = Vec::new();
    for name in invalid_names() {
        let mut object = machine("x");
        object["metadata"]["name"] = json!(name);
        cases.push(
            Case::new(
                format!("create named {name:?}"),
                Method::POST,
                machines("v1alpha2"),
            )
            .json(&object)
            .status(422, "Invalid"),
        );
    }
    let mut unnamed = machine("x");
    unnamed["metadata"]
        .as_object_mut()
        .expect("meta")
        .remove("name");
    cases.push(
        Case::new("create without a name", Method::POST, machines("v1alpha2"))
            .json(&unnamed)
            .status(422, "Invalid"),
    );
    let mut generated = unnamed.clone();
    generated["metadata"]["generateName"] = json!("Bad_");
    cases.push(
        Case::new(
            "create with an invalid generateName",
            Method::POST,
            machines("v1alpha2"),
        )
        .json(&generated)
        .status(422, "Invalid"),
    );
    let mut with_rv = machine("x");
    with_rv["metadata"]["resourceVersion"] = json!("5");
    cases.push(
        Case::new(
            "create with a resourceVersion",
            Method::POST,
            machines("v1alpha2"),
        )
        .json(&with_rv)
        .status(400, "BadRequest"),
    );
    let mut elsewhere = machine("x");
    elsewhere["metadata"]["namespace"] = json!("elsewhere");
    cases.push(
        Case::new(
            "create in another namespace than the URL's",
            Method::POST,
            machines("v1alpha2"),
        )
        .json(&elsewhere)
        .status(400, "BadRequest"),
    );

    // Each bad piece of metadata through create, update, merge patch, JSON patch and apply.
    let pieces: Vec<(&str, &str, Value)> = bad_labels()
        .into_iter()
        .map(|v| ("labels", "labels", v))
        .chain(
            bad_finalizers()
                .into_iter()
                .map(|v| ("finalizers", "finalizers", v)),
        )
        .chain(
            bad_owner_references()
                .into_iter()
                .map(|v| ("ownerReferences", "ownerReferences", v)),
        )
        .chain([("annotations", "annotations", json!({"bad key!": "v"}))])
        .collect();
    for (what, field, value) in pieces {
        let mut created = machine("x");
        created["metadata"][field] = value.clone();
        cases.push(
            Case::new(
                format!("create with {what} {value}"),
                Method::POST,
                machines("v1alpha2"),
            )
            .json(&created)
            .status(422, "Invalid"),
        );
        let mut updated = stored.clone();
        updated["metadata"][field] = value.clone();
        cases.push(
            Case::new(
                format!("update with {what} {value}"),
                Method::PUT,
                target("v1alpha2"),
            )
            .json(&updated)
            .status(422, "Invalid"),
        );
        cases.push(
            Case::new(
                format!("merge patch of {what} {value}"),
                Method::PATCH,
                target("v1alpha2"),
            )
            .body(MERGE_PATCH, json!({"metadata": {field: value}}).to_string())
            .status(422, "Invalid"),
        );
        cases.push(
            Case::new(
                format!("JSON patch of {what} {value}"),
                Method::PATCH,
                target("v1alpha2"),
            )
            .body(
                JSON_PATCH,
                json!([{"op": "add", "path": format!("/metadata/{field}"), "value": value}])
                    .to_string(),
            )
            .status(422, "Invalid"),
        );
        let mut applied = json!({
            "apiVersion": stored["apiVersion"], "kind": "ProxmoxMachine",
            "metadata": {"name": TARGET, "namespace": "default"},
        });
        applied["metadata"][field] = value.clone();
        cases.push(
            Case::new(
                format!("apply of {what} {value}"),
                Method::PATCH,
                format!("{}?fieldManager=hostile", target("v1alpha2")),
            )
            .body(APPLY, applied.to_string())
            .status(422, "Invalid"),
        );
    }

    // Identity on update.
    let mut renamed = stored.clone();
    renamed["metadata"]["name"] = json!("other");
    cases.push(
        Case::new(
            "update renaming the object",
            Method::PUT,
            target("v1alpha2"),
        )
        .json(&renamed)
        .status(400, "BadRequest"),
    );
    let mut moved = stored.clone();
    moved["metadata"]["namespace"] = json!("elsewhere");
    cases.push(
        Case::new("update moving the object", Method::PUT, target("v1alpha2"))
            .json(&moved)
            .status(400, "BadRequest"),
    );
    let mut other_uid = stored.clone();
    other_uid["metadata"]["uid"] = json!("2c8f1a4e-0d7b-4c55-9c1c-8e1f3e3a7a10");
    cases.push(
        Case::new("update with another uid", Method::PUT, target("v1alpha2"))
            .json(&other_uid)
            .status(422, "Invalid"),
    );
    let mut stale = stored.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    cases.push(
        Case::new(
            "update from a stale resourceVersion",
            Method::PUT,
            target("v1alpha2"),
        )
        .json(&stale)
        .status(409, "Conflict"),
    );
    let mut unversioned = stored.clone();
    unversioned["metadata"]
        .as_object_mut()
        .expect("meta")
        .remove("resourceVersion");
    cases.push(
        Case::new(
            "update without a resourceVersion",
            Method::PUT,
            target("v1alpha2"),
        )
        .json(&unversioned)
        .status(422, "Invalid"),
    );
    let mut not_a_number = stored.clone();
    not_a_number["metadata"]["resourceVersion"] = json!("abc");
    // kube-apiserver fails this with a 500 (its versioner's parse error escapes); a
    // resourceVersion that is not the stored one is a conflict here, whatever it looks like.
    cases.push(
        Case::new(
            "update with a resourceVersion that is no number",
            Method::PUT,
            target("v1alpha2"),
        )
        .json(&not_a_number)
        .status(409, "Conflict"),
    );
    // `kubectl replace -f` of a manifest: no uid or creationTimestamp, the stored ones stay;
    // a different creationTimestamp is ignored. Neither changes anything.
    let mut manifest = stored.clone();
    let meta = manifest["metadata"].as_object_mut().expect("meta");
    meta.remove("uid");
    meta.remove("creationTimestamp");
    meta.remove("managedFields");
    cases.push(
        Case::new(
            "update without uid and creationTimestamp",
            Method::PUT,
            target("v1alpha2"),
        )
        .json(&manifest)
        .accepted(200),
    );
    let mut backdated = stored.clone();
    backdated["metadata"]["creationTimestamp"] = json!("2000-01-01T00:00:00Z");
    cases.push(
        Case::new(
            "update with another creationTimestamp",
            Method::PUT,
            target("v1alpha2"),
        )
        .json(&backdated)
        .accepted(200),
    );
    assert!(fixture.run("names and metadata", cases).await >= 120);
}
