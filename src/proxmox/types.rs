//! Typed views of PVE responses and the request parameters the client sends.
//!
//! Every field is decoded leniently (see [`crate::proxmox::lenient`]) and unknown fields
//! are ignored, so newer PVE releases that add fields keep working.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::lenient::{
    as_bool, as_string, as_u64, bool_opt, bool_or_false, f64_list, f64_opt, i64_opt, i64_req,
    string_opt, string_req, template_flag, u32_opt, u32_req, u64_opt, u64_req,
};
use super::propstring::{
    DriveSpec, NetDevice, PropertyString, is_drive_key, net_index, parse_size,
};
use super::upid::Upid;

/// `GET /version`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct Version {
    /// `9.0.10`
    #[serde(deserialize_with = "string_req")]
    pub version: String,
    /// `9.0`
    #[serde(default, deserialize_with = "string_opt")]
    pub release: Option<String>,
    /// Source revision.
    #[serde(default, deserialize_with = "string_opt")]
    pub repoid: Option<String>,
}

/// One entry of `GET /cluster/status`: the cluster itself or one member node.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct ClusterStatusEntry {
    /// `cluster` or `node`.
    #[serde(rename = "type", deserialize_with = "string_req")]
    pub kind: String,
    /// `cluster` or `node/<name>`.
    #[serde(default, deserialize_with = "string_opt")]
    pub id: Option<String>,
    /// Cluster or node name.
    #[serde(default, deserialize_with = "string_opt")]
    pub name: Option<String>,
    /// Node: corosync node id (0 when not clustered).
    #[serde(default, deserialize_with = "u64_opt")]
    pub nodeid: Option<u64>,
    /// Node: address.
    #[serde(default, deserialize_with = "string_opt")]
    pub ip: Option<String>,
    /// Node: whether it is reachable.
    #[serde(default, deserialize_with = "bool_opt")]
    pub online: Option<bool>,
    /// Node: whether it answered this request.
    #[serde(default, deserialize_with = "bool_opt")]
    pub local: Option<bool>,
    /// Cluster: member count.
    #[serde(default, deserialize_with = "u64_opt")]
    pub nodes: Option<u64>,
    /// Cluster: whether it has quorum.
    #[serde(default, deserialize_with = "bool_opt")]
    pub quorate: Option<bool>,
}

/// The `type` filter of `GET /cluster/resources`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceType {
    /// QEMU VMs and LXC containers.
    Vm,
    /// Storages, one entry per node.
    Storage,
    /// Nodes.
    Node,
    /// SDN zones.
    Sdn,
}

impl ResourceType {
    /// The query value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Vm => "vm",
            Self::Storage => "storage",
            Self::Node => "node",
            Self::Sdn => "sdn",
        }
    }
}

/// One device of `GET /nodes/{node}/hardware/pci`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct PciDeviceInfo {
    /// Its address, `0000:01:00.0`.
    pub id: String,
}

/// One entry of `GET /cluster/mapping/pci`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct PciMapping {
    /// The mapping's name.
    pub id: String,
    /// Its devices: `id=10de:20b5,node=pve1,path=0000:01:00.0,…` each.
    #[serde(default)]
    pub map: Vec<String>,
}

impl PciMapping {
    /// The nodes its devices are on, one entry per device.
    pub fn device_nodes(&self) -> impl Iterator<Item = String> + '_ {
        self.map.iter().filter_map(|entry| {
            crate::proxmox::propstring::PropertyString::parse(entry, None)
                .get("node")
                .map(str::to_owned)
        })
    }
}

