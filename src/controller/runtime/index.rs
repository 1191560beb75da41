//! What the feed remembers about the watched objects, and which keys an event touches:
//! a ProxmoxMachine's event touches that machine; a ProxmoxCluster's touches the cluster
//! and — when its readiness or deletion changes — every ProxmoxMachine of its CAPI
//! Cluster (label `cluster.x-k8s.io/cluster-name`), which wait for it.
//!
//! Objects are read straight from the watch's JSON (a few fields), not decoded.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::key::{ObjectKey, ReconcileKind, Trigger};
use crate::management::types::{CAPI_GROUP, CLUSTER_NAME_LABEL};

/// What machines wait for in a ProxmoxCluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Gate {
    provisioned: bool,
    ready: String,
    deleting: bool,
}

#[derive(Clone, Debug)]
struct ClusterEntry {
    /// The CAPI Cluster it belongs to.
    capi: String,
    gate: Gate,
}

/// The watched objects: machines by their cluster label, clusters with their gate.
#[derive(Default)]
pub struct Index {
    /// (namespace, name) → CAPI cluster label.
    machines: BTreeMap<(String, String), String>,
    clusters: BTreeMap<(String, String), ClusterEntry>,
}

fn str_at<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn id(object: &Value) -> (String, String) {
    (
        str_at(object, "/metadata/namespace").to_owned(),
        str_at(object, "/metadata/name").to_owned(),
    )
}

fn label(object: &Value) -> &str {
    object
        .pointer("/metadata/labels")
        .and_then(|l| l.get(CLUSTER_NAME_LABEL))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The CAPI Cluster of a ProxmoxCluster: its owner, else its cluster-name label, else its
/// own name (CAPI names them alike).
fn capi_cluster(object: &Value) -> String {
    let owner = object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|o| {
            o.get("kind").and_then(Value::as_str) == Some("Cluster")
                && str_at(o, "/apiVersion").split('/').next() == Some(CAPI_GROUP)
        })
        .map(|o| str_at(o, "/name"));
    match owner.filter(|n| !n.is_empty()) {
        Some(owner) => owner.to_owned(),
        None if !label(object).is_empty() => label(object).to_owned(),
        None => id(object).1,
    }
}

fn gate(object: &Value) -> Gate {
    let ready = object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
        .map(|c| str_at(c, "/status").to_owned())
        .unwrap_or_default();
    Gate {
        provisioned: object
            .pointer("/status/initialization/provisioned")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        ready,
        deleting: object.pointer("/metadata/deletionTimestamp").is_some(),
    }
}

impl Index {
    /// Records an object as present now; the keys to reconcile.
    pub fn upsert(&mut self, kind: ReconcileKind, object: &Value) -> Vec<ObjectKey> {
        let (namespace, name) = id(object);
        match kind {
            ReconcileKind::ProxmoxMachine => {
                self.machines
                    .insert((namespace.clone(), name.clone()), label(object).to_owned());
                vec![ObjectKey::machine(namespace, name)]
            }
            ReconcileKind::ProxmoxCluster => {
                let entry = ClusterEntry {
                    capi: capi_cluster(object),
                    gate: gate(object),
                };
                let before = self
                    .clusters
                    .insert((namespace.clone(), name.clone()), entry.clone());
                let mut keys = vec![ObjectKey::cluster(&namespace, &name)];
                if before.is_none_or(|b| b.gate != entry.gate || b.capi != entry.capi) {
                    keys.extend(self.machines_of(&namespace, &entry.capi));
                }
                keys
            }
        }
    }

    /// Records an object as gone; the keys to reconcile.
    pub fn remove(&mut self, kind: ReconcileKind, object: &Value) -> Vec<ObjectKey> {
        let (namespace, name) = id(object);
        match kind {
            ReconcileKind::ProxmoxMachine => {
                self.machines.remove(&(namespace.clone(), name.clone()));
                vec![ObjectKey::machine(namespace, name)]
            }
            ReconcileKind::ProxmoxCluster => {
                let before = self.clusters.remove(&(namespace.clone(), name.clone()));
                let mut keys = vec![ObjectKey::cluster(&namespace, &name)];
                if let Some(before) = before {
                    keys.extend(self.machines_of(&namespace, &before.capi));
                }
                keys
            }
        }
    }

