//! A tiny Cluster API core: what CAPI's Cluster and Machine controllers do with our
//! infrastructure objects, only as far as the controller needs it.
//!
//! * [`cluster::Clusters`]: a Cluster whose `spec.infrastructureRef` names a
//!   ProxmoxCluster gets the finalizer `cluster.cluster.x-k8s.io`; the ProxmoxCluster gets
//!   the Cluster as controlling owner and the cluster-name label; once the ProxmoxCluster
//!   reports `status.initialization.provisioned`, the Cluster gets
//!   `status.initialization.infrastructureProvisioned=true` and — unless it has a valid
//!   one — the ProxmoxCluster's `spec.controlPlaneEndpoint`. A deleted Cluster deletes its
//!   Machines, then (once they are gone) the ProxmoxCluster, then drops its finalizer.
//! * [`machine::Machines`]: a Machine whose `spec.infrastructureRef` names a
//!   ProxmoxMachine gets the finalizer `machine.cluster.x-k8s.io`; the ProxmoxMachine gets
//!   the Machine as controlling owner and the cluster-name label; once the ProxmoxMachine
//!   is provisioned, the Machine gets `spec.providerID`, `status.addresses`,
//!   `status.initialization.infrastructureProvisioned` and — **pretending, since no
//!   kubelet exists here** — a `status.nodeRef` (the ProxmoxMachine's name) and
//!   `Available=True`: the node "joins" when the VM is provisioned. A deleted Machine
//!   deletes its ProxmoxMachine, waits until it is gone, then drops its finalizer.
//!
//! Not emulated: bootstrap and control-plane providers (the bootstrap Secret and
//! `spec.bootstrap.dataSecretName` are the user's), MachineSets/Deployments, topology,
//! failure domains, pausing of CAPI's own work, health checks, the garbage collector.

pub mod cluster;
pub mod machine;

use serde_json::Value;

use super::error::EmulationError;
use super::meta::{
    add_finalizer, controller_reference, ensure_owner, is_deleting, meta_str, set_label,
};
use crate::management::kube::changes::referenced_name;
use crate::management::kube::kinds::Kind;
use crate::management::kube::objects::Objects;
use crate::management::types::CLUSTER_NAME_LABEL;

/// CAPI's Cluster finalizer.
pub const CLUSTER_FINALIZER: &str = "cluster.cluster.x-k8s.io";
/// CAPI's Machine finalizer.
pub const MACHINE_FINALIZER: &str = "machine.cluster.x-k8s.io";

/// How often a deletion waiting for dependents looks again when no watch event comes.
const DELETION_RECHECK: std::time::Duration = std::time::Duration::from_secs(5);

/// One side of CAPI's contract with an infrastructure provider: a CAPI object and the
/// infrastructure object its `spec.infrastructureRef` names.
struct Contract {
    /// Cluster or Machine.
    capi: Kind,
    /// ProxmoxCluster or ProxmoxMachine.
    infra: Kind,
    /// CAPI's finalizer on the CAPI object.
    finalizer: &'static str,
}

impl Contract {
    /// The CAPI object and the name of its infrastructure object; `None` when it is absent
    /// or its reference is not to our kind.
    async fn read(
        &self,
        objects: &Objects,
        namespace: &str,
        name: &str,
    ) -> Result<Option<(Value, String)>, EmulationError> {
        let Some(object) = objects.get(self.capi, namespace, name).await? else {
            return Ok(None);
        };
        Ok(
            referenced_name(&object["spec"]["infrastructureRef"], self.infra)
                .map(|infra| (object, infra)),
        )
    }

    /// CAPI's finalizer on `object`, then the infrastructure object with `object` as its
    /// controlling owner and the cluster-name label. `None` while the infrastructure
    /// object does not exist or is being deleted.
    async fn adopt(
        &self,
        objects: &Objects,
        object: &mut Value,
        infra: &str,
        cluster: Option<&str>,
    ) -> Result<Option<Value>, EmulationError> {
        if add_finalizer(object, self.finalizer) {
            *object = objects.replace(self.capi, object).await?;
        }
        let namespace = meta_str(object, "namespace").to_string();
        let Some(mut infra_object) = objects.get(self.infra, &namespace, infra).await? else {
            return Ok(None);
        };
        if is_deleting(&infra_object) {
            return Ok(None);
        }
        let mut changed = ensure_owner(&mut infra_object, &controller_reference(object));
        if let Some(cluster) = cluster {
            changed |= set_label(&mut infra_object, CLUSTER_NAME_LABEL, cluster);
        }
        if changed {
            infra_object = objects.replace(self.infra, &infra_object).await?;
        }
        Ok(Some(infra_object))
    }
}

/// Deletes an object (the uid read is a precondition) unless it is being deleted already;
/// true once it is gone.
async fn delete_and_check_gone(
    objects: &Objects,
    kind: Kind,
    namespace: &str,
    name: &str,
) -> Result<bool, EmulationError> {
    let Some(object) = objects.get(kind, namespace, name).await? else {
        return Ok(true);
    };
    if !is_deleting(&object) {
        objects
            .delete(kind, namespace, name, Some(meta_str(&object, "uid")))
            .await?;
    }
    Ok(false)
}