/// One entry of `GET /cluster/resources` (VM, node, storage or pool).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct ClusterResource {
    /// `qemu/101`, `node/pve1`, `storage/pve1/local`.
    #[serde(deserialize_with = "string_req")]
    pub id: String,
    /// `qemu`, `lxc`, `node`, `storage`, `pool`, `sdn`.
    #[serde(rename = "type", deserialize_with = "string_req")]
    pub kind: String,
    /// VM id.
    #[serde(default, deserialize_with = "u32_opt")]
    pub vmid: Option<u32>,
    /// Node the resource lives on.
    #[serde(default, deserialize_with = "string_opt")]
    pub node: Option<String>,
    /// `running`, `stopped`, `online`, `available`, `unknown`...
    #[serde(default, deserialize_with = "string_opt")]
    pub status: Option<String>,
    /// VM name (absent for a few seconds after creation).
    #[serde(default, deserialize_with = "string_opt")]
    pub name: Option<String>,
    /// Whether the VM is a template (`template: 0|1`).
    #[serde(default, deserialize_with = "template_flag")]
    pub template: bool,
    /// `;`-joined tags.
    #[serde(default, deserialize_with = "string_opt")]
    pub tags: Option<String>,
    /// Config lock (`clone`, `backup`...).
    #[serde(default, deserialize_with = "string_opt")]
    pub lock: Option<String>,
    /// Pool membership.
    #[serde(default, deserialize_with = "string_opt")]
    pub pool: Option<String>,
    /// CPU count.
    #[serde(default, deserialize_with = "f64_opt")]
    pub maxcpu: Option<f64>,
    /// CPU usage fraction.
    #[serde(default, deserialize_with = "f64_opt")]
    pub cpu: Option<f64>,
    /// Memory size in bytes.
    #[serde(default, deserialize_with = "u64_opt")]
    pub maxmem: Option<u64>,
    /// Memory used in bytes.
    #[serde(default, deserialize_with = "u64_opt")]
    pub mem: Option<u64>,
    /// Disk size in bytes.
    #[serde(default, deserialize_with = "u64_opt")]
    pub maxdisk: Option<u64>,
    /// Disk used in bytes.
    #[serde(default, deserialize_with = "u64_opt")]
    pub disk: Option<u64>,
    /// Uptime in seconds.
    #[serde(default, deserialize_with = "u64_opt")]
    pub uptime: Option<u64>,
    /// Storage id.
    #[serde(default, deserialize_with = "string_opt")]
    pub storage: Option<String>,
    /// Storage plugin type.
    #[serde(default, deserialize_with = "string_opt")]
    pub plugintype: Option<String>,
    /// Storage content types, comma separated.
    #[serde(default, deserialize_with = "string_opt")]
    pub content: Option<String>,
    /// Whether a storage is shared.
    #[serde(default, deserialize_with = "bool_opt")]
    pub shared: Option<bool>,
}

impl ClusterResource {
    /// Tags split on `;`, trimmed and lower-cased (CAPMOX's template matching rule).
    pub fn tag_list(&self) -> Vec<String> {
        self.tags
            .as_deref()
            .map(super::tags::split)
            .unwrap_or_default()
            .into_iter()
            .map(|t| t.to_ascii_lowercase())
            .collect()
    }
}

/// One entry of `GET /nodes`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct NodeInfo {
    /// Node name.
    #[serde(deserialize_with = "string_req")]
    pub node: String,
    /// `online`, `offline`, `unknown`.
    #[serde(default, deserialize_with = "string_opt")]
    pub status: Option<String>,
    /// CPU usage fraction.
    #[serde(default, deserialize_with = "f64_opt")]
    pub cpu: Option<f64>,
    /// CPU count.
    #[serde(default, deserialize_with = "f64_opt")]
    pub maxcpu: Option<f64>,
    /// Memory used (bytes).
    #[serde(default, deserialize_with = "u64_opt")]
    pub mem: Option<u64>,
    /// Memory size (bytes).
    #[serde(default, deserialize_with = "u64_opt")]
    pub maxmem: Option<u64>,
    /// Uptime in seconds.
    #[serde(default, deserialize_with = "u64_opt")]
    pub uptime: Option<u64>,
    /// SHA-256 fingerprint of the node's certificate (`AA:BB:...`).
    #[serde(default, deserialize_with = "string_opt")]
    pub ssl_fingerprint: Option<String>,
}

/// `cpuinfo` of a node status.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct CpuInfo {
    /// CPU model.
    #[serde(default, deserialize_with = "string_opt")]
    pub model: Option<String>,
    /// Logical CPUs.
    #[serde(default, deserialize_with = "u64_opt")]
    pub cpus: Option<u64>,
    /// Sockets.
    #[serde(default, deserialize_with = "u64_opt")]
    pub sockets: Option<u64>,
    /// Cores per socket.
    #[serde(default, deserialize_with = "u64_opt")]
    pub cores: Option<u64>,
    /// Clock (PVE sends a string).
    #[serde(default, deserialize_with = "f64_opt")]
    pub mhz: Option<f64>,
}

/// `memory` of a node status, in bytes.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct MemoryInfo {
    /// Installed memory.
    #[serde(default, deserialize_with = "u64_opt")]
    pub total: Option<u64>,
    /// Used memory (`total - available`).
    #[serde(default, deserialize_with = "u64_opt")]
    pub used: Option<u64>,
    /// Free memory.
    #[serde(default, deserialize_with = "u64_opt")]
    pub free: Option<u64>,
    /// Available memory.
    #[serde(default, deserialize_with = "u64_opt")]
    pub available: Option<u64>,
}

