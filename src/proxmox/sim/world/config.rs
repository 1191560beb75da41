//! VM config semantics: which keys exist, how values are validated and normalised
//! (MACs, tags, drives), pending changes on running VMs, JSON typing and the digest.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Power, World};
use crate::proxmox::propstring::{
    DriveSpec, NetDevice, PropertyString, format_size, is_drive_key, net_index,
};
use crate::proxmox::sha256;
use crate::proxmox::sim::error::PveError;
use crate::proxmox::tags;

/// Plain config keys the simulator accepts.
const KEYS: &[&str] = &[
    "name",
    "description",
    "cores",
    "sockets",
    "vcpus",
    "memory",
    "balloon",
    "shares",
    "cpu",
    "cpulimit",
    "cpuunits",
    "numa",
    "agent",
    "onboot",
    "startup",
    "protection",
    "template",
    "boot",
    "bootdisk",
    "tags",
    "ostype",
    "machine",
    "bios",
    "scsihw",
    "smbios1",
    "vmgenid",
    "meta",
    "hotplug",
    "kvm",
    "acpi",
    "tablet",
    "localtime",
    "hookscript",
    "vga",
    "args",
    "affinity",
    "watchdog",
    "rng0",
    "efidisk0",
    "tpmstate0",
];

/// Built-in cloud-init keys (always applied at once, even while running).
const CLOUD_INIT_KEYS: &[&str] = &[
    "ciuser",
    "cipassword",
    "citype",
    "cicustom",
    "sshkeys",
    "nameserver",
    "searchdomain",
    "ciupgrade",
];

/// Integer keys (numbers, not strings, in `GET config`), besides the booleans.
const INT_KEYS: &[&str] = &["cores", "sockets", "vcpus", "balloon", "shares", "cpuunits"];

/// Boolean keys (0/1, also numbers in `GET config`).
const BOOL_KEYS: &[&str] = &[
    "numa",
    "onboot",
    "template",
    "protection",
    "kvm",
    "acpi",
    "tablet",
    "localtime",
    "ciupgrade",
];

/// Keys applied at once even while the VM runs ("fast plug").
const FAST_PLUG: &[&str] = &[
    "name",
    "description",
    "tags",
    "onboot",
    "protection",
    "startup",
    "shares",
    "hookscript",
    "lock",
];

/// Whether `key` is a config key (plain or indexed).
pub fn is_known_config_key(key: &str) -> bool {
    KEYS.contains(&key)
        || CLOUD_INIT_KEYS.contains(&key)
        || is_drive_key(key)
        || net_index(key).is_some()
        || indexed(key, "ipconfig", 31)
        || indexed(key, "unused", 255)
        || indexed(key, "serial", 3)
        || indexed(key, "usb", 4)
        || indexed(key, "hostpci", 15)
        || indexed(key, "numa", 7)
}

/// `hostpci0` … `hostpci15`.
pub(super) fn is_hostpci_key(key: &str) -> bool {
    indexed(key, "hostpci", 15)
}

fn indexed(key: &str, prefix: &str, max: u32) -> bool {
    key.strip_prefix(prefix)
        .filter(|n| {
            !n.is_empty()
                && n.bytes().all(|b| b.is_ascii_digit())
                && !(n.len() > 1 && n.starts_with('0'))
        })
        .and_then(|n| n.parse::<u32>().ok())
        .is_some_and(|n| n <= max)
}

/// `memory` in MiB (`4096` or `current=4096`; PVE's default 512).
pub fn memory_mib(config: &BTreeMap<String, String>) -> u64 {
    config
        .get("memory")
        .and_then(|m| {
            PropertyString::parse(m, Some("current"))
                .get("current")?
                .parse()
                .ok()
        })
        .unwrap_or(512)
}

/// A value with PVE's JSON type: integers for integer keys, strings otherwise.
pub fn json_value(key: &str, value: &str) -> Value {
    if (INT_KEYS.contains(&key) || BOOL_KEYS.contains(&key))
        && let Ok(n) = value.parse::<i64>()
    {
        return Value::from(n);
    }
    Value::from(value)
}

