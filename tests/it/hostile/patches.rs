//! Every patch type and server-side apply: malformed patches, patches that cannot apply,
//! patches built to do unbounded work, and applies kube refuses.

use reqwest::Method;
use serde_json::{Value, json};

use super::{Case, Fixture, TARGET, target};
use crate::rest::GROUP;

const JSON_PATCH: &str = "application/json-patch+json";
const MERGE_PATCH: &str = "application/merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

fn json_patch(what: &str, ops: Value) -> Case {
    Case::new(
        format!("JSON patch: {what}"),
        Method::PATCH,
        target("v1alpha2"),
    )
    .body(JSON_PATCH, ops.to_string())
}

fn merge_patch(what: &str, body: impl Into<Vec<u8>>) -> Case {
    Case::new(
        format!("merge patch: {what}"),
        Method::PATCH,
        target("v1alpha2"),
    )
    .body(MERGE_PATCH, body)
}

fn apply(what: &str, query: &str, body: impl Into<Vec<u8>>) -> Case {
    Case::new(
        format!("apply: {what}"),
        Method::PATCH,
        format!("{}?{query}", target("v1alpha2")),
    )
    .body(APPLY, body)
}

/// The attack: a 100-byte array copied into itself until it needs gigabytes.
fn copy_bomb(copies: usize) -> Value {
    let mut ops = vec![json!({"op": "add", "path": "/spec/zz", "value": ["x".repeat(96)]})];
    ops.extend(
        (0..copies).map(|_| json!({"op": "copy", "from": "/spec/zz", "path": "/spec/zz/-"})),
    );
    Value::Array(ops)
}

/// Pairs of add + move that nest the document one level deeper each.
fn deepening_moves(pairs: usize) -> Value {
    let mut ops = vec![json!({"op": "add", "path": "/n0", "value": {}})];
    for i in 0..pairs {
        ops.push(json!({"op": "add", "path": format!("/n{}", i + 1), "value": {}}));
        ops.push(json!({"op": "move", "from": format!("/n{i}"), "path": format!("/n{}/x", i + 1)}));
    }
    Value::Array(ops)
}

