//! Bootstrap data: render the NoCloud seed (cloud-init or Ignition), upload it as
//! `user-data-<vmid>.iso` to an ISO-capable storage of the VM's node, and attach it as
//! `ide0` (boot order extended, IPv4 tag `ip_net0_<addr>` added) in one synchronous
//! config write. `status.bootstrapDataProvided` is written *before* the upload, so a
//! deletion after a crash knows a seed may exist. Re-running the phase re-uploads
//! (overwriting the same file) and re-attaches; once attached and recorded it is skipped.

use std::time::Instant;

use super::addresses::Claims;
use super::phase::Phase;
use super::{Failure, Flow, Pass, Step, mgmt_failure};
use crate::api::v1alpha2::{CloudInitDrive, ProxmoxMachineSpec};
use crate::controller::render::network::{DeviceInput, IpConfig, build};
use crate::controller::render::{self, Format, SeedInputs};
use crate::controller::seams::{InfraStore, Management};
use crate::management::types::secret_value;
use crate::proxmox::nocloud;
use crate::proxmox::propstring::is_drive_key;
use crate::proxmox::types::{ConfigUpdate, PowerState, VmConfig};
use crate::proxmox::{self, ErrorKind};

/// The drive the seed goes on (`spec.cloudInitDrive`, `ide0` by default).
pub(super) fn seed_drive(spec: &ProxmoxMachineSpec) -> String {
    CloudInitDrive::key(spec.cloud_init_drive.as_ref())
}

/// The seed's file name.
pub(super) fn iso_name(vmid: u32) -> String {
    format!("user-data-{vmid}.iso")
}

/// The seed's volume id on `storage`.
pub(super) fn iso_volid(storage: &str, vmid: u32) -> String {
    format!("{storage}:iso/{}", iso_name(vmid))
}

/// The drive holding our seed and its volume, on whichever drive it is (the spec's drive may
/// have changed since it was attached).
pub(super) fn attached_seed(config: &VmConfig, vmid: u32) -> Option<(String, String)> {
    let suffix = format!(":iso/{}", iso_name(vmid));
    config.0.keys().filter(|k| is_drive_key(k)).find_map(|key| {
        let drive = config.drive(key)?;
        drive
            .volume
            .ends_with(&suffix)
            .then(|| (key.clone(), drive.volume))
    })
}

/// `order=a;b` with `device` appended; `None` when it is there already or the boot
/// setting is absent or in the legacy form (left alone).
pub(super) fn boot_with(boot: Option<&str>, device: &str) -> Option<String> {
    let order = boot?.trim().strip_prefix("order=")?;
    if order.split(';').any(|d| d.trim() == device) {
        return None;
    }
    Some(if order.is_empty() {
        format!("order={device}")
    } else {
        format!("order={order};{device}")
    })
}