/// The config digest: a hash of the current and pending sections (PVE uses SHA-1 of the
/// file; clients only compare it).
pub fn digest(vm: &super::Vm) -> String {
    let mut text = String::new();
    for (k, v) in &vm.config {
        text.push_str(&format!("{k}: {v}\n"));
    }
    text.push_str("[PENDING]\n");
    for (k, v) in &vm.pending {
        text.push_str(&format!("{k}: {v}\n"));
    }
    for k in &vm.pending_delete {
        text.push_str(&format!("delete: {k}\n"));
    }
    sha256::hex(&sha256::digest(text.as_bytes()))[..40].to_string()
}

/// A requested config change (POST/PUT `config`).
#[derive(Clone, Debug, Default)]
pub struct ConfigChange {
    /// Keys to set (raw values from the request).
    pub set: BTreeMap<String, String>,
    /// Keys to delete.
    pub delete: Vec<String>,
    /// Pending keys to revert.
    pub revert: Vec<String>,
    /// Required digest.
    pub digest: Option<String>,
    /// Ignore the config lock.
    pub skiplock: bool,
}

/// PVE's `dns-name` format: dot-separated labels of letters, digits and inner hyphens.
pub fn is_dns_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b.len() <= 63
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        })
}

/// Validates one value; the error is the per-parameter text of a 400.
fn check_value(key: &str, value: &str) -> Result<(), String> {
    let int = |min: i64| match value.parse::<i64>() {
        Ok(n) if n >= min => Ok(()),
        Ok(_) => Err(format!("value must have a minimum value of {min}")),
        Err(_) => Err(format!("type check ('integer') failed - got '{value}'")),
    };
    match key {
        "name" if !is_dns_name(value) => Err("value does not look like a valid DNS name".into()),
        "cores" | "sockets" | "vcpus" => int(1),
        "balloon" | "shares" | "cpuunits" => int(0),
        "memory" => {
            let mib = PropertyString::parse(value, Some("current"))
                .get("current")
                .map(str::to_string)
                .unwrap_or_default();
            match mib.parse::<i64>() {
                Ok(n) if n >= 16 => Ok(()),
                Ok(_) => Err("value must have a minimum value of 16".into()),
                Err(_) => Err(format!("type check ('integer') failed - got '{value}'")),
            }
        }
        k if BOOL_KEYS.contains(&k) && !matches!(value, "0" | "1") => {
            Err(format!("type check ('boolean') failed - got '{value}'"))
        }
        "tags" => tags::normalize(value)
            .map(|_| ())
            .map_err(|_| "invalid characters in tag".to_string()),
        "description" if value.len() > 8192 => Err("value may only be 8192 characters long".into()),
        k if net_index(k).is_some() && NetDevice::parse(value).is_none() => {
            Err("invalid format - unable to parse network options".into())
        }
        k if is_drive_key(k) && DriveSpec::parse(value).is_none() => {
            Err("invalid format - unable to parse drive options".into())
        }
        _ => Ok(()),
    }
}

