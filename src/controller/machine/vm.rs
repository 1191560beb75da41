//! Finding the machine's VM by its recorded VMID and deciding whether it is ours.
//!
//! A VM is ours when its name is the machine's name. A VM under our VMID with another
//! name belongs to someone else (the id was taken between our choice and our clone):
//! it is never touched, the VMID is forgotten and a new one chosen. A VM still locked by
//! a clone is waited for (its name appears only as the clone proceeds).

use super::phase::Phase;
use super::{Failure, Pass};
use crate::controller::seams::{InfraStore, Management};
use crate::proxmox::types::{ResourceType, VmConfig};

/// What was found under the VMID.
pub(super) enum Located {
    /// Our VM, on `node`, with its config.
    Ours { node: String, config: VmConfig },
    /// A clone onto the id is still running.
    Cloning,
    /// Someone else's VM (or a template).
    Foreign,
    /// Nothing.
    Absent,
}

impl<S: InfraStore, M: Management> Pass<'_, S, M> {
    fn classify(&self, node: String, config: VmConfig) -> Located {
        if config.lock().as_deref() == Some("clone") {
            return Located::Cloning;
        }
        match config.name() {
            _ if config.is_template() => Located::Foreign,
            Some(name) if name == self.h.name() => Located::Ours { node, config },
            // A clone's placeholder has no name until the clone writes the config.
            None => Located::Cloning,
            Some(_) => Located::Foreign,
        }
    }

    /// Looks the VMID up on the recorded node, else anywhere in the cluster.
    pub(super) async fn locate(&mut self, vmid: u32) -> Result<Located, Failure> {
        let client = self.client().await?;
        if let Some(node) = self.node() {
            match client.vm_config(&node, vmid).await {
                Ok(config) => return Ok(self.classify(node, config)),
                Err(e) if super::not_found(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let resources = client.cluster_resources(Some(ResourceType::Vm)).await?;
        let Some(node) = resources
            .iter()
            .find(|r| r.vmid == Some(vmid) && r.kind == "qemu")
            .and_then(|r| r.node.clone())
        else {
            return Ok(Located::Absent);
        };
        match client.vm_config(&node, vmid).await {
            Ok(config) => Ok(self.classify(node, config)),
            // Moved or deleted between the two calls: look again next pass.
            Err(e) if super::not_found(&e) => Ok(Located::Cloning),
            Err(e) => Err(e.into()),
        }
    }

    /// The VM's config, read once per pass.
    pub(super) async fn vm_config(&mut self) -> Result<(u32, String, VmConfig), Failure> {
        let vmid = self
            .vmid()?
            .ok_or_else(|| Failure::Terminal("the machine has no VM".into()))?;
        if let (Some(config), Some(node)) = (&self.vm, self.node()) {
            return Ok((vmid, node, config.clone()));
        }
        match self.locate(vmid).await? {
            Located::Ours { node, config } => {
                self.h.status.proxmox_node = Some(node.clone());
                self.vm = Some(config.clone());
                Ok((vmid, node, config))
            }
            Located::Cloning => Err(Failure::Blocked(
                format!("VM {vmid} is still being cloned"),
                self.r.config.poll,
            )),
            Located::Foreign | Located::Absent if !self.h.phase().provisioned() => {
                // Lost before it was provisioned: cloning again creates no duplicate.
                let message = format!("VM {vmid} of this machine no longer exists; recreating it");
                self.h.set_phase(Phase::Cloning, &message, self.now);
                Err(Failure::Blocked(message, std::time::Duration::ZERO))
            }
            Located::Foreign | Located::Absent => Err(Failure::Terminal(format!(
                "VM {vmid} of this machine no longer exists"
            ))),
        }
    }
}
