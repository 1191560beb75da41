//! Reads of the embedded store. Each runs in one redb read transaction (an MVCC snapshot), so
//! it sees one consistent revision and never blocks the writer.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::iter::Peekable;
use std::ops::Bound;

use redb::{Database, ReadTransaction, ReadableDatabase};

use super::tables::{KV, LOG, META, Meta, Row, key_value, listed, log_event, storage};
use crate::error::{Error, Result};
use crate::types::{Event, KeyValue, ListPage, ListQuery, Listed, Revision};

fn begin(db: &Database) -> Result<ReadTransaction> {
    db.begin_read().map_err(storage)
}

fn meta(txn: &ReadTransaction) -> Result<Meta> {
    Meta::read(&txn.open_table(META).map_err(storage)?)
}

pub(super) fn current_meta(db: &Database) -> Result<Meta> {
    meta(&begin(db)?)
}

pub(super) fn get(db: &Database, key: &str) -> Result<KeyValue> {
    let txn = begin(db)?;
    let table = txn.open_table(KV).map_err(storage)?;
    let row = table.get(key).map_err(storage)?;
    row.map(|row| key_value(key, row.value()))
        .ok_or_else(|| Error::NotFound {
            key: key.to_owned(),
        })
}

/// Keys under `prefix` after `start_after` as they were at revision `at`.
///
/// The `kv` table holds the present. For a past revision, the log rows written after it are
/// undone on top of it: the oldest such row of a key holds the key's state at `at`. Each key
/// is lent to `read` while the read transaction holds its page, so a value the reader does not
/// need is never copied.
pub(super) fn list<T>(
    db: &Database,
    query: &ListQuery,
    mut read: impl FnMut(Listed<'_>) -> T,
) -> Result<ListPage<T>> {
    let prefix = query.prefix.as_str();
    let txn = begin(db)?;
    let meta = meta(&txn)?;
    let revision = meta.resolve_read(query.at)?;
    let lower = match query.continue_after() {
        Some(after) => Bound::Excluded(after),
        None => Bound::Included(prefix),
    };
    let past = if revision < meta.revision {
        states_at(&txn, prefix, lower, revision, meta.revision)?
    } else {
        BTreeMap::new()
    };

    let table = txn.open_table(KV).map_err(storage)?;
    let present = table
        .range::<&str>((lower, Bound::Unbounded))
        .map_err(storage)?
        .map(|entry| {
            let (key, row) = entry.map_err(storage)?;
            let key = key.value();
            Ok((key.to_owned(), Visible::Present(row)))
        })
        .take_while(|entry| match entry {
            Ok((key, _)) => key.starts_with(prefix),
            Err(_) => true,
        });
    let past = past
        .into_iter()
        .map(|(key, kv)| (key, kv.map(Visible::Past)));

    let mut items = Vec::new();
    let mut remaining = 0_i64;
    for entry in overlay(present, past) {
        let (key, visible) = entry?;
        if query.limit.is_some_and(|limit| items.len() >= limit) {
            remaining += 1;
        } else {
            items.push(visible.lend(&key, &mut read));
        }
    }
    Ok(ListPage {
        items,
        revision,
        more: remaining > 0,
        remaining: Some(remaining),
    })
}

/// A key's value as a list sees it: still the stored row, or taken from the log.
enum Visible {
    Present(redb::AccessGuard<'static, Row<'static>>),
    Past(KeyValue),
}

impl Visible {
    fn lend<T>(&self, key: &str, read: &mut impl FnMut(Listed<'_>) -> T) -> T {
        match self {
            Visible::Present(row) => read(listed(key, row.value())),
            Visible::Past(kv) => read(kv.listed()),
        }
    }
}

/// For every key under `prefix` (and within `lower`) written after `at`: its state at `at`
/// (`None`: it did not exist then).
fn states_at(
    txn: &ReadTransaction,
    prefix: &str,
    lower: Bound<&str>,
    at: Revision,
    current: Revision,
) -> Result<BTreeMap<String, Option<KeyValue>>> {
    let log = txn.open_table(LOG).map_err(storage)?;
    let mut states = BTreeMap::new();
    for entry in log.range(at + 1..=current).map_err(storage)? {
        let (_, row) = entry.map_err(storage)?;
        let (key, _, prev) = row.value();
        let in_range = match lower {
            Bound::Excluded(after) => key > after,
            _ => true,
        };
        if in_range && key.starts_with(prefix) && !states.contains_key(key) {
            states.insert(key.to_owned(), prev.map(|prev| key_value(key, prev)));
        }
    }
    Ok(states)
}

/// Merges two key-sorted sources: the present, and the keys whose past state overrides it
/// (`None`: absent in the past). Yields what exists in the past view, in key order.
pub(super) fn overlay<T, E>(
    present: impl Iterator<Item = Result<(String, T), E>>,
    past: impl Iterator<Item = (String, Option<T>)>,
) -> impl Iterator<Item = Result<(String, T), E>> {
    Overlay {
        present: present.peekable(),
        past: past.peekable(),
    }
}

struct Overlay<P: Iterator, Q: Iterator> {
    present: Peekable<P>,
    past: Peekable<Q>,
}

impl<T, E, P, Q> Iterator for Overlay<P, Q>
where
    P: Iterator<Item = Result<(String, T), E>>,
    Q: Iterator<Item = (String, Option<T>)>,
{
    type Item = Result<(String, T), E>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let order = match (self.present.peek(), self.past.peek()) {
                (None, None) => return None,
                (Some(Err(_)), _) | (Some(Ok(_)), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some(Ok((present, _))), Some((past, _))) => present.cmp(past),
            };
            match order {
                Ordering::Less => return self.present.next(),
                // The past state of this key wins over the present one.
                Ordering::Equal => drop(self.present.next()),
                Ordering::Greater => {}
            }
            if let Some((key, Some(value))) = self.past.next() {
                return Some(Ok((key, value)));
            }
        }
    }
}

