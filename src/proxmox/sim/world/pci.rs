//! PCI passthrough as Proxmox VE does it: the datacenter's resource mappings
//! (`/cluster/mapping/pci`), the devices of each node, and the reservation a starting VM
//! takes on the devices its `hostpciN` options name, released when it stops. A mapping
//! offers each of its devices on the VM's node in turn and the first no other VM holds is
//! taken; raw addresses must exist on the node. The refusals are PVE's, with its messages
//! (`PVE::QemuServer::PCI`): they fail the start task. A mediated device (`mdev`) is an
//! instance made on the device, not the device itself, so it holds nothing here.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::Node;
use super::config::is_hostpci_key;
use crate::proxmox::pci_address::{covers, full as full_address};
use crate::proxmox::propstring::PropertyString;
use crate::proxmox::sim::seed::Seed;

/// One mapping.
#[derive(Clone, Debug)]
pub struct PciMapping {
    pub description: String,
    pub devices: Vec<MappedDevice>,
}

/// A device of a mapping.
#[derive(Clone, Debug)]
pub struct MappedDevice {
    pub node: String,
    /// One address, or several `;`-separated.
    pub path: String,
    /// `vendor:device`.
    pub id: String,
}

/// The cluster's PCI devices and who holds them.
#[derive(Clone, Debug, Default)]
pub struct Pci {
    pub mappings: BTreeMap<String, PciMapping>,
    /// Addresses on each node (the mappings' included).
    pub devices: BTreeMap<String, BTreeSet<String>>,
    /// The VM holding each (node, address).
    pub held: BTreeMap<(String, String), u32>,
}

/// The addresses of `wanted` (one function, or every function of a device) on a node.
fn functions<'a>(wanted: &str, present: &'a BTreeSet<String>) -> Vec<&'a String> {
    present.iter().filter(|p| covers(wanted, p)).collect()
}

impl Pci {
    /// The seed's mappings and node devices, checked against its nodes.
    pub fn from_seed(seed: &Seed, nodes: &BTreeMap<String, Node>) -> Result<Self, String> {
        let mut pci = Self::default();
        for node in &seed.nodes {
            pci.devices
                .entry(node.name.clone())
                .or_default()
                .extend(node.pci_devices.iter().map(|d| full_address(d)));
        }
        for mapping in &seed.pci_mappings {
            let mut devices = Vec::new();
            for device in &mapping.map {
                if !nodes.contains_key(&device.node) {
                    return Err(format!(
                        "PCI mapping {} names unknown node {}",
                        mapping.id, device.node
                    ));
                }
                pci.devices
                    .entry(device.node.clone())
                    .or_default()
                    .extend(device.path.split(';').map(full_address));
                devices.push(MappedDevice {
                    node: device.node.clone(),
                    path: device.path.clone(),
                    id: device.id.clone(),
                });
            }
            pci.mappings.insert(
                mapping.id.clone(),
                PciMapping {
                    description: mapping.description.clone(),
                    devices,
                },
            );
        }
        Ok(pci)
    }

    /// `GET /cluster/mapping/pci`: each mapping with its `map` entries as PVE prints them.
    pub fn mappings_view(&self) -> Value {
        let list: Vec<Value> = self
            .mappings
            .iter()
            .map(|(id, m)| {
                let map: Vec<String> = m
                    .devices
                    .iter()
                    .map(|d| format!("id={},node={},path={}", d.id, d.node, d.path))
                    .collect();
                json!({"id": id, "description": m.description, "map": map})
            })
            .collect();
        Value::Array(list)
    }

