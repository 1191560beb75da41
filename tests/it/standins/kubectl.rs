//! kubectl 1.33 and 1.27 against the stand-ins: discovery (`api-resources`, categories,
//! short names), create / client-side apply / get -o yaml / get -w / patch / label / edit /
//! delete on every kind, `create secret generic --from-literal`, a Secret with `stringData`
//! (kubectl sends strategic merge patches for Secrets), and finalizer-held deletion.
//!
//! None of these group-versions is in `/openapi/v2` or `/openapi/v3`: kubectl then skips
//! client-side schema validation and sends merge patches for the custom kinds.

use super::KINDS;
use crate::rest::Api;
use crate::rest::kubectl::{Kubectl, watch_shows};

fn yaml(api_version: &str, kind: &str, name: &str, body: &str) -> String {
    format!("apiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: {name}\n{body}")
}

/// kubectl's name for a kind's resource, e.g. `clusters.cluster.x-k8s.io`.
fn resource(plural: &str, api_version: &str) -> String {
    match api_version.split_once('/') {
        Some((group, _)) => format!("{plural}.{group}"),
        None => plural.to_owned(),
    }
}

async fn every_kind(version: &str) {
    let api = Api::start().await;
    let k = Kubectl::new(&api, version);

    let resources = k
        .ok(&["api-resources", "--categories", "cluster-api"])
        .await;
    for expected in [
        "clusters",
        "machines",
        "ipaddressclaims",
        "globalinclusterippools",
    ] {
        assert!(resources.contains(expected), "{version}: {resources}");
    }
    let cl = k
        .ok(&["api-resources", "--api-group", "cluster.x-k8s.io"])
        .await;
    assert!(cl.contains(" cl ") && cl.contains(" ma "), "{cl}");

    for case in &KINDS {
        let name = format!("k-{}", case.plural);
        let res = resource(case.plural, case.api_version);
        let body = if case.kind == "Secret" {
            "stringData:\n  user: admin\n"
        } else {
            "spec:\n  size: 1\n  nested:\n    list: [a, b]\n"
        };
        let file = k.manifest(
            &format!("{name}.yaml"),
            &yaml(case.api_version, case.kind, &name, body),
        );
        let created = k.ok(&["create", "-f", &file]).await;
        assert!(
            created.contains("created"),
            "{version} {}: {created}",
            case.kind
        );
        let got = k.ok(&["get", &res, &name, "-o", "yaml"]).await;
        assert!(
            got.contains(&format!("kind: {}", case.kind)) && got.contains("uid:"),
            "{got}"
        );
        // Client-side apply of a changed manifest (three-way merge against last-applied).
        let changed = if case.kind == "Secret" {
            "stringData:\n  user: root\n"
        } else {
            "spec:\n  size: 2\n  nested:\n    list: [a, b]\n"
        };
        let file = k.manifest(
            &format!("{name}.yaml"),
            &yaml(case.api_version, case.kind, &name, changed),
        );
        let applied = k.ok(&["apply", "-f", &file]).await;
        assert!(
            applied.contains("configured"),
            "{version} {}: {applied}",
            case.kind
        );
        let object = k.json(&["get", &res, &name]).await;
        if case.kind == "Secret" {
            assert_eq!(object["data"]["user"], "cm9vdA==", "{object}");
        } else {
            assert_eq!(object["spec"]["size"], 2, "{object}");
            assert_eq!(object["metadata"]["generation"], 2, "{object}");
        }
        k.ok(&["label", &res, &name, "tier=test"]).await;
        let patch = if case.kind == "Secret" {
            r#"{"data":{"extra":"eA=="}}"#
        } else {
            r#"{"spec":{"size":3}}"#
        };
        let patch_type = if case.kind == "Secret" {
            "strategic"
        } else {
            "merge"
        };
        k.ok(&["patch", &res, &name, "--type", patch_type, "-p", patch])
            .await;
        let labelled = k.ok(&["get", &res, "-l", "tier=test", "-o", "name"]).await;
        assert!(labelled.contains(&name), "{labelled}");
        let table = k.ok(&["get", &res]).await;
        let header = table.lines().next().unwrap_or_default();
        assert!(
            header.starts_with("NAME") && header.contains("AGE"),
            "{table}"
        );
        let deleted = k.ok(&["delete", "-f", &file]).await;
        assert!(deleted.contains("deleted"), "{deleted}");
        let gone = k.fails(&["get", &res, &name]).await;
        assert!(
            gone.contains("NotFound") || gone.contains("not found"),
            "{gone}"
        );
    }
}

