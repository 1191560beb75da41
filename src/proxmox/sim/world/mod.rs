//! The simulated cluster's state and the rules every handler shares.

mod config;
mod disks;
mod guest;
pub mod pci;
mod views;

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::time::Duration;

use ipnet::Ipv4Net;

pub use config::{ConfigChange, is_dns_name, is_known_config_key, memory_mib};
pub use guest::{Boot, ExecJob, os_info};

use super::clock::SimTime;
use super::error::PveError;
use super::faults::FaultPlan;
use super::profile::{Profile, Work};
use super::rng::Rng;
use super::seed::{Seed, SeedVm};
use super::tasks::TaskEngine;
use crate::proxmox::nocloud::NoCloud;
use crate::proxmox::propstring::{DriveSpec, format_size};
use crate::proxmox::types::VmConfig;
use crate::proxmox::upid::is_valid_node_name;

/// A cluster member.
#[derive(Clone, Debug)]
pub struct Node {
    /// Name.
    pub name: String,
    /// Corosync id.
    pub nodeid: u32,
    /// Logical CPUs.
    pub cpus: u32,
    /// Installed memory (bytes).
    pub mem_total: u64,
    /// Memory the host uses without any VM (bytes).
    pub mem_base: u64,
    /// Address.
    pub ip: String,
}

/// A stored volume.
#[derive(Clone, Debug)]
pub struct Volume {
    /// Bytes.
    pub size: u64,
    /// `raw`, `qcow2`, `iso`.
    pub format: String,
    /// `images` or `iso`.
    pub content: String,
    /// Owning VM for disks.
    pub vmid: Option<u32>,
    /// Creation time (Unix).
    pub ctime: i64,
    /// The parsed seed when this is an uploaded NoCloud ISO.
    pub seed: Option<NoCloud>,
}

/// A storage.
#[derive(Clone, Debug)]
pub struct Storage {
    /// Id.
    pub id: String,
    /// Plugin type.
    pub kind: String,
    /// Content types.
    pub content: BTreeSet<String>,
    /// Shared between nodes.
    pub shared: bool,
    /// Restricted to these nodes.
    pub nodes: Option<BTreeSet<String>>,
    /// Capacity in bytes (per node when local).
    pub total: u64,
    /// Volumes by scope (node name, or empty when shared) and volume name.
    pub volumes: BTreeMap<String, BTreeMap<String, Volume>>,
}

impl Storage {
    /// Directory-like storages hold files (ISOs) and take uploads.
    pub fn is_file_based(&self) -> bool {
        matches!(
            self.kind.as_str(),
            "dir" | "nfs" | "cifs" | "cephfs" | "glusterfs"
        )
    }

    /// The volume scope on `node`.
    pub fn scope(&self, node: &str) -> String {
        if self.shared {
            String::new()
        } else {
            node.to_string()
        }
    }

    /// Whether the storage is configured on `node`.
    pub fn on_node(&self, node: &str) -> bool {
        self.nodes.as_ref().is_none_or(|n| n.contains(node))
    }

    /// Bytes used in `scope`.
    pub fn used(&self, scope: &str) -> u64 {
        self.volumes
            .get(scope)
            .map(|v| v.values().map(|v| v.size).sum())
            .unwrap_or(0)
    }

    /// Whether it holds `content`.
    pub fn supports(&self, content: &str) -> bool {
        self.content.contains(content)
    }

    /// Where a volume lives on disk (for `volume_info`).
    pub fn path_of(&self, volname: &str) -> String {
        match self.kind.as_str() {
            "dir" if self.id == "local" => format!("/var/lib/vz/{}", file_dir(volname)),
            _ if self.is_file_based() => format!("/mnt/pve/{}/{}", self.id, file_dir(volname)),
            "rbd" => format!("rbd:{}/{volname}", self.id),
            "zfspool" => format!("/dev/zvol/rpool/data/{volname}"),
            _ => format!("/dev/pve/{volname}"),
        }
    }
}

fn file_dir(volname: &str) -> String {
    match volname.strip_prefix("iso/") {
        Some(name) => format!("template/iso/{name}"),
        None => format!("images/{volname}"),
    }
}

/// Power state of a VM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Power {
    /// Not running.
    Stopped,
    /// Running.
    Running,
    /// Paused (`qmpstatus: paused`).
    Paused,
}