impl<S: InfraStore, M: Management> Pass<'_, S, M> {
    /// Phase `WaitingForBootstrapDataReconciliation`.
    pub(super) async fn step_bootstrap(&mut self) -> Step {
        let (vmid, node, config) = self.vm_config().await?;
        if self.adopting && self.running(&node, vmid).await? {
            // A restored object whose VM already runs: it was bootstrapped long ago.
            return Ok(Flow::Next(Phase::RegisteringHaResource));
        }
        if attached_seed(&config, vmid).is_some()
            && self.h.status.bootstrap_data_provided == Some(true)
        {
            return Ok(Flow::Next(Phase::PoweringOn));
        }
        let (format, user_data) = self.bootstrap_data().await?;
        let resolved = match self.resolved.clone() {
            Some(r) => r,
            None => match self.ensure_claims().await? {
                Claims::Ready(r) => r,
                Claims::Pending(_) => return Ok(Flow::Next(Phase::AllocatingAddresses)),
            },
        };
        let uuid = smbios_uuid(&config).ok_or_else(|| {
            Failure::Blocked(
                format!("VM {vmid} has no SMBIOS UUID yet"),
                self.r.config.poll,
            )
        })?;
        let devices = self.h.obj.spec.network.clone().unwrap_or_default();
        let nets = config.nets();
        let mut inputs = Vec::new();
        for device in &devices.network_devices {
            let n: u32 = device
                .name
                .strip_prefix("net")
                .and_then(|n| n.parse().ok())
                .unwrap_or(u32::MAX);
            let mac = nets.get(&n).and_then(|d| d.mac.clone()).ok_or_else(|| {
                Failure::Blocked(
                    format!("VM {vmid} has no MAC address for {} yet", device.name),
                    self.r.config.poll,
                )
            })?;
            let addresses = resolved
                .iter()
                .filter(|r| r.plan.device == device.name)
                .map(|r| IpConfig {
                    address: r.address,
                    prefix: r.prefix,
                    gateway: r.gateway,
                    metric: r.metric,
                    default: r.plan.default,
                })
                .collect();
            inputs.push(DeviceInput {
                device,
                mac,
                addresses,
                dns: self.dns_servers(&device.dns_servers),
            });
        }
        let network = build(inputs, &devices.vrfs).map_err(|e| Failure::Terminal(e.to_string()))?;
        let zone = self.zone();
        let version = self.machine.as_ref().and_then(|m| m.spec.version.clone());
        let seed = render::seed(&SeedInputs {
            hostname: self.h.name(),
            instance_id: &uuid,
            provider_id_injection: self
                .h
                .obj
                .spec
                .metadata_settings
                .as_ref()
                .and_then(|m| m.provider_id_injection)
                == Some(true),
            kubernetes_version: version.as_deref(),
            node: &node,
            zone: &zone,
            network: &network,
            format,
            user_data: &user_data,
        })
        .map_err(|e| Failure::Terminal(e.to_string()))?;
        let iso = nocloud::write_iso(&seed)
            .map_err(|e| Failure::Error(super::ReconcileError::Retry(e.to_string())))?;
        let storage = self.iso_storage(&node).await?;
        // An upload recorded in taskRef and found finished is not repeated.
        if self.finished.as_deref() != Some("imgcopy") {
            // Recorded first: from now on a seed may exist on Proxmox.
            self.h.status.bootstrap_data_provided = Some(true);
            self.save_status().await?;
            let client = self.client().await?;
            let upid = match client
                .upload(&node, &storage, "iso", &iso_name(vmid), iso)
                .await
            {
                Ok(upid) => upid,
                Err(e) => {
                    self.forget_iso_storage(&node);
                    return Err(e.into());
                }
            };
            if let Some(flow) = self.settle(upid, "seed upload", false).await? {
                return Ok(flow);
            }
        }
        let drive = seed_drive(&self.h.obj.spec);
        // Attaching a CD-ROM where the VM has a disk would detach that disk.
        if let Some(disk) = config.drive(&drive).filter(|d| !d.is_cdrom()) {
            return Err(Failure::Terminal(format!(
                "cloudInitDrive {drive} holds the disk {}: choose a free drive",
                disk.volume
            )));
        }
        let client = self.client().await?;
        let mut update =
            ConfigUpdate::new().set(&drive, format!("{},media=cdrom", iso_volid(&storage, vmid)));
        if let Some(boot) = boot_with(config.boot().as_deref(), &drive) {
            update = update.set("boot", boot);
        }
        let ip_tag = resolved
            .iter()
            .filter(|r| r.plan.default && r.plan.device == "net0" && r.address.is_ipv4())
            .min_by_key(|r| r.plan.offset)
            .map(|r| format!("ip_net0_{}", r.address));
        if let Some(tags) = super::configure::merged_tags(&config, ip_tag.as_deref()) {
            update = update.set("tags", tags);
        }
        client.update_vm_config_sync(&node, vmid, &update).await?;
        self.applied(&update);
        Ok(Flow::Next(Phase::PoweringOn))
    }

    /// The bootstrap data secret's `value` and `format`.
    pub(super) async fn bootstrap_data(&mut self) -> Result<(Format, Vec<u8>), Failure> {
        let name = self
            .machine
            .as_ref()
            .and_then(|m| m.spec.bootstrap.data_secret_name.clone())
            .ok_or_else(|| {
                Failure::Blocked(
                    "the Machine has no bootstrap data secret".into(),
                    self.r.config.poll,
                )
            })?;
        let secret = self
            .r
            .mgmt
            .secret(&self.ns(), &name)
            .await
            .map_err(mgmt_failure)?
            .ok_or_else(|| {
                Failure::Blocked(
                    format!("bootstrap data secret {name:?} not found"),
                    self.r.config.poll,
                )
            })?;
        let value = secret_value(&secret, "value").ok_or_else(|| {
            Failure::Blocked(
                "error retrieving bootstrap data: secret `value` key is missing".into(),
                self.r.config.poll,
            )
        })?;
        let format =
            secret_value(&secret, "format").map(|f| String::from_utf8_lossy(&f).into_owned());
        let format =
            Format::parse(format.as_deref()).map_err(|e| Failure::Terminal(e.to_string()))?;
        Ok((format, value))
    }

    /// A device's name servers: its own, else its zone's, else the cluster's (upstream
    /// ignored the zone's).
    fn dns_servers(&self, own: &[String]) -> Vec<String> {
        if !own.is_empty() {
            return own.to_vec();
        }
        let zone = self.zone();
        self.pc
            .spec
            .zone_config
            .iter()
            .find(|z| z.zone.as_deref() == Some(zone.as_str()))
            .map(|z| z.dns_servers.clone())
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| self.pc.spec.dns_servers.clone())
    }

    /// Whether the VM runs (one status call).
    pub(super) async fn running(&mut self, node: &str, vmid: u32) -> Result<bool, Failure> {
        let client = self.client().await?;
        let status = client.vm_status(node, vmid).await?;
        Ok(matches!(
            status.power_state(),
            PowerState::Running | PowerState::Paused
        ))
    }

    /// The first enabled ISO-capable storage of the node (listed at most every
    /// `storage_cache_ttl` per Proxmox VE cluster and node).
    async fn iso_storage(&mut self, node: &str) -> Result<String, Failure> {
        let client = self.client().await?;
        let key = (self.endpoint_key(), node.to_string());
        let ttl = self.r.config.storage_cache_ttl;
        if let Some((at, storage)) = self
            .r
            .iso_storages
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            && at.elapsed() < ttl
            && let Some(storage) = storage
        {
            return Ok(storage.clone());
        }
        let storages = client.storages(node, Some("iso")).await?;
        let chosen = storages
            .into_iter()
            .find(|s| s.enabled && s.active && s.supports("iso"))
            .map(|s| s.storage);
        self.r
            .iso_storages
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, (Instant::now(), chosen.clone()));
        chosen.ok_or_else(|| {
            Failure::Blocked(
                format!("no enabled storage with iso content on node {node}"),
                self.r.config.blocked_retry,
            )
        })
    }

    /// Drops the cached storage of a node after it failed.
    fn forget_iso_storage(&self, node: &str) {
        self.r
            .iso_storages
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(self.endpoint_key(), node.to_string()));
    }

    /// Whose view of the storages a cached entry is: credentials may see other storages,
    /// so the ProxmoxCluster's, and node names repeat across Proxmox VE clusters, so the
    /// machine's Proxmox VE cluster's (known once [`Self::client`] ran).
    fn endpoint_key(&self) -> String {
        format!(
            "{}/{}/{}",
            self.ns(),
            self.pc.metadata.name.as_deref().unwrap_or_default(),
            self.pve.as_deref().unwrap_or_default()
        )
    }

    /// Deletes the seed volume; absent is fine.
    pub(super) async fn delete_seed(
        &mut self,
        node: &str,
        volid: &str,
    ) -> Result<Option<Flow>, Failure> {
        let Some((storage, _)) = volid.split_once(':') else {
            return Ok(None);
        };
        let client = self.client().await?;
        let upid = match client.delete_volume(node, storage, volid).await {
            Ok(upid) => upid,
            Err(e) if gone(&e) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        self.settle(upid, "seed removal", true).await
    }

    /// The volume id the seed would have on the node's ISO storage (for a sweep when it
    /// is not attached).
    pub(super) async fn expected_seed(&mut self, node: &str, vmid: u32) -> Result<String, Failure> {
        Ok(iso_volid(&self.iso_storage(node).await?, vmid))
    }
}

