//! The loop every emulation runs: objects are queued by key from watch-derived triggers
//! and from a periodic relist, and reconciled one at a time, each pass starting from a
//! fresh read. Failed passes are retried with exponential back-off (conflicts soon);
//! a pass may ask to come back after a delay or to relist everything (it freed capacity
//! others wait for). Nothing is cached between passes, so a restart loses nothing.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use tokio::time::Instant;

use super::error::EmulationError;
use crate::management::kube::changes::ObjectKey;

/// What a trigger asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wake {
    /// Reconcile this object.
    Key(ObjectKey),
    /// Relist and reconcile everything (a change that concerns many objects).
    All,
}

/// What a pass asks for next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Nothing until a trigger or the relist.
    Done,
    /// Come back after this delay (waiting for something not watched).
    After(Duration),
    /// Done, and reconcile everything again (e.g. an address was released).
    RelistAll,
}

/// One emulated controller.
pub trait Reconcile: Send + Sync + 'static {
    /// For log lines.
    fn name(&self) -> &'static str;

    /// The keys of every object to look at (the relist).
    fn keys(&self) -> impl Future<Output = Result<Vec<ObjectKey>, EmulationError>> + Send;

    /// One idempotent pass over one object.
    fn reconcile(
        &self,
        key: &ObjectKey,
    ) -> impl Future<Output = Result<Next, EmulationError>> + Send;
}

/// Retry delays: conflicts after a fresh read soon, other failures with doubling delays.
const CONFLICT_RETRY: Duration = Duration::from_millis(100);
const FIRST_RETRY: Duration = Duration::from_millis(250);
const MAX_RETRY: Duration = Duration::from_secs(30);

fn retry_delay(error: &EmulationError, failures: u32) -> Duration {
    if error.is_conflict() {
        return CONFLICT_RETRY;
    }
    FIRST_RETRY
        .saturating_mul(2u32.saturating_pow(failures.saturating_sub(1).min(16)))
        .min(MAX_RETRY)
}

/// Keys waiting, with the time each is due.
#[derive(Default)]
struct Queue {
    due: BTreeMap<ObjectKey, Instant>,
}

impl Queue {
    /// Queues `key` at `at`, or earlier if it already waits for an earlier time.
    fn push(&mut self, key: ObjectKey, at: Instant) {
        let entry = self.due.entry(key).or_insert(at);
        *entry = (*entry).min(at);
    }

    /// When the earliest key is due.
    fn next_due(&self) -> Option<Instant> {
        self.due.values().min().copied()
    }

    fn pop_due(&mut self, now: Instant) -> Option<ObjectKey> {
        let key = self
            .due
            .iter()
            .filter(|(_, at)| **at <= now)
            .min_by_key(|(_, at)| **at)
            .map(|(k, _)| k.clone())?;
        self.due.remove(&key);
        Some(key)
    }
}

/// Runs `reconciler` until `shutdown` resolves.
pub async fn run<R: Reconcile>(
    reconciler: R,
    mut triggers: BoxStream<'static, Wake>,
    relist_interval: Duration,
    shutdown: impl Future<Output = ()> + Send,
) {
    let mut shutdown = std::pin::pin!(shutdown.fuse());
    let mut queue = Queue::default();
    let mut failures: HashMap<ObjectKey, u32> = HashMap::new();
    let mut next_relist = Instant::now();
    let mut triggers_open = true;
    loop {
        let now = Instant::now();
        if now >= next_relist {
            next_relist = now + relist_interval;
            let listed = futures::select! {
                () = shutdown.as_mut() => return,
                listed = reconciler.keys().fuse() => listed,
            };
            match listed {
                Ok(keys) => keys.into_iter().for_each(|k| queue.push(k, now)),
                Err(error) => {
                    tracing::warn!(loop = reconciler.name(), %error, "relist failed");
                    next_relist = now + FIRST_RETRY.max(relist_interval / 10);
                }
            }
        }
        while let Some(key) = queue.pop_due(Instant::now()) {
            let result = futures::select! {
                () = shutdown.as_mut() => return,
                result = reconciler.reconcile(&key).fuse() => result,
            };
            let now = Instant::now();
            match result {
                Ok(next) => {
                    failures.remove(&key);
                    match next {
                        Next::Done => {}
                        Next::After(delay) => queue.push(key, now + delay),
                        Next::RelistAll => next_relist = now,
                    }
                }
                Err(error) => {
                    let count = failures.entry(key.clone()).or_default();
                    *count = count.saturating_add(1);
                    let delay = retry_delay(&error, *count);
                    tracing::debug!(loop = reconciler.name(), namespace = %key.0, name = %key.1, %error, ?delay, "pass failed; retrying");
                    queue.push(key, now + delay);
                }
            }
            // Triggers that arrived meanwhile join the queue before the next pass.
            while triggers_open {
                match triggers.next().now_or_never() {
                    Some(Some(wake)) => apply(wake, &mut queue, &mut next_relist),
                    Some(None) => triggers_open = false,
                    None => break,
                }
            }
            if Instant::now() >= next_relist {
                break;
            }
        }
        let wake_at = queue
            .next_due()
            .map_or(next_relist, |due| due.min(next_relist));
        let sleep = tokio::time::sleep_until(wake_at).fuse();
        let mut sleep = std::pin::pin!(sleep);
        let trigger = async {
            if triggers_open {
                triggers.next().await
            } else {
                futures::future::pending().await
            }
        };
        futures::select! {
            () = shutdown.as_mut() => return,
            () = sleep => {}
            wake = trigger.fuse() => match wake {
                Some(wake) => apply(wake, &mut queue, &mut next_relist),
                None => triggers_open = false,
            },
        }
    }
}

fn apply(wake: Wake, queue: &mut Queue, next_relist: &mut Instant) {
    let now = Instant::now();
    match wake {
        Wake::Key(key) => queue.push(key, now),
        Wake::All => *next_relist = now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::seams::ManagementError;

    #[test]
    fn retries_back_off_and_conflicts_come_back_soon() {
        let conflict = EmulationError::Api(ManagementError::Conflict("x".into()));
        let down = EmulationError::Api(ManagementError::Unavailable("x".into()));
        assert_eq!(retry_delay(&conflict, 7), CONFLICT_RETRY);
        assert_eq!(retry_delay(&down, 1), FIRST_RETRY);
        assert_eq!(retry_delay(&down, 2), FIRST_RETRY * 2);
        assert_eq!(retry_delay(&down, 40), MAX_RETRY);
    }

    #[test]
    fn the_queue_keeps_the_earliest_time_per_key() {
        let now = Instant::now();
        let key = ("ns".to_string(), "a".to_string());
        let mut queue = Queue::default();
        queue.push(key.clone(), now + Duration::from_secs(5));
        queue.push(key.clone(), now);
        queue.push(key.clone(), now + Duration::from_secs(9));
        assert_eq!(queue.next_due(), Some(now));
        assert_eq!(queue.pop_due(now), Some(key));
        assert_eq!(queue.pop_due(now), None);
    }
}
