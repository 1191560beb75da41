//! Placements this process made recently.
//!
//! Proxmox's `/cluster/resources` shows a new VM's memory only seconds after the clone
//! (about 10 s on real PVE), and a ProxmoxCluster's `status.nodeLocations` is written after
//! the clone as well, so machines scheduled in one burst would all see the same node as the
//! freest and land on it. Each placement is therefore remembered for [`MEMORY_LAG`]: its
//! memory counts as used on its node, and it counts as a machine of its cluster and role
//! there, and the PCI devices of the mappings it wants count as taken there. Past that
//! window Proxmox and the cluster's status tell the truth again. (A VM
//! already visible in Proxmox is counted twice within the window: placement errs on the
//! side of spreading, never of overcommitting.) Like the VMID reservations, this is per
//! process and keyed by node name.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use jiff::Timestamp;

/// How long a placement counts on its node.
pub const MEMORY_LAG: Duration = Duration::from_secs(60);

/// Machines that spread together: one cluster's control plane, or its workers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub namespace: String,
    pub cluster: String,
    pub control_plane: bool,
}

#[derive(Debug)]
struct Placement {
    machine: String,
    node: String,
    hold: Hold,
    group: Group,
    at: Timestamp,
}

/// What a placement takes on its node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hold {
    /// Memory.
    pub bytes: u64,
    /// Logical CPUs (counted only where `cpuAdjustment` asks).
    pub cpus: u64,
    /// One PCI mapping per device it wants of one.
    pub mappings: Vec<String>,
    /// The raw PCI addresses it passes through.
    pub addresses: Vec<String>,
}

/// What other recent placements hold.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reserved {
    /// Memory per node.
    pub bytes: BTreeMap<String, u64>,
    /// Node per machine name, for the machines of the asking group.
    pub machines: BTreeMap<String, String>,
}

/// The recent placements, per machine uid.
#[derive(Debug, Default)]
pub struct Placements(Mutex<HashMap<String, Placement>>);

impl Placements {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Placement>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Places machine `uid` (`machine` by name, of `group`, taking `hold`): `pick` chooses
    /// its node from what the other placements hold, and the choice is recorded, under one
    /// lock, so that machines placed at the same moment each see the others' placement
    /// (reading, then recording under two locks let two workers both take the freest node).
    pub fn place<E>(
        &self,
        uid: &str,
        machine: &str,
        group: Group,
        hold: Hold,
        now: Timestamp,
        pick: impl FnOnce(Reserved) -> Result<String, E>,
    ) -> Result<String, E> {
        let mut placements = self.live(now);
        let node = pick(reserved_in(&placements, uid, &group))?;
        placements.insert(
            uid.to_owned(),
            Placement {
                machine: machine.to_owned(),
                node: node.clone(),
                hold,
                group,
                at: now,
            },
        );
        Ok(node)
    }

    /// The PCI devices per (node, mapping) that the placements of machines other than
    /// `uid` take at `now`, but for those whose VM Proxmox shows already (`visible`, by node
    /// and name), which count by their config.
    pub fn devices(
        &self,
        uid: &str,
        now: Timestamp,
        visible: &BTreeSet<(String, String)>,
    ) -> BTreeMap<(String, String), usize> {
        let mut taken = BTreeMap::new();
        self.for_unseen(uid, now, visible, |p| {
            for mapping in &p.hold.mappings {
                *taken.entry((p.node.clone(), mapping.clone())).or_insert(0) += 1;
            }
        });
        taken
    }

    /// The raw PCI addresses (by node) that the placements of machines other than `uid`
    /// take at `now`, but for those whose VM Proxmox shows already (`visible`).
    pub fn addresses(
        &self,
        uid: &str,
        now: Timestamp,
        visible: &BTreeSet<(String, String)>,
    ) -> BTreeSet<(String, String)> {
        let mut taken = BTreeSet::new();
        self.for_unseen(uid, now, visible, |p| {
            taken.extend(p.hold.addresses.iter().map(|a| (p.node.clone(), a.clone())));
        });
        taken
    }

    /// The CPUs per node that the placements of machines other than `uid` take at `now`,
    /// but for those whose VM Proxmox shows with its CPUs already (`visible`).
    pub fn cpus(
        &self,
        uid: &str,
        now: Timestamp,
        visible: &BTreeSet<(String, String)>,
    ) -> BTreeMap<String, u64> {
        let mut taken = BTreeMap::new();
        self.for_unseen(uid, now, visible, |p| {
            *taken.entry(p.node.clone()).or_insert(0) += p.hold.cpus;
        });
        taken
    }

    /// Calls `f` with every live placement of a machine other than `uid` whose VM is not
    /// `visible` (by node and name).
    fn for_unseen(
        &self,
        uid: &str,
        now: Timestamp,
        visible: &BTreeSet<(String, String)>,
        mut f: impl FnMut(&Placement),
    ) {
        let placements = self.live(now);
        placements
            .iter()
            .filter(|(u, p)| *u != uid && !visible.contains(&(p.node.clone(), p.machine.clone())))
            .for_each(|(_, p)| f(p));
    }

    /// The placements still within [`MEMORY_LAG`] at `now`; expired ones are dropped.
    fn live(&self, now: Timestamp) -> std::sync::MutexGuard<'_, HashMap<String, Placement>> {
        let mut placements = self.lock();
        placements.retain(|_, p| {
            now.duration_since(p.at)
                .try_into()
                .is_ok_and(|age: Duration| age < MEMORY_LAG)
        });
        placements
    }

    /// Forgets machine `uid` (deleted).
    pub fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }
}

