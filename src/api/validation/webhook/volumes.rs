//! Rules of `spec.disks.additionalVolumes` (ours: upstream has no data disks). The
//! schema checks each entry's shape and that no drive appears twice; these rules add
//! what Proxmox would refuse only once the VM exists, and on updates what the controller
//! cannot do to a disk that holds data (shrink it, move it, detach it).

use crate::api::field::{Error, Path};
use crate::api::v1alpha2::{AdditionalVolume, CloudInitDrive, ProxmoxMachineSpec};

/// The highest slot of each bus Proxmox VE has (`scsi30`, `virtio15`...).
fn last_slot(bus: &str) -> Option<u32> {
    match bus {
        "ide" => Some(3),
        "sata" => Some(5),
        "scsi" => Some(30),
        "virtio" => Some(15),
        _ => None,
    }
}

/// A drive key split into bus and slot, when it is one Proxmox has.
fn drive(key: &str) -> Option<(&str, u32)> {
    let split = key.find(|c: char| c.is_ascii_digit())?;
    let (bus, digits) = key.split_at(split);
    if digits.len() > 1 && digits.starts_with('0') {
        return None;
    }
    let slot = digits.parse().ok()?;
    (slot <= last_slot(bus)?).then_some((bus, slot))
}

fn volumes_path(spec_path: &Path) -> Path {
    spec_path.child("disks").child("additionalVolumes")
}

/// Each volume on a drive that exists, is free for it, and supports its options.
pub fn volume_errors(spec: &ProxmoxMachineSpec, spec_path: &Path) -> Vec<Error> {
    let Some(disks) = &spec.disks else {
        return Vec::new();
    };
    let boot = disks.boot_volume.as_ref().map(|b| b.disk.as_str());
    let seed = CloudInitDrive::key(spec.cloud_init_drive.as_ref());
    let mut errors = Vec::new();
    for (i, volume) in disks.additional_volumes.iter().enumerate() {
        let path = volumes_path(spec_path).index(i);
        let key = volume.disk.as_str();
        let Some((bus, _)) = drive(key) else {
            errors.push(Error::invalid(
                path.child("disk"),
                key,
                "no such drive: slots are 0-3 on ide, 0-5 on sata, 0-30 on scsi and 0-15 on virtio",
            ));
            continue;
        };
        if boot == Some(key) {
            errors.push(Error::invalid(
                path.child("disk"),
                key,
                "this is the boot volume (disks.bootVolume)",
            ));
        }
        if seed == key {
            errors.push(Error::invalid(
                path.child("disk"),
                key,
                "the bootstrap seed's CD-ROM is on this drive (cloudInitDrive)",
            ));
        }
        if volume.ssd == Some(true) && bus == "virtio" {
            errors.push(Error::invalid(
                path.child("ssd"),
                true,
                "virtio drives cannot be presented as SSDs: use a scsi or sata drive",
            ));
        }
        if volume.io_thread == Some(true) && !matches!(bus, "scsi" | "virtio") {
            errors.push(Error::invalid(
                path.child("ioThread"),
                true,
                "I/O threads need a scsi or virtio drive",
            ));
        }
    }
    errors
}

/// Once the VM exists (its VMID is recorded), a volume may only grow.
pub fn volume_update_errors(
    new: &ProxmoxMachineSpec,
    old: &ProxmoxMachineSpec,
    spec_path: &Path,
) -> Vec<Error> {
    if old.virtual_machine_id.is_none() {
        return Vec::new();
    }
    let volumes = |spec: &ProxmoxMachineSpec| -> Vec<AdditionalVolume> {
        spec.disks
            .as_ref()
            .map(|d| d.additional_volumes.clone())
            .unwrap_or_default()
    };
    let (new_volumes, old_volumes) = (volumes(new), volumes(old));
    let path = volumes_path(spec_path);
    let mut errors = Vec::new();
    for was in &old_volumes {
        let Some((i, now)) = new_volumes
            .iter()
            .enumerate()
            .find(|(_, v)| v.disk == was.disk)
        else {
            errors.push(Error::forbidden(
                path.clone(),
                format!(
                    "{} cannot be removed once the VM exists: its disk holds data and is never detached; replace the machine instead",
                    was.disk
                ),
            ));
            continue;
        };
        if now.size_gb < was.size_gb {
            errors.push(Error::invalid(
                path.index(i).child("sizeGb"),
                now.size_gb,
                format!(
                    "volumes cannot shrink (was {}): Proxmox VE only grows disks",
                    was.size_gb
                ),
            ));
        }
        let resized = AdditionalVolume {
            size_gb: was.size_gb,
            ..now.clone()
        };
        if resized != *was {
            errors.push(Error::forbidden(
                path.index(i),
                "only sizeGb of a volume can change once the VM exists",
            ));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drives_are_those_proxmox_has() {
        assert_eq!(drive("scsi30"), Some(("scsi", 30)));
        assert_eq!(drive("virtio15"), Some(("virtio", 15)));
        assert_eq!(drive("ide3"), Some(("ide", 3)));
        assert_eq!(drive("scsi31"), None);
        assert_eq!(drive("sata6"), None);
        assert_eq!(drive("nvme0"), None);
        assert_eq!(drive("scsi"), None);
        assert_eq!(drive("scsi01"), None);
    }
}
