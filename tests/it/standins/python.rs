//! The Python `kubernetes` client's dynamic client on the stand-ins: discovery of the three
//! groups and the core group, CRUD of a Cluster (with `/status`), a cluster-scoped pool and a
//! Secret with `stringData`.

use serde_json::{Value, json};

use crate::rest::Api;
use crate::server::{python, run};

const SCRIPT: &str = r#"
import json, sys
from kubernetes import client, config, dynamic

config.load_kube_config(config_file=sys.argv[1])
dyn = dynamic.DynamicClient(client.ApiClient())
clusters = dyn.resources.get(api_version="cluster.x-k8s.io/v1beta2", kind="Cluster")
pools = dyn.resources.get(api_version="ipam.cluster.x-k8s.io/v1alpha2", kind="GlobalInClusterIPPool")
secrets = dyn.resources.get(api_version="v1", kind="Secret")
ns = "python"
out = {}
created = clusters.create(namespace=ns, body={
    "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
    "metadata": {"name": "py", "labels": {"app": "py"}},
    "spec": {"paused": False},
})
out["created"] = [created.metadata.name, created.metadata.generation]
patched = clusters.patch(name="py", namespace=ns, body={"spec": {"paused": True}},
                         content_type="application/merge-patch+json")
out["patched"] = [patched.spec.paused, patched.metadata.generation]
current = clusters.get(name="py", namespace=ns).to_dict()
current["status"] = {"phase": "Provisioned"}
status = clusters.status.replace(body=current, namespace=ns)
out["status"] = [status.status.phase, status.metadata.generation]
out["listed"] = [i.metadata.name for i in clusters.get(namespace=ns, label_selector="app=py").items]
clusters.delete(name="py", namespace=ns)
try:
    clusters.get(name="py", namespace=ns)
    out["gone"] = False
except dynamic.exceptions.NotFoundError:
    out["gone"] = True

pool = pools.create(body={
    "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "GlobalInClusterIPPool",
    "metadata": {"name": "py-pool"}, "spec": {"addresses": ["10.1.0.0/24"]},
})
out["pool"] = [pool.metadata.name, pool.metadata.namespace]
pools.delete(name="py-pool")

secret = secrets.create(namespace=ns, body={
    "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "py-secret"},
    "stringData": {"user": "admin"},
})
out["secret"] = [secret.data.user, secret.type]
secrets.delete(name="py-secret", namespace=ns)
print(json.dumps(out))
"#;

#[tokio::test(flavor = "multi_thread")]
async fn dynamic_client_on_stand_ins() {
    let api = Api::start().await;
    let kubeconfig = api.dev.kubeconfig().to_string_lossy().into_owned();
    let (ok, out, err) = run(&python(), &["-c", SCRIPT, &kubeconfig]).await;
    assert!(ok, "python client failed:\n{err}");
    let result: Value = serde_json::from_str(out.trim()).expect("script output");
    assert_eq!(result["created"], json!(["py", 1]));
    assert_eq!(result["patched"], json!([true, 2]));
    assert_eq!(result["status"], json!(["Provisioned", 2]));
    assert_eq!(result["listed"], json!(["py"]));
    assert_eq!(result["gone"], true);
    assert_eq!(result["pool"], json!(["py-pool", null]));
    assert_eq!(result["secret"], json!(["YWRtaW4=", "Opaque"]));
}
