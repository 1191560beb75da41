//! The work queue (client-go's workqueue semantics with kube-rs' `Action`s):
//!
//! * a key waiting in the queue is there once, however often it is added (dedup);
//! * a key handed to a worker is not handed out again until the worker is `done` with it;
//!   added meanwhile, it is marked dirty and queued again right after (so the change is
//!   seen by a fresh pass, never by two passes at once);
//! * `Requeue(d)` and errors come back after a delay; the earliest pending time wins, and
//!   an immediate add replaces a pending delay;
//! * errors are delayed by the [`ErrorPolicy`] per key (the n-th consecutive failure;
//!   conflicts short); a success resets the count;
//! * `shutdown` empties the queue and wakes every waiting worker with `None`.
//!
//! Times are `tokio::time::Instant`, so tests can run it on a paused clock.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::controller::action::{Action, ErrorPolicy};

/// How a worker's pass over a key ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Success: the reconciler's next action.
    Done(Action),
    /// Failure: back off (`conflict`: the short conflict delay).
    Failed { conflict: bool },
}

struct State<K> {
    ready: VecDeque<K>,
    queued: HashSet<K>,
    processing: HashSet<K>,
    dirty: HashSet<K>,
    /// Pending delayed adds, ordered by due time (the counter keeps entries unique).
    delayed: BTreeSet<(Instant, u64, K)>,
    due: HashMap<K, (Instant, u64)>,
    sequence: u64,
    failures: HashMap<K, u32>,
    shut_down: bool,
}

/// A deduplicating, per-key exclusive work queue with delays and back-off.
pub struct WorkQueue<K> {
    state: Mutex<State<K>>,
    wake: Notify,
    policy: ErrorPolicy,
}

