//! VM configuration after the clone: sockets, cores, memory, CPU model, description, tags, NICs
//! and passed-through PCI devices (`hostpciN`),
//! computed as the difference between the spec and the VM's config and written in one
//! synchronous `PUT .../config` (no task to poll). NICs that exist keep their MAC
//! (model, bridge, VLAN, MTU and queues are changed in place); NICs the template lacks
//! are added and get their MAC from Proxmox, which is then read back once.
//! An empty difference writes nothing and the phase still advances (upstream stalled).

use std::collections::BTreeSet;

use super::phase::Phase;
use super::{Failure, Flow, Pass, Step};
use crate::api::v1alpha2::{NetworkDevice, PciDevice, ProxmoxMachineSpec};
use crate::controller::seams::{InfraStore, Management};
use crate::proxmox::propstring::{NetDevice, PropertyString, SizeChange};
use crate::proxmox::types::{ConfigUpdate, VmConfig};

/// The config change for a VM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ConfigPlan {
    /// Keys to set.
    pub update: ConfigUpdate,
    /// NICs are added, whose MACs Proxmox assigns.
    pub new_nics: bool,
}

/// The tag list with `wanted` added, or `None` when nothing is missing.
pub(super) fn merged_tags<'a>(
    config: &VmConfig,
    wanted: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    let mut tags: BTreeSet<String> = config.tags().into_iter().collect();
    let before = tags.len();
    tags.extend(
        wanted
            .into_iter()
            .map(|t| t.trim().to_ascii_lowercase())
            .filter(|t| !t.is_empty()),
    );
    (tags.len() != before).then(|| tags.into_iter().collect::<Vec<_>>().join(";"))
}

fn nic(device: &NetworkDevice, existing: Option<&NetDevice>) -> NetDevice {
    let mut nic = existing.cloned().unwrap_or(NetDevice {
        model: String::new(),
        mac: None,
        options: Default::default(),
    });
    nic.model = device.model.clone().unwrap_or_else(|| "virtio".to_string());
    let mut set = |key: &str, value: Option<String>| {
        if let Some(v) = value {
            nic.options.insert(key.to_string(), v);
        }
    };
    set("bridge", device.bridge.clone());
    set("mtu", device.mtu.map(|v| v.to_string()));
    set("tag", device.vlan.map(|v| v.to_string()));
    set("queues", device.queues.map(|v| v.to_string()));
    nic
}

/// The `cpu` option with its model (`cputype`, the leading item) set to `model` and its
/// other options (`flags`...) kept; `None` when the model already is `model`.
fn cpu_with(current: Option<&str>, model: &str) -> Option<String> {
    let mut cpu = PropertyString::parse(current.unwrap_or_default(), Some("cputype"));
    if cpu.get("cputype") == Some(model) {
        return None;
    }
    cpu.options.remove("cputype");
    cpu.leading = Some(model.to_string());
    Some(cpu.to_canonical())
}

/// A device's `hostpciN` option: `host` (its addresses, `;`-separated) or `mapping`, with
/// the flags the spec sets, as PVE reads them (`pcie=1`, `rombar=0`, `x-vga=1`, `mdev=`).
fn hostpci(device: &PciDevice) -> PropertyString {
    let mut option = PropertyString::default();
    let mut set = |key: &str, value: Option<String>| {
        if let Some(v) = value {
            option.options.insert(key.to_string(), v);
        }
    };
    let flag = |v: Option<bool>| v.map(|on| if on { "1" } else { "0" }.to_string());
    set(
        "host",
        (!device.device_ids.is_empty()).then(|| device.device_ids.join(";")),
    );
    set("mapping", device.mapping.clone());
    set("pcie", flag(device.pcie));
    set("rombar", flag(device.rombar));
    set("x-vga", flag(device.primary_gpu));
    set("mdev", device.mdev.clone());
    option
}

fn net_number(name: &str) -> Option<u32> {
    name.strip_prefix("net")?.parse().ok()
}