    /// Replaces every object of `kind` by a fresh list; the keys of the listed objects and
    /// of those that disappeared meanwhile.
    pub fn replace(&mut self, kind: ReconcileKind, objects: &[Value]) -> Vec<ObjectKey> {
        let listed: BTreeSet<(String, String)> = objects.iter().map(id).collect();
        let known: Vec<&(String, String)> = match kind {
            ReconcileKind::ProxmoxMachine => self.machines.keys().collect(),
            ReconcileKind::ProxmoxCluster => self.clusters.keys().collect(),
        };
        let gone: Vec<(String, String)> = known
            .into_iter()
            .filter(|k| !listed.contains(*k))
            .cloned()
            .collect();
        let mut keys = Vec::new();
        for (namespace, name) in gone {
            let stub = serde_json::json!({"metadata": {"namespace": namespace, "name": name}});
            keys.extend(self.remove(kind, &stub));
        }
        for object in objects {
            keys.extend(self.upsert(kind, object));
        }
        keys
    }

    /// The keys a trigger names.
    pub fn resolve(&self, trigger: Trigger) -> Vec<ObjectKey> {
        match trigger {
            Trigger::Object(key) => vec![key],
            Trigger::Cluster { namespace, name } => {
                let mut keys: Vec<ObjectKey> = self
                    .clusters
                    .iter()
                    .filter(|((ns, _), e)| *ns == namespace && e.capi == name)
                    .map(|((ns, n), _)| ObjectKey::cluster(ns, n))
                    .collect();
                keys.extend(self.machines_of(&namespace, &name));
                keys
            }
        }
    }

    /// Every known object (the periodic resync).
    pub fn all(&self) -> Vec<ObjectKey> {
        let clusters = self
            .clusters
            .keys()
            .map(|(ns, n)| ObjectKey::cluster(ns, n));
        let machines = self
            .machines
            .keys()
            .map(|(ns, n)| ObjectKey::machine(ns, n));
        clusters.chain(machines).collect()
    }

    fn machines_of(&self, namespace: &str, capi: &str) -> Vec<ObjectKey> {
        self.machines
            .iter()
            .filter(|((ns, _), c)| ns == namespace && c.as_str() == capi)
            .map(|((ns, n), _)| ObjectKey::machine(ns, n))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn machine(name: &str, cluster: &str) -> Value {
        json!({"metadata": {"namespace": "ns", "name": name,
            "labels": {CLUSTER_NAME_LABEL: cluster}}})
    }

    fn cluster(name: &str, provisioned: bool, deleting: bool) -> Value {
        let mut c = json!({"metadata": {"namespace": "ns", "name": name,
            "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                "name": format!("capi-{name}"), "uid": "u"}]},
            "status": {"initialization": {"provisioned": provisioned}}});
        if deleting {
            c["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        c
    }

    #[test]
    fn cluster_gate_changes_touch_its_machines_only() {
        let mut index = Index::default();
        index.upsert(ReconcileKind::ProxmoxMachine, &machine("m1", "capi-c1"));
        index.upsert(ReconcileKind::ProxmoxMachine, &machine("m2", "capi-c2"));
        let first = index.upsert(ReconcileKind::ProxmoxCluster, &cluster("c1", false, false));
        assert_eq!(
            first,
            vec![
                ObjectKey::cluster("ns", "c1"),
                ObjectKey::machine("ns", "m1")
            ]
        );
        let same = index.upsert(ReconcileKind::ProxmoxCluster, &cluster("c1", false, false));
        assert_eq!(same, vec![ObjectKey::cluster("ns", "c1")], "no gate change");
        let ready = index.upsert(ReconcileKind::ProxmoxCluster, &cluster("c1", true, false));
        assert_eq!(ready.len(), 2);
        let deleting = index.upsert(ReconcileKind::ProxmoxCluster, &cluster("c1", true, true));
        assert!(deleting.contains(&ObjectKey::machine("ns", "m1")));
        assert!(!deleting.contains(&ObjectKey::machine("ns", "m2")));
    }

    #[test]
    fn relists_report_vanished_objects_and_triggers_resolve() {
        let mut index = Index::default();
        index.replace(
            ReconcileKind::ProxmoxMachine,
            &[machine("m1", "capi-c1"), machine("m2", "capi-c1")],
        );
        index.upsert(ReconcileKind::ProxmoxCluster, &cluster("c1", true, false));
        let keys = index.replace(ReconcileKind::ProxmoxMachine, &[machine("m1", "capi-c1")]);
        assert!(
            keys.contains(&ObjectKey::machine("ns", "m2")),
            "gone: {keys:?}"
        );
        assert_eq!(
            index.resolve(Trigger::Cluster {
                namespace: "ns".into(),
                name: "capi-c1".into()
            }),
            vec![
                ObjectKey::cluster("ns", "c1"),
                ObjectKey::machine("ns", "m1")
            ]
        );
        assert_eq!(index.all().len(), 2);
    }
}