impl<K: Clone + Eq + Hash + Ord> WorkQueue<K> {
    /// An empty queue retrying errors by `policy`.
    pub fn new(policy: ErrorPolicy) -> Self {
        Self {
            state: Mutex::new(State {
                ready: VecDeque::new(),
                queued: HashSet::new(),
                processing: HashSet::new(),
                dirty: HashSet::new(),
                delayed: BTreeSet::new(),
                due: HashMap::new(),
                sequence: 0,
                failures: HashMap::new(),
                shut_down: false,
            }),
            wake: Notify::new(),
            policy,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<K>> {
        // A panic while holding the lock leaves consistent data (no partial updates span
        // an await or a user callback), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `key` now.
    pub fn add(&self, key: K) {
        let mut s = self.lock();
        if s.shut_down {
            return;
        }
        Self::cancel_delay(&mut s, &key);
        Self::enqueue(&mut s, key);
        drop(s);
        self.wake.notify_waiters();
    }

    /// Queues `key` after `delay` (unless it is due earlier already).
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            return self.add(key);
        }
        let mut s = self.lock();
        if s.shut_down {
            return;
        }
        let at = Instant::now() + delay;
        if let Some(&(current, _)) = s.due.get(&key)
            && current <= at
        {
            return;
        }
        Self::cancel_delay(&mut s, &key);
        s.sequence += 1;
        let sequence = s.sequence;
        s.delayed.insert((at, sequence, key.clone()));
        s.due.insert(key, (at, sequence));
        drop(s);
        // A waiting worker may have to wake earlier now.
        self.wake.notify_waiters();
    }

    fn cancel_delay(s: &mut State<K>, key: &K) {
        if let Some((at, sequence)) = s.due.remove(key) {
            s.delayed.remove(&(at, sequence, key.clone()));
        }
    }

    fn enqueue(s: &mut State<K>, key: K) {
        if s.processing.contains(&key) {
            s.dirty.insert(key);
        } else if s.queued.insert(key.clone()) {
            s.ready.push_back(key);
        }
    }

    /// Moves every delayed key that is due to the ready queue; the next due time.
    fn promote(s: &mut State<K>, now: Instant) -> Option<Instant> {
        while let Some(first) = s.delayed.first() {
            if first.0 > now {
                return Some(first.0);
            }
            if let Some((_, _, key)) = s.delayed.pop_first() {
                s.due.remove(&key);
                Self::enqueue(s, key);
            }
        }
        None
    }

    /// The next key to work on (now exclusively the caller's until [`Self::done`]);
    /// `None` once the queue is shut down.
    pub async fn next(&self) -> Option<K> {
        loop {
            let notified = self.wake.notified();
            tokio::pin!(notified);
            // Registered before looking, so an add between the look and the wait wakes us.
            notified.as_mut().enable();
            let next_due = {
                let mut s = self.lock();
                if s.shut_down {
                    return None;
                }
                let next_due = Self::promote(&mut s, Instant::now());
                if let Some(key) = s.ready.pop_front() {
                    s.queued.remove(&key);
                    s.processing.insert(key.clone());
                    return Some(key);
                }
                next_due
            };
            match next_due {
                Some(at) => {
                    tokio::select! {
                        _ = notified => {}
                        _ = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Ends the caller's pass over `key`: a key added meanwhile runs again now; otherwise
    /// the outcome decides (requeue after a delay, wait for a change, back off).
    pub fn done(&self, key: K, outcome: Outcome) {
        let mut s = self.lock();
        s.processing.remove(&key);
        if s.shut_down {
            return;
        }
        let delay = match outcome {
            Outcome::Done(action) => {
                s.failures.remove(&key);
                match action {
                    Action::Requeue(d) => Some(d),
                    Action::AwaitChange => None,
                }
            }
            Outcome::Failed { conflict } => {
                let n = s.failures.entry(key.clone()).or_insert(0);
                *n = n.saturating_add(1);
                Some(self.policy.delay(*n, conflict))
            }
        };
        let dirty = s.dirty.remove(&key);
        drop(s);
        if dirty {
            self.add(key);
        } else if let Some(delay) = delay {
            self.add_after(key, delay);
        }
    }

    /// Gives a key back without a verdict (its pass was abandoned): it runs again now.
    pub fn abandon(&self, key: K) {
        let mut s = self.lock();
        s.processing.remove(&key);
        s.dirty.remove(&key);
        drop(s);
        self.add(key);
    }

    /// Consecutive failures of `key`.
    pub fn failures(&self, key: &K) -> u32 {
        self.lock().failures.get(key).copied().unwrap_or(0)
    }

    /// Keys waiting to be handed out now (not delayed, not in a pass).
    pub fn depth(&self) -> usize {
        self.lock().ready.len()
    }

    /// Keys waiting for their delay.
    pub fn delayed(&self) -> usize {
        self.lock().delayed.len()
    }

    /// Whether `key` is waiting (now or delayed).
    pub fn contains(&self, key: &K) -> bool {
        let s = self.lock();
        s.queued.contains(key) || s.due.contains_key(key)
    }

    /// Drops every key and makes [`Self::next`] answer `None` from now on.
    pub fn shutdown(&self) {
        let mut s = self.lock();
        s.shut_down = true;
        s.ready.clear();
        s.queued.clear();
        s.dirty.clear();
        s.delayed.clear();
        s.due.clear();
        drop(s);
        self.wake.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn queue() -> Arc<WorkQueue<&'static str>> {
        Arc::new(WorkQueue::new(ErrorPolicy {
            base: Duration::from_secs(2),
            max: Duration::from_secs(60),
            jitter: 0.0,
            conflict: Duration::from_millis(200),
        }))
    }

    async fn poll_next(q: &WorkQueue<&'static str>) -> Option<&'static str> {
        tokio::time::timeout(Duration::from_millis(1), q.next())
            .await
            .ok()
            .flatten()
    }

    #[tokio::test(start_paused = true)]
    async fn a_queued_key_is_handed_out_once() {
        let q = queue();
        q.add("a");
        q.add("b");
        q.add("a");
        assert_eq!(q.depth(), 2);
        assert_eq!(q.next().await, Some("a"));
        assert_eq!(q.next().await, Some("b"));
        assert_eq!(poll_next(&q).await, None, "a was deduplicated");
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_in_a_pass_is_not_handed_out_again_but_rerun_after() {
        let q = queue();
        q.add("a");
        let key = q.next().await;
        assert_eq!(key, Some("a"));
        q.add("a");
        q.add("a");
        assert_eq!(poll_next(&q).await, None, "a is being processed");
        q.done("a", Outcome::Done(Action::AwaitChange));
        assert_eq!(
            q.next().await,
            Some("a"),
            "changed while processed: runs again"
        );
        q.done("a", Outcome::Done(Action::AwaitChange));
        assert_eq!(poll_next(&q).await, None, "once");
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_workers_never_share_a_key() {
        let q = queue();
        let running = Arc::new(Mutex::new(HashSet::new()));
        let passes = Arc::new(Mutex::new(0usize));
        let mut workers = Vec::new();
        for _ in 0..4 {
            let (q, running, passes) = (q.clone(), running.clone(), passes.clone());
            workers.push(tokio::spawn(async move {
                while let Some(key) = q.next().await {
                    assert!(running.lock().unwrap().insert(key), "{key} twice at once");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    running.lock().unwrap().remove(&key);
                    *passes.lock().unwrap() += 1;
                    q.done(key, Outcome::Done(Action::AwaitChange));
                }
            }));
        }
        for round in 0..50 {
            for key in ["a", "b", "c"] {
                q.add(key);
            }
            tokio::time::sleep(Duration::from_millis(if round % 2 == 0 { 3 } else { 7 })).await;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        q.shutdown();
        for w in workers {
            w.await.expect("worker");
        }
        let passes = *passes.lock().unwrap();
        assert!((3..150).contains(&passes), "deduplicated passes: {passes}");
    }

    #[tokio::test(start_paused = true)]
    async fn requeues_wait_for_their_delay_and_the_earliest_wins() {
        let q = queue();
        q.add("a");
        let a = q.next().await.expect("a");
        q.done(a, Outcome::Done(Action::Requeue(Duration::from_secs(30))));
        q.add_after("a", Duration::from_secs(60));
        assert_eq!(q.delayed(), 1);
        let start = Instant::now();
        assert_eq!(q.next().await, Some("a"));
        assert_eq!(start.elapsed(), Duration::from_secs(30));
        q.done("a", Outcome::Done(Action::Requeue(Duration::from_secs(30))));
        q.add("a");
        assert_eq!(q.delayed(), 0, "an immediate add replaces the delay");
        assert_eq!(poll_next(&q).await, Some("a"));
    }

    #[tokio::test(start_paused = true)]
    async fn errors_back_off_per_key_and_success_resets() {
        let q = queue();
        q.add("a");
        let mut waits = Vec::new();
        for _ in 0..4 {
            let start = Instant::now();
            let a = q.next().await.expect("a");
            waits.push(start.elapsed().as_secs());
            q.done(a, Outcome::Failed { conflict: false });
        }
        assert_eq!(waits, vec![0, 2, 4, 8]);
        assert_eq!(q.failures(&"a"), 4);
        let a = q.next().await.expect("a");
        q.done(a, Outcome::Failed { conflict: true });
        let start = Instant::now();
        let a = q.next().await.expect("a");
        assert_eq!(
            start.elapsed(),
            Duration::from_millis(200),
            "conflicts retry fast"
        );
        q.done(a, Outcome::Done(Action::AwaitChange));
        assert_eq!(q.failures(&"a"), 0);
        q.add("a");
        let a = q.next().await.expect("a");
        q.done(a, Outcome::Failed { conflict: false });
        let start = Instant::now();
        q.next().await.expect("a");
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(2),
            "back-off starts over"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_wakes_waiting_workers() {
        let q = queue();
        let waiting = tokio::spawn({
            let q = q.clone();
            async move { q.next().await }
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
        q.add_after("a", Duration::from_secs(10));
        q.shutdown();
        assert_eq!(waiting.await.expect("worker"), None);
        q.add("b");
        assert_eq!(q.next().await, None);
    }
}