/// Devices named by `boot: order=a;b`.
fn boot_devices(boot: &str) -> Vec<String> {
    PropertyString::parse(boot, Some("legacy"))
        .get("order")
        .map(|o| {
            o.split([';', ','])
                .filter(|d| !d.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a config change on a running VM takes effect at once.
fn applies_live(key: &str, hotplug: &str) -> bool {
    let allows = |what: &str| hotplug == "1" || hotplug.split(',').any(|h| h.trim() == what);
    FAST_PLUG.contains(&key)
        || CLOUD_INIT_KEYS.contains(&key)
        || indexed(key, "ipconfig", 31)
        || (net_index(key).is_some() && allows("network"))
        || ((is_drive_key(key) || key.starts_with("unused")) && allows("disk"))
        || (key == "memory" && allows("memory"))
        || (key == "vcpus" && allows("cpu"))
}

impl World {
    /// The synchronous checks of `POST/PUT config`, in PVE's order.
    pub fn validate_config_change(
        &self,
        node: &str,
        vmid: u32,
        change: &ConfigChange,
    ) -> Result<(), PveError> {
        if change.set.is_empty() && change.delete.is_empty() && change.revert.is_empty() {
            return Err(PveError::internal("no options specified"));
        }
        let mut errors = BTreeMap::new();
        for (k, v) in &change.set {
            if let Err(e) = check_value(k, v) {
                errors.insert(k.clone(), e);
            }
            if change.delete.contains(k) {
                errors.insert(
                    "delete".into(),
                    format!("you can't use '-{k}' and -delete {k}'"),
                );
            }
        }
        for k in change.delete.iter().chain(&change.revert) {
            if !is_known_config_key(k) {
                errors.insert(
                    "delete".into(),
                    format!("invalid format - value '{k}' does not look like a valid config key"),
                );
            }
        }
        if !errors.is_empty() {
            return Err(PveError::params(errors));
        }
        self.vm_on(node, vmid)?;
        self.check_digest(vmid, change.digest.as_deref())
            .map_err(PveError::internal)?;
        let vm = self.vm_on(node, vmid)?;
        if !change.skiplock {
            self.check_lock(vmid)?;
        }
        let user = self.current_user.split('!').next().unwrap_or_default();
        if let Some((key, _)) = change
            .set
            .iter()
            .find(|(k, v)| is_hostpci_key(k) && super::pci::names_raw_addresses(v))
            .filter(|_| user != "root@pam")
        {
            return Err(PveError::forbidden(format!(
                "Permission check failed (only root can set '{key}' config for non-mapped devices)"
            )));
        }
        let effective = vm.effective_config();
        if let Some(balloon) = change
            .set
            .get("balloon")
            .and_then(|b| b.parse::<u64>().ok())
        {
            let memory = match change.set.get("memory") {
                Some(m) => memory_mib(&[("memory".to_string(), m.clone())].into()),
                None => memory_mib(&effective),
            };
            if balloon > memory {
                return Err(PveError::internal(
                    "balloon value too large (must be smaller than assigned memory)",
                ));
            }
        }
        if let Some(boot) = change.set.get("boot") {
            for dev in boot_devices(boot) {
                let present = change.set.contains_key(&dev)
                    || (effective.contains_key(&dev) && !change.delete.contains(&dev));
                if !present {
                    return Err(PveError::param(
                        "boot",
                        format!("invalid bootorder: device '{dev}' does not exist"),
                    ));
                }
            }
        }
        for (k, v) in &change.set {
            if is_drive_key(k) {
                self.check_drive_volume(node, v)?;
            }
        }
        Ok(())
    }

    /// Fails when the VM's config no longer has the digest a change was based on.
    pub fn check_digest(&self, vmid: u32, expected: Option<&str>) -> Result<(), String> {
        match (expected, self.vms.get(&vmid)) {
            (Some(want), Some(vm)) if want != digest(vm) => {
                Err("checksum mismatch (file change by other user?)".to_string())
            }
            _ => Ok(()),
        }
    }

    /// A drive's storage must exist and an ISO must be there.
    fn check_drive_volume(&self, node: &str, value: &str) -> Result<(), PveError> {
        let Some(drive) = DriveSpec::parse(value) else {
            return Ok(());
        };
        let Some((storage, volname)) = drive.storage_volume() else {
            return Ok(());
        };
        let s = self
            .storages
            .get(storage)
            .filter(|s| s.on_node(node))
            .ok_or_else(|| PveError::internal(format!("storage '{storage}' does not exist")))?;
        let is_new_disk = volname.chars().all(|c| c.is_ascii_digit());
        if !is_new_disk && self.volume(node, &drive.volume).is_none() {
            if drive.is_cdrom() || volname.starts_with("iso/") {
                return Err(PveError::internal(format!(
                    "volume '{}' does not exist",
                    drive.volume
                )));
            }
            return Err(PveError::internal(format!(
                "unable to parse volume ID '{}' on storage '{}'",
                drive.volume, s.id
            )));
        }
        Ok(())
    }

    /// Normalises a value the way PVE stores it (new MACs, sorted tags, ISO sizes).
    fn normalize_value(&mut self, node: &str, key: &str, value: &str) -> String {
        if key == "tags" {
            return tags::normalize(value).unwrap_or_else(|_| value.to_string());
        }
        if key == "description" && !value.ends_with('\n') {
            // PVE stores descriptions as comment lines and reads them back with newlines.
            return format!("{value}\n");
        }
        if key == "memory" {
            return memory_mib(&[("memory".to_string(), value.to_string())].into()).to_string();
        }
        if net_index(key).is_some()
            && let Some(mut nic) = NetDevice::parse(value)
        {
            if nic.mac.is_none() {
                nic.mac = Some(self.new_mac());
            }
            return nic.to_canonical();
        }
        if is_drive_key(key)
            && let Some(mut drive) = DriveSpec::parse(value)
        {
            if drive.is_cdrom()
                && let Some(vol) = self.volume(node, &drive.volume)
            {
                drive.options.insert("size".into(), format_size(vol.size));
            }
            return drive.to_canonical();
        }
        value.to_string()
    }

    /// Applies a validated change (inside the `qmconfig` worker, or inline for PUT):
    /// new disks allocated first (see [`Self::allocate_new_disks`]); everything at once on
    /// a stopped VM; on a running one, hot-pluggable keys at once
    /// and the rest as pending changes for the next start.
    pub fn apply_config_change(&mut self, vmid: u32, change: &ConfigChange) -> Result<(), String> {
        let Some(vm) = self.vms.get(&vmid) else {
            return Err(format!("VM {vmid} does not exist"));
        };
        let node = vm.node.clone();
        let running = vm.power != Power::Stopped;
        let hotplug = vm
            .config
            .get("hotplug")
            .cloned()
            .unwrap_or_else(|| "network,disk,usb".to_string());
        let mut values: Vec<(String, String)> = change
            .set
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        self.allocate_new_disks(vmid, &mut values)?;
        let normalized: Vec<(String, String)> = values
            .into_iter()
            .map(|(k, v)| {
                let v = self.normalize_value(&node, &k, &v);
                (k, v)
            })
            .collect();
        for (key, value) in &normalized {
            if is_drive_key(key) && (!running || applies_live(key, &hotplug)) {
                self.keep_replaced_disk(vmid, key, value);
            }
        }
        let Some(vm) = self.vms.get_mut(&vmid) else {
            return Err(format!("VM {vmid} does not exist"));
        };
        for key in &change.revert {
            vm.pending.remove(key);
            vm.pending_delete.remove(key);
        }
        for (key, value) in normalized {
            vm.pending_delete.remove(&key);
            if !running || applies_live(&key, &hotplug) {
                vm.pending.remove(&key);
                vm.config.insert(key, value);
            } else {
                vm.pending.insert(key, value);
            }
        }
        for key in &change.delete {
            vm.pending.remove(key);
            if !running || applies_live(key, &hotplug) {
                vm.config.remove(key);
            } else if vm.config.contains_key(key) {
                vm.pending_delete.insert(key.clone());
            }
        }
        Ok(())
    }

    /// Applies pending changes (at VM start).
    pub fn apply_pending(&mut self, vmid: u32) {
        if let Some(vm) = self.vms.get_mut(&vmid) {
            for key in std::mem::take(&mut vm.pending_delete) {
                vm.config.remove(&key);
            }
            let pending = std::mem::take(&mut vm.pending);
            vm.config.extend(pending);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values() {
        assert!(is_known_config_key("net31") && !is_known_config_key("net32"));
        assert!(is_known_config_key("ipconfig0") && is_known_config_key("unused3"));
        assert!(!is_known_config_key("bogus") && !is_known_config_key("serial01"));
        assert_eq!(json_value("cores", "4"), Value::from(4));
        assert_eq!(json_value("memory", "4096"), Value::from("4096"));
        assert!(check_value("name", "k8s-cp-1.example").is_ok());
        assert!(check_value("name", "-bad").is_err());
        assert!(check_value("memory", "8").is_err());
        assert!(check_value("onboot", "true").is_err());
        assert!(check_value("tags", "a;b c").is_ok());
        assert!(check_value("tags", "a:b").is_err());
        assert!(check_value("net0", "virtio,bridge=vmbr0").is_ok());
        assert!(check_value("net0", "bogus").is_err());
        assert_eq!(
            boot_devices("order=scsi0;ide2;net0"),
            ["scsi0", "ide2", "net0"]
        );
        assert!(applies_live("net1", "network,disk,usb"));
        assert!(!applies_live("cores", "network,disk,usb"));
        assert!(applies_live("memory", "1"));
    }
}
