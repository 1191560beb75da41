//! A token-bucket request rate limit shared by every client that talks to one Proxmox
//! endpoint, so many reconcilers together cannot flood `pveproxy`. It also counts the
//! requests it admitted (the controller reports API calls per provisioned machine).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// Requests per second with a burst allowance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateLimit {
    /// Sustained requests per second.
    pub per_second: f64,
    /// Requests allowed at once after a quiet period.
    pub burst: u32,
}

/// The bucket's arithmetic, separate from waiting so it can be tested without a clock.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

impl Bucket {
    /// Takes a token at `now`, or says how long until one is available.
    fn take(&mut self, limit: RateLimit, now: Instant) -> Result<(), Duration> {
        let rate = limit.per_second.max(f64::MIN_POSITIVE);
        let burst = f64::from(limit.burst.max(1));
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate).min(burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(());
        }
        let wait = ((1.0 - self.tokens) / rate).min(3600.0);
        Err(Duration::from_secs_f64(wait))
    }
}

/// A shared rate limit (or none) plus a counter of admitted requests.
#[derive(Debug)]
pub struct RateLimiter {
    limit: Option<RateLimit>,
    bucket: Mutex<Bucket>,
    admitted: AtomicU64,
}

impl RateLimiter {
    /// A limiter; `None` admits everything (and still counts).
    pub fn new(limit: Option<RateLimit>) -> Self {
        let burst = limit.map(|l| f64::from(l.burst.max(1))).unwrap_or(1.0);
        Self {
            limit,
            bucket: Mutex::new(Bucket {
                tokens: burst,
                last: Instant::now(),
            }),
            admitted: AtomicU64::new(0),
        }
    }

    /// Waits for a token.
    pub async fn acquire(&self) {
        if let Some(limit) = self.limit {
            loop {
                let outcome = {
                    let mut bucket = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
                    bucket.take(limit, Instant::now())
                };
                match outcome {
                    Ok(()) => break,
                    Err(wait) => tokio::time::sleep(wait).await,
                }
            }
        }
        self.admitted.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests admitted so far.
    pub fn admitted(&self) -> u64 {
        self.admitted.load(Ordering::Relaxed)
    }

    /// The configured limit.
    pub fn limit(&self) -> Option<RateLimit> {
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_allows_a_burst_then_paces() {
        let limit = RateLimit {
            per_second: 10.0,
            burst: 3,
        };
        let t0 = Instant::now();
        let mut b = Bucket {
            tokens: 3.0,
            last: t0,
        };
        for _ in 0..3 {
            assert_eq!(b.take(limit, t0), Ok(()));
        }
        let wait = b.take(limit, t0).expect_err("empty");
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-6, "{wait:?}");
        assert_eq!(b.take(limit, t0 + Duration::from_millis(100)), Ok(()));
        // A long pause refills only up to the burst.
        let later = t0 + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(b.take(limit, later), Ok(()));
        }
        assert!(b.take(limit, later).is_err());
    }

    #[tokio::test]
    async fn counts_admitted_requests() {
        let unlimited = RateLimiter::new(None);
        for _ in 0..5 {
            unlimited.acquire().await;
        }
        assert_eq!(unlimited.admitted(), 5);
        let limited = RateLimiter::new(Some(RateLimit {
            per_second: 1000.0,
            burst: 2,
        }));
        limited.acquire().await;
        limited.acquire().await;
        assert_eq!(limited.admitted(), 2);
    }
}