/// `GET /nodes/{node}/status`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct NodeStatus {
    /// Uptime in seconds.
    #[serde(default, deserialize_with = "u64_opt")]
    pub uptime: Option<u64>,
    /// CPU usage fraction.
    #[serde(default, deserialize_with = "f64_opt")]
    pub cpu: Option<f64>,
    /// 1/5/15-minute load (PVE sends strings).
    #[serde(default, deserialize_with = "f64_list")]
    pub loadavg: Vec<f64>,
    /// CPU details.
    #[serde(default)]
    pub cpuinfo: CpuInfo,
    /// Memory in bytes.
    #[serde(default)]
    pub memory: MemoryInfo,
    /// `pve-manager/9.0.10/...`.
    #[serde(default, deserialize_with = "string_opt")]
    pub pveversion: Option<String>,
    /// Kernel version line.
    #[serde(default, deserialize_with = "string_opt")]
    pub kversion: Option<String>,
}

/// The power state derived the way go-proxmox/CAPMOX derive it from `status`,
/// `qmpstatus` and `lock`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PowerState {
    /// `status=running`, `qmpstatus` running or absent.
    Running,
    /// `status=running`, `qmpstatus=paused`.
    Paused,
    /// `status=stopped`, not hibernated.
    Stopped,
    /// `status=stopped` with `lock=suspended`.
    Hibernated,
    /// Anything else (e.g. `prelaunch`, unknown).
    Unknown,
}

/// A VM in `GET /nodes/{node}/qemu` or `GET .../status/current`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct VmStatus {
    /// VM id.
    #[serde(deserialize_with = "u32_req")]
    pub vmid: u32,
    /// Name (`VM <vmid>` when unset).
    #[serde(default, deserialize_with = "string_opt")]
    pub name: Option<String>,
    /// `running` or `stopped`.
    #[serde(deserialize_with = "string_req")]
    pub status: String,
    /// QMP run state (`running`, `paused`, `prelaunch`...).
    #[serde(default, deserialize_with = "string_opt")]
    pub qmpstatus: Option<String>,
    /// Present (1) only for templates.
    #[serde(default, deserialize_with = "template_flag")]
    pub template: bool,
    /// Config lock.
    #[serde(default, deserialize_with = "string_opt")]
    pub lock: Option<String>,
    /// `;`-joined tags.
    #[serde(default, deserialize_with = "string_opt")]
    pub tags: Option<String>,
    /// sockets × cores.
    #[serde(default, deserialize_with = "f64_opt")]
    pub cpus: Option<f64>,
    /// Configured memory in bytes.
    #[serde(default, deserialize_with = "u64_opt")]
    pub maxmem: Option<u64>,
    /// Boot disk size in bytes.
    #[serde(default, deserialize_with = "u64_opt")]
    pub maxdisk: Option<u64>,
    /// Memory in use (bytes).
    #[serde(default, deserialize_with = "u64_opt")]
    pub mem: Option<u64>,
    /// Uptime in seconds.
    #[serde(default, deserialize_with = "u64_opt")]
    pub uptime: Option<u64>,
    /// QEMU process id while running.
    #[serde(default, deserialize_with = "u64_opt")]
    pub pid: Option<u64>,
    /// `1` when the guest agent is enabled in the config (status/current only).
    #[serde(default, deserialize_with = "bool_or_false")]
    pub agent: bool,
}

impl VmStatus {
    /// The power state as CAPMOX derives it.
    pub fn power_state(&self) -> PowerState {
        let hibernated = self.lock.as_deref() == Some("suspended");
        match (self.status.as_str(), self.qmpstatus.as_deref()) {
            ("running", None | Some("running")) => PowerState::Running,
            ("running", Some("paused")) => PowerState::Paused,
            ("stopped", _) if hibernated => PowerState::Hibernated,
            ("stopped", _) => PowerState::Stopped,
            _ => PowerState::Unknown,
        }
    }
}

/// A container in `GET /nodes/{node}/lxc` (the scheduler only needs its memory).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct ContainerStatus {
    /// Container id (PVE may send it as a string).
    #[serde(deserialize_with = "u32_req")]
    pub vmid: u32,
    /// Name.
    #[serde(default, deserialize_with = "string_opt")]
    pub name: Option<String>,
    /// `running` or `stopped`.
    #[serde(default, deserialize_with = "string_opt")]
    pub status: Option<String>,
    /// Configured memory in bytes.
    #[serde(default, deserialize_with = "u64_opt")]
    pub maxmem: Option<u64>,
}

/// `GET /nodes/{node}/qemu/{vmid}/config`: raw values plus typed accessors.
///
/// Values are kept as PVE sent them (numbers for integer keys, strings otherwise) so
/// nothing is lost; the accessors read either spelling.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(transparent)]
pub struct VmConfig(pub BTreeMap<String, Value>);