async fn secrets_edit_watch_and_finalizers(version: &str) {
    let api = Api::start().await;
    let k = Kubectl::new(&api, version);

    k.ok(&[
        "create",
        "secret",
        "generic",
        "lit",
        "--from-literal=password=hunter2",
    ])
    .await;
    let password = k
        .ok(&["get", "secret", "lit", "-o", "jsonpath={.data.password}"])
        .await;
    assert_eq!(password, "aHVudGVyMg==");
    let kind = k
        .ok(&["get", "secret", "lit", "-o", "jsonpath={.type}"])
        .await;
    assert_eq!(kind, "Opaque");

    // kubectl edit (JSON merge patch for the custom kinds).
    let file = k.manifest(
        "edit.yaml",
        &yaml(
            "cluster.x-k8s.io/v1beta2",
            "Cluster",
            "edited",
            "spec:\n  paused: false\n",
        ),
    );
    k.ok(&["create", "-f", &file]).await;
    let (ok, _, err) = k
        .run_with(
            &["edit", "cluster", "edited"],
            &[("KUBE_EDITOR", "sed -i -e s/paused:.false/paused:\\ true/")],
        )
        .await;
    assert!(ok, "edit: {err}");
    let paused = k
        .ok(&["get", "cluster", "edited", "-o", "jsonpath={.spec.paused}"])
        .await;
    assert_eq!(paused, "true");

    let second = k.manifest(
        "second.yaml",
        &yaml("cluster.x-k8s.io/v1beta2", "Cluster", "watched", ""),
    );
    watch_shows(
        &k,
        "clusters.cluster.x-k8s.io",
        async {
            k.ok(&["create", "-f", &second]).await;
        },
        "watched",
    )
    .await;

    // A finalizer keeps the object, terminating, until it is removed.
    let held = k.manifest(
        "held.yaml",
        &yaml(
            "cluster.x-k8s.io/v1beta2",
            "Machine",
            "held",
            "  finalizers: [machine.cluster.x-k8s.io]\nspec: {}\n",
        ),
    );
    k.ok(&["create", "-f", &held]).await;
    k.ok(&["delete", "machine", "held", "--wait=false"]).await;
    let deleting = k
        .ok(&[
            "get",
            "machine",
            "held",
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ])
        .await;
    assert!(!deleting.is_empty(), "terminating");
    k.ok(&[
        "patch",
        "machine",
        "held",
        "--type",
        "json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ])
    .await;
    // kubectl then looks the namespace up; dev answers that every namespace exists.
    let gone = k.fails(&["get", "machine", "held"]).await;
    assert!(
        gone.contains(r#"machines.cluster.x-k8s.io "held" not found"#),
        "{gone}"
    );

    // Server-side apply is refused plainly.
    let ssa = k.fails(&["apply", "--server-side", "-f", &second]).await;
    assert!(ssa.contains("server-side apply is not supported"), "{ssa}");
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_1_33_every_kind() {
    every_kind("1.33").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_1_27_every_kind() {
    every_kind("1.27").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_1_33_secrets_edit_watch_finalizers() {
    secrets_edit_watch_and_finalizers("1.33").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_1_27_secrets_edit_watch_finalizers() {
    secrets_edit_watch_and_finalizers("1.27").await;
}