/// The difference between the spec and the VM's config.
pub(super) fn plan(spec: &ProxmoxMachineSpec, config: &VmConfig) -> ConfigPlan {
    let mut update = ConfigUpdate::new();
    let positive = |v: Option<i32>| v.and_then(|v| u64::try_from(v).ok()).filter(|v| *v > 0);
    if let Some(s) = positive(spec.num_sockets).filter(|s| *s != config.sockets()) {
        update = update.set("sockets", s);
    }
    if let Some(c) = positive(spec.num_cores).filter(|c| *c != config.cores()) {
        update = update.set("cores", c);
    }
    if let Some(m) = positive(spec.memory_mib).filter(|m| *m != config.memory_mib()) {
        update = update.set("memory", m);
    }
    if let Some(cpu) = spec
        .cpu_type
        .as_deref()
        .and_then(|model| cpu_with(config.get("cpu").as_deref(), model))
    {
        update = update.set("cpu", cpu);
    }
    if let Some(d) = &spec.description {
        let current = config.description().unwrap_or_default();
        if current.trim_end() != d.trim_end() {
            update = update.set("description", d);
        }
    }
    let mut new_nics = false;
    let nets = config.nets();
    for device in spec.network.iter().flat_map(|n| &n.network_devices) {
        let Some(n) = net_number(&device.name) else {
            continue;
        };
        let existing = nets.get(&n);
        let wanted = nic(device, existing);
        if existing != Some(&wanted) {
            new_nics |= wanted.mac.is_none();
            update = update.set(format!("net{n}"), wanted.to_canonical());
        }
    }
    for (n, device) in spec.pci_devices.iter().enumerate() {
        let key = format!("hostpci{n}");
        let wanted = hostpci(device);
        let current = config
            .get(&key)
            .map(|v| PropertyString::parse(&v, Some("host")));
        if current.as_ref() != Some(&wanted) {
            update = update.set(key, wanted.to_canonical());
        }
    }
    if let Some(tags) = merged_tags(config, spec.tags.iter().map(String::as_str)) {
        update = update.set("tags", tags);
    }
    ConfigPlan { update, new_nics }
}