/// A VM (or template).
#[derive(Clone, Debug)]
pub struct Vm {
    /// Id.
    pub vmid: u32,
    /// Node whose directory holds the config.
    pub node: String,
    /// Current config, raw PVE strings (`lock` included).
    pub config: BTreeMap<String, String>,
    /// Pending values.
    pub pending: BTreeMap<String, String>,
    /// Pending deletions.
    pub pending_delete: BTreeSet<String>,
    /// Power state.
    pub power: Power,
    /// The current boot's milestones while powered on.
    pub boot: Option<Boot>,
    /// From when `/cluster/resources` reports its name and status: pvestatd broadcasts a
    /// new VM's status a while after it appears; VMs of the seed were there before start.
    pub listed_at: SimTime,
    /// QEMU pid while running.
    pub qemu_pid: u32,
    /// Pool membership.
    pub pool: Option<String>,
    /// Guest commands started through the agent.
    pub exec: BTreeMap<u64, ExecJob>,
}

impl Vm {
    /// Config with pending changes applied (what `GET config` shows).
    pub fn effective_config(&self) -> BTreeMap<String, String> {
        let mut c = self.config.clone();
        for k in &self.pending_delete {
            c.remove(k);
        }
        c.extend(self.pending.iter().map(|(k, v)| (k.clone(), v.clone())));
        c
    }

    /// The current config with typed accessors.
    pub fn typed(&self) -> VmConfig {
        VmConfig(
            self.config
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::from(v.as_str())))
                .collect(),
        )
    }

    /// Whether this is a template.
    pub fn is_template(&self) -> bool {
        self.config.get("template").is_some_and(|t| t == "1")
    }

    /// Memory in MiB.
    pub fn memory_mib(&self) -> u64 {
        config::memory_mib(&self.config)
    }

    /// `name`, or PVE's default.
    pub fn name(&self) -> String {
        self.config
            .get("name")
            .cloned()
            .unwrap_or_else(|| format!("VM {}", self.vmid))
    }

    /// Disks (not CD-ROMs) with their config key.
    pub fn disks(&self) -> Vec<(String, DriveSpec)> {
        self.config
            .iter()
            .filter(|(k, _)| crate::proxmox::propstring::is_drive_key(k) || k.starts_with("unused"))
            .filter_map(|(k, v)| Some((k.clone(), DriveSpec::parse(v)?)))
            .filter(|(_, d)| !d.is_cdrom() && d.volume != "none")
            .collect()
    }
}

/// A token that may use the API.
#[derive(Clone, Debug)]
pub struct TokenDef {
    /// The secret.
    pub secret: String,
    /// Read-only tokens get 403 on every change.
    pub read_only: bool,
}

/// A bridge with a DHCP range.
#[derive(Clone, Debug)]
pub struct DhcpPool {
    /// Bridge.
    pub bridge: String,
    /// Subnet.
    pub net: Ipv4Net,
    /// First address.
    pub start: Ipv4Addr,
    /// Last address.
    pub end: Ipv4Addr,
}

/// The whole simulated cluster.
pub struct World {
    /// Cluster name.
    pub cluster_name: String,
    /// `pve-manager` version.
    pub version: String,
    /// Members.
    pub nodes: BTreeMap<String, Node>,
    /// Storages.
    pub storages: BTreeMap<String, Storage>,
    /// Pools.
    pub pools: BTreeSet<String>,
    /// VMs.
    pub vms: BTreeMap<u32, Vm>,
    /// API tokens by id.
    pub tokens: BTreeMap<String, TokenDef>,
    /// DHCP ranges.
    pub dhcp: Vec<DhcpPool>,
    /// DHCP leases by MAC.
    pub leases: BTreeMap<String, Ipv4Addr>,
    /// Fault knobs.
    pub faults: FaultPlan,
    /// Timing profile.
    pub profile: Profile,
    /// Randomness (seeded).
    pub rng: Rng,
    /// Tasks and locks.
    pub tasks: TaskEngine,
    /// Simulated time of the current event.
    pub now: SimTime,
    /// Unix time when the simulator started.
    pub epoch: i64,
    /// MAC prefix for new NICs.
    pub mac_prefix: String,
    /// SHA-256 fingerprint of the serving certificate.
    pub fingerprint: String,
    /// The token id of the request being handled (tasks record it).
    pub current_user: String,
    /// HA groups.
    pub ha_groups: BTreeSet<String>,
    /// HA resources by id (`vm:<vmid>`).
    pub ha_resources: BTreeMap<String, HaResource>,
    /// PCI mappings, devices and who holds them.
    pub pci: pci::Pci,
}

