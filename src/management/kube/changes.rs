//! Change streams for the controller runtime: which of our objects to reconcile when a
//! Cluster API object changes.
//!
//! CAPI's Machine (Cluster) names its ProxmoxMachine (ProxmoxCluster) in
//! `spec.infrastructureRef`; a change of the Machine (Cluster) — a new `bootstrap.
//! dataSecretName`, a node that joined, `infrastructureProvisioned`, pause, deletion —
//! matters to the reconciler of that object. The streams are built on
//! `kube::runtime::watcher` with its default back-off: a broken watch is re-established
//! (relisting when its resourceVersion expired), so the stream never ends by itself and
//! yields the keys of every object seen again after a restart (the runtime deduplicates).

use futures::{Stream, StreamExt, future};
use kube::api::DynamicObject;
use kube::runtime::{WatchStreamExt, watcher};

use super::kinds::Kind;
use crate::management::types::GroupKindName;

/// Namespace and name of one of our objects.
pub type ObjectKey = (String, String);

/// `(namespace, infrastructureRef name)` of every changed (or deleted) Machine whose
/// `spec.infrastructureRef` is a ProxmoxMachine.
pub fn proxmox_machine_changes(client: kube::Client) -> impl Stream<Item = ObjectKey> + Send {
    infrastructure_ref_changes(client, Kind::Machine, Kind::ProxmoxMachine)
}

/// `(namespace, name)` of every changed (or deleted) CAPI Cluster whose
/// `spec.infrastructureRef` is a ProxmoxCluster: the runtime resolves it to that
/// ProxmoxCluster and the ProxmoxMachines labelled with the Cluster's name (a pause or a
/// provisioned infrastructure concerns them all).
pub fn capi_cluster_changes(client: kube::Client) -> impl Stream<Item = ObjectKey> + Send {
    changes(
        client,
        Kind::Cluster,
        Kind::ProxmoxCluster,
        |object, target| {
            referenced_name(&object.data["spec"]["infrastructureRef"], target)?;
            Some((
                object.metadata.namespace.clone().unwrap_or_default(),
                object.metadata.name.clone()?,
            ))
        },
    )
}

fn infrastructure_ref_changes(
    client: kube::Client,
    watched: Kind,
    target: Kind,
) -> impl Stream<Item = ObjectKey> + Send {
    changes(client, watched, target, infrastructure_ref)
}

/// The keys `key` gives for every changed `watched` object that refers to a `target`.
fn changes(
    client: kube::Client,
    watched: Kind,
    target: Kind,
    key: fn(&DynamicObject, Kind) -> Option<ObjectKey>,
) -> impl Stream<Item = ObjectKey> + Send {
    watcher(watched.api_all(&client), watcher::Config::default())
        .default_backoff()
        .touched_objects()
        .filter_map(move |event| {
            future::ready(match event {
                Ok(object) => key(&object, target),
                Err(error) => {
                    // The back-off already delays the retry; nothing to requeue.
                    tracing::debug!(kind = watched.name(), %error, "watch of CAPI objects failed; retrying");
                    None
                }
            })
        })
}

/// The key of `object`'s infrastructure reference when it names a `target`.
pub fn infrastructure_ref(object: &DynamicObject, target: Kind) -> Option<ObjectKey> {
    let name = referenced_name(&object.data["spec"]["infrastructureRef"], target)?;
    Some((object.metadata.namespace.clone().unwrap_or_default(), name))
}

/// The name a v1beta2 contract reference (`{apiGroup, kind, name}`) gives when it names
/// a `target`.
pub fn referenced_name(reference: &serde_json::Value, target: Kind) -> Option<String> {
    let reference: GroupKindName = serde_json::from_value(reference.clone()).ok()?;
    (reference.api_group == target.group()
        && reference.kind == target.name()
        && !reference.name.is_empty())
    .then_some(reference.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(reference: serde_json::Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": "m", "namespace": "ns"},
            "spec": {"clusterName": "c", "infrastructureRef": reference},
        }))
        .expect("object")
    }

    #[test]
    fn only_proxmox_references_are_keys() {
        let ours = object(json!({
            "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "ProxmoxMachine", "name": "pm"
        }));
        assert_eq!(
            infrastructure_ref(&ours, Kind::ProxmoxMachine),
            Some(("ns".to_string(), "pm".to_string()))
        );
        assert_eq!(infrastructure_ref(&ours, Kind::ProxmoxCluster), None);
        let docker = object(json!({
            "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachine", "name": "d"
        }));
        assert_eq!(infrastructure_ref(&docker, Kind::ProxmoxMachine), None);
        let other_group = object(json!({
            "apiGroup": "example.com", "kind": "ProxmoxMachine", "name": "x"
        }));
        assert_eq!(infrastructure_ref(&other_group, Kind::ProxmoxMachine), None);
        assert_eq!(
            infrastructure_ref(&object(json!(null)), Kind::ProxmoxMachine),
            None
        );
        assert_eq!(
            infrastructure_ref(&object(json!("garbage")), Kind::ProxmoxMachine),
            None
        );
    }
}