/// Events under `prefix` from the log, above `after`, at most `max` revisions of them.
pub(super) struct LogChunk {
    pub events: Vec<Event>,
    /// Every revision up to here has been looked at.
    pub upto: Revision,
    /// The store's revision when the chunk was read.
    pub current: Revision,
}

pub(super) fn read_log(db: &Database, prefix: &str, after: Revision, max: i64) -> Result<LogChunk> {
    let txn = begin(db)?;
    let meta = meta(&txn)?;
    if !meta.covers_events_after(after) {
        return Err(Error::Expired { requested: after });
    }
    let upto = meta.revision.min(after.saturating_add(max));
    let log = txn.open_table(LOG).map_err(storage)?;
    let mut events = Vec::new();
    if upto > after {
        for entry in log.range(after + 1..=upto).map_err(storage)? {
            let (revision, row) = entry.map_err(storage)?;
            let row = row.value();
            if row.0.starts_with(prefix) {
                events.push(log_event(revision.value(), row));
            }
        }
    }
    Ok(LogChunk {
        events,
        upto: upto.max(after),
        current: meta.revision,
    })
}

#[cfg(test)]
mod tests {
    use super::overlay;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn merged(
        present: &BTreeMap<String, u8>,
        past: &BTreeMap<String, Option<u8>>,
    ) -> Vec<(String, u8)> {
        let present = present.iter().map(|(k, v)| Ok::<_, ()>((k.clone(), *v)));
        let past = past.iter().map(|(k, v)| (k.clone(), *v));
        overlay(present, past)
            .collect::<Result<_, _>>()
            .unwrap_or_default()
    }

    proptest! {
        /// The merge equals applying the past states onto the present map.
        #[test]
        fn overlay_matches_map_model(
            present in prop::collection::btree_map("[a-e]{1,2}", any::<u8>(), 0..12),
            past in prop::collection::btree_map("[a-e]{1,2}", prop::option::of(any::<u8>()), 0..12),
        ) {
            let mut model = present.clone();
            for (key, state) in &past {
                match state {
                    Some(value) => { model.insert(key.clone(), *value); }
                    None => { model.remove(key); }
                }
            }
            let expected: Vec<_> = model.into_iter().collect();
            prop_assert_eq!(merged(&present, &past), expected);
        }
    }

    #[test]
    fn overlay_passes_errors_through() {
        let present = vec![Ok(("a".to_owned(), 1)), Err("boom")].into_iter();
        let past = Vec::<(String, Option<i32>)>::new().into_iter();
        let out: Vec<_> = overlay(present, past).collect();
        assert_eq!(out, vec![Ok(("a".to_owned(), 1)), Err("boom")]);
    }
}
