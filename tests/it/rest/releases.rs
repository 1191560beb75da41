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
