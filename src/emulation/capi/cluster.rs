//! The Cluster side of the CAPI emulation (see [`super`]).

use serde_json::Value;

use super::{CLUSTER_FINALIZER, Contract, DELETION_RECHECK, delete_and_check_gone};
use crate::emulation::driver::{Next, Reconcile};
use crate::emulation::error::EmulationError;
use crate::emulation::meta::{
    has_finalizer, is_deleting, meta_str, remove_finalizer, set_at, str_at,
};
use crate::management::kube::changes::ObjectKey;
use crate::management::kube::kinds::Kind;
use crate::management::kube::objects::{Objects, key_of};
use crate::management::types::{CAPI_GROUP, CLUSTER_NAME_LABEL};

const CONTRACT: Contract = Contract {
    capi: Kind::Cluster,
    infra: Kind::ProxmoxCluster,
    finalizer: CLUSTER_FINALIZER,
};

/// The emulated Cluster controller.
pub struct Clusters {
    objects: Objects,
}

/// CAPI's validity rule for an endpoint: a host and a port.
fn valid_endpoint(endpoint: &Value) -> bool {
    endpoint["host"].as_str().is_some_and(|h| !h.is_empty())
        && endpoint["port"].as_i64().is_some_and(|p| p != 0)
}

/// The cluster a Machine (as JSON) belongs to.
pub fn machine_cluster(machine: &Value) -> Option<&str> {
    str_at(machine, "/spec/clusterName").or_else(|| {
        machine["metadata"]["labels"][CLUSTER_NAME_LABEL]
            .as_str()
            .filter(|s| !s.is_empty())
    })
}

/// The Cluster names a ProxmoxCluster (as JSON) points back to: its Cluster owners, else
/// its cluster-name label.
pub fn owning_clusters(proxmox_cluster: &Value) -> Vec<String> {
    let owners = crate::emulation::meta::owner_names(proxmox_cluster, "Cluster", CAPI_GROUP);
    if !owners.is_empty() {
        return owners;
    }
    proxmox_cluster["metadata"]["labels"][CLUSTER_NAME_LABEL]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(|s| vec![s.to_string()])
        .unwrap_or_default()
}

impl Clusters {
    pub fn new(objects: Objects) -> Self {
        Self { objects }
    }

    /// Deletion: Machines first, then the ProxmoxCluster, then the finalizer.
    async fn delete(
        &self,
        namespace: &str,
        mut cluster: Value,
        infra: &str,
    ) -> Result<Next, EmulationError> {
        if !has_finalizer(&cluster, CLUSTER_FINALIZER) {
            return Ok(Next::Done);
        }
        let name = meta_str(&cluster, "name").to_string();
        let machines: Vec<Value> = self
            .objects
            .list(Kind::Machine, Some(namespace), "")
            .await?
            .into_iter()
            .filter(|m| machine_cluster(m) == Some(name.as_str()))
            .collect();
        for machine in &machines {
            if !is_deleting(machine) {
                let (ns, machine_name) = key_of(machine);
                self.objects
                    .delete(
                        Kind::Machine,
                        &ns,
                        &machine_name,
                        Some(meta_str(machine, "uid")),
                    )
                    .await?;
            }
        }
        if !machines.is_empty() {
            return Ok(Next::After(DELETION_RECHECK));
        }
        if !delete_and_check_gone(&self.objects, Kind::ProxmoxCluster, namespace, infra).await? {
            return Ok(Next::After(DELETION_RECHECK));
        }
        remove_finalizer(&mut cluster, CLUSTER_FINALIZER);
        self.objects.replace(Kind::Cluster, &cluster).await?;
        Ok(Next::Done)
    }
}

impl Reconcile for Clusters {
    fn name(&self) -> &'static str {
        "capi-clusters"
    }

    async fn keys(&self) -> Result<Vec<ObjectKey>, EmulationError> {
        let clusters = self.objects.list(Kind::Cluster, None, "").await?;
        Ok(clusters.iter().map(key_of).collect())
    }

    async fn reconcile(&self, (namespace, name): &ObjectKey) -> Result<Next, EmulationError> {
        let Some((mut cluster, infra)) = CONTRACT.read(&self.objects, namespace, name).await?
        else {
            return Ok(Next::Done);
        };
        if is_deleting(&cluster) {
            return self.delete(namespace, cluster, &infra).await;
        }
        let Some(infra_cluster) = CONTRACT
            .adopt(&self.objects, &mut cluster, &infra, Some(name))
            .await?
        else {
            return Ok(Next::Done);
        };
        if infra_cluster["status"]["initialization"]["provisioned"] != Value::Bool(true) {
            return Ok(Next::Done);
        }
        // CAPI copies the endpoint only when the Cluster has no valid one of its own.
        let endpoint = &infra_cluster["spec"]["controlPlaneEndpoint"];
        if !valid_endpoint(&cluster["spec"]["controlPlaneEndpoint"])
            && valid_endpoint(endpoint)
            && set_at(
                &mut cluster,
                &["spec", "controlPlaneEndpoint"],
                endpoint.clone(),
            )
        {
            cluster = self.objects.replace(Kind::Cluster, &cluster).await?;
        }
        if set_at(
            &mut cluster,
            &["status", "initialization", "infrastructureProvisioned"],
            Value::Bool(true),
        ) {
            self.objects.replace_status(Kind::Cluster, &cluster).await?;
        }
        Ok(Next::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn endpoints_need_host_and_port() {
        assert!(valid_endpoint(&json!({"host": "10.0.0.1", "port": 6443})));
        assert!(!valid_endpoint(&json!({"host": "10.0.0.1"})));
        assert!(!valid_endpoint(&json!({"host": "", "port": 6443})));
        assert!(!valid_endpoint(&json!(null)));
    }

    #[test]
    fn machines_and_infra_clusters_name_their_cluster() {
        let labelled = json!({"metadata": {"labels": {CLUSTER_NAME_LABEL: "c"}}, "spec": {}});
        assert_eq!(machine_cluster(&labelled), Some("c"));
        let spec = json!({"metadata": {}, "spec": {"clusterName": "d"}});
        assert_eq!(machine_cluster(&spec), Some("d"));
        assert_eq!(machine_cluster(&json!({})), None);
        let owned = json!({"metadata": {"ownerReferences": [
            {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "c1", "uid": "u"}
        ], "labels": {CLUSTER_NAME_LABEL: "other"}}});
        assert_eq!(owning_clusters(&owned), ["c1"]);
        assert_eq!(owning_clusters(&labelled), ["c"]);
        assert!(owning_clusters(&json!({})).is_empty());
    }
}
