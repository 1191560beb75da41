//! HA resources (`/cluster/ha/resources`): VMs the HA manager restarts or relocates.

use super::{Client, Error, path};
use crate::proxmox::types::{HaResourceEntry, HaSettings};

impl Client {
    /// `GET /cluster/ha/resources`: every HA resource of the cluster.
    pub async fn ha_resources(&self) -> Result<Vec<HaResourceEntry>, Error> {
        self.get("/cluster/ha/resources", &[]).await
    }

    /// `POST /cluster/ha/resources`: registers `sid` (`vm:<vmid>`); synchronous.
    pub async fn create_ha_resource(&self, sid: &str, settings: &HaSettings) -> Result<(), Error> {
        let mut form = vec![("sid".to_string(), sid.to_string())];
        form.extend(settings.form());
        let _: serde_json::Value = self.post("/cluster/ha/resources", form).await?;
        Ok(())
    }

    /// `PUT /cluster/ha/resources/{sid}`: changes its settings; synchronous.
    pub async fn update_ha_resource(&self, sid: &str, settings: &HaSettings) -> Result<(), Error> {
        let _: serde_json::Value = self
            .put(&path(&["cluster", "ha", "resources", sid]), settings.form())
            .await?;
        Ok(())
    }
}