fn machine_config(spec: Value) -> String {
    json!({
        "apiVersion": format!("{GROUP}/v1alpha2"), "kind": "ProxmoxMachine",
        "metadata": {"name": TARGET, "namespace": "default"}, "spec": spec,
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn json_patches() {
    let fixture = Fixture::start().await;
    let mut cases = vec![
        json_patch("not an array", json!({"op": "add"})).status(400, "BadRequest"),
        json_patch("an array of numbers", json!([1, 2])).status(400, "BadRequest"),
        Case::new("JSON patch: malformed JSON", Method::PATCH, target("v1alpha2"))
            .body(JSON_PATCH, "[{\"op\":")
            .status(400, "BadRequest"),
        json_patch("10,001 operations", Value::Array(vec![json!({"op": "test", "path": "/kind", "value": "ProxmoxMachine"}); 10_001]))
            .status(413, "RequestEntityTooLarge"),
        json_patch("25 self-doubling copies", copy_bomb(25)).status(422, "Invalid"),
        json_patch("40 self-doubling copies", copy_bomb(40)).status(422, "Invalid"),
        json_patch("4,999 deepening moves", deepening_moves(4_999)).status(422, "Invalid"),
        json_patch("a failed test", json!([{"op": "test", "path": "/spec/numCores", "value": 99}]))
            .status(422, "Invalid"),
        json_patch("test of a missing path", json!([{"op": "test", "path": "/spec/nothing/here", "value": 1}]))
            .status(422, "Invalid"),
        json_patch("remove of a missing key", json!([{"op": "remove", "path": "/spec/nothing"}]))
            .status(422, "Invalid"),
        json_patch("the ~2 escape (a literal key)", json!([{"op": "remove", "path": "/metadata/labels/a~2b"}]))
            .status(422, "Invalid"),
        json_patch("an unknown op", json!([{"op": "jump", "path": "/spec"}])).status(422, "Invalid"),
        json_patch("no op", json!([{"path": "/spec"}])).status(422, "Invalid"),
        json_patch("no path", json!([{"op": "add", "value": 1}])).status(422, "Invalid"),
        json_patch("a numeric path", json!([{"op": "replace", "path": 5, "value": 1}])).status(422, "Invalid"),
        json_patch("move without from", json!([{"op": "move", "path": "/spec/x"}])).status(422, "Invalid"),
        json_patch("copy from a missing path", json!([{"op": "copy", "from": "/a/b/c", "path": "/spec/x"}]))
            .status(422, "Invalid"),
        json_patch("add below a scalar", json!([{"op": "add", "path": "/kind/x", "value": 1}]))
            .status(422, "Invalid"),
        json_patch("an index past the end", json!([{"op": "add", "path": "/spec/network/networkDevices/9", "value": {}}]))
            .status(422, "Invalid"),
        json_patch("an index that is no number", json!([{"op": "add", "path": "/spec/network/networkDevices/x", "value": {}}]))
            .status(422, "Invalid"),
        json_patch("an index beyond i64", json!([{"op": "remove", "path": "/spec/network/networkDevices/99999999999999999999"}]))
            .status(422, "Invalid"),
        json_patch("the whole document replaced by an array", json!([{"op": "replace", "path": "", "value": []}]))
            .status(422, "Invalid"),
        json_patch("renaming the object", json!([{"op": "replace", "path": "/metadata/name", "value": "other"}]))
            .status(400, "BadRequest"),
        json_patch("removing the kind", json!([{"op": "remove", "path": "/kind"}])).status(400, "BadRequest"),
        json_patch("a wrong type", json!([{"op": "replace", "path": "/spec/numCores", "value": "many"}]))
            .status(422, "Invalid"),
        json_patch("an out-of-range value", json!([{"op": "replace", "path": "/spec/numSockets", "value": 0}]))
            .status(422, "Invalid"),
        json_patch("a stale resourceVersion", json!([{"op": "replace", "path": "/metadata/resourceVersion", "value": "1"}]))
            .status(409, "Conflict"),
        json_patch("another uid", json!([{"op": "replace", "path": "/metadata/uid", "value": "2c8f1a4e-0d7b-4c55-9c1c-8e1f3e3a7a10"}]))
            .status(422, "Invalid"),
        json_patch("an invalid finalizer", json!([{"op": "add", "path": "/metadata/finalizers", "value": ["Bad Finalizer!"]}]))
            .status(422, "Invalid"),
        json_patch("a test that passes, then a failing one", json!([
            {"op": "test", "path": "/kind", "value": "ProxmoxMachine"},
            {"op": "replace", "path": "/spec/numCores", "value": 8},
            {"op": "test", "path": "/spec/numCores", "value": 9},
        ]))
        .status(422, "Invalid"),
    ];
    // Patches that apply but change nothing are answered 200 and write nothing.
    cases.push(json_patch("an empty patch", json!([])).accepted(200));
    cases.push(
        Case::new("JSON patch: null", Method::PATCH, target("v1alpha2"))
            .body(JSON_PATCH, "null")
            .accepted(200),
    );
    cases.push(
        json_patch(
            "tests only",
            json!([{"op": "test", "path": "/kind", "value": "ProxmoxMachine"}]),
        )
        .accepted(200),
    );
    assert!(fixture.run("JSON patches", cases).await >= 30);
}

#[tokio::test(flavor = "multi_thread")]
async fn merge_patches_and_other_types() {
    let fixture = Fixture::start().await;
    let mut cases = vec![
        merge_patch("malformed JSON", "{\"spec\":").status(400, "BadRequest"),
        merge_patch("null", "null").status(400, "BadRequest"),
        merge_patch("a number", "5").status(400, "BadRequest"),
        merge_patch("a string", "\"x\"").status(400, "BadRequest"),
        merge_patch("an array", "[]").status(422, "Invalid"),
        merge_patch(
            "nested 100 deep",
            format!("{{\"spec\":{}{}}}", "{\"a\":".repeat(100), "1}".repeat(100)),
        )
        .status(400, "BadRequest"),
        merge_patch(
            "a wrong type",
            json!({"spec": {"numCores": "many"}}).to_string(),
        )
        .status(422, "Invalid"),
        merge_patch(
            "renaming the object",
            json!({"metadata": {"name": "other"}}).to_string(),
        )
        .status(400, "BadRequest"),
        merge_patch(
            "another kind",
            json!({"kind": "ProxmoxCluster"}).to_string(),
        )
        .status(400, "BadRequest"),
        merge_patch(
            "a stale resourceVersion",
            json!({"metadata": {"resourceVersion": "1"}}).to_string(),
        )
        .status(409, "Conflict"),
        merge_patch("removing the spec", json!({"spec": null}).to_string()).status(422, "Invalid"),
        Case::new(
            "merge patch: duplicate fields, Strict",
            Method::PATCH,
            format!("{}?fieldValidation=Strict", target("v1alpha2")),
        )
        .body(MERGE_PATCH, "{\"spec\":{\"numCores\":2,\"numCores\":3}}")
        .status(400, "BadRequest"),
        Case::new(
            "merge patch: unknown field, Strict",
            Method::PATCH,
            format!("{}?fieldValidation=Strict", target("v1alpha2")),
        )
        .body(MERGE_PATCH, json!({"spec": {"bogus": 1}}).to_string())
        .status(400, "BadRequest"),
        Case::new(
            "merge patch: bad fieldValidation",
            Method::PATCH,
            format!("{}?fieldValidation=Sometimes", target("v1alpha2")),
        )
        .body(MERGE_PATCH, "{}")
        .status(422, "Invalid"),
        Case::new(
            "merge patch: force without apply",
            Method::PATCH,
            format!("{}?force=true", target("v1alpha2")),
        )
        .body(MERGE_PATCH, "{}")
        .status(422, "Invalid"),
        Case::new(
            "merge patch: unknown dryRun",
            Method::PATCH,
            format!("{}?dryRun=Bogus", target("v1alpha2")),
        )
        .body(MERGE_PATCH, "{}")
        .status(422, "Invalid"),
        Case::new(
            "merge patch: a field manager too long",
            Method::PATCH,
            format!("{}?fieldManager={}", target("v1alpha2"), "m".repeat(129)),
        )
        .body(MERGE_PATCH, "{}")
        .status(422, "Invalid"),
        Case::new("strategic merge patch", Method::PATCH, target("v1alpha2"))
            .body("application/strategic-merge-patch+json", "{}")
            .status(415, "UnsupportedMediaType"),
        Case::new(
            "patch without a content type",
            Method::PATCH,
            target("v1alpha2"),
        )
        .status(415, "UnsupportedMediaType"),
        Case::new("patch as plain JSON", Method::PATCH, target("v1alpha2"))
            .body("application/json", "{}")
            .status(415, "UnsupportedMediaType"),
        Case::new("patch type ;;;", Method::PATCH, target("v1alpha2"))
            .body(";;;", "{}")
            .status(415, "UnsupportedMediaType"),
        Case::new(
            "create with content type ;;;",
            Method::POST,
            super::machines("v1alpha2"),
        )
        .body(";;;", "{}")
        .status(415, "UnsupportedMediaType"),
        Case::new(
            "create with a malformed media type parameter",
            Method::POST,
            super::machines("v1alpha2"),
        )
        .body("application/json; charset", "{}")
        .status(415, "UnsupportedMediaType"),
        Case::new(
            "create as protobuf",
            Method::POST,
            super::machines("v1alpha2"),
        )
        .body("application/vnd.kubernetes.protobuf", "k8s\0")
        .status(415, "UnsupportedMediaType"),
        merge_patch(
            "status through the main resource (ignored)",
            json!({"status": {"ready": true}}).to_string(),
        )
        .accepted(200),
    ];
    cases.push(
        Case::new(
            "merge patch of status: a wrong type",
            Method::PATCH,
            format!("{}/status", target("v1alpha2")),
        )
        .body(
            MERGE_PATCH,
            json!({"status": {"conditions": "none"}}).to_string(),
        )
        .status(422, "Invalid"),
    );
    assert!(fixture.run("merge and other patch types", cases).await >= 25);
}

#[tokio::test(flavor = "multi_thread")]
async fn server_side_apply() {
    let fixture = Fixture::start().await;
    let cases = vec![
        apply("no fieldManager", "", machine_config(json!({"numCores": 2}))).status(422, "Invalid"),
        apply("malformed YAML", "fieldManager=hostile", "spec: [").status(400, "BadRequest"),
        apply("a YAML bomb", "fieldManager=hostile", super::bodies::billion_laughs()).status(413, "RequestEntityTooLarge"),
        apply("a list, not an object", "fieldManager=hostile", "[1, 2]").status(400, "BadRequest"),
        apply("another kind", "fieldManager=hostile", machine_config(json!({})).replace("ProxmoxMachine", "ProxmoxCluster"))
            .status(400, "BadRequest"),
        apply("another name", "fieldManager=hostile", machine_config(json!({})).replace(TARGET, "other"))
            .status(400, "BadRequest"),
        apply("a conflict with the creator's field", "fieldManager=hostile", machine_config(json!({"numCores": 7})))
            .status(409, "Conflict"),
        apply("a wrong type", "fieldManager=hostile&force=true", machine_config(json!({"numCores": "many"})))
            .status(422, "Invalid"),
        apply("an unknown field, Strict", "fieldManager=hostile&fieldValidation=Strict", machine_config(json!({"bogus": 1})))
            .status(400, "BadRequest"),
        apply("duplicate fields, Strict", "fieldManager=hostile&fieldValidation=Strict",
              "apiVersion: infrastructure.cluster.x-k8s.io/v1alpha2\nkind: ProxmoxMachine\nmetadata:\n  name: target\n  namespace: default\nspec:\n  numCores: 2\n  numCores: 3\n")
            .status(400, "BadRequest"),
        apply("nested 1,000 deep", "fieldManager=hostile",
              format!("apiVersion: v1\nx: {}1{}\n", "[".repeat(1_000), "]".repeat(1_000)))
            .status(400, "BadRequest"),
        apply("managedFields in the configuration", "fieldManager=hostile",
              json!({"apiVersion": format!("{GROUP}/v1alpha2"), "kind": "ProxmoxMachine",
                     "metadata": {"name": TARGET, "namespace": "default", "managedFields": [{"manager": "x", "operation": "Apply"}]}}).to_string())
            .status(400, "BadRequest"),
        apply("a stale resourceVersion", "fieldManager=hostile",
              json!({"apiVersion": format!("{GROUP}/v1alpha2"), "kind": "ProxmoxMachine",
                     "metadata": {"name": TARGET, "namespace": "default", "resourceVersion": "1"}}).to_string())
            .status(409, "Conflict"),
        apply("as JSON with duplicate keys, Strict", "fieldManager=hostile&fieldValidation=Strict",
              "{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1alpha2\",\"kind\":\"ProxmoxMachine\",\"metadata\":{\"name\":\"target\",\"name\":\"target\",\"namespace\":\"default\"}}")
            .status(400, "BadRequest"),
        Case::new("apply of status: a wrong type", Method::PATCH, format!("{}/status?fieldManager=hostile&force=true", target("v1alpha2")))
            .body(APPLY, json!({"apiVersion": format!("{GROUP}/v1alpha2"), "kind": "ProxmoxMachine",
                                "metadata": {"name": TARGET, "namespace": "default"}, "status": {"conditions": "none"}}).to_string())
            .status(422, "Invalid"),
        apply("the same configuration as stored (no change)", "fieldManager=hostile",
              json!({"apiVersion": format!("{GROUP}/v1alpha2"), "kind": "ProxmoxMachine",
                     "metadata": {"name": TARGET, "namespace": "default"}}).to_string())
            .accepted(200),
    ];
    assert!(fixture.run("server-side apply", cases).await >= 15);
}