    /// `GET /nodes/{node}/hardware/pci`: the node's devices, each in its own IOMMU group,
    /// with the vendor and device ids of the mapping that maps it (a display controller).
    pub fn node_view(&self, node: &str) -> Value {
        let ids: BTreeMap<String, &str> = self
            .mappings
            .values()
            .flat_map(|m| &m.devices)
            .filter(|d| d.node == node)
            .flat_map(|d| d.path.split(';').map(|p| (full_address(p), d.id.as_str())))
            .collect();
        let list: Vec<Value> = self
            .devices
            .get(node)
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(group, address)| {
                let (vendor, device) = ids
                    .get(address)
                    .and_then(|id| id.split_once(':'))
                    .unwrap_or(("1af4", "1000"));
                json!({
                    "id": address, "class": "0x030000", "iommugroup": group,
                    "vendor": format!("0x{vendor}"), "device": format!("0x{device}"),
                })
            })
            .collect();
        Value::Array(list)
    }

    /// Takes for `vmid`, starting on `node`, the devices its `hostpciN` options name, all
    /// or none; PVE's start error otherwise.
    pub fn reserve(
        &mut self,
        vmid: u32,
        node: &str,
        config: &BTreeMap<String, String>,
    ) -> Result<(), String> {
        let none = BTreeSet::new();
        let present = self.devices.get(node).unwrap_or(&none);
        let mut taken: Vec<(String, String)> = Vec::new();
        for (key, value) in config {
            if !is_hostpci_key(key) {
                continue;
            }
            let option = PropertyString::parse(value, Some("host"));
            let alternatives: Vec<Vec<String>> = match (option.get("host"), option.get("mapping")) {
                (Some(_), Some(_)) => return Err("Cannot set both 'host' and 'mapping'.".into()),
                (None, None) => return Err("Either 'host' or 'mapping' must be set.".into()),
                (None, Some(mapping)) => {
                    let devices: Vec<Vec<String>> = self
                        .mappings
                        .get(mapping)
                        .into_iter()
                        .flat_map(|m| &m.devices)
                        .filter(|d| d.node == node)
                        .map(|d| d.path.split(';').map(str::to_owned).collect())
                        .collect();
                    if devices.is_empty() {
                        return Err(format!("PCI device mapping not found for '{mapping}'"));
                    }
                    devices
                }
                (Some(host), None) => vec![host.split(';').map(str::to_owned).collect()],
            };
            let mdev = option.get("mdev").is_some();
            let mut refusal = None;
            let mut chosen = None;
            for alternative in alternatives {
                let mut addresses = Vec::new();
                for id in &alternative {
                    let found = functions(id, present);
                    if found.is_empty() {
                        return Err(format!("no PCI device found for '{id}'"));
                    }
                    addresses.extend(found.into_iter().cloned());
                }
                if mdev && addresses.len() > 1 {
                    return Err("cannot use mediated device with multifunction device".into());
                }
                if mdev {
                    chosen = Some(Vec::new());
                    break;
                }
                let owner = addresses.iter().find_map(|a| {
                    let key = (node.to_owned(), a.clone());
                    match self.held.get(&key) {
                        Some(&owner) if owner != vmid => Some((a.clone(), owner)),
                        _ if taken.contains(&key) => Some((a.clone(), vmid)),
                        _ => None,
                    }
                });
                match owner {
                    Some((address, owner)) => {
                        refusal = Some(format!(
                            "PCI device '{address}' already in use by VMID '{owner}'"
                        ));
                    }
                    None => {
                        chosen = Some(addresses);
                        break;
                    }
                }
            }
            match chosen {
                Some(addresses) => {
                    taken.extend(addresses.into_iter().map(|a| (node.to_owned(), a)))
                }
                None => return Err(refusal.unwrap_or_default()),
            }
        }
        for key in taken {
            self.held.insert(key, vmid);
        }
        Ok(())
    }

    /// Releases what `vmid` holds (it stopped, or went).
    pub fn release(&mut self, vmid: u32) {
        self.held.retain(|_, owner| *owner != vmid);
    }
}

/// Whether a `hostpciN` value passes raw addresses (`host`), which PVE lets only root set.
pub fn names_raw_addresses(value: &str) -> bool {
    PropertyString::parse(value, Some("host"))
        .get("host")
        .is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxmox::sim::seed::{SeedPciDevice, SeedPciMapping};

    fn pci() -> Pci {
        let mut seed = Seed::default();
        seed.nodes[0].pci_devices = vec!["0000:05:00.0".into()];
        seed.pci_mappings = vec![SeedPciMapping {
            id: "a100".into(),
            description: String::new(),
            map: ["0000:01:00.0", "0000:02:00.0"]
                .into_iter()
                .map(|path| SeedPciDevice {
                    node: "pve1".into(),
                    path: path.into(),
                    id: "10de:20b5".into(),
                })
                .collect(),
        }];
        let nodes = seed
            .nodes
            .iter()
            .map(|n| {
                (
                    n.name.clone(),
                    Node {
                        name: n.name.clone(),
                        nodeid: 1,
                        cpus: 1,
                        mem_total: 0,
                        mem_base: 0,
                        ip: String::new(),
                    },
                )
            })
            .collect();
        Pci::from_seed(&seed, &nodes).expect("pci")
    }

    fn config(value: &str) -> BTreeMap<String, String> {
        [("hostpci0".to_string(), value.to_string())].into()
    }

    #[test]
    fn a_mapping_gives_each_vm_a_free_device_until_none_is_left() {
        let mut pci = pci();
        let gpu = config("mapping=a100,pcie=1");
        pci.reserve(101, "pve1", &gpu).expect("first device");
        pci.reserve(102, "pve1", &gpu).expect("second device");
        assert_eq!(
            pci.reserve(103, "pve1", &gpu),
            Err("PCI device '0000:02:00.0' already in use by VMID '102'".into())
        );
        assert_eq!(
            pci.reserve(103, "pve2", &gpu),
            Err("PCI device mapping not found for 'a100'".into())
        );
        pci.release(101);
        pci.reserve(103, "pve1", &gpu).expect("freed");
        assert_eq!(pci.held[&("pve1".into(), "0000:01:00.0".into())], 103);
    }

    #[test]
    fn raw_addresses_must_exist_and_be_free() {
        let mut pci = pci();
        pci.reserve(101, "pve1", &config("05:00"))
            .expect("every function of 05:00");
        assert_eq!(
            pci.reserve(102, "pve1", &config("0000:05:00.0")),
            Err("PCI device '0000:05:00.0' already in use by VMID '101'".into())
        );
        assert_eq!(
            pci.reserve(102, "pve1", &config("0000:09:00.0")),
            Err("no PCI device found for '0000:09:00.0'".into())
        );
        assert_eq!(
            pci.reserve(102, "pve1", &config("host=0000:05:00.0,mapping=a100")),
            Err("Cannot set both 'host' and 'mapping'.".into())
        );
        assert!(names_raw_addresses("0000:05:00.0,pcie=1"));
        assert!(!names_raw_addresses("mapping=a100"));
    }
}
