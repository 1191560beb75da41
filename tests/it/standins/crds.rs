//! `dev` and another provider's CRD: `kubectl apply -f` of a CustomResourceDefinition of our
//! group (CAPK's KubevirtCluster, v1alpha1) makes its kind known at once, as the cluster's CRDs
//! do in `serve`: listed by discovery without verbs, and `kubectl get` shows the 503 with the
//! reason instead of "the server doesn't have a resource type"; deleting the CRD forgets it.

use std::time::Duration;

use crate::auth::eventually;
use crate::rest::kubectl::Kubectl;
use crate::rest::{Api, GROUP};

const KUBEVIRT_CLUSTERS: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: kubevirtclusters.infrastructure.cluster.x-k8s.io
spec:
  group: infrastructure.cluster.x-k8s.io
  names:
    kind: KubevirtCluster
    listKind: KubevirtClusterList
    plural: kubevirtclusters
    singular: kubevirtcluster
    categories: [cluster-api]
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object}
    subresources: {status: {}}
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_crd_of_our_group_applied_to_dev_makes_its_kind_known() {
    let api = Api::start().await;
    let k = Kubectl::new(&api, "1.33");
    let path = format!("/apis/{GROUP}/v1alpha1/namespaces/default/kubevirtclusters");
    assert_eq!(api.get(&path).send().await.status, 404, "no CRD yet");

    let file = k.manifest("kubevirtclusters.yaml", KUBEVIRT_CLUSTERS);
    let applied = k.ok(&["apply", "-f", &file]).await;
    assert!(applied.contains("created"), "{applied}");
    eventually(Duration::from_secs(10), "KubevirtCluster known", || async {
        api.get(&path).send().await.status == 503
    })
    .await;
    let reply = api.get(&path).send().await;
    assert!(
        reply
            .message()
            .starts_with("KubevirtCluster is defined by CustomResourceDefinition"),
        "{}",
        reply.text
    );
    let listed = api
        .get(&format!("/apis/{GROUP}/v1alpha1"))
        .send()
        .await
        .json();
    let entry = listed["resources"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == "kubevirtclusters"))
        .unwrap_or_else(|| panic!("kubevirtclusters in discovery: {listed}"));
    assert_eq!(entry["verbs"], serde_json::json!([]));

    let (ok, _, err) = k.run(&["get", "kubevirtclusters"]).await;
    assert!(!ok);
    assert!(
        err.contains("Error from server (ServiceUnavailable): KubevirtCluster is defined by"),
        "{err}"
    );

    k.ok(&["delete", "-f", &file]).await;
    eventually(
        Duration::from_secs(10),
        "KubevirtCluster forgotten",
        || async { api.get(&path).send().await.status == 404 },
    )
    .await;
}
