//! Memory-aware placement of a new VM onto one of the allowed nodes (upstream §6.9.1).
//!
//! A node's reservable memory is `total × adjustment / 100` minus the configured memory
//! (`maxmem`) of every non-template VM and every container on it, floored at 0. Nodes are
//! ranked by reservable memory, then (stable) by how many of the cluster's machines of
//! the same role already run there, so VMs spread; the first node where the VM fits
//! strictly wins, else the node with the most memory if it fits exactly.
//!
//! `memoryAdjustment: 0` switches the memory check off (what upstream's docs promise;
//! upstream's code instead compared against the node's total memory): every allowed node
//! is eligible, placement only spreads by count, and no node memory is read at all.
//!
//! CPUs count when `cpuAdjustment` is set (upstream #724): a node's allocatable CPUs are
//! `logical CPUs × cpuAdjustment / 100` minus the CPUs of every non-template VM and every
//! container on it, and only nodes with the VM's CPUs left are ranked at all ([`with_cpus`]).

use std::collections::BTreeMap;

/// A node and the memory still reservable on it (`None`: not checked).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeCapacity {
    /// Node name.
    pub node: String,
    /// Reservable bytes; `None` when the memory check is off.
    pub available: Option<u64>,
}

/// No allowed node has room for the VM.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot reserve {requested}B of memory on node {node}: {available}B available memory left")]
pub struct InsufficientMemory {
    /// Requested bytes.
    pub requested: u64,
    /// The node with the most room.
    pub node: String,
    /// Its reservable bytes.
    pub available: u64,
}

/// A node and the logical CPUs still allocatable on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeCpus {
    pub node: String,
    pub available: u64,
}

/// No allowed node has the CPUs the VM needs left.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot reserve {requested} CPUs: no allowed node has that many left ({left})")]
pub struct InsufficientCpus {
    pub requested: u64,
    /// What each node has left, `pve1: 2, pve2: 0`.
    pub left: String,
}

/// The nodes (in their order) with at least `requested` CPUs left.
pub fn with_cpus(nodes: &[NodeCpus], requested: u64) -> Result<Vec<String>, InsufficientCpus> {
    let fitting: Vec<String> = nodes
        .iter()
        .filter(|n| requested <= n.available)
        .map(|n| n.node.clone())
        .collect();
    if fitting.is_empty() {
        let left: Vec<String> = nodes
            .iter()
            .map(|n| format!("{}: {}", n.node, n.available))
            .collect();
        return Err(InsufficientCpus {
            requested,
            left: left.join(", "),
        });
    }
    Ok(fitting)
}

/// The default `memoryAdjustment`.
pub const DEFAULT_ADJUSTMENT: u64 = 100;

/// `total × adjustment / 100 − used`, floored at 0 (no overflow for any input).
pub fn reservable(total: u64, adjustment: u64, used: u64) -> u64 {
    let scaled = u128::from(total) * u128::from(adjustment) / 100;
    u64::try_from(scaled.saturating_sub(u128::from(used))).unwrap_or(u64::MAX)
}