impl VmConfig {
    /// A value as a string, numbers printed.
    pub fn get(&self, key: &str) -> Option<String> {
        self.0.get(key).and_then(as_string)
    }
    /// SHA digest of the config file (for optimistic concurrency).
    pub fn digest(&self) -> Option<String> {
        self.get("digest")
    }
    /// `name`.
    pub fn name(&self) -> Option<String> {
        self.get("name")
    }
    /// `description`.
    pub fn description(&self) -> Option<String> {
        self.get("description")
    }
    /// `lock`.
    pub fn lock(&self) -> Option<String> {
        self.get("lock")
    }
    /// `cores` (default 1).
    pub fn cores(&self) -> u64 {
        self.0.get("cores").and_then(as_u64).unwrap_or(1)
    }
    /// `sockets` (default 1).
    pub fn sockets(&self) -> u64 {
        self.0.get("sockets").and_then(as_u64).unwrap_or(1)
    }
    /// `memory` in MiB (a number, a string, or `current=<MiB>`; default 512).
    pub fn memory_mib(&self) -> u64 {
        self.get("memory")
            .and_then(|m| {
                PropertyString::parse(&m, Some("current"))
                    .get("current")
                    .and_then(|c| c.parse().ok())
            })
            .unwrap_or(512)
    }
    /// Whether `template: 1` is set.
    pub fn is_template(&self) -> bool {
        self.0.get("template").and_then(as_bool).unwrap_or(false)
    }
    /// Whether the guest agent is enabled (`agent: 1` or `agent: enabled=1,...`).
    pub fn agent_enabled(&self) -> bool {
        self.get("agent").is_some_and(|a| {
            PropertyString::parse(&a, Some("enabled"))
                .get("enabled")
                .and_then(|e| as_bool(&Value::from(e)))
                .unwrap_or(false)
        })
    }
    /// Tags split and lower-cased.
    pub fn tags(&self) -> Vec<String> {
        self.get("tags")
            .map(|t| super::tags::split(&t))
            .unwrap_or_default()
            .into_iter()
            .map(|t| t.to_ascii_lowercase())
            .collect()
    }
    /// `smbios1` `uuid=` value (CAPMOX's instance id).
    pub fn smbios_uuid(&self) -> Option<String> {
        self.get("smbios1").and_then(|s| {
            PropertyString::parse(&s, Some("uuid"))
                .get("uuid")
                .map(str::to_string)
        })
    }
    /// `boot` value.
    pub fn boot(&self) -> Option<String> {
        self.get("boot")
    }
    /// The `netN` devices that parse, by index.
    pub fn nets(&self) -> BTreeMap<u32, NetDevice> {
        self.0
            .iter()
            .filter_map(|(k, v)| Some((net_index(k)?, NetDevice::parse(&as_string(v)?)?)))
            .collect()
    }
    /// A drive key (`scsi0`, `ide0`...) parsed.
    pub fn drive(&self, key: &str) -> Option<DriveSpec> {
        self.get(key).and_then(|d| DriveSpec::parse(&d))
    }
    /// The drive the VM boots from: the first disk (not CD-ROM) of the boot order, else
    /// `bootdisk`, else the first disk drive there is.
    pub fn boot_disk(&self) -> Option<(String, DriveSpec)> {
        let disk = |key: &str| {
            self.drive(key)
                .filter(|d| !d.is_cdrom() && d.storage_volume().is_some())
                .map(|d| (key.to_string(), d))
        };
        let order = self.boot().unwrap_or_default();
        let listed = order
            .trim()
            .strip_prefix("order=")
            .unwrap_or_default()
            .split(';')
            .map(str::trim)
            .chain(self.get("bootdisk").as_deref().map(str::trim))
            .find_map(disk);
        listed.or_else(|| {
            self.0
                .keys()
                .filter(|k| is_drive_key(k))
                .find_map(|k| disk(k))
        })
    }
    /// Size of a drive in bytes from its `size=` option.
    pub fn drive_size(&self, key: &str) -> Option<u64> {
        self.drive(key)
            .and_then(|d| d.options.get("size").and_then(|s| parse_size(s)))
    }
}

/// `running` or `stopped`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskState {
    /// Still running.
    Running,
    /// Finished; see `exitstatus`.
    Stopped,
}

/// How a finished task ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskOutcome {
    /// `OK`.
    Ok,
    /// `WARNINGS: n`: a success that logged warnings.
    Warnings(u32),
    /// Anything else: the error text (`unexpected status` when the worker died).
    Failed(String),
}

impl TaskOutcome {
    /// Interprets an `exitstatus`.
    pub fn from_exitstatus(exit: &str) -> Self {
        let exit = exit.trim();
        if exit == "OK" {
            return Self::Ok;
        }
        match exit
            .strip_prefix("WARNINGS:")
            .map(|n| n.trim().parse::<u32>())
        {
            Some(Ok(n)) => Self::Warnings(n),
            _ => Self::Failed(exit.to_string()),
        }
    }

