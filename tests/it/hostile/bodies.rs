//! Request bodies: malformed and truncated, other encodings, sizes, nesting depth, YAML bombs,
//! and bodies that are well-formed but not an object of the kind.

use reqwest::Method;
use serde_json::{Value, json};

use super::{Case, Fixture, machines, read_target, target};
use crate::rest::machine;

const JSON: &str = "application/json";
const YAML: &str = "application/yaml";

/// `body` cut at `parts` points: every prefix is malformed.
fn truncations(body: &str, parts: usize) -> Vec<String> {
    let step = body.len() / (parts + 1);
    (1..=parts)
        .map(|i| body[..i * step].to_owned())
        .filter(|prefix| !prefix.is_empty())
        .collect()
}

fn yaml_of(value: &Value) -> String {
    serde_saphyr::to_string(value).expect("yaml")
}

/// Nine levels of ten aliases each: a billion values from a few hundred bytes.
pub fn billion_laughs() -> String {
    let mut bomb = String::from(
        "apiVersion: v1\nkind: X\na0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n",
    );
    for level in 1..9 {
        let refs = vec![format!("*a{}", level - 1); 10].join(", ");
        bomb.push_str(&format!("a{level}: &a{level} [{refs}]\n"));
    }
    bomb
}

/// `[[[…]]]` nested `depth` deep under `spec.x`.
fn nested(depth: usize) -> String {
    let mut object = machine("deep").to_string();
    let inner = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    object.insert_str(object.len() - 1, &format!(",\"x\":{inner}"));
    object
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_truncated_and_foreign_bodies() {
    let fixture = Fixture::start().await;
    let stored = read_target(&fixture.api, "v1alpha2").await;
    let created = machine("new").to_string();
    let replaced = stored.to_string();
    let mut cases = Vec::new();
    for prefix in truncations(&created, 24) {
        cases.push(
            Case::new(
                format!("POST truncated at {}", prefix.len()),
                Method::POST,
                machines("v1alpha2"),
            )
            .body(JSON, prefix)
            .status(400, "BadRequest"),
        );
    }
    for prefix in truncations(&replaced, 16) {
        cases.push(
            Case::new(
                format!("PUT truncated at {}", prefix.len()),
                Method::PUT,
                target("v1alpha2"),
            )
            .body(JSON, prefix)
            .status(400, "BadRequest"),
        );
    }
    let yaml = yaml_of(&machine("new"));
    for prefix in truncations(&yaml, 8)
        .into_iter()
        .filter(|p| p.ends_with(['[', '{', '"', '\'']))
    {
        cases.push(
            Case::new(
                format!("POST YAML truncated at {}", prefix.len()),
                Method::POST,
                machines("v1alpha2"),
            )
            .body(YAML, prefix)
            .status(400, "BadRequest"),
        );
    }
    let not_objects: [(&str, &[u8]); 12] = [
        ("empty", b""),
        ("null", b"null"),
        ("array", b"[1,2,3]"),
        ("string", b"\"machine\""),
        ("number", b"42"),
        ("true", b"true"),
        ("trailing garbage", b"{\"kind\":\"ProxmoxMachine\"} {}"),
        ("BOM", b"\xef\xbb\xbf{}"),
        ("UTF-16", b"\xff\xfe{\x00}\x00"),
        ("NUL bytes", b"\x00\x00\x00\x00"),
        ("single quotes", b"{'kind':'ProxmoxMachine'}"),
        ("comments", b"{/* c */\"kind\":\"ProxmoxMachine\"}"),
    ];
    for (what, body) in not_objects {
        cases.push(
            Case::new(format!("POST {what}"), Method::POST, machines("v1alpha2"))
                .body(JSON, body)
                .status(400, "BadRequest"),
        );
    }
    for (what, body) in [
        ("tab indentation", "a:\n\tb: 1\n"),
        ("unclosed flow", "a: [1, 2"),
        ("bad indentation", "a: b: c"),
        ("invalid UTF-8", "a: \u{fffd}"),
        ("scalar", "just a string"),
    ] {
        let body = if what == "invalid UTF-8" {
            b"a: \xff\xfe".to_vec()
        } else {
            body.as_bytes().to_vec()
        };
        cases.push(
            Case::new(
                format!("POST YAML {what}"),
                Method::POST,
                machines("v1alpha2"),
            )
            .body(YAML, body)
            .status(400, "BadRequest"),
        );
    }
    let mut no_kind = machine("new");
    no_kind.as_object_mut().expect("object").remove("kind");
    let mut other_kind = machine("new");
    other_kind["kind"] = json!("ProxmoxCluster");
    let mut other_group = machine("new");
    other_group["apiVersion"] = json!("cluster.x-k8s.io/v1beta2");
    let mut no_version = machine("new");
    no_version
        .as_object_mut()
        .expect("object")
        .remove("apiVersion");
    for (what, body) in [
        ("no kind", no_kind),
        ("another kind", other_kind),
        ("another group", other_group),
        ("no apiVersion", no_version),
    ] {
        cases.push(
            Case::new(format!("POST {what}"), Method::POST, machines("v1alpha2"))
                .json(&body)
                .status(400, "BadRequest"),
        );
    }
    assert!(fixture.run("bodies", cases).await >= 60);
}

#[tokio::test(flavor = "multi_thread")]
async fn encodings_sizes_depth_and_bombs() {
    let fixture = Fixture::start().await;
    let dry_run = format!("{}?dryRun=All", machines("v1alpha2"));
    let mut cases = Vec::new();
    // Go reads invalid UTF-8 as U+FFFD: in a name that is an invalid name, in free text it is
    // accepted (dry run, so nothing is stored).
    let name_bytes = machine("x")
        .to_string()
        .replace("\"x\"", "\"bad\\u0001name\"");
    cases.push(
        Case::new(
            "escaped control character in the name",
            Method::POST,
            machines("v1alpha2"),
        )
        .body(JSON, name_bytes)
        .status(422, "Invalid"),
    );
    let mut latin1 = machine("latin1").to_string().into_bytes();
    let at = latin1
        .windows(8)
        .position(|w| w == b"\"latin1\"")
        .expect("name")
        + 7;
    latin1.splice(at..at, *b"\xe9");
    cases.push(
        Case::new(
            "Latin-1 byte in the name",
            Method::POST,
            machines("v1alpha2"),
        )
        .body(JSON, latin1)
        .status(422, "Invalid"),
    );
    let mut annotated = machine("annotated").to_string().into_bytes();
    let at = annotated
        .windows(8)
        .position(|w| w == b"\"spec\":{")
        .expect("spec");
    annotated.splice(
        at..at,
        *b"\"metadata\":{\"name\":\"annotated\",\"annotations\":{\"note\":\"caf\xe9\"}},",
    );
    cases.push(
        Case::new(
            "Latin-1 byte in an annotation (read as U+FFFD)",
            Method::POST,
            dry_run,
        )
        .body(JSON, annotated)
        .accepted(201),
    );
    // Sizes.
    let mut over = machine("big");
    over["metadata"]["annotations"] = json!({"a": "x".repeat(3 * 1024 * 1024)});
    cases.push(
        Case::new("body over 3 MiB", Method::POST, machines("v1alpha2"))
            .json(&over)
            .status(413, "RequestEntityTooLarge"),
    );
    let mut annotations = machine("annotations");
    annotations["metadata"]["annotations"] = json!({"a": "x".repeat(300 * 1024)});
    cases.push(
        Case::new(
            "annotations over 256 KiB",
            Method::POST,
            machines("v1alpha2"),
        )
        .json(&annotations)
        .status(422, "Invalid"),
    );
    let zeros = format!("[{}]", vec!["0"; 150_000].join(","));
    let mut object = machine("zeros").to_string();
    object.insert_str(object.len() - 1, &format!(",\"x\":{zeros}"));
    cases.push(
        Case::new(
            "150,000 values (bound: 100,000)",
            Method::POST,
            machines("v1alpha2"),
        )
        .body(JSON, object)
        .status(413, "RequestEntityTooLarge"),
    );
    // Depth: beyond Go's 10,000 both refuse; beyond 64 is our bound (kube prunes the field).
    for depth in [65, 100, 1_000, 10_001, 100_000] {
        cases.push(
            Case::new(
                format!("JSON nested {depth} deep"),
                Method::POST,
                machines("v1alpha2"),
            )
            .body(JSON, nested(depth))
            .status(400, "BadRequest"),
        );
    }
    for depth in [65, 1_000] {
        let yaml = format!(
            "apiVersion: v1\nx: {}1{}\n",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        cases.push(
            Case::new(
                format!("YAML nested {depth} deep"),
                Method::POST,
                machines("v1alpha2"),
            )
            .body(YAML, yaml)
            .status(400, "BadRequest"),
        );
    }
    // YAML bombs: aliases never expand past the value bound.
    cases.push(
        Case::new("billion laughs", Method::POST, machines("v1alpha2"))
            .body(YAML, billion_laughs())
            .status(413, "RequestEntityTooLarge"),
    );
    cases.push(
        Case::new(
            "billion laughs as an update",
            Method::PUT,
            target("v1alpha2"),
        )
        .body(YAML, billion_laughs())
        .status(413, "RequestEntityTooLarge"),
    );
    let mut merge_bomb = String::from("base: &b {a: 1}\n");
    for i in 0..200 {
        merge_bomb.push_str(&format!("k{i}: {{<<: *b}}\n"));
    }
    cases.push(
        Case::new(
            "merge keys (not a kind's object)",
            Method::POST,
            machines("v1alpha2"),
        )
        .body(YAML, merge_bomb)
        .status(400, "BadRequest"),
    );
    let anchors: String = (0..2_000).map(|i| format!("a{i}: &x{i} v\n")).collect();
    cases.push(
        Case::new(
            "thousands of anchors (not a kind's object)",
            Method::POST,
            machines("v1alpha2"),
        )
        .body(YAML, anchors)
        .status(400, "BadRequest"),
    );
    assert!(
        fixture
            .run("encodings, sizes, depth, YAML bombs", cases)
            .await
            >= 15
    );
}
