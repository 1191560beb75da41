//! Which nodes can give a machine the PCI devices it wants. A resource mapping has some
//! devices on each node; a device is taken by every VM whose `hostpciN` names the mapping
//! there (Proxmox VE hands one device of the mapping to each at start, and refuses the
//! start when none is left), and by this process's recent placements that Proxmox does not
//! show yet. Raw host addresses pin the machine to the nodes that have them, free of any
//! VM's `hostpciN`. A node is a candidate when it can give every device; when none is, the
//! machine waits, and the message names the mapping or address and what each node has.

use std::collections::{BTreeMap, BTreeSet};

use crate::api::v1alpha2::PciDevice;
use crate::proxmox::pci_address::overlap;
use crate::proxmox::propstring::PropertyString;
use crate::proxmox::types::PciMapping;

/// How many devices of each mapping a machine wants.
pub fn wanted(devices: &[PciDevice]) -> BTreeMap<String, usize> {
    let mut wanted = BTreeMap::new();
    for mapping in devices.iter().filter_map(|d| d.mapping.as_ref()) {
        *wanted.entry(mapping.clone()).or_insert(0) += 1;
    }
    wanted
}

/// The mappings a VM config's `hostpciN` options name, one entry per option.
pub fn mappings_in<'a>(options: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    options
        .into_iter()
        .filter_map(|value| {
            PropertyString::parse(value, Some("host"))
                .get("mapping")
                .map(str::to_owned)
        })
        .collect()
}

/// The raw host addresses a machine wants.
pub fn wanted_addresses(devices: &[PciDevice]) -> Vec<String> {
    devices
        .iter()
        .flat_map(|d| d.device_ids.iter().cloned())
        .collect()
}

/// The raw host addresses a VM config's `hostpciN` options pass through.
pub fn addresses_in<'a>(options: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    options
        .into_iter()
        .filter_map(|value| {
            PropertyString::parse(value, Some("host"))
                .get("host")
                .map(str::to_owned)
        })
        .flat_map(|host| host.split(';').map(str::to_owned).collect::<Vec<_>>())
        .collect()
}

/// The `candidates` (in their order) that have every `wanted` address (`present`: each
/// node's devices) and where no VM passes one through (`held`: node and address); the
/// reason when there are none.
pub fn nodes_with_addresses(
    candidates: &[String],
    wanted: &[String],
    present: &BTreeMap<String, Vec<String>>,
    held: &BTreeSet<(String, String)>,
) -> Result<Vec<String>, String> {
    let state = |node: &str, address: &str| {
        let has = present
            .get(node)
            .is_some_and(|devices| devices.iter().any(|d| overlap(address, d)));
        let taken = held.iter().any(|(n, a)| n == node && overlap(address, a));
        match (has, taken) {
            (false, _) => Some("absent"),
            (true, true) => Some("held by another VM"),
            (true, false) => None,
        }
    };
    let fits: Vec<String> = candidates
        .iter()
        .filter(|node| wanted.iter().all(|a| state(node, a).is_none()))
        .cloned()
        .collect();
    let Some(address) = wanted
        .iter()
        .find(|a| candidates.iter().all(|node| state(node, a).is_some()))
        .filter(|_| fits.is_empty())
    else {
        return Ok(fits);
    };
    let checked: Vec<String> = candidates
        .iter()
        .map(|node| format!("{node}: {}", state(node, address).unwrap_or("free")))
        .collect();
    Err(format!(
        "no node has PCI device {address} free ({})",
        checked.join(", ")
    ))
}

/// Devices per (node, mapping).
pub type Counts = BTreeMap<(String, String), usize>;

/// The devices each mapping has on each node.
pub fn provided(mappings: &[PciMapping]) -> Counts {
    let mut counts = Counts::new();
    for mapping in mappings {
        for node in mapping.device_nodes() {
            *counts.entry((node, mapping.id.clone())).or_insert(0) += 1;
        }
    }
    counts
}