/// An HA resource's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HaResource {
    /// Requested state.
    pub state: String,
    /// HA group.
    pub group: Option<String>,
    /// Restarts before a relocation.
    pub max_restart: i64,
    /// Relocations.
    pub max_relocate: i64,
}

/// `Seed` plus the runtime choices needed to build a [`World`].
pub struct WorldOptions {
    /// Timing profile.
    pub profile: Profile,
    /// RNG seed.
    pub rng_seed: u64,
    /// Initial faults.
    pub faults: FaultPlan,
    /// Tokens.
    pub tokens: BTreeMap<String, TokenDef>,
    /// Unix time at start.
    pub epoch: i64,
    /// Certificate fingerprint.
    pub fingerprint: String,
}

impl World {
    /// Builds the world from a seed, checking it for consistency.
    pub fn from_seed(seed: &Seed, options: WorldOptions) -> Result<Self, String> {
        let mut world = Self {
            cluster_name: seed.cluster_name.clone(),
            version: seed.version.clone(),
            nodes: BTreeMap::new(),
            storages: BTreeMap::new(),
            pools: seed.pools.iter().cloned().collect(),
            vms: BTreeMap::new(),
            tokens: options.tokens,
            dhcp: Vec::new(),
            leases: BTreeMap::new(),
            faults: FaultPlan::default(),
            profile: options.profile,
            rng: Rng::new(options.rng_seed),
            tasks: TaskEngine::default(),
            now: Duration::ZERO,
            epoch: options.epoch,
            mac_prefix: "BC:24:11".to_string(),
            fingerprint: options.fingerprint,
            current_user: "root@pam".to_string(),
            ha_groups: seed.ha_groups.iter().cloned().collect(),
            ha_resources: BTreeMap::new(),
            pci: pci::Pci::default(),
        };
        if seed.nodes.is_empty() {
            return Err("a cluster needs at least one node".into());
        }
        for (i, n) in seed.nodes.iter().enumerate() {
            if !is_valid_node_name(&n.name) {
                return Err(format!("invalid node name {:?}", n.name));
            }
            world.nodes.insert(
                n.name.clone(),
                Node {
                    name: n.name.clone(),
                    nodeid: u32::try_from(i + 1).unwrap_or(u32::MAX),
                    cpus: n.cpus.max(1),
                    mem_total: n.memory_gib << 30,
                    mem_base: n.base_used_gib << 30,
                    ip: n.ip.clone(),
                },
            );
        }
        world.pci = pci::Pci::from_seed(seed, &world.nodes)?;
        for s in &seed.storages {
            if let Some(bad) = s
                .nodes
                .iter()
                .flatten()
                .find(|n| !world.nodes.contains_key(*n))
            {
                return Err(format!("storage {} names unknown node {bad}", s.id));
            }
            world.storages.insert(
                s.id.clone(),
                Storage {
                    id: s.id.clone(),
                    kind: s.kind.clone(),
                    content: s.content.iter().cloned().collect(),
                    shared: s.shared,
                    nodes: s.nodes.as_ref().map(|n| n.iter().cloned().collect()),
                    total: s.total_gib << 30,
                    volumes: BTreeMap::new(),
                },
            );
        }
        for n in &seed.networks {
            let parse = |a: &str| a.parse::<Ipv4Addr>().map_err(|e| format!("{a}: {e}"));
            world.dhcp.push(DhcpPool {
                bridge: n.bridge.clone(),
                net: n.cidr.parse().map_err(|e| format!("{}: {e}", n.cidr))?,
                start: parse(&n.dhcp_start)?,
                end: parse(&n.dhcp_end)?,
            });
        }
        for t in &seed.templates {
            world.seed_vm(t, true)?;
        }
        for v in &seed.vms {
            world.seed_vm(v, false)?;
        }
        world.faults = options.faults;
        Ok(world)
    }