    /// `OK` and `WARNINGS: n` are successes.
    pub fn is_success(&self) -> bool {
        !matches!(self, Self::Failed(_))
    }
}

/// `GET /nodes/{node}/tasks/{upid}/status`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct TaskStatus {
    /// The task.
    pub upid: Upid,
    /// Node it runs on.
    #[serde(deserialize_with = "string_req")]
    pub node: String,
    /// Worker type.
    #[serde(rename = "type", deserialize_with = "string_req")]
    pub task_type: String,
    /// Object id.
    #[serde(default, deserialize_with = "string_opt")]
    pub id: Option<String>,
    /// `user@realm`.
    #[serde(deserialize_with = "string_req")]
    pub user: String,
    /// Token name when started by a token.
    #[serde(default, deserialize_with = "string_opt")]
    pub tokenid: Option<String>,
    /// Unix start time.
    #[serde(deserialize_with = "i64_req")]
    pub starttime: i64,
    /// Worker pid.
    #[serde(default, deserialize_with = "u64_opt")]
    pub pid: Option<u64>,
    /// Running or stopped.
    pub status: TaskState,
    /// `OK`, `WARNINGS: n` or the error text; only when stopped.
    #[serde(default, deserialize_with = "string_opt")]
    pub exitstatus: Option<String>,
}

impl TaskStatus {
    /// `None` while running.
    pub fn outcome(&self) -> Option<TaskOutcome> {
        match self.status {
            TaskState::Running => None,
            TaskState::Stopped => Some(TaskOutcome::from_exitstatus(
                self.exitstatus.as_deref().unwrap_or("unexpected status"),
            )),
        }
    }
}

/// One line of `GET /nodes/{node}/tasks/{upid}/log`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub struct TaskLogLine {
    /// 1-based line number.
    #[serde(deserialize_with = "u64_req")]
    pub n: u64,
    /// The text.
    #[serde(deserialize_with = "string_req")]
    pub t: String,
}

/// A page of a task log plus the total line count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskLog {
    /// The requested lines.
    pub lines: Vec<TaskLogLine>,
    /// Total lines in the log.
    pub total: u64,
}

/// One entry of `GET /nodes/{node}/storage`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct StorageInfo {
    /// Storage id.
    #[serde(deserialize_with = "string_req")]
    pub storage: String,
    /// Plugin type (`dir`, `lvmthin`...).
    #[serde(rename = "type", default, deserialize_with = "string_opt")]
    pub kind: Option<String>,
    /// Content types, comma separated.
    #[serde(default, deserialize_with = "string_opt")]
    pub content: Option<String>,
    /// Enabled in the storage config.
    #[serde(default, deserialize_with = "bool_or_false")]
    pub enabled: bool,
    /// Currently usable.
    #[serde(default, deserialize_with = "bool_or_false")]
    pub active: bool,
    /// Shared between nodes.
    #[serde(default, deserialize_with = "bool_or_false")]
    pub shared: bool,
    /// Capacity in bytes.
    #[serde(default, deserialize_with = "u64_opt")]
    pub total: Option<u64>,
    /// Used bytes.
    #[serde(default, deserialize_with = "u64_opt")]
    pub used: Option<u64>,
    /// Available bytes.
    #[serde(default, deserialize_with = "u64_opt")]
    pub avail: Option<u64>,
}

impl StorageInfo {
    /// Whether the storage holds this content type (`iso`, `images`...).
    pub fn supports(&self, content: &str) -> bool {
        self.content
            .as_deref()
            .is_some_and(|c| c.split(',').any(|x| x.trim() == content))
    }
}

/// One entry of `GET /nodes/{node}/storage/{storage}/content`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct StorageContent {
    /// `local:iso/user-data-101.iso`.
    #[serde(deserialize_with = "string_req")]
    pub volid: String,
    /// `iso`, `images`...
    #[serde(default, deserialize_with = "string_opt")]
    pub content: Option<String>,
    /// `iso`, `raw`, `qcow2`...
    #[serde(default, deserialize_with = "string_opt")]
    pub format: Option<String>,
    /// Size in bytes.
    #[serde(default, deserialize_with = "u64_opt")]
    pub size: Option<u64>,
    /// Owning VM.
    #[serde(default, deserialize_with = "u32_opt")]
    pub vmid: Option<u32>,
    /// Creation time.
    #[serde(default, deserialize_with = "i64_opt")]
    pub ctime: Option<i64>,
}

/// `GET /nodes/{node}/storage/{storage}/content/{volume}`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct VolumeInfo {
    /// Path on the node.
    #[serde(default, deserialize_with = "string_opt")]
    pub path: Option<String>,
    /// Size in bytes.
    #[serde(default, deserialize_with = "u64_opt")]
    pub size: Option<u64>,
    /// Used bytes.
    #[serde(default, deserialize_with = "u64_opt")]
    pub used: Option<u64>,
    /// Format.
    #[serde(default, deserialize_with = "string_opt")]
    pub format: Option<String>,
}