/// The `candidates` (in their order) where every wanted mapping has enough devices that
/// `taken` does not hold; the reason when there are none.
pub fn nodes_with_devices(
    candidates: &[String],
    wanted: &BTreeMap<String, usize>,
    provided: &Counts,
    taken: &Counts,
) -> Result<Vec<String>, String> {
    let free = |node: &str, mapping: &str| {
        let key = (node.to_owned(), mapping.to_owned());
        let has = provided.get(&key).copied().unwrap_or(0);
        (
            has,
            has.saturating_sub(taken.get(&key).copied().unwrap_or(0)),
        )
    };
    let fits: Vec<String> = candidates
        .iter()
        .filter(|node| wanted.iter().all(|(m, n)| free(node, m).1 >= *n))
        .cloned()
        .collect();
    if !fits.is_empty() || wanted.is_empty() {
        return Ok(fits);
    }
    let (mapping, count) = wanted
        .iter()
        .find(|(m, n)| candidates.iter().all(|node| free(node, m).1 < **n))
        .or_else(|| wanted.iter().next())
        .expect("wanted is not empty");
    let checked: Vec<String> = candidates
        .iter()
        .map(|node| match free(node, mapping) {
            (0, _) => format!("{node}: none mapped"),
            (has, left) => format!("{node}: {} of {has} taken", has - left),
        })
        .collect();
    let devices = if *count == 1 { "device" } else { "devices" };
    Err(format!(
        "no node has {count} free {devices} of PCI mapping {mapping:?} ({})",
        checked.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapping(id: &str, nodes: &[&str]) -> PciMapping {
        PciMapping {
            id: id.into(),
            map: nodes
                .iter()
                .enumerate()
                .map(|(i, n)| format!("id=10de:20b5,node={n},path=0000:0{i}:00.0"))
                .collect(),
        }
    }

    fn nodes(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn a_node_qualifies_while_its_mapping_has_a_free_device() {
        let provided = provided(&[mapping("a100", &["pve1", "pve1", "pve2"])]);
        let wanted = wanted(&[PciDevice {
            mapping: Some("a100".into()),
            ..PciDevice::default()
        }]);
        let all = nodes(&["pve1", "pve2", "pve3"]);
        assert_eq!(
            nodes_with_devices(&all, &wanted, &provided, &Counts::new()),
            Ok(nodes(&["pve1", "pve2"]))
        );
        let taken: Counts = [
            (("pve1".into(), "a100".into()), 2),
            (("pve2".into(), "a100".into()), 1),
        ]
        .into();
        assert_eq!(
            nodes_with_devices(&all, &wanted, &provided, &taken),
            Err("no node has 1 free device of PCI mapping \"a100\" (pve1: 2 of 2 taken, pve2: 1 of 1 \
                 taken, pve3: none mapped)"
                .into())
        );
    }

    #[test]
    fn raw_addresses_pin_to_the_nodes_that_have_them_free() {
        let present = BTreeMap::from([
            ("pve1".to_string(), vec!["0000:81:00.0".to_string()]),
            (
                "pve2".to_string(),
                vec!["0000:81:00.0".to_string(), "0000:81:00.1".to_string()],
            ),
        ]);
        let all = nodes(&["pve1", "pve2", "pve3"]);
        let wanted = vec!["81:00".to_string()];
        assert_eq!(
            nodes_with_addresses(&all, &wanted, &present, &BTreeSet::new()),
            Ok(nodes(&["pve1", "pve2"]))
        );
        let held = BTreeSet::from([
            ("pve1".to_string(), "0000:81:00.0".to_string()),
            ("pve2".to_string(), "81:00.1".to_string()),
        ]);
        assert_eq!(
            nodes_with_addresses(&all, &wanted, &present, &held),
            Err(
                "no node has PCI device 81:00 free (pve1: held by another VM, pve2: held by \
                 another VM, pve3: absent)"
                    .into()
            )
        );
        assert_eq!(
            addresses_in(["0000:81:00.0;0000:81:00.1,pcie=1", "mapping=a100"]),
            ["0000:81:00.0", "0000:81:00.1"]
        );
    }

    #[test]
    fn two_devices_of_one_mapping_need_two_free_on_one_node() {
        let provided = provided(&[mapping("l4", &["pve1", "pve2", "pve2"])]);
        let gpu = PciDevice {
            mapping: Some("l4".into()),
            ..PciDevice::default()
        };
        let wanted = wanted(&[gpu.clone(), gpu]);
        assert_eq!(
            nodes_with_devices(
                &nodes(&["pve1", "pve2"]),
                &wanted,
                &provided,
                &Counts::new()
            ),
            Ok(nodes(&["pve2"]))
        );
        assert_eq!(
            mappings_in(["mapping=l4,pcie=1", "0000:05:00.0", "host=01:00,mapping=x"]),
            ["l4", "x"]
        );
    }
}