/// Picks the node for a VM needing `requested` bytes. `placed` counts the cluster's
/// machines of the same role per node (from `status.nodeLocations`). `nodes` keeps the
/// order of `allowedNodes`, which breaks remaining ties.
pub fn pick_node(
    nodes: &[NodeCapacity],
    requested: u64,
    placed: &BTreeMap<String, usize>,
) -> Result<String, InsufficientMemory> {
    let mut ranked: Vec<&NodeCapacity> = nodes.iter().collect();
    // Unlimited nodes rank first; the sorts are stable so allowedNodes order breaks ties.
    ranked.sort_by_key(|n| std::cmp::Reverse(n.available.unwrap_or(u64::MAX)));
    let Some(most_free) = ranked.first().copied() else {
        return Err(InsufficientMemory {
            requested,
            node: String::new(),
            available: 0,
        });
    };
    if let Some(max) = most_free.available
        && requested > max
    {
        return Err(InsufficientMemory {
            requested,
            node: most_free.node.clone(),
            available: max,
        });
    }
    ranked.sort_by_key(|n| placed.get(&n.node).copied().unwrap_or(0));
    let fits = |n: &&&NodeCapacity| n.available.is_none_or(|a| requested < a);
    Ok(ranked
        .iter()
        .find(fits)
        .copied()
        .unwrap_or(most_free)
        .node
        .clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// Runs the upstream test sequence: each pick takes `request` from the chosen node
    /// and counts one more machine there.
    fn sequence(mib: &[(&str, u64)], request: u64, rounds: usize) -> Vec<String> {
        let mut nodes: Vec<NodeCapacity> = mib
            .iter()
            .map(|(n, m)| NodeCapacity {
                node: n.to_string(),
                available: Some(m * MIB),
            })
            .collect();
        let mut placed = BTreeMap::new();
        let mut out = Vec::new();
        for _ in 0..rounds {
            match pick_node(&nodes, request * MIB, &placed) {
                Ok(node) => {
                    if let Some(n) = nodes.iter_mut().find(|n| n.node == node) {
                        n.available = n.available.map(|a| a - request * MIB);
                    }
                    *placed.entry(node.clone()).or_insert(0) += 1;
                    out.push(node);
                }
                Err(_) => {
                    out.push("out of memory".into());
                    break;
                }
            }
        }
        out
    }

    #[test]
    fn upstream_sequences() {
        assert_eq!(
            sequence(&[("pve1", 20), ("pve2", 30), ("pve3", 15)], 8, 10),
            [
                "pve2",
                "pve1",
                "pve3",
                "pve2",
                "pve1",
                "pve2",
                "out of memory"
            ]
        );
        assert_eq!(
            sequence(&[("pve1", 25), ("pve2", 35), ("pve3", 15)], 8, 8),
            [
                "pve2", "pve1", "pve3", "pve2", "pve1", "pve2", "pve1", "pve2"
            ]
        );
    }

    #[test]
    fn insufficient_memory_names_the_most_free_node() {
        let nodes = [NodeCapacity {
            node: "pve1".into(),
            available: Some(10),
        }];
        assert_eq!(
            pick_node(&nodes, 11, &BTreeMap::new()).map_err(|e| e.to_string()),
            Err("cannot reserve 11B of memory on node pve1: 10B available memory left".into())
        );
        // An exact fit falls back to the most free node.
        assert_eq!(pick_node(&nodes, 10, &BTreeMap::new()), Ok("pve1".into()));
        assert!(pick_node(&[], 1, &BTreeMap::new()).is_err());
    }

    #[test]
    fn adjustment_zero_only_spreads() {
        let nodes: Vec<NodeCapacity> = ["a", "b", "c"]
            .iter()
            .map(|n| NodeCapacity {
                node: n.to_string(),
                available: None,
            })
            .collect();
        let placed: BTreeMap<String, usize> = [("a".into(), 2), ("b".into(), 1)].into();
        assert_eq!(pick_node(&nodes, u64::MAX, &placed), Ok("c".into()));
        assert_eq!(pick_node(&nodes, 1, &BTreeMap::new()), Ok("a".into()));
    }

    #[test]
    fn only_nodes_with_the_cpus_left_are_ranked() {
        let nodes = [
            NodeCpus {
                node: "pve1".into(),
                available: reservable(16, 200, 29),
            },
            NodeCpus {
                node: "pve2".into(),
                available: reservable(8, 100, 6),
            },
        ];
        assert_eq!(with_cpus(&nodes, 2), Ok(vec!["pve1".into(), "pve2".into()]));
        assert_eq!(with_cpus(&nodes, 3), Ok(vec!["pve1".into()]));
        assert_eq!(
            with_cpus(&nodes, 4).map_err(|e| e.to_string()),
            Err(
                "cannot reserve 4 CPUs: no allowed node has that many left (pve1: 3, pve2: 2)"
                    .into()
            )
        );
    }

    #[test]
    fn reservable_scales_and_floors() {
        assert_eq!(reservable(100, 100, 30), 70);
        assert_eq!(reservable(100, 300, 30), 270);
        assert_eq!(reservable(100, 95, 100), 0);
        assert_eq!(reservable(u64::MAX, u64::MAX, 0), u64::MAX);
    }
}