/// Guest agent `get-osinfo` result.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct OsInfo {
    /// `ubuntu`
    #[serde(default, deserialize_with = "string_opt")]
    pub id: Option<String>,
    /// `Ubuntu`
    #[serde(default, deserialize_with = "string_opt")]
    pub name: Option<String>,
    /// `Ubuntu 24.04.1 LTS`
    #[serde(default, deserialize_with = "string_opt")]
    pub pretty_name: Option<String>,
    /// `24.04.1 LTS (Noble Numbat)`
    #[serde(default, deserialize_with = "string_opt")]
    pub version: Option<String>,
    /// `24.04`
    #[serde(default, deserialize_with = "string_opt")]
    pub version_id: Option<String>,
    /// Kernel release.
    #[serde(default, deserialize_with = "string_opt")]
    pub kernel_release: Option<String>,
    /// Architecture.
    #[serde(default, deserialize_with = "string_opt")]
    pub machine: Option<String>,
}

/// One address of a guest interface.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct GuestIpAddress {
    /// `ipv4` or `ipv6`.
    #[serde(deserialize_with = "string_req")]
    pub ip_address_type: String,
    /// The address.
    #[serde(deserialize_with = "string_req")]
    pub ip_address: String,
    /// Prefix length.
    #[serde(default, deserialize_with = "u64_opt")]
    pub prefix: Option<u64>,
}

/// One interface of `network-get-interfaces`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct GuestInterface {
    /// `eth0`, `lo`.
    #[serde(deserialize_with = "string_req")]
    pub name: String,
    /// Lower-case MAC.
    #[serde(default, deserialize_with = "string_opt")]
    pub hardware_address: Option<String>,
    /// Addresses (absent when none).
    #[serde(default)]
    pub ip_addresses: Vec<GuestIpAddress>,
}

/// `GET .../agent/exec-status?pid=P`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ExecStatus {
    /// Whether the process has exited.
    #[serde(default, deserialize_with = "bool_or_false")]
    pub exited: bool,
    /// Exit code once exited.
    #[serde(default, deserialize_with = "i64_opt")]
    pub exitcode: Option<i64>,
    /// Signal that ended it.
    #[serde(default, deserialize_with = "i64_opt")]
    pub signal: Option<i64>,
    /// Standard output.
    #[serde(default, deserialize_with = "string_opt")]
    pub out_data: Option<String>,
    /// Standard error.
    #[serde(default, deserialize_with = "string_opt")]
    pub err_data: Option<String>,
    /// Output was truncated.
    #[serde(default, deserialize_with = "bool_or_false")]
    pub out_truncated: bool,
    /// Error output was truncated.
    #[serde(default, deserialize_with = "bool_or_false")]
    pub err_truncated: bool,
}

/// Parameters of `POST /nodes/{node}/qemu/{vmid}/clone`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CloneRequest {
    /// Id of the new VM.
    pub newid: u32,
    /// Its name.
    pub name: Option<String>,
    /// Its description.
    pub description: Option<String>,
    /// Pool to add it to.
    pub pool: Option<String>,
    /// Snapshot to clone from.
    pub snapname: Option<String>,
    /// Target storage (full clones only).
    pub storage: Option<String>,
    /// Disk format (full clones only).
    pub format: Option<String>,
    /// Full copy (`true`) or linked clone (`false`); PVE's default depends on whether the
    /// source is a template.
    pub full: Option<bool>,
    /// Target node (only with shared storage).
    pub target: Option<String>,
    /// Bandwidth limit in KiB/s.
    pub bwlimit: Option<u64>,
}

impl CloneRequest {
    /// The form parameters, in a stable order.
    pub fn params(&self) -> Vec<(String, String)> {
        let mut p = vec![("newid".to_string(), self.newid.to_string())];
        let mut opt = |k: &str, v: &Option<String>| {
            if let Some(v) = v {
                p.push((k.to_string(), v.clone()));
            }
        };
        opt("name", &self.name);
        opt("description", &self.description);
        opt("pool", &self.pool);
        opt("snapname", &self.snapname);
        opt("storage", &self.storage);
        opt("format", &self.format);
        opt("target", &self.target);
        if let Some(full) = self.full {
            p.push(("full".to_string(), u8::from(full).to_string()));
        }
        if let Some(bw) = self.bwlimit {
            p.push(("bwlimit".to_string(), bw.to_string()));
        }
        p
    }
}

