//! A small bounded cache whose entries expire after a per-entry time to live. Used for the
//! answers of the management cluster (TokenReview, SubjectAccessReview), which kube-apiserver's
//! delegating authenticator and authorizer cache the same way.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Entries live until their deadline; at capacity, expired entries are dropped first and then
/// the entry closest to expiry, so a flood of distinct keys cannot grow memory without bound.
#[derive(Debug)]
pub struct TtlCache<K, V> {
    capacity: usize,
    entries: Mutex<HashMap<K, (V, Instant)>>,
}

impl<K: Eq + Hash + Clone, V: Clone> TtlCache<K, V> {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The live value for `key` at `now`.
    pub fn get_at(&self, key: &K, now: Instant) -> Option<V> {
        let mut entries = self.entries.lock().ok()?;
        match entries.get(key) {
            Some((value, deadline)) if *deadline > now => Some(value.clone()),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    pub fn get(&self, key: &K) -> Option<V> {
        self.get_at(key, Instant::now())
    }

    /// Stores `value` for `ttl` from `now`; a zero TTL stores nothing.
    pub fn insert_at(&self, key: K, value: V, ttl: Duration, now: Instant) {
        if ttl.is_zero() {
            return;
        }
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if entries.len() >= self.capacity && !entries.contains_key(&key) {
            entries.retain(|_, (_, deadline)| *deadline > now);
            if entries.len() >= self.capacity
                && let Some(soonest) = entries
                    .iter()
                    .min_by_key(|(_, (_, deadline))| *deadline)
                    .map(|(k, _)| k.clone())
            {
                entries.remove(&soonest);
            }
        }
        entries.insert(key, (value, now + ttl));
    }

    pub fn insert(&self, key: K, value: V, ttl: Duration) {
        self.insert_at(key, value, ttl, Instant::now());
    }

    /// The number of stored entries, expired or not.
    pub fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_after_their_ttl() {
        let cache = TtlCache::new(8);
        let t0 = Instant::now();
        cache.insert_at("a", 1, Duration::from_secs(10), t0);
        cache.insert_at("b", 2, Duration::from_secs(1), t0);
        cache.insert_at("zero", 3, Duration::ZERO, t0);
        assert_eq!(cache.get_at(&"a", t0 + Duration::from_secs(9)), Some(1));
        assert_eq!(cache.get_at(&"b", t0 + Duration::from_secs(1)), None);
        assert_eq!(cache.get_at(&"zero", t0), None);
        assert_eq!(cache.get_at(&"a", t0 + Duration::from_secs(10)), None);
        assert!(cache.is_empty(), "expired entries are removed on read");
    }

    #[test]
    fn capacity_evicts_expired_then_soonest() {
        let cache = TtlCache::new(2);
        let t0 = Instant::now();
        cache.insert_at(1, "short", Duration::from_secs(1), t0);
        cache.insert_at(2, "long", Duration::from_secs(100), t0);
        // Full: the expired entry makes room.
        cache.insert_at(
            3,
            "new",
            Duration::from_secs(50),
            t0 + Duration::from_secs(2),
        );
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get_at(&2, t0), Some("long"));
        // Full with live entries: the one closest to expiry goes.
        cache.insert_at(
            4,
            "newest",
            Duration::from_secs(100),
            t0 + Duration::from_secs(3),
        );
        assert_eq!(cache.get_at(&3, t0 + Duration::from_secs(3)), None);
        assert_eq!(cache.get_at(&2, t0 + Duration::from_secs(3)), Some("long"));
        assert_eq!(
            cache.get_at(&4, t0 + Duration::from_secs(3)),
            Some("newest")
        );
        // Replacing an existing key never evicts another.
        cache.insert_at(
            4,
            "again",
            Duration::from_secs(100),
            t0 + Duration::from_secs(3),
        );
        assert_eq!(cache.len(), 2);
    }
}
