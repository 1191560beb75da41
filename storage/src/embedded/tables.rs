//! The redb tables of the embedded store and how their rows map to store values.
//!
//! - `kv`: key → (create_revision, mod_revision, value): the current state.
//! - `log`: revision → (key, new (create_revision, value) or none for a delete,
//!   previous (create_revision, mod_revision, value)): one row per revision, trimmed to the
//!   configured history. It serves watches from a past revision and reads at a past revision.
//! - `meta`: the current revision, the compacted revision and the file format version.

use redb::{ReadableTable, TableDefinition};

use crate::error::{Error, Result};
use crate::types::{Event, KeyValue, Listed, Revision};

/// A row of `kv`: (create_revision, mod_revision, value).
pub(super) type Row<'a> = (i64, i64, &'a [u8]);
/// A row of `log`: (key, (create_revision, value) written or `None` for a delete, previous row).
pub(super) type LogRow<'a> = (&'a str, Option<(i64, &'a [u8])>, Option<Row<'a>>);

pub(super) const KV: TableDefinition<&str, Row<'static>> = TableDefinition::new("kv");
pub(super) const LOG: TableDefinition<i64, LogRow<'static>> = TableDefinition::new("log");
pub(super) const META: TableDefinition<&str, i64> = TableDefinition::new("meta");

const META_REVISION: &str = "revision";
const META_COMPACTED: &str = "compacted";
const META_FORMAT: &str = "format";
/// Bumped whenever the table layout changes, so an old binary refuses a newer file.
const FORMAT_VERSION: i64 = 1;
/// The revision of an empty store, as in etcd: the first write gets revision 2.
pub(super) const INITIAL_REVISION: Revision = 1;

/// The store-wide counters, read in the same transaction as the data they describe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Meta {
    /// The revision of the latest committed write.
    pub revision: Revision,
    /// Reads below this revision, and watches that need events before it, are `Expired`.
    pub compacted: Revision,
}

impl Meta {
    pub(super) fn read(table: &impl ReadableTable<&'static str, i64>) -> Result<Self> {
        let format = read_counter(table, META_FORMAT)?;
        if format != Some(FORMAT_VERSION) {
            return Err(Error::Internal(format!(
                "database format {format:?} is not the supported version {FORMAT_VERSION}"
            )));
        }
        Ok(Self {
            revision: read_counter(table, META_REVISION)?.unwrap_or(INITIAL_REVISION),
            compacted: read_counter(table, META_COMPACTED)?.unwrap_or(0),
        })
    }

    pub(super) fn write(&self, table: &mut redb::Table<&'static str, i64>) -> Result<()> {
        table
            .insert(META_REVISION, self.revision)
            .map_err(storage)?;
        table
            .insert(META_COMPACTED, self.compacted)
            .map_err(storage)?;
        Ok(())
    }

    /// Marks a new file with the current format; refuses a file written in another format.
    pub(super) fn initialize(table: &mut redb::Table<&'static str, i64>) -> Result<()> {
        match read_counter(table, META_FORMAT)? {
            None => {
                table.insert(META_FORMAT, FORMAT_VERSION).map_err(storage)?;
                Ok(())
            }
            Some(FORMAT_VERSION) => Ok(()),
            Some(other) => Err(Error::Internal(format!(
                "database format {other} is not the supported version {FORMAT_VERSION}"
            ))),
        }
    }

    /// The revision a read at `at` (default: now) sees, or why it cannot be served.
    pub(super) fn resolve_read(&self, at: Option<Revision>) -> Result<Revision> {
        match at {
            None => Ok(self.revision),
            Some(at) if at > self.revision => Err(Error::FutureRevision { requested: at }),
            Some(at) if at < self.compacted => Err(Error::Expired { requested: at }),
            Some(at) => Ok(at),
        }
    }

    /// Whether the log still holds every revision above `after`.
    pub(super) fn covers_events_after(&self, after: Revision) -> bool {
        after + 1 >= self.compacted
    }
}

fn read_counter(table: &impl ReadableTable<&'static str, i64>, name: &str) -> Result<Option<i64>> {
    Ok(table.get(name).map_err(storage)?.map(|guard| guard.value()))
}

/// A row of `kv` as a list lends it.
pub(super) fn listed<'a>(key: &'a str, (create_revision, revision, value): Row<'a>) -> Listed<'a> {
    Listed {
        key,
        value,
        revision,
        create_revision,
    }
}

/// Turns a row of `kv` into a [`KeyValue`].
pub(super) fn key_value(key: &str, row: Row<'_>) -> KeyValue {
    listed(key, row).to_key_value()
}

/// Turns a row of `log` at `revision` into the watch event it records.
pub(super) fn log_event(revision: Revision, (key, new, prev): LogRow<'_>) -> Event {
    let prev = prev.map(|row| key_value(key, row));
    match new {
        Some((create_revision, value)) => Event::Put {
            kv: key_value(key, (create_revision, revision, value)),
            prev,
        },
        None => Event::Delete {
            key: key.to_owned(),
            revision,
            prev,
        },
    }
}

/// Maps any redb failure to the store's error type.
pub(super) fn storage(error: impl Into<redb::Error>) -> Error {
    Error::Internal(format!("embedded store: {}", error.into()))
}
