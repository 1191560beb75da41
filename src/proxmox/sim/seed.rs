//! The initial state of a simulated cluster: nodes, storages, networks, pools and
//! template VMs. A seed is JSON or YAML; [`Seed::default`] is a three-node cluster with
//! tagged Ubuntu templates, enough for the controller's whole life cycle.

use serde::{Deserialize, Serialize};

/// A whole cluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seed {
    /// Cluster name in `/cluster/status`.
    pub cluster_name: String,
    /// `pve-manager` version reported by `/version`.
    #[serde(default = "default_version")]
    pub version: String,
    /// Cluster members.
    pub nodes: Vec<SeedNode>,
    /// Storage definitions.
    pub storages: Vec<SeedStorage>,
    /// Resource pools.
    #[serde(default)]
    pub pools: Vec<String>,
    /// Bridges with a simulated DHCP range.
    #[serde(default)]
    pub networks: Vec<SeedNetwork>,
    /// Template VMs (`template: 1`).
    #[serde(default)]
    pub templates: Vec<SeedVm>,
    /// Ordinary VMs.
    #[serde(default)]
    pub vms: Vec<SeedVm>,
    /// HA groups.
    #[serde(default)]
    pub ha_groups: Vec<String>,
    /// PCI resource mappings of the datacenter (`/cluster/mapping/pci`).
    #[serde(default)]
    pub pci_mappings: Vec<SeedPciMapping>,
}

/// A PCI resource mapping: a name for one kind of device on several nodes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedPciMapping {
    /// Mapping id (`a100`).
    pub id: String,
    /// Free text.
    #[serde(default)]
    pub description: String,
    /// Its devices, each on a node.
    pub map: Vec<SeedPciDevice>,
}

/// One mapped device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedPciDevice {
    /// Node.
    pub node: String,
    /// PCI address, `0000:01:00.0`, or several `;`-separated (one multi-function device).
    pub path: String,
    /// Vendor and device id, `10de:20b5`.
    pub id: String,
}

fn default_version() -> String {
    "9.0.10".to_string()
}

/// A node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedNode {
    /// Node name.
    pub name: String,
    /// Logical CPUs.
    pub cpus: u32,
    /// Installed memory in GiB.
    pub memory_gib: u64,
    /// Memory the host itself uses, in GiB.
    #[serde(default = "default_base_gib")]
    pub base_used_gib: u64,
    /// Address shown in `/cluster/status`.
    pub ip: String,
    /// PCI devices that may be passed through by address (`hostpci: 0000:01:00.0`), besides
    /// those of the mappings, which exist on their nodes too.
    #[serde(default)]
    pub pci_devices: Vec<String>,
}

fn default_base_gib() -> u64 {
    2
}

/// A storage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedStorage {
    /// Storage id.
    pub id: String,
    /// Plugin type: `dir`, `nfs`, `cifs`, `cephfs` (file-based) or `lvmthin`, `lvm`,
    /// `zfspool`, `rbd` (block).
    #[serde(rename = "type")]
    pub kind: String,
    /// Content types (`images`, `iso`, `rootdir`, `vztmpl`, `backup`, `snippets`, `import`).
    pub content: Vec<String>,
    /// Shared between all nodes (one pool of space) or local to each node.
    #[serde(default)]
    pub shared: bool,
    /// Restrict to these nodes (all when absent).
    #[serde(default)]
    pub nodes: Option<Vec<String>>,
    /// Capacity in GiB (per node for local storages).
    pub total_gib: u64,
}

/// A bridge whose guests get DHCP addresses from a range.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedNetwork {
    /// Bridge name (`vmbr0`).
    pub bridge: String,
    /// Subnet, e.g. `10.0.0.0/24`.
    pub cidr: String,
    /// First and last DHCP address.
    pub dhcp_start: String,
    /// Last DHCP address.
    pub dhcp_end: String,
}

/// A VM or template.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedVm {
    /// VM id.
    pub vmid: u32,
    /// Node it lives on.
    pub node: String,
    /// Name.
    pub name: String,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Storage of the boot disk.
    pub storage: String,
    /// Boot disk size in GiB.
    pub disk_gib: u64,
    /// Memory in MiB.
    #[serde(default = "default_memory")]
    pub memory_mib: u64,
    /// Cores.
    #[serde(default = "default_cores")]
    pub cores: u32,
    /// Bridge of `net0`.
    #[serde(default = "default_bridge")]
    pub bridge: String,
    /// Whether the guest agent is enabled (and installed in the image).
    #[serde(default = "yes")]
    pub agent: bool,
    /// Ordinary VMs only: running at start.
    #[serde(default)]
    pub running: bool,
}

fn default_memory() -> u64 {
    2048
}
fn default_cores() -> u32 {
    2
}
fn default_bridge() -> String {
    "vmbr0".to_string()
}
fn yes() -> bool {
    true
}