impl<S: InfraStore, M: Management> Pass<'_, S, M> {
    /// Mirrors a config change we made in the cached config instead of reading it back.
    pub(super) fn applied(&mut self, update: &ConfigUpdate) {
        if let Some(config) = self.vm.as_mut() {
            for (k, v) in &update.set {
                config
                    .0
                    .insert(k.clone(), serde_json::Value::String(v.clone()));
            }
            for k in &update.delete {
                config.0.remove(k);
            }
        }
    }

    /// Phase `WaitingForDiskReconciliation`: grow the boot disk to `bootVolume` (never
    /// shrink: a disk already as large is done), then the data disks.
    pub(super) async fn step_disks(&mut self) -> Step {
        let Some(boot) = self.h.obj.spec.disks.clone().and_then(|d| d.boot_volume) else {
            return self.volumes_then_addresses().await;
        };
        let (vmid, node, config) = self.vm_config().await?;
        let wanted = u64::try_from(boot.size_gb).unwrap_or(0) << 30;
        let current = config.drive_size(&boot.disk).ok_or_else(|| {
            Failure::Terminal(format!("disk {} does not exist on VM {vmid}", boot.disk))
        })?;
        if current < wanted {
            let client = self.client().await?;
            let upid = client
                .resize_disk(&node, vmid, &boot.disk, SizeChange::Absolute(wanted))
                .await?;
            if let Some(upid) = upid
                && let Some(flow) = self.settle(upid, "disk resize", false).await?
            {
                return Ok(flow);
            }
            if let Some(mut drive) = config.drive(&boot.disk) {
                drive
                    .options
                    .insert("size".into(), format!("{}G", boot.size_gb));
                let update = ConfigUpdate::new().set(boot.disk.clone(), drive.to_canonical());
                self.applied(&update);
            }
        }
        self.volumes_then_addresses().await
    }

    /// Applies the configuration difference, then moves on to the disks.
    pub(super) async fn configure(&mut self, node: String, vmid: u32, config: VmConfig) -> Step {
        let plan = plan(&self.h.obj.spec, &config);
        if !plan.update.is_empty() {
            let client = self.client().await?;
            client
                .update_vm_config_sync(&node, vmid, &plan.update)
                .await?;
            if plan.new_nics {
                // Proxmox chose the new MACs: read them once.
                self.vm = None;
            } else {
                self.vm = Some(config);
                self.applied(&plan.update);
            }
        }
        Ok(Flow::Next(Phase::ReconcilingDisks))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::v1alpha2::NetworkSpec;
    use serde_json::json;

    fn config() -> VmConfig {
        serde_json::from_value(json!({
            "name": "m", "cores": 2, "sockets": 1, "memory": "2048",
            "description": "old\n", "tags": "capmox;ubuntu",
            "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1"
        }))
        .expect("config")
    }

    fn device(name: &str, bridge: &str) -> NetworkDevice {
        NetworkDevice {
            name: name.into(),
            bridge: Some(bridge.into()),
            ..NetworkDevice::default()
        }
    }

    #[test]
    fn nothing_to_change_is_an_empty_plan() {
        let spec = ProxmoxMachineSpec {
            num_cores: Some(2),
            memory_mib: Some(2048),
            description: Some("old".into()),
            tags: vec!["Capmox".into()],
            network: Some(NetworkSpec {
                network_devices: vec![device("net0", "vmbr0")],
                ..NetworkSpec::default()
            }),
            ..ProxmoxMachineSpec::default()
        };
        let p = plan(&spec, &config());
        assert!(p.update.is_empty(), "{:?}", p.update);
        assert!(!p.new_nics);
    }

    #[test]
    fn the_cpu_model_is_set_and_the_templates_flags_kept() {
        assert_eq!(cpu_with(None, "host").as_deref(), Some("host"));
        assert_eq!(
            cpu_with(Some("kvm64,flags=+aes;+pcid"), "x86-64-v2-AES").as_deref(),
            Some("x86-64-v2-AES,flags=+aes;+pcid")
        );
        assert_eq!(cpu_with(Some("cputype=host,hidden=1"), "host"), None);
        let spec = ProxmoxMachineSpec {
            cpu_type: Some("host".into()),
            ..ProxmoxMachineSpec::default()
        };
        assert_eq!(plan(&spec, &config()).update.set["cpu"], "host");
    }

    #[test]
    fn changes_keep_macs_and_add_nics() {
        let mut net0 = device("net0", "vmbr1");
        net0.vlan = Some(100);
        net0.mtu = Some(1);
        let mut net1 = device("net1", "vmbr2");
        net1.model = Some("e1000".into());
        net1.queues = Some(4);
        let spec = ProxmoxMachineSpec {
            num_sockets: Some(2),
            num_cores: Some(4),
            memory_mib: Some(4096),
            description: Some("new".into()),
            tags: vec!["extra".into()],
            network: Some(NetworkSpec {
                network_devices: vec![net1, net0],
                ..NetworkSpec::default()
            }),
            ..ProxmoxMachineSpec::default()
        };
        let p = plan(&spec, &config());
        let set = &p.update.set;
        assert_eq!(set["sockets"], "2");
        assert_eq!(set["cores"], "4");
        assert_eq!(set["memory"], "4096");
        assert_eq!(set["description"], "new");
        assert_eq!(set["tags"], "capmox;extra;ubuntu");
        assert_eq!(
            set["net0"],
            "virtio=BC:24:11:00:00:01,bridge=vmbr1,firewall=1,mtu=1,tag=100"
        );
        assert_eq!(set["net1"], "e1000,bridge=vmbr2,queues=4");
        assert!(p.new_nics);
        assert_eq!(merged_tags(&config(), ["ubuntu"]), None);
    }

    #[test]
    fn pci_devices_are_hostpci_options_in_order() {
        let spec = ProxmoxMachineSpec {
            pci_devices: vec![
                PciDevice {
                    mapping: Some("a100".into()),
                    pcie: Some(true),
                    primary_gpu: Some(true),
                    ..PciDevice::default()
                },
                PciDevice {
                    device_ids: vec!["0000:81:00.0".into(), "0000:81:00.1".into()],
                    rombar: Some(false),
                    mdev: Some("nvidia-35".into()),
                    ..PciDevice::default()
                },
            ],
            ..ProxmoxMachineSpec::default()
        };
        let p = plan(&spec, &config());
        assert_eq!(p.update.set["hostpci0"], "mapping=a100,pcie=1,x-vga=1");
        assert_eq!(
            p.update.set["hostpci1"],
            "host=0000:81:00.0;0000:81:00.1,mdev=nvidia-35,rombar=0"
        );
        // Written already (PVE's own order, `host` implied): nothing to do.
        let mut written = config();
        written
            .0
            .insert("hostpci0".into(), json!("mapping=a100,x-vga=1,pcie=1"));
        written.0.insert(
            "hostpci1".into(),
            json!("0000:81:00.0;0000:81:00.1,rombar=0,mdev=nvidia-35"),
        );
        assert!(plan(&spec, &written).update.is_empty());
    }
}
