//! The Python `kubernetes` client's dynamic client: discovery, CRUD in both versions, list
//! with a label selector, merge patch, and a watch that sees the changes.

use serde_json::Value;

use super::Api;
use crate::server::{python, run};

const SCRIPT: &str = r#"
import json, sys, threading
from kubernetes import client, config, dynamic

config.load_kube_config(config_file=sys.argv[1])
dyn = dynamic.DynamicClient(client.ApiClient())
group = "infrastructure.cluster.x-k8s.io"
machines = dyn.resources.get(api_version=group + "/v1alpha2", kind="ProxmoxMachine")
machines_v1 = dyn.resources.get(api_version=group + "/v1alpha1", kind="ProxmoxMachine")
ns = "python"
body = {
    "apiVersion": group + "/v1alpha2", "kind": "ProxmoxMachine",
    "metadata": {"name": "py-0", "labels": {"app": "py"}},
    "spec": {"sourceNode": "pve1", "templateID": 100,
             "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0"}]}},
}
created = machines.create(body=body, namespace=ns)
out = {"created": created.metadata.name, "generation": created.metadata.generation}

events = []
def watch():
    for event in machines.watch(namespace=ns, resource_version=created.metadata.resourceVersion, timeout=20):
        events.append([event["type"], event["object"].metadata.name])
        if event["type"] == "DELETED":
            return
watcher = threading.Thread(target=watch)
watcher.start()

other = dict(body, metadata={"name": "py-1", "labels": {"app": "other"}})
machines.create(body=other, namespace=ns)
listed = machines.get(namespace=ns, label_selector="app=py")
out["listed"] = [item.metadata.name for item in listed.items]
patched = machines.patch(name="py-0", namespace=ns, body={"spec": {"numSockets": 3}},
                         content_type="application/merge-patch+json")
out["patched"] = [patched.spec.numSockets, patched.metadata.generation]
v1 = machines_v1.get(name="py-0", namespace=ns)
out["v1"] = [v1.apiVersion, v1.spec.network.default.bridge]
current = machines.get(name="py-0", namespace=ns).to_dict()
current["metadata"]["labels"]["replaced"] = "yes"
replaced = machines.replace(body=current, namespace=ns)
out["replaced"] = replaced.metadata.labels["replaced"]
machines.delete(name="py-0", namespace=ns)
try:
    machines.get(name="py-0", namespace=ns)
    out["gone"] = False
except dynamic.exceptions.NotFoundError:
    out["gone"] = True
watcher.join(30)
out["events"] = events
print(json.dumps(out))
"#;

#[tokio::test(flavor = "multi_thread")]
async fn dynamic_client_crud_and_watch() {
    let api = Api::start().await;
    let kubeconfig = api.dev.kubeconfig().to_string_lossy().into_owned();
    let (ok, out, err) = run(&python(), &["-c", SCRIPT, &kubeconfig]).await;
    assert!(ok, "python client failed:\n{err}");
    let result: Value = serde_json::from_str(out.trim()).expect("script output");
    assert_eq!(result["created"], "py-0");
    assert_eq!(result["generation"], 1);
    assert_eq!(result["listed"], serde_json::json!(["py-0"]));
    assert_eq!(result["patched"], serde_json::json!([3, 2]));
    assert_eq!(
        result["v1"],
        serde_json::json!(["infrastructure.cluster.x-k8s.io/v1alpha1", "vmbr0"])
    );
    assert_eq!(result["replaced"], "yes");
    assert_eq!(result["gone"], true);
    let events: Vec<(String, String)> =
        serde_json::from_value(result["events"].clone()).expect("events");
    let expected: Vec<(String, String)> = [
        ("ADDED", "py-1"),
        ("MODIFIED", "py-0"),
        ("MODIFIED", "py-0"),
        ("DELETED", "py-0"),
    ]
    .iter()
    .map(|(t, n)| ((*t).to_owned(), (*n).to_owned()))
    .collect();
    assert_eq!(events, expected);
}
