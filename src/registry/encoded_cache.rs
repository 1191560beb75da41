//! The JSON of stored objects as each served version reads them, kept by revision, so that a
//! LIST of unchanged objects does not decode, convert and encode every item again (for
//! kube-apiserver the watch cache keeps serialized objects for the same reason).
//!
//! An object at a revision never changes, so an entry is never stale and nothing invalidates
//! it: the entries of overwritten or deleted objects are simply never asked for again and
//! leave first-in, first-out once the cache holds its budget of bytes.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use capmox_storage::Revision;
use serde_json::value::RawValue;

use super::descriptor::GroupVersion;

/// Bytes an entry costs besides its JSON: the map slot, the queue slot, the key's heap block.
const ENTRY_OVERHEAD: usize = 96;

/// Encoded objects by (revision, version), bounded by bytes; a budget of 0 keeps nothing.
pub struct EncodedCache {
    budget: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<Slot, Entry>,
    /// Insertion order, oldest first.
    order: VecDeque<Slot>,
    bytes: usize,
}

/// A revision names one write, which (in this server) writes one key; the key is kept in the
/// entry and compared, so a store that wrote two keys in one revision still reads right. The
/// reader is the `ResourceRest` that encoded it: a kind defined by a CRD gets a new one when
/// its schema changes, and an object reads differently under another schema.
type Slot = (Revision, GroupVersion, ReaderId);

/// Which `ResourceRest` encoded an entry.
pub type ReaderId = u64;

struct Entry {
    key: Box<str>,
    json: Arc<RawValue>,
}

impl Entry {
    fn cost(&self) -> usize {
        ENTRY_OVERHEAD + self.key.len() + self.json.get().len()
    }
}

impl EncodedCache {
    pub fn new(budget_bytes: usize) -> Self {
        Self {
            budget: budget_bytes,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The JSON of the object stored at `key` in `revision` as `version` reads it: from the
    /// cache, else made by `encode` and kept.
    pub fn get_or_encode<E>(
        &self,
        key: &str,
        slot: (Revision, GroupVersion, ReaderId),
        encode: impl FnOnce() -> Result<Box<RawValue>, E>,
    ) -> Result<Arc<RawValue>, E> {
        if let Some(json) = self.cached(key, slot) {
            return Ok(json);
        }
        let json: Arc<RawValue> = encode()?.into();
        self.insert(key, slot, Arc::clone(&json));
        Ok(json)
    }

    /// The JSON of the object stored at `key` in `revision` as `version` reads it, if kept.
    pub fn cached(&self, key: &str, slot: Slot) -> Option<Arc<RawValue>> {
        if self.budget == 0 {
            return None;
        }
        let inner = self.inner.lock().ok()?;
        let entry = inner.entries.get(&slot)?;
        (*entry.key == *key).then(|| Arc::clone(&entry.json))
    }

    fn insert(&self, key: &str, slot: Slot, json: Arc<RawValue>) {
        let entry = Entry {
            key: key.into(),
            json,
        };
        let cost = entry.cost();
        if cost > self.budget {
            return;
        }
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        if inner.entries.contains_key(&slot) {
            return;
        }
        while inner.bytes + cost > self.budget {
            let Some(oldest) = inner.order.pop_front() else {
                break;
            };
            if let Some(evicted) = inner.entries.remove(&oldest) {
                inner.bytes -= evicted.cost();
            }
        }
        inner.bytes += cost;
        inner.order.push_back(slot);
        inner.entries.insert(slot, entry);
    }

    /// Bytes held (JSON and bookkeeping).
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.inner.lock().map_or(0, |inner| inner.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: GroupVersion = GroupVersion {
        group: "g",
        version: "v1",
    };
    const V2: GroupVersion = GroupVersion {
        group: "g",
        version: "v2",
    };

    fn raw(text: &str) -> Result<Box<RawValue>, ()> {
        Ok(RawValue::from_string(text.to_owned()).expect("json"))
    }

    fn read(cache: &EncodedCache, key: &str, revision: Revision, version: GroupVersion) -> String {
        cache
            .get_or_encode(key, (revision, version, 0), || {
                raw(&format!("\"{key}@{revision}\""))
            })
            .expect("encoded")
            .get()
            .to_owned()
    }

    /// Whether reading the object at `key` in `revision` had to encode it.
    fn encoded(cache: &EncodedCache, key: &str, revision: Revision, version: GroupVersion) -> bool {
        let mut encoded = false;
        cache
            .get_or_encode(key, (revision, version, 0), || {
                encoded = true;
                raw("0")
            })
            .expect("encoded");
        encoded
    }

    #[test]
    fn encodes_once_per_revision_and_version() {
        let cache = EncodedCache::new(1 << 20);
        let encodings = (0..3).filter(|_| encoded(&cache, "/k", 5, V1)).count();
        assert_eq!(encodings, 1);
        assert!(encoded(&cache, "/k", 5, V2), "another version");
        assert!(encoded(&cache, "/k", 6, V1), "another revision");
    }

    #[test]
    fn another_key_at_the_same_revision_is_not_mistaken_for_the_first() {
        let cache = EncodedCache::new(1 << 20);
        assert_eq!(read(&cache, "/a", 7, V1), "\"/a@7\"");
        assert_eq!(read(&cache, "/b", 7, V1), "\"/b@7\"");
    }

    #[test]
    fn stays_within_its_budget_dropping_the_oldest_first() {
        let one = ENTRY_OVERHEAD + "/k".len() + "\"/k@0\"".len();
        let cache = EncodedCache::new(3 * one);
        for revision in 0..10 {
            read(&cache, "/k", revision, V1);
            assert!(cache.bytes() <= 3 * one, "{} > {}", cache.bytes(), 3 * one);
        }
        assert!(!encoded(&cache, "/k", 9, V1), "the newest entries stay");
        assert!(encoded(&cache, "/k", 0, V1), "the oldest went");
    }

    #[test]
    fn a_budget_of_zero_keeps_nothing() {
        let cache = EncodedCache::new(0);
        let encodings = (0..2).filter(|_| encoded(&cache, "/k", 1, V1)).count();
        assert_eq!((encodings, cache.bytes()), (2, 0));
    }
}