/// Proxmox says the volume (or its storage) does not exist.
fn gone(e: &proxmox::Error) -> bool {
    e.kind() == ErrorKind::NotFound || e.to_string().contains("does not exist")
}

/// The SMBIOS UUID, canonical lower case.
pub(super) fn smbios_uuid(config: &VmConfig) -> Option<String> {
    let raw = config.smbios_uuid()?;
    uuid::Uuid::parse_str(raw.trim())
        .ok()
        .map(|u| u.hyphenated().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn boot_order_gets_the_seed_once() {
        assert_eq!(
            boot_with(Some("order=scsi0;ide2;net0"), "ide0").as_deref(),
            Some("order=scsi0;ide2;net0;ide0")
        );
        assert_eq!(boot_with(Some("order=scsi0;ide0"), "ide0"), None);
        assert_eq!(boot_with(Some("cdn"), "ide0"), None);
        assert_eq!(boot_with(None, "ide0"), None);
    }

    #[test]
    fn recognises_our_seed_and_the_uuid() {
        let config: VmConfig = serde_json::from_value(json!({
            "ide0": "nfs-iso:iso/user-data-101.iso,media=cdrom,size=368K",
            "smbios1": "uuid=6C3FA683-BEF9-4425-B413-EAA45A9D6191"
        }))
        .expect("config");
        assert_eq!(
            attached_seed(&config, 101),
            Some(("ide0".into(), "nfs-iso:iso/user-data-101.iso".into()))
        );
        assert_eq!(attached_seed(&config, 102), None);
        // Found on any drive: the spec's drive may have changed since it was attached.
        let moved: VmConfig = serde_json::from_value(json!({
            "scsi0": "local-lvm:vm-101-disk-0,size=20G",
            "scsi5": "nfs-iso:iso/user-data-101.iso,media=cdrom"
        }))
        .expect("config");
        assert_eq!(
            attached_seed(&moved, 101),
            Some(("scsi5".into(), "nfs-iso:iso/user-data-101.iso".into()))
        );
        assert_eq!(
            smbios_uuid(&config).as_deref(),
            Some("6c3fa683-bef9-4425-b413-eaa45a9d6191")
        );
        assert!(
            config
                .drive(&seed_drive(&ProxmoxMachineSpec::default()))
                .is_some_and(|d| d.is_cdrom())
        );
    }
}
