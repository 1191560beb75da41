//! FieldsV1 and managedFields exactly as Kubernetes writes them: sets read
//! from kube-apiserver's output write back the same JSON, and every key
//! writes back byte for byte.

use capmox_apiserver::registry::apply::Managed;
use capmox_apiserver::registry::apply::fieldpath::{PathElement, Set};
use serde_json::Value;

/// `fieldsV1` as kube-apiserver stores it: a kubectl apply of a ConfigMap,
/// a Deployment's pod from kube-controller-manager (owner reference,
/// two-key list map), a kubelet status update (conditions, pod IPs), a
/// finalizer set, and a CAPI apply of a ProxmoxMachine.
const KUBE_FIELDS: [&str; 5] = [
    r#"{"f:data":{"f:key":{}},"f:metadata":{"f:labels":{"f:test-label":{}}}}"#,
    r#"{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"4a2e5c36-9e2b-4f3e-8c1e-1a2b3c4d5e6f\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"nginx\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:ports":{".":{},"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:protocol":{}}},"f:resources":{},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}"#,
    r#"{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"10.244.0.5\"}":{".":{},"f:ip":{}}},"f:startTime":{}}}"#,
    r#"{"f:metadata":{"f:finalizers":{".":{},"v:\"kubernetes.io/pv-protection\"":{}}}}"#,
    r#"{"f:metadata":{"f:annotations":{"f:cluster.x-k8s.io/cloned-from-groupkind":{},"f:cluster.x-k8s.io/cloned-from-name":{}},"f:labels":{"f:cluster.x-k8s.io/cluster-name":{},"f:cluster.x-k8s.io/control-plane":{}},"f:ownerReferences":{"k:{\"uid\":\"d5b0a3f4-1c2d-4e5f-8a9b-0c1d2e3f4a5b\"}":{}}},"f:spec":{"f:network":{"f:networkDevices":{"k:{\"name\":\"net0\"}":{".":{},"f:bridge":{},"f:ipPoolRef":{},"f:name":{}}}},"f:sourceNode":{},"f:templateID":{}}}"#,
];

fn keys(value: &Value, out: &mut Vec<String>) {
    if let Value::Object(map) = value {
        for (key, child) in map {
            out.push(key.clone());
            keys(child, out);
        }
    }
}

#[test]
fn kube_fields_read_and_write_back_unchanged() {
    for text in KUBE_FIELDS {
        let json: Value = serde_json::from_str(text).unwrap();
        let set = Set::from_fields_v1(&json).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert!(!set.is_empty());
        assert_eq!(set.to_fields_v1(), json, "{text}");
    }
}

#[test]
fn every_key_writes_back_byte_for_byte() {
    for text in KUBE_FIELDS {
        let json: Value = serde_json::from_str(text).unwrap();
        let mut all = Vec::new();
        keys(&json, &mut all);
        for key in all.into_iter().filter(|k| k != ".") {
            let element = PathElement::from_fields_key(&key)
                .unwrap_or_else(|e| panic!("{key}: {e}"))
                .unwrap_or_else(|| panic!("{key}: unknown type"));
            assert_eq!(element.to_fields_key(), key);
        }
    }
}

#[test]
fn kube_paths_read_as_kube_prints_them() {
    let json: Value = serde_json::from_str(KUBE_FIELDS[1]).unwrap();
    let set = Set::from_fields_v1(&json).unwrap();
    let paths: Vec<String> = set.paths().iter().map(ToString::to_string).collect();
    assert!(
        paths.contains(
            &r#".spec.containers[name="nginx"].ports[containerPort=80,protocol="TCP"].protocol"#
                .to_owned()
        )
    );
    assert!(paths.contains(&".metadata.labels".to_owned()));
    assert!(!paths.contains(&".metadata".to_owned()));
    assert_eq!(set.len(), paths.len());
}

/// A ProxmoxMachine's `managedFields` as kube-apiserver orders them:
/// appliers first, then updaters oldest first.
const KUBE_ENTRIES: &str = r#"[
  {"manager":"capi-machineset","operation":"Apply","apiVersion":"infrastructure.cluster.x-k8s.io/v1alpha2","time":"2026-03-01T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:sourceNode":{},"f:templateID":{}}}},
  {"manager":"capi-machineset-metadata","operation":"Apply","apiVersion":"infrastructure.cluster.x-k8s.io/v1alpha2","time":"2026-03-01T10:00:01Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{"f:cluster.x-k8s.io/set-name":{}}}}},
  {"manager":"manager","operation":"Update","apiVersion":"infrastructure.cluster.x-k8s.io/v1alpha2","time":"2026-03-01T10:00:02Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:finalizers":{".":{},"v:\"proxmoxmachine.infrastructure.cluster.x-k8s.io\"":{}}}}},
  {"manager":"manager","operation":"Update","apiVersion":"infrastructure.cluster.x-k8s.io/v1alpha2","time":"2026-03-01T10:05:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:status":{".":{},"f:conditions":{".":{},"k:{\"type\":\"Ready\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{},"f:type":{}}}}},"subresource":"status"}
]"#;

#[test]
fn kube_managed_fields_entries_read_and_write_back_unchanged() {
    let entries: Value = serde_json::from_str(KUBE_ENTRIES).unwrap();
    let managed = Managed::decode(&entries).unwrap();
    assert_eq!(managed.fields.len(), 4);
    assert_eq!(managed.encode(), Some(entries));
}
