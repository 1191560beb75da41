//! Deletion: stop the VM and wait, destroy it and wait, delete the seed, release the
//! IP claims, drop the node location, remove the finalizer — each step checking first,
//! so a repeated pass picks up where the last one stopped.
//!
//! A VM under the recorded VMID that is not ours (another name) is left alone; a clone
//! still running onto it is waited for. Claims are released only after the VM is gone,
//! so an address is never handed out while a VM still uses it.

use std::collections::BTreeMap;

use super::bootstrap::attached_seed;
use super::phase::Phase;
use super::vm::Located;
use super::{Failure, Flow, Pass, Step, addresses};
use crate::api::v1alpha2::ProxmoxMachine;
use crate::controller::action::Action;
use crate::controller::handle::{Handle, remove_finalizer};
use crate::controller::names::MACHINE_FINALIZER;
use crate::controller::seams::{InfraStore, Management, ManagementError};
use crate::proxmox::ErrorKind;
use crate::proxmox::types::DeleteOptions;

/// One deletion pass.
pub(super) async fn run<S: InfraStore, M: Management>(pass: &mut Pass<'_, S, M>) -> Step {
    // `Provisioned` means the seed was already deleted after the node joined.
    let seed_gone = pass.h.phase() == Phase::Provisioned;
    if pass.h.phase() != Phase::Deleting {
        pass.h.set_phase(Phase::Deleting, "", pass.now);
    }
    // A back-off window from provisioning does not delay the deletion.
    pass.h.status.retry_after = None;
    if let Some(action) = pass.track_task().await? {
        return Ok(Flow::Wait(action));
    }
    if let Some(vmid) = pass.vmid().ok().flatten() {
        let mut seed_removed = false;
        match pass.locate(vmid).await? {
            Located::Ours { node, config } => {
                if let Some(lock) = config.lock() {
                    return Err(Failure::Blocked(
                        format!("VM {vmid} is locked ({lock})"),
                        pass.r.config.poll,
                    ));
                }
                if let Some(flow) = pass.destroy(&node, vmid).await? {
                    return Ok(flow);
                }
                if let Some((_, volid)) = attached_seed(&config, vmid) {
                    if let Some(flow) = pass.delete_seed(&node, &volid).await? {
                        return Ok(flow);
                    }
                    seed_removed = true;
                }
            }
            Located::Cloning => return Ok(Flow::Wait(Action::Requeue(pass.r.config.poll))),
            Located::Foreign | Located::Absent => {}
        }
        // A seed may have been uploaded without being attached (or survived the VM).
        if !seed_removed
            && !seed_gone
            && pass.h.status.bootstrap_data_provided == Some(true)
            && let Some(node) = pass.node()
        {
            let volid = pass.expected_seed(&node, vmid).await?;
            if let Some(flow) = pass.delete_seed(&node, &volid).await? {
                return Ok(flow);
            }
        }
        pass.h.status.bootstrap_data_provided = None;
    }
    release_claims(&pass.r.mgmt, &pass.h).await?;
    pass.record_location(None).await?;
    pass.r.reserve_vmid(pass.h.uid(), None);
    pass.r.forget_placement(pass.h.uid());
    pass.h
        .write_spec(&pass.r.store, |o| {
            remove_finalizer(&mut o.metadata, MACHINE_FINALIZER)
        })
        .await?;
    Ok(Flow::Wait(Action::AwaitChange))
}

impl<S: InfraStore, M: Management> Pass<'_, S, M> {
    /// Stops (always: stopping a stopped VM is a no-op) and destroys the VM. `Some`
    /// when the pass has to wait.
    async fn destroy(&mut self, node: &str, vmid: u32) -> Result<Option<Flow>, Failure> {
        let client = self.client().await?;
        if self.finished.as_deref() != Some("qmstop") {
            let upid = client.stop_vm(node, vmid).await?;
            if let Some(flow) = self.settle(upid, "stop", false).await? {
                return Ok(Some(flow));
            }
        }
        let options = DeleteOptions {
            purge: true,
            destroy_unreferenced_disks: true,
            skiplock: false,
        };
        let upid = match client.delete_vm(node, vmid, options).await {
            Ok(upid) => upid,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        self.settle(upid, "destroy", true).await
    }
}

/// Deletes every claim the ProxmoxMachine controls (found by owner, so claims of
/// devices since removed from the spec go too).
pub(super) async fn release_claims<M: Management>(
    mgmt: &M,
    h: &Handle<ProxmoxMachine>,
) -> Result<(), ManagementError> {
    let claims = mgmt.list_claims(h.namespace(), &BTreeMap::new()).await?;
    for claim in claims.iter().filter(|c| addresses::owned_by(c, &h.obj)) {
        let name = claim.metadata.name.clone().unwrap_or_default();
        mgmt.delete_claim(h.namespace(), &name).await?;
    }
    Ok(())
}