/// A config change for `POST`/`PUT /nodes/{node}/qemu/{vmid}/config`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigUpdate {
    /// Keys to set, with PVE-formatted values.
    pub set: BTreeMap<String, String>,
    /// Keys to delete.
    pub delete: Vec<String>,
    /// Pending changes to revert.
    pub revert: Vec<String>,
    /// Only apply if the config still has this digest.
    pub digest: Option<String>,
}

impl ConfigUpdate {
    /// An empty update.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets `key` to `value`.
    pub fn set(mut self, key: impl Into<String>, value: impl ToString) -> Self {
        self.set.insert(key.into(), value.to_string());
        self
    }
    /// Deletes `key`.
    pub fn delete(mut self, key: impl Into<String>) -> Self {
        self.delete.push(key.into());
        self
    }
    /// Reverts the pending change of `key`.
    pub fn revert(mut self, key: impl Into<String>) -> Self {
        self.revert.push(key.into());
        self
    }
    /// Requires the config digest to match.
    pub fn digest(mut self, digest: impl Into<String>) -> Self {
        self.digest = Some(digest.into());
        self
    }
    /// True when nothing would be sent.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.delete.is_empty() && self.revert.is_empty()
    }
    /// The form parameters.
    pub fn params(&self) -> Vec<(String, String)> {
        let mut p: Vec<(String, String)> = self
            .set
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !self.delete.is_empty() {
            p.push(("delete".to_string(), self.delete.join(",")));
        }
        if !self.revert.is_empty() {
            p.push(("revert".to_string(), self.revert.join(",")));
        }
        if let Some(d) = &self.digest {
            p.push(("digest".to_string(), d.clone()));
        }
        p
    }
}

/// Options of `DELETE /nodes/{node}/qemu/{vmid}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// Also remove the VM from backup/replication/HA configuration.
    pub purge: bool,
    /// Also destroy `vm-<id>-*` volumes not referenced by the config.
    pub destroy_unreferenced_disks: bool,
    /// Ignore the config lock (root@pam only).
    pub skiplock: bool,
}

impl DeleteOptions {
    /// The query parameters (only the flags that are set).
    pub fn params(&self) -> Vec<(String, String)> {
        [
            ("purge", self.purge),
            (
                "destroy-unreferenced-disks",
                self.destroy_unreferenced_disks,
            ),
            ("skiplock", self.skiplock),
        ]
        .into_iter()
        .filter(|(_, on)| *on)
        .map(|(k, _)| (k.to_string(), "1".to_string()))
        .collect()
    }
}

/// `POST /nodes/{node}/qemu/{vmid}/status/{action}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PowerAction {
    /// Start (`qmstart`).
    Start,
    /// Hard stop (`qmstop`).
    Stop,
    /// ACPI/agent shutdown (`qmshutdown`).
    Shutdown,
    /// Reboot (`qmreboot`).
    Reboot,
    /// Hard reset (`qmreset`).
    Reset,
    /// Pause (`qmsuspend`).
    Suspend,
    /// Resume a paused VM (`qmresume`).
    Resume,
}

impl PowerAction {
    /// Every action.
    pub const ALL: [Self; 7] = [
        Self::Start,
        Self::Stop,
        Self::Shutdown,
        Self::Reboot,
        Self::Reset,
        Self::Suspend,
        Self::Resume,
    ];