/// What the placements of machines other than `uid` hold: memory per node, and the nodes of
/// the machines of `group`.
fn reserved_in(placements: &HashMap<String, Placement>, uid: &str, group: &Group) -> Reserved {
    let mut reserved = Reserved::default();
    for (_, p) in placements.iter().filter(|(u, _)| *u != uid) {
        *reserved.bytes.entry(p.node.clone()).or_insert(0) += p.hold.bytes;
        if p.group == *group {
            reserved.machines.insert(p.machine.clone(), p.node.clone());
        }
    }
    reserved
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(cluster: &str, control_plane: bool) -> Group {
        Group {
            namespace: "ns".into(),
            cluster: cluster.into(),
            control_plane,
        }
    }

    /// Places `uid` on `node`, and returns what the others held when it was placed.
    fn place_on(
        placements: &Placements,
        (uid, machine, node): (&str, &str, &str),
        hold: Hold,
        group: Group,
        now: Timestamp,
    ) -> Reserved {
        let mut seen = None;
        let placed = placements.place(uid, machine, group, hold, now, |reserved| {
            seen = Some(reserved);
            Ok::<_, ()>(node.to_owned())
        });
        assert_eq!(placed, Ok(node.to_owned()));
        seen.expect("picked")
    }

    /// What the others hold for `uid` of `group` at `now`, without placing it.
    fn reserved(placements: &Placements, uid: &str, group: &Group, now: Timestamp) -> Reserved {
        let mut seen = None;
        let refused = placements.place(uid, "", group.clone(), Hold::default(), now, |reserved| {
            seen = Some(reserved);
            Err(())
        });
        assert_eq!(refused, Err(()), "a refused pick records nothing");
        seen.expect("picked")
    }

    #[test]
    fn placements_count_for_others_until_they_expire() {
        let placements = Placements::default();
        let t0 = Timestamp::UNIX_EPOCH;
        let cp = group("c1", true);
        let hold = |bytes, mappings: &[&str]| Hold {
            bytes,
            cpus: 2,
            mappings: mappings.iter().map(|m| m.to_string()).collect(),
            addresses: vec!["0000:81:00.0".to_string()],
        };
        place_on(
            &placements,
            ("u1", "m1", "pve1"),
            hold(4, &["a100"]),
            cp.clone(),
            t0,
        );
        place_on(
            &placements,
            ("u2", "m2", "pve1"),
            hold(2, &[]),
            group("c1", false),
            t0,
        );
        place_on(
            &placements,
            ("u3", "m3", "pve2"),
            hold(8, &["a100", "a100"]),
            group("c2", true),
            t0,
        );

        let seen = reserved(&placements, "u9", &cp, t0);
        assert_eq!(
            seen.bytes,
            BTreeMap::from([("pve1".into(), 6), ("pve2".into(), 8)]),
            "memory counts across clusters and roles"
        );
        assert_eq!(
            seen.machines,
            BTreeMap::from([("m1".into(), "pve1".into())]),
            "only the same cluster and role spread together"
        );
        // A machine's own placement does not count against it.
        assert_eq!(
            reserved(&placements, "u1", &cp, t0).machines,
            BTreeMap::new()
        );
        assert_eq!(
            placements.devices("u3", t0, &BTreeSet::new()),
            BTreeMap::from([(("pve1".into(), "a100".into()), 1)]),
            "the devices a placement wants count as taken on its node"
        );
        let shown = BTreeSet::from([("pve1".to_string(), "m1".to_string())]);
        assert!(
            placements.devices("u3", t0, &shown).is_empty(),
            "once Proxmox shows the VM, its config counts instead"
        );
        assert_eq!(
            placements.cpus("u9", t0, &shown),
            BTreeMap::from([("pve1".into(), 2), ("pve2".into(), 2)])
        );
        assert_eq!(
            placements.addresses("u9", t0, &shown),
            BTreeSet::from([
                ("pve1".to_string(), "0000:81:00.0".to_string()),
                ("pve2".to_string(), "0000:81:00.0".to_string()),
            ])
        );

        let later = t0 + Duration::from_secs(59);
        assert_eq!(reserved(&placements, "u9", &cp, later).bytes.len(), 2);
        let expired = t0 + MEMORY_LAG;
        assert_eq!(
            reserved(&placements, "u9", &cp, expired),
            Reserved::default()
        );

        place_on(
            &placements,
            ("u1", "m1", "pve1"),
            hold(4, &[]),
            cp.clone(),
            expired,
        );
        placements.forget("u1");
        assert_eq!(
            reserved(&placements, "u9", &cp, expired),
            Reserved::default()
        );
    }

    /// Two workers placed at the same moment, each picking the node with the fewest workers
    /// and slow to decide (a preempted thread): the second sees the first's placement.
    #[test]
    fn machines_placed_at_once_see_each_other() {
        let placements = std::sync::Arc::new(Placements::default());
        let workers = group("c1", false);
        let place = |uid: &'static str| {
            let (placements, workers) = (std::sync::Arc::clone(&placements), workers.clone());
            std::thread::spawn(move || {
                let hold = Hold::default();
                placements.place(uid, uid, workers, hold, Timestamp::UNIX_EPOCH, |reserved| {
                    std::thread::sleep(Duration::from_millis(50));
                    let taken: Vec<&String> = reserved.machines.values().collect();
                    let node = ["pve1", "pve2"]
                        .into_iter()
                        .find(|node| !taken.iter().any(|t| t.as_str() == *node))
                        .unwrap_or("pve1");
                    Ok::<_, ()>(node.to_owned())
                })
            })
        };
        let (a, b) = (place("w1"), place("w2"));
        let mut nodes = [a.join().expect("w1"), b.join().expect("w2")].map(Result::unwrap);
        nodes.sort();
        assert_eq!(nodes, ["pve1".to_owned(), "pve2".to_owned()]);
    }
}