    fn seed_vm(&mut self, v: &SeedVm, template: bool) -> Result<(), String> {
        if !self.nodes.contains_key(&v.node) {
            return Err(format!("VM {} is on unknown node {}", v.vmid, v.node));
        }
        if self.vms.contains_key(&v.vmid) || !(100..=999_999_999).contains(&v.vmid) {
            return Err(format!("VM id {} is invalid or used twice", v.vmid));
        }
        let storage = self
            .storages
            .get(&v.storage)
            .filter(|s| s.supports("images") && s.on_node(&v.node))
            .ok_or_else(|| format!("VM {}: storage {} cannot hold its disk", v.vmid, v.storage))?;
        let prefix = if template { "base" } else { "vm" };
        let volname = disk_volname(storage, prefix, v.vmid, 0);
        let size = v.disk_gib << 30;
        let scope = storage.scope(&v.node);
        let mac = self.new_mac();
        let uuid = self.new_uuid();
        let mut config: BTreeMap<String, String> = [
            ("name", v.name.clone()),
            ("memory", v.memory_mib.to_string()),
            ("cores", v.cores.to_string()),
            ("sockets", "1".to_string()),
            ("cpu", "x86-64-v2-AES".to_string()),
            ("ostype", "l26".to_string()),
            ("scsihw", "virtio-scsi-single".to_string()),
            (
                "scsi0",
                format!(
                    "{}:{volname},iothread=1,size={}",
                    v.storage,
                    format_size(size)
                ),
            ),
            ("ide2", "none,media=cdrom".to_string()),
            ("net0", format!("virtio={mac},bridge={}", v.bridge)),
            ("boot", "order=scsi0;ide2;net0".to_string()),
            ("smbios1", format!("uuid={uuid}")),
            ("vmgenid", self.new_uuid()),
            ("meta", format!("creation-qemu=9.2.0,ctime={}", self.epoch)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        if v.agent {
            config.insert("agent".into(), "enabled=1".into());
        }
        if !v.tags.is_empty() {
            let tags = crate::proxmox::tags::normalize(&v.tags.join(";"))
                .map_err(|bad| format!("VM {}: invalid tag {bad}", v.vmid))?;
            config.insert("tags".into(), tags);
        }
        if template {
            config.insert("template".into(), "1".into());
        }
        self.add_volume(&v.storage, &scope, &volname, size, Some(v.vmid), "images");
        let mut vm = self.new_vm(v.vmid, &v.node, config);
        vm.listed_at = SimTime::ZERO;
        if v.running && !template {
            vm.power = Power::Running;
            vm.boot = Some(Boot {
                at: Duration::ZERO,
                agent_at: Duration::ZERO,
                cloud_init_at: Duration::ZERO,
            });
        }
        self.vms.insert(v.vmid, vm);
        Ok(())
    }

    /// A fresh VM record.
    pub fn new_vm(&mut self, vmid: u32, node: &str, config: BTreeMap<String, String>) -> Vm {
        Vm {
            vmid,
            node: node.to_string(),
            config,
            pending: BTreeMap::new(),
            pending_delete: BTreeSet::new(),
            power: Power::Stopped,
            boot: None,
            listed_at: self.now + self.profile.nominal(Work::RrdLag),
            qemu_pid: 0,
            pool: None,
            exec: BTreeMap::new(),
        }
    }

    /// Memory (bytes) of the VMs powered on at `node`.
    pub fn node_vm_memory(&self, node: &str) -> u64 {
        self.vms
            .values()
            .filter(|vm| vm.node == node && vm.power != Power::Stopped)
            .map(|vm| vm.memory_mib() << 20)
            .sum()
    }

    /// Unix time now.
    pub fn unix_now(&self) -> i64 {
        self.epoch + self.now.as_secs() as i64
    }

    /// How long `work` takes in this profile.
    pub fn duration(&mut self, work: Work) -> Duration {
        self.profile.duration(work, &mut self.rng)
    }

    /// A random MAC with the Proxmox prefix, unique in the cluster.
    pub fn new_mac(&mut self) -> String {
        loop {
            let r = self.rng.next_u64();
            let mac = format!(
                "{}:{:02X}:{:02X}:{:02X}",
                self.mac_prefix,
                r & 0xFF,
                (r >> 8) & 0xFF,
                (r >> 16) & 0xFF
            );
            let used = self.vms.values().any(|vm| {
                vm.config
                    .values()
                    .chain(vm.pending.values())
                    .any(|v| v.contains(&mac))
            });
            if !used {
                return mac;
            }
        }
    }

    /// A random (v4-shaped) UUID from the seeded RNG.
    pub fn new_uuid(&mut self) -> String {
        let a = self.rng.next_u64();
        let b = self.rng.next_u64();
        uuid::Builder::from_random_bytes(
            [a.to_be_bytes(), b.to_be_bytes()]
                .concat()
                .try_into()
                .unwrap_or([0u8; 16]),
        )
        .into_uuid()
        .to_string()
    }

    /// The VM `vmid` if its config lives on `node`.
    pub fn vm_on(&self, node: &str, vmid: u32) -> Result<&Vm, PveError> {
        self.vms
            .get(&vmid)
            .filter(|vm| vm.node == node)
            .ok_or_else(|| PveError::no_such_vm(node, vmid))
    }

    /// Mutable [`World::vm_on`].
    pub fn vm_on_mut(&mut self, node: &str, vmid: u32) -> Result<&mut Vm, PveError> {
        self.vms
            .get_mut(&vmid)
            .filter(|vm| vm.node == node)
            .ok_or_else(|| PveError::no_such_vm(node, vmid))
    }

    /// The config lock, including one forced by the fault plan.
    pub fn vm_lock(&self, vmid: u32) -> Option<String> {
        self.faults.locked_vms.get(&vmid).cloned().or_else(|| {
            self.vms
                .get(&vmid)
                .and_then(|vm| vm.config.get("lock").cloned())
        })
    }

    /// Fails when the VM has a config lock.
    pub fn check_lock(&self, vmid: u32) -> Result<(), PveError> {
        match self.vm_lock(vmid) {
            Some(lock) => Err(PveError::locked(&lock)),
            None => Ok(()),
        }
    }

    /// Fails when the cluster has no quorum.
    pub fn check_quorum(&self) -> Result<(), PveError> {
        if self.faults.no_quorum {
            Err(PveError::no_quorum())
        } else {
            Ok(())
        }
    }

    /// Stores a volume.
    pub fn add_volume(
        &mut self,
        storage: &str,
        scope: &str,
        volname: &str,
        size: u64,
        vmid: Option<u32>,
        content: &str,
    ) {
        let ctime = self.unix_now();
        if let Some(s) = self.storages.get_mut(storage) {
            let format = if content == "iso" {
                "iso"
            } else if volname.ends_with(".qcow2") {
                "qcow2"
            } else {
                "raw"
            };
            s.volumes.entry(scope.to_string()).or_default().insert(
                volname.to_string(),
                Volume {
                    size,
                    format: format.to_string(),
                    content: content.to_string(),
                    vmid,
                    ctime,
                    seed: None,
                },
            );
        }
    }

    /// Fails when `bytes` more do not fit (or the storage is marked full).
    pub fn check_space(&self, storage: &str, scope: &str, bytes: u64) -> Result<(), String> {
        let Some(s) = self.storages.get(storage) else {
            return Err(format!("storage '{storage}' does not exist"));
        };
        let free = s.total.saturating_sub(s.used(scope));
        if self.faults.full_storages.contains(storage) || bytes > free {
            return Err(match s.kind.as_str() {
                "lvmthin" | "lvm" => format!(
                    "lvcreate 'pve/vm-disk' error:   Volume group \"pve\" has insufficient free space ({} extents): {} required.",
                    free >> 22,
                    bytes.div_ceil(1 << 22)
                ),
                "zfspool" => "zfs error: cannot create volume: out of space".to_string(),
                _ => "No space left on device".to_string(),
            });
        }
        Ok(())
    }

    /// Removes the disks `vmid` owns on any storage.
    pub fn free_vm_volumes(&mut self, vmid: u32) {
        for s in self.storages.values_mut() {
            for vols in s.volumes.values_mut() {
                vols.retain(|_, v| v.vmid != Some(vmid));
            }
        }
    }

    /// The next free disk volume name for `vmid` on `storage` in `scope`.
    pub fn next_disk_volname(&self, storage: &str, scope: &str, vmid: u32) -> String {
        let Some(s) = self.storages.get(storage) else {
            return format!("vm-{vmid}-disk-0");
        };
        let used = s.volumes.get(scope);
        // Linked clones' names end in the plain name (`base-9000-disk-0/vm-101-disk-0`).
        let taken = |name: &str| {
            used.is_some_and(|u| {
                u.keys()
                    .any(|k| k == name || k.strip_suffix(name).is_some_and(|p| p.ends_with('/')))
            })
        };
        (0..)
            .map(|n| disk_volname(s, "vm", vmid, n))
            .find(|name| !taken(name))
            .unwrap_or_else(|| format!("vm-{vmid}-disk-x"))
    }

    /// The volume name a linked clone of `base` gets, as pve-storage's `clone_image` names
    /// it: file storages nest it under the base (`9000/base-9000-disk-0.qcow2/101/vm-101-disk-0.qcow2`),
    /// ZFS and RBD prefix the base (`base-9000-disk-0/vm-101-disk-0`), LVM-thin gives the thin
    /// snapshot a plain name (`vm-101-disk-0`).
    pub fn linked_clone_volname(
        &self,
        storage: &str,
        scope: &str,
        base: &str,
        vmid: u32,
    ) -> String {
        let name = self.next_disk_volname(storage, scope, vmid);
        match self.storages.get(storage) {
            Some(s) if s.is_file_based() || matches!(s.kind.as_str(), "zfspool" | "rbd") => {
                format!("{base}/{name}")
            }
            _ => name,
        }
    }

    /// Looks up a volume by volid (`storage:volname`) as seen from `node`.
    pub fn volume(&self, node: &str, volid: &str) -> Option<&Volume> {
        let (storage, volname) = volid.split_once(':')?;
        let s = self.storages.get(storage)?;
        s.volumes.get(&s.scope(node))?.get(volname)
    }
}

/// `vm-101-disk-0` on block storages, `101/vm-101-disk-0.qcow2` on file storages.
pub fn disk_volname(storage: &Storage, prefix: &str, vmid: u32, n: u32) -> String {
    if storage.is_file_based() {
        format!("{vmid}/{prefix}-{vmid}-disk-{n}.qcow2")
    } else {
        format!("{prefix}-{vmid}-disk-{n}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> WorldOptions {
        WorldOptions {
            profile: Profile::Instant,
            rng_seed: 7,
            faults: FaultPlan::default(),
            tokens: BTreeMap::new(),
            epoch: 1_700_000_000,
            fingerprint: "AA".into(),
        }
    }

    #[test]
    fn builtin_seeds_build() {
        for name in ["default", "single"] {
            let seed = Seed::builtin(name).expect("builtin");
            let world = World::from_seed(&seed, options()).expect("valid seed");
            assert_eq!(world.vms.len(), seed.templates.len());
            assert!(world.vms.values().all(Vm::is_template));
            let disk = world.vms[&9000].disks();
            assert_eq!(disk.len(), 1);
            assert!(
                world.volume("pve1", &disk[0].1.volume).is_some(),
                "{name}: template disk stored"
            );
        }
    }

    #[test]
    fn inconsistent_seeds_are_rejected() {
        let mut seed = Seed::default();
        seed.templates[0].node = "nowhere".into();
        assert!(World::from_seed(&seed, options()).is_err());
        let mut seed = Seed::default();
        seed.templates[1].vmid = seed.templates[0].vmid;
        assert!(World::from_seed(&seed, options()).is_err());
        let mut seed = Seed::default();
        seed.templates[0].storage = "local".into();
        assert!(
            World::from_seed(&seed, options()).is_err(),
            "local holds no images"
        );
        let mut seed = Seed::default();
        seed.nodes[0].name = "-bad".into();
        assert!(World::from_seed(&seed, options()).is_err());
    }

    #[test]
    fn macs_are_unique_with_the_proxmox_prefix() {
        let mut world = World::from_seed(&Seed::default(), options()).expect("valid");
        let macs: BTreeSet<String> = (0..200).map(|_| world.new_mac()).collect();
        assert_eq!(macs.len(), 200);
        assert!(
            macs.iter()
                .all(|m| m.starts_with("BC:24:11:") && crate::proxmox::propstring::is_valid_mac(m))
        );
    }
}
