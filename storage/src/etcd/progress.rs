//! Which of etcd's progress notifications a watch may pass on as [`Event::Progress`] marks.
//!
//! A mark promises that every event up to its revision has been delivered. etcd before 3.4.25
//! and 3.5.8 answers a progress *request* on a side channel that can overtake events still
//! queued for the watcher — by a whole replay when the watcher started in the past
//! (etcd issue 15220). Relaying such an answer could make a client resume after events it never
//! got. So with those versions a requested answer is relayed only once the watcher is in sync
//! — it started at the head, etcd's own periodic notification (which travels in order) said so,
//! or it has been open for [`SETTLE`], ten rounds of etcd's 100 ms replay loop — and only after
//! a second request came back, by which time anything queued before the first answer has been
//! sent. The settle time is a heuristic; the watch also ends with `Expired` should an event
//! ever arrive at or below a mark it passed on.
//!
//! [`Event::Progress`]: crate::Event::Progress

use std::time::Duration;

use tokio::time::Instant;

use crate::types::Revision;

/// How long an old etcd may take to replay history to a new watcher, by assumption.
pub(super) const SETTLE: Duration = Duration::from_secs(1);

/// Whether etcd orders answers to progress requests with the events of a watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ProgressTrust {
    Ordered,
    Unordered,
}

impl ProgressTrust {
    /// Judges an etcd server version such as `3.4.23`; anything unreadable counts as old.
    pub(super) fn of_version(version: &str) -> Self {
        let mut parts = version
            .split(['.', '-', '+'])
            .map(|part| part.parse::<u64>().ok());
        let (Some(Some(major)), Some(Some(minor)), Some(Some(patch))) =
            (parts.next(), parts.next(), parts.next())
        else {
            return ProgressTrust::Unordered;
        };
        let fixed = match (major, minor) {
            (3, 4) => patch >= 25,
            (3, 5) => patch >= 8,
            (3, 0..=3) | (0..=2, _) => false,
            _ => true,
        };
        if fixed {
            ProgressTrust::Ordered
        } else {
            ProgressTrust::Unordered
        }
    }
}

/// What to do with one progress notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Pass on a mark at this revision.
    Relay(Revision),
    /// Send another progress request; its answer confirms this one.
    AskAgain,
    /// Drop it: it may be ahead of queued events.
    Ignore,
}

/// The progress state of one etcd watch stream (reset when the watch reconnects).
pub(super) struct ProgressGate {
    trust: ProgressTrust,
    /// From when the watcher counts as in sync.
    in_sync_from: Instant,
    unconfirmed: Option<Revision>,
}

impl ProgressGate {
    /// A watch that asked to start at `start` and was created `now`, when etcd was at
    /// `created_at`. Starting above etcd's revision, it had nothing to replay: it is in sync.
    pub(super) fn new(
        trust: ProgressTrust,
        start: Revision,
        created_at: Revision,
        now: Instant,
    ) -> Self {
        Self {
            trust,
            in_sync_from: if start > created_at {
                now
            } else {
                now + SETTLE
            },
            unconfirmed: None,
        }
    }

    /// Judges a notification at `revision`; `periodic` when it is etcd's own periodic one
    /// (addressed to the watcher, sent only when it is in sync), not an answer to a request.
    pub(super) fn judge(&mut self, revision: Revision, periodic: bool, now: Instant) -> Verdict {
        if periodic {
            self.in_sync_from = self.in_sync_from.min(now);
            return Verdict::Relay(revision);
        }
        if self.trust == ProgressTrust::Ordered {
            return Verdict::Relay(revision);
        }
        if now < self.in_sync_from {
            return Verdict::Ignore;
        }
        match self.unconfirmed.take() {
            Some(first) => Verdict::Relay(first),
            None => {
                self.unconfirmed = Some(revision);
                Verdict::AskAgain
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_with_ordered_progress() {
        for version in ["3.4.25", "3.4.31", "3.5.8", "3.5.21", "3.6.0", "4.0.0"] {
            assert_eq!(
                ProgressTrust::of_version(version),
                ProgressTrust::Ordered,
                "{version}"
            );
        }
        for version in ["3.4.23", "3.5.1", "3.3.27", "", "garbage", "3.4"] {
            assert_eq!(
                ProgressTrust::of_version(version),
                ProgressTrust::Unordered,
                "{version}"
            );
        }
    }

    #[test]
    fn a_fixed_etcd_is_relayed_at_once() {
        let now = Instant::now();
        let mut gate = ProgressGate::new(ProgressTrust::Ordered, 5, 10, now);
        assert_eq!(gate.judge(12, false, now), Verdict::Relay(12));
    }

    #[test]
    fn an_old_etcd_replaying_history_is_not_trusted_until_it_settled() {
        let now = Instant::now();
        let mut gate = ProgressGate::new(ProgressTrust::Unordered, 5, 10, now);
        assert_eq!(gate.judge(12, false, now), Verdict::Ignore);
        let settled = now + SETTLE;
        assert_eq!(gate.judge(12, false, settled), Verdict::AskAgain);
        assert_eq!(gate.judge(13, false, settled), Verdict::Relay(12));
    }

    #[test]
    fn etcds_periodic_notification_proves_the_watch_in_sync() {
        let now = Instant::now();
        let mut gate = ProgressGate::new(ProgressTrust::Unordered, 5, 10, now);
        assert_eq!(gate.judge(13, true, now), Verdict::Relay(13));
        assert_eq!(gate.judge(14, false, now), Verdict::AskAgain);
        assert_eq!(gate.judge(15, false, now), Verdict::Relay(14));
    }

    #[test]
    fn an_old_etcd_in_sync_needs_a_second_answer() {
        let now = Instant::now();
        let mut gate = ProgressGate::new(ProgressTrust::Unordered, 11, 10, now);
        assert_eq!(gate.judge(12, false, now), Verdict::AskAgain);
        assert_eq!(gate.judge(12, false, now), Verdict::Relay(12));
        assert_eq!(gate.judge(20, false, now), Verdict::AskAgain);
    }
}
