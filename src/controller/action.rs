//! What a reconcile asks for next, and the error back-off policy.
//!
//! Like kube-rs' `Action`: either "run me again after this long" or "run me again when
//! something I watch changes". Errors go through [`ErrorPolicy`], which turns an error and
//! the number of consecutive failures for the same object into a delay with jitter, so a
//! persistent failure never becomes a hot loop and many objects failing together do not
//! retry in lock-step.

use std::time::Duration;

/// The next step after a successful reconcile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Reconcile again after this long (polling something that has no watch).
    Requeue(Duration),
    /// Nothing to do until the object or something it depends on changes.
    AwaitChange,
}

impl Action {
    /// `Requeue(d)`.
    pub fn requeue(d: Duration) -> Self {
        Self::Requeue(d)
    }

    /// The earlier of two actions (`AwaitChange` is the latest).
    pub fn min(self, other: Action) -> Action {
        match (self, other) {
            (Self::Requeue(a), Self::Requeue(b)) => Self::Requeue(a.min(b)),
            (Self::Requeue(a), Self::AwaitChange) | (Self::AwaitChange, Self::Requeue(a)) => {
                Self::Requeue(a)
            }
            (Self::AwaitChange, Self::AwaitChange) => Self::AwaitChange,
        }
    }
}

/// Retry delays after errors: exponential from `base` to `max`, ±`jitter` (a fraction).
/// Write conflicts retry quickly because the newer object is already there.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ErrorPolicy {
    /// Delay after the first failure.
    pub base: Duration,
    /// Longest delay.
    pub max: Duration,
    /// Random spread, as a fraction of the delay (0.2 = ±20 %).
    pub jitter: f64,
    /// Delay after an optimistic-concurrency conflict.
    pub conflict: Duration,
}

impl Default for ErrorPolicy {
    /// 2 s doubling to 5 min, ±25 %; conflicts after 200 ms.
    fn default() -> Self {
        Self {
            base: Duration::from_secs(2),
            max: Duration::from_secs(300),
            jitter: 0.25,
            conflict: Duration::from_millis(200),
        }
    }
}

impl ErrorPolicy {
    /// The delay before retry number `attempt` (1 = first failure).
    pub fn delay(&self, attempt: u32, conflict: bool) -> Duration {
        let nominal = if conflict {
            self.conflict
        } else {
            let factor = 2u32.saturating_pow(attempt.saturating_sub(1).min(20));
            self.base.saturating_mul(factor).min(self.max)
        };
        spread(nominal, self.jitter)
    }
}

/// `d` scaled by a random factor in `[1 - jitter, 1 + jitter]`.
pub fn spread(d: Duration, jitter: f64) -> Duration {
    let jitter = jitter.clamp(0.0, 1.0);
    // uuid's v4 generator is the OS random source already in the tree.
    let r = (uuid::Uuid::new_v4().as_u128() % 10_000) as f64 / 10_000.0;
    d.mul_f64(1.0 - jitter + 2.0 * jitter * r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_to_the_cap_with_bounded_jitter() {
        let p = ErrorPolicy::default();
        for (attempt, nominal) in [(1, 2), (2, 4), (3, 8), (9, 300), (40, 300)] {
            let d = p.delay(attempt, false).as_secs_f64();
            let n = nominal as f64;
            assert!(
                d >= n * 0.75 - 1e-9 && d <= n * 1.25 + 1e-9,
                "{attempt}: {d}"
            );
        }
        assert!(p.delay(7, true) <= Duration::from_millis(250));
        let delays: std::collections::BTreeSet<_> = (0..20).map(|_| p.delay(3, false)).collect();
        assert!(delays.len() > 1, "jitter spreads retries");
    }

    #[test]
    fn min_prefers_the_earlier_requeue() {
        let a = Action::Requeue(Duration::from_secs(5));
        assert_eq!(a.min(Action::AwaitChange), a);
        assert_eq!(
            a.min(Action::Requeue(Duration::from_secs(1))),
            Action::Requeue(Duration::from_secs(1))
        );
        assert_eq!(
            Action::AwaitChange.min(Action::AwaitChange),
            Action::AwaitChange
        );
    }
}