impl Seed {
    /// Parses JSON or YAML.
    pub fn parse(text: &str) -> Result<Self, String> {
        match serde_json::from_str(text) {
            Ok(seed) => Ok(seed),
            Err(json_err) => serde_saphyr::from_str(text)
                .map_err(|yaml_err| format!("not a seed (JSON: {json_err}; YAML: {yaml_err})")),
        }
    }

    /// A one-node cluster (no `cluster` entry semantics differ: `nodeid` 0).
    pub fn single_node() -> Self {
        let mut seed = Self::default();
        seed.nodes.truncate(1);
        seed.storages.retain(|s| s.id != "nfs-iso");
        for vm in seed.templates.iter_mut().chain(seed.vms.iter_mut()) {
            vm.node = seed.nodes[0].name.clone();
            if vm.storage == "ceph" {
                vm.storage = "local-lvm".to_string();
            }
        }
        for mapping in &mut seed.pci_mappings {
            mapping.map.truncate(1);
            for device in &mut mapping.map {
                device.node = seed.nodes[0].name.clone();
            }
        }
        seed
    }

    /// A named built-in seed: `default` or `single`.
    pub fn builtin(name: &str) -> Option<Self> {
        match name {
            "default" => Some(Self::default()),
            "single" => Some(Self::single_node()),
            _ => None,
        }
    }
}

impl Default for Seed {
    fn default() -> Self {
        let node = |name: &str, cpus, memory_gib, ip: &str| SeedNode {
            name: name.to_string(),
            cpus,
            memory_gib,
            base_used_gib: 2,
            ip: ip.to_string(),
            pci_devices: Vec::new(),
        };
        let storage = |id: &str, kind: &str, content: &[&str], shared, total_gib| SeedStorage {
            id: id.to_string(),
            kind: kind.to_string(),
            content: content.iter().map(|c| c.to_string()).collect(),
            shared,
            nodes: None,
            total_gib,
        };
        let template = |vmid, node: &str, name: &str, tags: &[&str], storage: &str| SeedVm {
            vmid,
            node: node.to_string(),
            name: name.to_string(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
            storage: storage.to_string(),
            disk_gib: 10,
            memory_mib: 2048,
            cores: 2,
            bridge: "vmbr0".to_string(),
            agent: true,
            running: false,
        };
        Self {
            cluster_name: "capmox-sim".to_string(),
            version: default_version(),
            nodes: vec![
                node("pve1", 16, 64, "10.0.0.11"),
                node("pve2", 16, 64, "10.0.0.12"),
                node("pve3", 8, 32, "10.0.0.13"),
            ],
            storages: vec![
                storage(
                    "local",
                    "dir",
                    &["iso", "vztmpl", "backup", "snippets"],
                    false,
                    100,
                ),
                storage("local-lvm", "lvmthin", &["images", "rootdir"], false, 500),
                storage("ceph", "rbd", &["images"], true, 2048),
                storage("nfs-iso", "nfs", &["iso", "vztmpl"], true, 50),
            ],
            pools: vec!["capi".to_string()],
            networks: vec![SeedNetwork {
                bridge: "vmbr0".to_string(),
                cidr: "10.0.0.0/24".to_string(),
                dhcp_start: "10.0.0.100".to_string(),
                dhcp_end: "10.0.0.199".to_string(),
            }],
            templates: vec![
                template(
                    9000,
                    "pve1",
                    "ubuntu-2404-kube-v1-31",
                    &["capmox", "kube-v1.31", "ubuntu"],
                    "local-lvm",
                ),
                template(
                    9001,
                    "pve2",
                    "ubuntu-2404-kube-v1-32",
                    &["capmox", "kube-v1.32", "ubuntu"],
                    "ceph",
                ),
                template(9002, "pve1", "debian-12-base", &["debian"], "local-lvm"),
            ],
            vms: Vec::new(),
            ha_groups: vec!["capmox".to_string()],
            // One GPU on each of pve2 and pve3, for `pciDevices: [{mapping: gpu}]`.
            pci_mappings: vec![SeedPciMapping {
                id: "gpu".to_string(),
                description: "a GPU on pve2 and one on pve3".to_string(),
                map: ["pve2", "pve3"]
                    .into_iter()
                    .map(|node| SeedPciDevice {
                        node: node.to_string(),
                        path: "0000:41:00.0".to_string(),
                        id: "10de:2236".to_string(),
                    })
                    .collect(),
            }],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_round_trip_through_json_and_yaml() {
        let seed = Seed::default();
        let json = serde_json::to_string(&seed).expect("serializes");
        assert_eq!(Seed::parse(&json), Ok(seed.clone()));
        let yaml = "cluster_name: c\nnodes:\n  - {name: a, cpus: 2, memory_gib: 4, ip: 10.1.1.1}\n\
                    storages:\n  - {id: s, type: dir, content: [iso, images], total_gib: 10}\n";
        let parsed = Seed::parse(yaml).expect("parses");
        assert_eq!(parsed.nodes[0].name, "a");
        assert_eq!(parsed.version, "9.0.10");
        assert!(Seed::parse("nodes: 3").is_err());
        assert_eq!(Seed::builtin("single").map(|s| s.nodes.len()), Some(1));
    }
}
