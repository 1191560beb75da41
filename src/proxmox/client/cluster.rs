//! Version, cluster and node calls.

use serde_json::Value;

use super::{Client, Error, ErrorKind, path};
use crate::proxmox::lenient::as_u64;
use crate::proxmox::types::{
    ClusterResource, ClusterStatusEntry, NodeInfo, NodeStatus, PciDeviceInfo, PciMapping,
    ResourceType, Version,
};

impl Client {
    /// `GET /version`: also the cheapest way to check URL, TLS and token.
    pub async fn version(&self) -> Result<Version, Error> {
        self.get("/version", &[]).await
    }

    /// `GET /cluster/status`: the cluster entry (if clustered) and one entry per node.
    pub async fn cluster_status(&self) -> Result<Vec<ClusterStatusEntry>, Error> {
        self.get("/cluster/status", &[]).await
    }

    /// `GET /cluster/resources[?type=...]`. Names and states of new VMs lag ~10 s.
    pub async fn cluster_resources(
        &self,
        kind: Option<ResourceType>,
    ) -> Result<Vec<ClusterResource>, Error> {
        let query: Vec<(String, String)> = kind
            .map(|k| vec![("type".to_string(), k.as_str().to_string())])
            .unwrap_or_default();
        self.get("/cluster/resources", &query).await
    }

    /// `GET /cluster/nextid`: the lowest free VM id (PVE sends it as a string).
    pub async fn next_id(&self) -> Result<u32, Error> {
        let v: Value = self.get("/cluster/nextid", &[]).await?;
        as_u64(&v)
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| Error::Decode {
                method: "GET".into(),
                path: "/cluster/nextid".into(),
                message: format!("expected a VM id, got {v}"),
            })
    }

    /// `GET /cluster/nextid?vmid=N`: whether `vmid` is free right now. "Taken" (400 `VM N
    /// already exists`) is `Ok(false)`; there is no reservation, so a clone may still race.
    pub async fn is_vmid_free(&self, vmid: u32) -> Result<bool, Error> {
        let query = [("vmid".to_string(), vmid.to_string())];
        match self.get::<Value>("/cluster/nextid", &query).await {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// `GET /cluster/mapping/pci`: the datacenter's PCI resource mappings.
    pub async fn pci_mappings(&self) -> Result<Vec<PciMapping>, Error> {
        self.get("/cluster/mapping/pci", &[]).await
    }

    /// `GET /nodes`.
    pub async fn nodes(&self) -> Result<Vec<NodeInfo>, Error> {
        self.get("/nodes", &[]).await
    }

    /// `GET /nodes/{node}/hardware/pci`: the node's PCI devices.
    pub async fn node_pci_devices(&self, node: &str) -> Result<Vec<PciDeviceInfo>, Error> {
        self.get(&path(&["nodes", node, "hardware", "pci"]), &[])
            .await
    }

    /// `GET /nodes/{node}/status`.
    pub async fn node_status(&self, node: &str) -> Result<NodeStatus, Error> {
        self.get(&path(&["nodes", node, "status"]), &[]).await
    }
}
