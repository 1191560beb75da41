//! ProxmoxKubernetesRelease as kubectl users meet it: discovered in v1alpha2 only (short name
//! `pkr`), applied server-side, shown with its version and first template, refused with the
//! field when invalid, and absent from v1alpha1.

use serde_json::Value;

use super::kubectl::Kubectl;
use super::{Api, GROUP, collection};

const RELEASE: &str = r#"apiVersion: infrastructure.cluster.x-k8s.io/v1alpha2
kind: ProxmoxKubernetesRelease
metadata:
  name: kubernetes-v1.34.8
spec:
  version: v1.34.8
  templates:
  - sourceNode: pve1
    templateID: 9000
  - templateSelector:
      matchTags: [ubuntu, v1.34.8]
    failureDomains: [rack-b]
"#;

fn names(list: &Value) -> Vec<&str> {
    list["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["name"].as_str())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn releases_are_served_in_v1alpha2_with_kubectl() {
    let api = Api::start().await;
    let v2 = api
        .get(&format!("/apis/{GROUP}/v1alpha2"))
        .send()
        .await
        .json();
    let release = v2["resources"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == "proxmoxkubernetesreleases"))
        .expect("listed in v1alpha2");
    assert_eq!(release["shortNames"], serde_json::json!(["pkr"]));
    assert_eq!(release["kind"], "ProxmoxKubernetesRelease");
    assert!(!names(&v2).contains(&"proxmoxkubernetesreleases/status"));
    let v1 = api
        .get(&format!("/apis/{GROUP}/v1alpha1"))
        .send()
        .await
        .json();
    assert!(!names(&v1).contains(&"proxmoxkubernetesreleases"), "{v1}");
    let old = api
        .get(&collection(
            "v1alpha1",
            "default",
            "proxmoxkubernetesreleases",
        ))
        .send()
        .await;
    assert_eq!(old.status, 404, "v1alpha1 has no releases");

    let kubectl = Kubectl::new(&api, "1.33").in_namespace("releases");
    let file = kubectl.manifest("release.yaml", RELEASE);
    let applied = kubectl.ok(&["apply", "--server-side", "-f", &file]).await;
    assert!(applied.contains("serverside-applied"), "{applied}");
    let table = kubectl.ok(&["get", "pkr"]).await;
    let lines: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        ["NAME", "VERSION", "TEMPLATE", "NODE", "TAGS", "AGE"],
        "{table}"
    );
    assert_eq!(
        lines[1][..4],
        ["kubernetes-v1.34.8", "v1.34.8", "9000", "pve1"],
        "{table}"
    );
    // The release changes (image-builder rebuilt the template): a plain edit.
    kubectl
        .ok(&[
            "patch",
            "pkr",
            "kubernetes-v1.34.8",
            "--type=json",
            "-p",
            r#"[{"op": "replace", "path": "/spec/templates/0/templateID", "value": 9010}]"#,
        ])
        .await;
    let stored = kubectl
        .json(&["get", "pkr", "kubernetes-v1.34.8", "-o", "json"])
        .await;
    assert_eq!(stored["spec"]["templates"][0]["templateID"], 9010);
    assert_eq!(
        stored["spec"]["templates"][1]["templateSelector"]["matchPolicy"], "exact",
        "defaulted like a machine's selector"
    );

    let refused = kubectl
        .fails(&[
            "patch",
            "pkr",
            "kubernetes-v1.34.8",
            "--type=merge",
            "-p",
            r#"{"spec": {"version": "1.34"}}"#,
        ])
        .await;
    assert!(
        refused.contains(r#"The ProxmoxKubernetesRelease "kubernetes-v1.34.8" is invalid: spec.version: Invalid value: "1.34""#),
        "{refused}"
    );
    let wrong_version = kubectl
        .fails(&[
            "get",
            "proxmoxkubernetesreleases.v1alpha1.infrastructure.cluster.x-k8s.io",
        ])
        .await;
    assert!(
        wrong_version.contains("the server doesn't have a resource type"),
        "{wrong_version}"
    );
}

/// A managedFields entry of a version the kind is not served in (a release has no v1alpha1)
/// is dropped at the next write, as structured-merge-diff drops the managers of a missing
/// version, instead of failing the conversion of every later apply.
#[tokio::test(flavor = "multi_thread")]
async fn managed_fields_of_an_unserved_version_are_dropped_not_converted() {
    let api = Api::start().await;
    let path = collection("v1alpha2", "releases", "proxmoxkubernetesreleases");
    let apply = |manager: &'static str, body: String| {
        let api = &api;
        let path = &path;
        async move {
            api.patch(&format!("{path}/kubernetes-v1.34.8?fieldManager={manager}"))
                .raw("application/apply-patch+yaml", body)
                .send()
                .await
        }
    };
    let created = apply("first", RELEASE.to_owned()).await;
    assert_eq!(created.status, 201, "{}", created.text);
    let mut object = created.json();
    let mut stale = object["metadata"]["managedFields"][0].clone();
    stale["manager"] = "old-tool".into();
    stale["apiVersion"] = format!("{GROUP}/v1alpha1").into();
    stale["fieldsV1"] = serde_json::json!({"f:spec": {"f:version": {}}});
    object["metadata"]["managedFields"]
        .as_array_mut()
        .expect("managedFields")
        .push(stale);
    let updated = api
        .put(&format!("{path}/kubernetes-v1.34.8"))
        .json(&object)
        .send()
        .await;
    assert_eq!(updated.status, 200, "{}", updated.text);
    let kept = updated.json()["metadata"]["managedFields"].to_string();
    assert!(!kept.contains("old-tool"), "dropped at the update: {kept}");
    let again = apply("second", RELEASE.replace("9000", "9001")).await;
    assert_eq!(
        again.status, 409,
        "a conflict with first, not a 5xx: {}",
        again.text
    );
    let forced = api
        .patch(&format!(
            "{path}/kubernetes-v1.34.8?fieldManager=second&force=true"
        ))
        .raw(
            "application/apply-patch+yaml",
            RELEASE.replace("9000", "9001"),
        )
        .send()
        .await;
    assert_eq!(forced.status, 200, "{}", forced.text);
    assert_eq!(
        forced.json()["spec"]["templates"][0]["templateID"],
        9001,
        "{}",
        forced.text
    );
}