    /// The path segment.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::Stop => "stop",
            Self::Shutdown => "shutdown",
            Self::Reboot => "reboot",
            Self::Reset => "reset",
            Self::Suspend => "suspend",
            Self::Resume => "resume",
        }
    }

    /// The worker type of the task it starts.
    pub fn task_type(self) -> &'static str {
        match self {
            Self::Start => "qmstart",
            Self::Stop => "qmstop",
            Self::Shutdown => "qmshutdown",
            Self::Reboot => "qmreboot",
            Self::Reset => "qmreset",
            Self::Suspend => "qmsuspend",
            Self::Resume => "qmresume",
        }
    }

    /// Parses the path segment.
    pub fn from_segment(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn decodes_the_reference_shapes() {
        let cfg: VmConfig = serde_json::from_value(json!({
            "digest":"1ac0","name":"k8s-cp","cores":4,"sockets":1,"memory":"8192",
            "agent":"enabled=1","net0":"virtio=BC:24:11:3A:5F:01,bridge=vmbr0,firewall=1,tag=100",
            "scsi0":"local-lvm:vm-101-disk-0,iothread=1,size=100G",
            "smbios1":"uuid=413c6ca3-d043-43fe-9fb4-bc4a6e60c7ef","tags":"capmox;b"
        }))
        .expect("decodes");
        assert_eq!(cfg.memory_mib(), 8192);
        assert_eq!(cfg.cores(), 4);
        assert!(cfg.agent_enabled());
        assert_eq!(cfg.nets()[&0].bridge(), Some("vmbr0"));
        assert_eq!(cfg.drive_size("scsi0"), Some(100 << 30));
        assert_eq!(
            cfg.smbios_uuid().as_deref(),
            Some("413c6ca3-d043-43fe-9fb4-bc4a6e60c7ef")
        );
        assert_eq!(cfg.tags(), vec!["capmox", "b"]);

        let status: TaskStatus = serde_json::from_value(json!({
            "upid":"UPID:pve1:0003A1B2:01C2D3E4:66F0A1B2:qmclone:9000:capmox@pve!capi:",
            "node":"pve1","pid":237986,"pstart":29545444,"starttime":1727045042,
            "type":"qmclone","id":"9000","user":"capmox@pve","tokenid":"capi",
            "status":"stopped","exitstatus":"WARNINGS: 1"
        }))
        .expect("decodes");
        assert_eq!(status.outcome(), Some(TaskOutcome::Warnings(1)));
        assert!(status.outcome().is_some_and(|o| o.is_success()));

        let vm: VmStatus =
            serde_json::from_value(json!({"vmid":"101","status":"running","qmpstatus":"paused"}))
                .expect("decodes");
        assert_eq!(vm.power_state(), PowerState::Paused);
        assert!(!vm.template);
    }

    #[test]
    fn outcomes() {
        assert_eq!(TaskOutcome::from_exitstatus("OK"), TaskOutcome::Ok);
        assert_eq!(
            TaskOutcome::from_exitstatus("WARNINGS: 3"),
            TaskOutcome::Warnings(3)
        );
        assert_eq!(
            TaskOutcome::from_exitstatus("clone failed: out of space"),
            TaskOutcome::Failed("clone failed: out of space".into())
        );
        assert!(!TaskOutcome::from_exitstatus("WARNINGS: x").is_success());
    }

    proptest! {
        #[test]
        fn arbitrary_objects_never_panic(keys in proptest::collection::vec("[a-z]{1,8}", 0..8),
                                         vals in proptest::collection::vec(".{0,12}", 0..8)) {
            let obj: serde_json::Map<String, Value> = keys.into_iter().zip(vals)
                .map(|(k, v)| (k, Value::String(v))).collect();
            let v = Value::Object(obj);
            let _ = serde_json::from_value::<VmStatus>(v.clone());
            let _ = serde_json::from_value::<TaskStatus>(v.clone());
            let _ = serde_json::from_value::<NodeStatus>(v.clone());
            let _ = serde_json::from_value::<ClusterResource>(v.clone());
            let cfg = VmConfig(serde_json::from_value(v).unwrap_or_default());
            let _ = (cfg.memory_mib(), cfg.nets(), cfg.tags(), cfg.agent_enabled(), cfg.smbios_uuid());
        }
    }
}

/// One entry of `GET /cluster/ha/resources`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub struct HaResourceEntry {
    /// `vm:<vmid>`.
    #[serde(deserialize_with = "string_req")]
    pub sid: String,
    /// The requested state.
    #[serde(default, deserialize_with = "string_opt")]
    pub state: Option<String>,
    /// The HA group.
    #[serde(default, deserialize_with = "string_opt")]
    pub group: Option<String>,
    /// Restarts on the node before a relocation.
    #[serde(default, deserialize_with = "u64_opt")]
    pub max_restart: Option<u64>,
    /// Relocations to other nodes.
    #[serde(default, deserialize_with = "u64_opt")]
    pub max_relocate: Option<u64>,
}

impl HaResourceEntry {
    /// Whether the resource is configured as `wanted` says (PVE's defaults: `started`, 1, 1).
    pub fn matches(&self, wanted: &HaSettings) -> bool {
        self.state.as_deref().unwrap_or("started") == wanted.state
            && self.group == wanted.group
            && self.max_restart.unwrap_or(1) == wanted.max_restart
            && self.max_relocate.unwrap_or(1) == wanted.max_relocate
    }
}

/// The settings of an HA resource this client writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HaSettings {
    /// Requested state.
    pub state: String,
    /// HA group, if any.
    pub group: Option<String>,
    /// Restarts on the node before a relocation.
    pub max_restart: u64,
    /// Relocations to other nodes.
    pub max_relocate: u64,
}

impl HaSettings {
    /// The form parameters of a create or update.
    pub fn form(&self) -> Vec<(String, String)> {
        let mut form = vec![
            ("state".to_string(), self.state.clone()),
            ("max_restart".to_string(), self.max_restart.to_string()),
            ("max_relocate".to_string(), self.max_relocate.to_string()),
        ];
        if let Some(group) = &self.group {
            form.push(("group".to_string(), group.clone()));
        }
        form
    }
}

/// The HA resource id of a VM.
pub fn ha_sid(vmid: u32) -> String {
    format!("vm:{vmid}")
}
