//! Data disks, `spec.disks.additionalVolumes`: created before the first start (and on a
//! running VM when the spec adds one), grown when the spec grows them.
//!
//! Proxmox has no disk ids: a disk is whatever volume a drive key (`scsi1`) holds, so the
//! drive key is the identity. A drive that holds a disk is that volume; a free drive gets a
//! new one. Creating twice would be the only way to duplicate a disk (the second
//! allocation replaces the first, which PVE keeps as an `unusedN` disk), and the creation
//! is guarded against it: it is sent with the digest of the config it was planned on, so
//! a repeated creation — a pass killed after sending it, a second controller — is refused
//! by PVE once the first has changed the config, and the next pass plans again on the
//! config that now has the disk. Growing is an absolute resize, idempotent by nature.

use super::phase::Phase;
use super::{Failure, Flow, Pass, Step};
use crate::api::v1alpha2::{AdditionalVolume, ProxmoxMachineSpec};
use crate::controller::seams::{InfraStore, Management};
use crate::proxmox::propstring::{PropertyString, SizeChange};
use crate::proxmox::types::{ConfigUpdate, VmConfig};

/// What the VM lacks of its volumes.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct VolumePlan {
    /// New disks (`scsi1: local-lvm:32,discard=on`), in one change.
    pub create: ConfigUpdate,
    /// Drives to grow, to a size in bytes.
    pub grow: Vec<(String, u64)>,
}

fn bytes(gib: i32) -> u64 {
    u64::try_from(gib).unwrap_or(0) << 30
}

/// The new-disk request PVE allocates a volume for: `<storage>:<GiB>` and the drive's
/// options.
fn new_disk(volume: &AdditionalVolume, storage: &str) -> String {
    let mut drive = PropertyString {
        leading: Some(format!("{storage}:{}", volume.size_gb.max(1))),
        options: Default::default(),
    };
    let mut flag = |key: &str, on: Option<bool>, value: &str| {
        if on == Some(true) {
            drive.options.insert(key.to_string(), value.to_string());
        }
    };
    flag("discard", volume.discard, "on");
    flag("iothread", volume.io_thread, "1");
    flag("ssd", volume.ssd, "1");
    if let Some(format) = &volume.format {
        drive.options.insert("format".into(), format.clone());
    }
    drive.to_canonical()
}

/// The difference between the spec's volumes and the VM's drives. A drive holding a
/// CD-ROM cannot take a volume (a spec problem).
pub(super) fn plan(spec: &ProxmoxMachineSpec, config: &VmConfig) -> Result<VolumePlan, String> {
    let volumes = spec.disks.iter().flat_map(|d| &d.additional_volumes);
    let default_storage = spec.storage.clone().or_else(|| {
        let (_, boot) = config.boot_disk()?;
        Some(boot.storage_volume()?.0.to_string())
    });
    let mut plan = VolumePlan::default();
    for volume in volumes {
        let key = volume.disk.as_str();
        match config.drive(key) {
            Some(drive) if drive.is_cdrom() => {
                return Err(format!(
                    "{key} holds a CD-ROM ({}), not a disk: choose another drive for this volume",
                    drive.volume
                ));
            }
            Some(drive) => {
                let wanted = bytes(volume.size_gb);
                if drive.size_bytes().is_some_and(|size| size < wanted) {
                    plan.grow.push((key.to_string(), wanted));
                }
            }
            None => {
                let storage = volume
                    .storage
                    .clone()
                    .or_else(|| default_storage.clone())
                    .ok_or_else(|| {
                        format!(
                            "{key} needs a storage: set its storage (the VM has no boot disk to take one from)"
                        )
                    })?;
                plan.create = std::mem::take(&mut plan.create).set(key, new_disk(volume, &storage));
            }
        }
    }
    Ok(plan)
}

