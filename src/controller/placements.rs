//! Placements this process made recently.
//!
//! Proxmox's `/cluster/resources` shows a new VM's memory only seconds after the clone
//! (about 10 s on real PVE), and a ProxmoxCluster's `status.nodeLocations` is written after
//! the clone as well, so machines scheduled in one burst would all see the same node as the
//! freest and land on it. Each placement is therefore remembered for [`MEMORY_LAG`]: its
//! memory counts as used on its node, and it counts as a machine of its cluster and role
//! there. Past that window Proxmox and the cluster's status tell the truth again. (A VM
//! already visible in Proxmox is counted twice within the window: placement errs on the
//! side of spreading, never of overcommitting.) Like the VMID reservations, this is per
//! process and keyed by node name.

use std::collections::{BTreeMap, HashMap};
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
    bytes: u64,
    group: Group,
    at: Timestamp,
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

    /// Remembers that machine `uid` (`machine` by name) was placed on `node`.
    pub fn record(
        &self,
        uid: &str,
        machine: &str,
        node: &str,
        bytes: u64,
        group: Group,
        now: Timestamp,
    ) {
        self.lock().insert(
            uid.to_owned(),
            Placement {
                machine: machine.to_owned(),
                node: node.to_owned(),
                bytes,
                group,
                at: now,
            },
        );
    }

    /// What the placements of machines other than `uid` still hold at `now`; expired ones
    /// are dropped.
    pub fn reserved(&self, uid: &str, group: &Group, now: Timestamp) -> Reserved {
        let mut placements = self.lock();
        placements.retain(|_, p| {
            now.duration_since(p.at)
                .try_into()
                .is_ok_and(|age: Duration| age < MEMORY_LAG)
        });
        let mut reserved = Reserved::default();
        for (_, p) in placements.iter().filter(|(u, _)| *u != uid) {
            *reserved.bytes.entry(p.node.clone()).or_insert(0) += p.bytes;
            if p.group == *group {
                reserved.machines.insert(p.machine.clone(), p.node.clone());
            }
        }
        reserved
    }

    /// Forgets machine `uid` (deleted).
    pub fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }
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

    #[test]
    fn placements_count_for_others_until_they_expire() {
        let placements = Placements::default();
        let t0 = Timestamp::UNIX_EPOCH;
        let cp = group("c1", true);
        placements.record("u1", "m1", "pve1", 4, cp.clone(), t0);
        placements.record("u2", "m2", "pve1", 2, group("c1", false), t0);
        placements.record("u3", "m3", "pve2", 8, group("c2", true), t0);

        let seen = placements.reserved("u9", &cp, t0);
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
        assert_eq!(placements.reserved("u1", &cp, t0).machines, BTreeMap::new());

        let later = t0 + Duration::from_secs(59);
        assert_eq!(placements.reserved("u9", &cp, later).bytes.len(), 2);
        let expired = t0 + MEMORY_LAG;
        assert_eq!(placements.reserved("u9", &cp, expired), Reserved::default());

        placements.record("u1", "m1", "pve1", 4, cp.clone(), expired);
        placements.forget("u1");
        assert_eq!(placements.reserved("u9", &cp, expired), Reserved::default());
    }
}
