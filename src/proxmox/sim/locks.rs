//! The file locks PVE serialises work with: a per-VM config lock
//! (`/var/lock/qemu-server/lock-<id>.conf`) and a per-storage allocation lock. Tasks
//! queue on them in FIFO order; shared holders (clone sources) may overlap.

use std::collections::{BTreeMap, VecDeque};

/// A lockable resource.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LockKey {
    /// A VM's config file lock.
    VmConfig(u32),
    /// A storage's allocation lock; `scope` is the node for local storages, empty for
    /// shared ones (cluster-wide).
    Storage {
        /// Storage id.
        id: String,
        /// Node, or empty when shared.
        scope: String,
    },
}

impl LockKey {
    /// The timeout error PVE prints for this lock.
    pub fn timeout_message(&self) -> String {
        match self {
            Self::VmConfig(vmid) => {
                format!("can't lock file '/var/lock/qemu-server/lock-{vmid}.conf' - got timeout")
            }
            Self::Storage { id, scope } if scope.is_empty() => {
                format!("cfs-lock 'storage-{id}' error: got lock request timeout")
            }
            Self::Storage { id, .. } => {
                format!("can't lock file '/var/lock/pve-manager/pve-storage-{id}' - got timeout")
            }
        }
    }
}

/// Shared or exclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    /// Several shared holders may coexist.
    Shared,
    /// One holder only.
    Exclusive,
}

#[derive(Debug, Default)]
struct LockState {
    holders: Vec<(u64, LockMode)>,
    waiters: VecDeque<(u64, LockMode)>,
}

/// All locks, by key; holders and waiters are task sequence numbers.
#[derive(Debug, Default)]
pub struct LockTable {
    locks: BTreeMap<LockKey, LockState>,
}

fn compatible(holders: &[(u64, LockMode)], mode: LockMode) -> bool {
    holders.is_empty()
        || (mode == LockMode::Shared && holders.iter().all(|(_, m)| *m == LockMode::Shared))
}

impl LockTable {
    /// Takes the lock now if nobody holds it incompatibly and nobody queues before us.
    pub fn try_acquire(&mut self, key: &LockKey, owner: u64, mode: LockMode) -> bool {
        let state = self.locks.entry(key.clone()).or_default();
        if state.waiters.is_empty() && compatible(&state.holders, mode) {
            state.holders.push((owner, mode));
            true
        } else {
            false
        }
    }

    /// Queues `owner` for the lock.
    pub fn enqueue(&mut self, key: &LockKey, owner: u64, mode: LockMode) {
        self.locks
            .entry(key.clone())
            .or_default()
            .waiters
            .push_back((owner, mode));
    }

    /// Whether anybody holds the lock.
    pub fn is_held(&self, key: &LockKey) -> bool {
        self.locks.get(key).is_some_and(|s| !s.holders.is_empty())
    }

    /// Releases everything `owner` holds or waits for; returns the waiters that now hold
    /// a lock, with the key they got.
    pub fn release_all(&mut self, owner: u64) -> Vec<(u64, LockKey)> {
        let mut granted = Vec::new();
        for (key, state) in &mut self.locks {
            state.holders.retain(|(o, _)| *o != owner);
            state.waiters.retain(|(o, _)| *o != owner);
            while let Some(&(next, mode)) = state.waiters.front() {
                if !compatible(&state.holders, mode) {
                    break;
                }
                state.waiters.pop_front();
                state.holders.push((next, mode));
                granted.push((next, key.clone()));
            }
        }
        self.locks
            .retain(|_, s| !s.holders.is_empty() || !s.waiters.is_empty());
        granted
    }

    /// Releases one lock of `owner`; returns the waiters that now hold it.
    pub fn release(&mut self, key: &LockKey, owner: u64) -> Vec<u64> {
        let Some(state) = self.locks.get_mut(key) else {
            return Vec::new();
        };
        state.holders.retain(|(o, _)| *o != owner);
        let mut granted = Vec::new();
        while let Some(&(next, mode)) = state.waiters.front() {
            if !compatible(&state.holders, mode) {
                break;
            }
            state.waiters.pop_front();
            state.holders.push((next, mode));
            granted.push(next);
        }
        granted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_exclusive_and_shared() {
        let mut t = LockTable::default();
        let k = LockKey::VmConfig(100);
        assert!(t.try_acquire(&k, 1, LockMode::Shared));
        assert!(t.try_acquire(&k, 2, LockMode::Shared));
        assert!(!t.try_acquire(&k, 3, LockMode::Exclusive));
        t.enqueue(&k, 3, LockMode::Exclusive);
        // A later shared request must not overtake the queued exclusive one.
        assert!(!t.try_acquire(&k, 4, LockMode::Shared));
        t.enqueue(&k, 4, LockMode::Shared);
        assert!(t.release(&k, 1).is_empty());
        assert_eq!(t.release_all(2), vec![(3, k.clone())]);
        assert_eq!(t.release(&k, 3), vec![4]);
        assert!(t.is_held(&k));
    }

    #[test]
    fn timeout_messages_match_pve() {
        assert!(
            LockKey::VmConfig(7)
                .timeout_message()
                .contains("lock-7.conf' - got timeout")
        );
        let shared = LockKey::Storage {
            id: "ceph".into(),
            scope: String::new(),
        };
        assert!(
            shared
                .timeout_message()
                .starts_with("cfs-lock 'storage-ceph'")
        );
    }
}