impl<S: InfraStore, M: Management> Pass<'_, S, M> {
    /// Brings the VM's data disks to the spec; `Some(wait)` while a task runs.
    pub(super) async fn reconcile_volumes(&mut self) -> Result<Option<Flow>, Failure> {
        if self
            .h
            .obj
            .spec
            .disks
            .as_ref()
            .is_none_or(|d| d.additional_volumes.is_empty())
        {
            return Ok(None);
        }
        let fresh = self.vm.is_none();
        let (vmid, node, config) = self.vm_config().await?;
        let client = self.client().await?;
        // Read in this step, for the digest: the pass's copy may carry changes mirrored
        // locally.
        let config = if fresh {
            config
        } else {
            client.vm_config(&node, vmid).await?
        };
        let plan = plan(&self.h.obj.spec, &config).map_err(Failure::Terminal)?;
        if !plan.create.is_empty() {
            let Some(digest) = config.digest() else {
                return Err(Failure::Blocked(
                    format!(
                        "Proxmox VE sent VM {vmid}'s config without a digest: disks are only created against one"
                    ),
                    self.r.config.poll,
                ));
            };
            let upid = client
                .update_vm_config(&node, vmid, &plan.create.clone().digest(digest))
                .await?;
            self.vm = None;
            if let Some(flow) = self.settle(upid, "disk creation", false).await? {
                return Ok(Some(flow));
            }
        }
        for (disk, size) in &plan.grow {
            let upid = client
                .resize_disk(&node, vmid, disk, SizeChange::Absolute(*size))
                .await?;
            self.vm = None;
            if let Some(upid) = upid
                && let Some(flow) = self.settle(upid, "disk resize", false).await?
            {
                return Ok(Some(flow));
            }
        }
        Ok(None)
    }

    /// Phase `Provisioned`: volumes the spec added or grew since are applied to the
    /// running VM; nothing else is left to do. Proxmox is asked only when the machine just
    /// got here, its spec changed since the phase was recorded, or the last pass had a
    /// problem: a provisioned machine's passes cost nothing otherwise.
    pub(super) async fn step_provisioned(&mut self) -> Step {
        let idle = Flow::Wait(crate::controller::action::Action::AwaitChange);
        if self.found_in == Phase::Provisioned && self.h.phase_settled() {
            return Ok(idle);
        }
        if let Some(flow) = self.reconcile_volumes().await? {
            return Ok(flow);
        }
        // Recorded for this generation: the next pass is idle until the spec changes.
        self.h.set_phase(Phase::Provisioned, "", self.now);
        Ok(idle)
    }

    /// The volumes, then on to the addresses (phase `WaitingForDiskReconciliation`).
    pub(super) async fn volumes_then_addresses(&mut self) -> Step {
        Ok(self
            .reconcile_volumes()
            .await?
            .unwrap_or(Flow::Next(Phase::AllocatingAddresses)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::v1alpha2::Storage;
    use serde_json::json;

    fn config() -> VmConfig {
        serde_json::from_value(json!({
            "boot": "order=scsi0;ide2;net0",
            "scsi0": "ceph:vm-101-disk-0,size=32G",
            "scsi1": "ceph:vm-101-disk-1,size=10G",
            "ide2": "local:iso/seed.iso,media=cdrom",
            "digest": "abc"
        }))
        .expect("config")
    }

    fn spec(volumes: Vec<AdditionalVolume>) -> ProxmoxMachineSpec {
        ProxmoxMachineSpec {
            disks: Some(Storage {
                boot_volume: None,
                additional_volumes: volumes,
            }),
            ..ProxmoxMachineSpec::default()
        }
    }

    fn volume(disk: &str, size_gb: i32) -> AdditionalVolume {
        AdditionalVolume {
            disk: disk.into(),
            size_gb,
            ..AdditionalVolume::default()
        }
    }

    #[test]
    fn free_drives_get_new_disks_on_the_boot_storage_and_smaller_ones_grow() {
        let mut fast = volume("virtio0", 100);
        fast.storage = Some("local-lvm".into());
        fast.discard = Some(true);
        fast.io_thread = Some(true);
        let mut ssd = volume("sata1", 5);
        ssd.ssd = Some(true);
        ssd.format = Some("raw".into());
        let p = plan(
            &spec(vec![volume("scsi1", 20), fast, ssd, volume("scsi0", 8)]),
            &config(),
        )
        .expect("plan");
        assert_eq!(
            p.create.set["virtio0"],
            "local-lvm:100,discard=on,iothread=1"
        );
        assert_eq!(p.create.set["sata1"], "ceph:5,format=raw,ssd=1");
        assert_eq!(p.create.set.len(), 2);
        // scsi0 is larger than asked: never shrunk.
        assert_eq!(p.grow, vec![("scsi1".to_string(), 20 << 30)]);
    }

    #[test]
    fn the_machines_storage_wins_and_a_cdrom_drive_is_refused() {
        let mut s = spec(vec![volume("scsi2", 1)]);
        s.storage = Some("nvme".into());
        assert_eq!(
            plan(&s, &config()).expect("plan").create.set["scsi2"],
            "nvme:1"
        );
        let refused = plan(&spec(vec![volume("ide2", 1)]), &config()).expect_err("cdrom");
        assert!(refused.contains("ide2 holds a CD-ROM"), "{refused}");
        let done = plan(&spec(vec![volume("scsi1", 10)]), &config()).expect("plan");
        assert_eq!(done, VolumePlan::default());
    }
}
