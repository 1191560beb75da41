//! New disks from a config change: a drive set to `<storage>:<size in GiB>` gets a fresh
//! volume (`vm-<vmid>-disk-<n>`) the way qemu-server's `create_disks` allocates it, and a
//! disk it replaces on that drive is kept as `unusedN`, never freed (PVE's behaviour, which
//! is what makes a repeated creation leave an "unused disk" behind).

use super::World;
use crate::proxmox::propstring::{DriveSpec, format_size, is_drive_key};

/// The size of a new-disk request (`local-lvm:32`), in GiB.
fn requested_gib(drive: &DriveSpec) -> Option<u64> {
    let (_, volname) = drive.storage_volume()?;
    if drive.is_cdrom() || volname.is_empty() || !volname.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    volname.parse().ok()
}

impl World {
    /// Allocates the volumes of the new-disk requests in `set` (rewriting each value to the
    /// volume it got) for `vmid` on its node. All or nothing: on an error, the volumes
    /// allocated so far are freed again.
    pub(super) fn allocate_new_disks(
        &mut self,
        vmid: u32,
        set: &mut [(String, String)],
    ) -> Result<(), String> {
        let Some(node) = self.vms.get(&vmid).map(|vm| vm.node.clone()) else {
            return Err(format!("VM {vmid} does not exist"));
        };
        let mut allocated: Vec<(String, String, String)> = Vec::new();
        for (key, value) in set.iter_mut() {
            let Some(mut drive) = DriveSpec::parse(value).filter(|_| is_drive_key(key)) else {
                continue;
            };
            let Some(gib) = requested_gib(&drive) else {
                continue;
            };
            match self.allocate_disk(&node, vmid, &mut drive, gib) {
                Ok(volume) => {
                    allocated.push(volume);
                    *value = drive.to_canonical();
                }
                Err(e) => {
                    for (storage, scope, volname) in allocated {
                        if let Some(vols) = self
                            .storages
                            .get_mut(&storage)
                            .and_then(|s| s.volumes.get_mut(&scope))
                        {
                            vols.remove(&volname);
                        }
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// One new volume of `gib` GiB for `drive` (whose volume and size it rewrites):
    /// (storage, scope, volname).
    fn allocate_disk(
        &mut self,
        node: &str,
        vmid: u32,
        drive: &mut DriveSpec,
        gib: u64,
    ) -> Result<(String, String, String), String> {
        let (storage, _) = drive.storage_volume().unwrap_or_default();
        let storage = storage.to_string();
        let Some(s) = self.storages.get(&storage) else {
            return Err(format!("storage '{storage}' does not exist"));
        };
        let scope = s.scope(node);
        let file_based = s.is_file_based();
        let format = drive
            .options
            .get("format")
            .cloned()
            .unwrap_or_else(|| if file_based { "qcow2" } else { "raw" }.to_string());
        if !file_based && format != "raw" {
            return Err(format!("unsupported format '{format}'"));
        }
        let bytes = gib << 30;
        self.check_space(&storage, &scope, bytes)?;
        let mut volname = self.next_disk_volname(&storage, &scope, vmid);
        if file_based && let Some(stem) = volname.strip_suffix(".qcow2") {
            volname = format!("{stem}.{format}");
        }
        self.add_volume(&storage, &scope, &volname, bytes, Some(vmid), "images");
        drive.volume = format!("{storage}:{volname}");
        drive.options.remove("format");
        drive.options.insert("size".into(), format_size(bytes));
        Ok((storage, scope, volname))
    }

    /// Keeps the disk `key` holds as the VM's first free `unusedN` when `replacement` puts
    /// another volume on the drive.
    pub(super) fn keep_replaced_disk(&mut self, vmid: u32, key: &str, replacement: &str) {
        let Some(vm) = self.vms.get_mut(&vmid) else {
            return;
        };
        let old = vm
            .config
            .get(key)
            .and_then(|v| DriveSpec::parse(v))
            .filter(|d| !d.is_cdrom() && d.storage_volume().is_some());
        let new = DriveSpec::parse(replacement);
        let Some(old) = old.filter(|o| new.as_ref().is_none_or(|n| n.volume != o.volume)) else {
            return;
        };
        if let Some(n) = (0..256).find(|n| !vm.config.contains_key(&format!("unused{n}"))) {
            vm.config.insert(format!("unused{n}"), old.volume);
        }
    }
}
