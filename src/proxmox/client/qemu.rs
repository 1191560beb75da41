//! QEMU VM calls.

use super::{Client, Error, path, vm_path};
use crate::proxmox::propstring::SizeChange;
use crate::proxmox::types::{
    CloneRequest, ConfigUpdate, ContainerStatus, DeleteOptions, PowerAction, VmConfig, VmStatus,
};
use crate::proxmox::upid::Upid;

impl Client {
    /// `GET /nodes/{node}/qemu`: every VM on the node.
    pub async fn list_vms(&self, node: &str) -> Result<Vec<VmStatus>, Error> {
        self.get(&path(&["nodes", node, "qemu"]), &[]).await
    }

    /// `GET /nodes/{node}/lxc`: containers count against a node's memory too.
    pub async fn list_containers(&self, node: &str) -> Result<Vec<ContainerStatus>, Error> {
        self.get(&path(&["nodes", node, "lxc"]), &[]).await
    }

    /// `GET /nodes/{node}/qemu/{vmid}/status/current`.
    pub async fn vm_status(&self, node: &str, vmid: u32) -> Result<VmStatus, Error> {
        self.get(&vm_path(node, vmid, &["status", "current"]), &[])
            .await
    }

    /// `GET .../config`: the config with pending changes applied.
    pub async fn vm_config(&self, node: &str, vmid: u32) -> Result<VmConfig, Error> {
        self.get(&vm_path(node, vmid, &["config"]), &[]).await
    }

    /// `GET .../config?current=1`: the config without pending changes.
    pub async fn vm_config_current(&self, node: &str, vmid: u32) -> Result<VmConfig, Error> {
        let query = [("current".to_string(), "1".to_string())];
        self.get(&vm_path(node, vmid, &["config"]), &query).await
    }

    /// `POST .../config`: applies the change in a `qmconfig` task and returns its UPID.
    /// Lock and digest are checked synchronously (HTTP 500 `VM is locked (...)`).
    pub async fn update_vm_config(
        &self,
        node: &str,
        vmid: u32,
        update: &ConfigUpdate,
    ) -> Result<Upid, Error> {
        self.post(&vm_path(node, vmid, &["config"]), update.params())
            .await
    }

    /// `PUT .../config`: applies the change inside the request.
    pub async fn update_vm_config_sync(
        &self,
        node: &str,
        vmid: u32,
        update: &ConfigUpdate,
    ) -> Result<(), Error> {
        let _: serde_json::Value = self
            .put(&vm_path(node, vmid, &["config"]), update.params())
            .await?;
        Ok(())
    }

    /// `POST .../clone`: starts a `qmclone` task (its id is the *source* vmid). The
    /// target exists at once as a locked placeholder.
    pub async fn clone_vm(
        &self,
        node: &str,
        vmid: u32,
        request: &CloneRequest,
    ) -> Result<Upid, Error> {
        self.post(&vm_path(node, vmid, &["clone"]), request.params())
            .await
    }

    /// `PUT .../resize`: PVE 8+ returns a `resize` task, PVE 7 `null` (done in-request).
    pub async fn resize_disk(
        &self,
        node: &str,
        vmid: u32,
        disk: &str,
        size: SizeChange,
    ) -> Result<Option<Upid>, Error> {
        let form = vec![
            ("disk".to_string(), disk.to_string()),
            ("size".to_string(), size.to_string()),
        ];
        self.put(&vm_path(node, vmid, &["resize"]), form).await
    }

    /// `POST .../status/{action}`: starts the power task.
    pub async fn vm_power(
        &self,
        node: &str,
        vmid: u32,
        action: PowerAction,
    ) -> Result<Upid, Error> {
        self.post(
            &vm_path(node, vmid, &["status", action.as_str()]),
            Vec::new(),
        )
        .await
    }

    /// Starts the VM (`qmstart`). The task ends when QEMU runs, not when the guest booted.
    pub async fn start_vm(&self, node: &str, vmid: u32) -> Result<Upid, Error> {
        self.vm_power(node, vmid, PowerAction::Start).await
    }

    /// Hard-stops the VM (`qmstop`).
    pub async fn stop_vm(&self, node: &str, vmid: u32) -> Result<Upid, Error> {
        self.vm_power(node, vmid, PowerAction::Stop).await
    }

    /// Asks the guest to power off (`qmshutdown`).
    pub async fn shutdown_vm(&self, node: &str, vmid: u32) -> Result<Upid, Error> {
        self.vm_power(node, vmid, PowerAction::Shutdown).await
    }

    /// Resumes a paused VM (`qmresume`).
    pub async fn resume_vm(&self, node: &str, vmid: u32) -> Result<Upid, Error> {
        self.vm_power(node, vmid, PowerAction::Resume).await
    }

    /// `DELETE /nodes/{node}/qemu/{vmid}`: starts `qmdestroy`. A running VM is refused
    /// synchronously (`VM N is running - destroy failed`): stop it and wait first.
    pub async fn delete_vm(
        &self,
        node: &str,
        vmid: u32,
        options: DeleteOptions,
    ) -> Result<Upid, Error> {
        self.delete(&vm_path(node, vmid, &[]), &options.params())
            .await
    }
}
