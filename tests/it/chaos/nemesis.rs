//! The faults, one per round: each is injected, held, healed, and timed.

use std::time::Duration;

use tokio::time::Instant;

use super::system::System;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    KillEtcdLeader,
    KillEtcdFollower,
    PartitionEtcdLeader,
    KillLeadingReplica,
    KillFollowerReplica,
    PauseLeadingReplica,
}

impl Fault {
    pub const ALL: [Fault; 6] = [
        Fault::KillEtcdLeader,
        Fault::KillLeadingReplica,
        Fault::PartitionEtcdLeader,
        Fault::KillFollowerReplica,
        Fault::KillEtcdFollower,
        Fault::PauseLeadingReplica,
    ];

    pub fn describe(self) -> &'static str {
        match self {
            Fault::KillEtcdLeader => "SIGKILL the etcd leader, restart it",
            Fault::KillEtcdFollower => "SIGKILL an etcd follower, restart it",
            Fault::PartitionEtcdLeader => "cut the etcd leader off from its peers, heal",
            Fault::KillLeadingReplica => "SIGKILL the replica leading the controller, restart it",
            Fault::KillFollowerReplica => "SIGKILL a replica that does not lead, restart it",
            Fault::PauseLeadingReplica => "SIGSTOP the leading replica past the lease TTL, SIGCONT",
        }
    }

    fn hits_the_controller(self) -> bool {
        matches!(self, Fault::KillLeadingReplica | Fault::PauseLeadingReplica)
    }
}

/// What one round did.
#[derive(Clone, Debug)]
pub struct Round {
    pub fault: Fault,
    /// Nanoseconds since the workload began: injected, healed.
    pub injected: u64,
    pub healed: u64,
    /// From the fault to another replica leading (faults on the leading replica).
    pub failover: Option<Duration>,
    /// Two replicas said they led on consecutive probes (100 ms apart).
    pub two_leaders: bool,
    /// Probes at which a woken leader still claimed to lead beside the new one.
    pub stale_claims: usize,
}

/// How long a fault is held.
pub struct Timing {
    pub hold: Duration,
    /// SIGSTOP lasts past the lease TTL by this much.
    pub pause: Duration,
}

pub async fn inject(
    system: &mut System,
    fault: Fault,
    timing: &Timing,
    now: impl Fn() -> u64,
) -> Round {
    let leader = system.wait_for_leader(None, Duration::from_secs(60)).await;
    let etcd_leader = system.etcd.leader().await;
    let injected = now();
    let at = Instant::now();
    let mut failover = None;
    let mut two_leaders = false;
    let mut stale_claims = 0;
    match fault {
        Fault::KillEtcdLeader | Fault::KillEtcdFollower => {
            let leader = etcd_leader.expect("an etcd leader");
            let target = if fault == Fault::KillEtcdLeader {
                leader
            } else {
                (leader + 1) % system.etcd.members.len()
            };
            system.etcd.members[target].process.kill();
            tokio::time::sleep(timing.hold).await;
            system.etcd.members[target].process.restart();
        }
        Fault::PartitionEtcdLeader => {
            let target = etcd_leader.expect("an etcd leader");
            system.etcd.partition(target, true);
            tokio::time::sleep(timing.hold).await;
            system.etcd.partition(target, false);
        }
        Fault::KillLeadingReplica | Fault::KillFollowerReplica | Fault::PauseLeadingReplica => {
            let leader = leader.expect("a leading replica");
            let target = if fault.hits_the_controller() {
                leader
            } else {
                (leader + 1) % system.replicas.len()
            };
            let pause = fault == Fault::PauseLeadingReplica;
            if pause {
                system.replicas[target].process.pause(true);
            } else {
                system.replicas[target].process.kill();
            }
            if fault.hits_the_controller() {
                failover = system
                    .wait_for_leader(Some(target), Duration::from_secs(60))
                    .await
                    .map(|_| at.elapsed());
            }
            let held = if pause { timing.pause } else { timing.hold };
            let end = at + held;
            while Instant::now() < end {
                two_leaders |= system.leaders().await.len() > 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            if pause {
                system.replicas[target].process.pause(false);
                // The old leader wakes with an expired lease and stands down. Until its
                // supervisor has run, its gauge may still say it leads, for a probe; its
                // Proxmox writes are fenced meanwhile. Two leaders on consecutive probes
                // would be a real overlap.
                let mut before = false;
                for _ in 0..20 {
                    let now = system.leaders().await.len() > 1;
                    two_leaders |= before && now;
                    stale_claims += usize::from(now);
                    before = now;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            } else {
                system.restart_replica(target);
            }
            system.wait_ready(target, Duration::from_secs(60)).await;
        }
    }
    system.etcd.wait_for_leader(Duration::from_secs(60)).await;
    Round {
        fault,
        injected,
        healed: now(),
        failover,
        two_leaders,
        stale_claims,
    }
}
