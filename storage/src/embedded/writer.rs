//! The single writer of the embedded store, with group commit.
//!
//! Writes queue up as commands. One thread takes everything queued (up to `max_batch`), applies
//! it in one redb write transaction (each write gets its own revision, in queue order), commits
//! it durably (fsync), and only then publishes the changes to watchers and acknowledges each
//! write. While one commit syncs, the next batch queues up, so throughput grows with the
//! number of concurrent writers instead of being capped at one fsync per write. When the last
//! batch had several writers, the next commit waits up to `commit_delay` for as many (as
//! PostgreSQL's `commit_delay` does when other transactions are active): writers that spend
//! CPU between writes (an API server decoding and validating) otherwise arrive one by one
//! and each pays a commit. While it waits, only the write that completes the batch wakes it
//! ([`Arrivals`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use redb::{Database, Durability, ReadableTable, Table};
use tokio::sync::{broadcast, mpsc, oneshot};

use super::arrivals::Arrivals;
use super::tables::{KV, LOG, LogRow, META, Meta, Row, key_value, storage};
use crate::error::{Error, Result};
use crate::types::{Deleted, Event, KeyValue, Revision};

pub(super) enum WriteOp {
    Create {
        key: String,
        value: Bytes,
    },
    Update {
        key: String,
        value: Bytes,
        expected: Revision,
    },
    Delete {
        key: String,
        expected: Option<Revision>,
    },
    Compact {
        revision: Revision,
    },
}

pub(super) enum Outcome {
    Written(Revision),
    Deleted(Deleted),
    Compacted,
}

pub(super) enum Command {
    Write {
        op: WriteOp,
        reply: oneshot::Sender<Result<Outcome>>,
    },
    /// Commit what is queued before this, then stop.
    Stop,
}

/// What the writer tells watchers.
#[derive(Clone)]
pub(super) enum Announcement {
    /// One durable commit: revisions `first..=last`, one event each, in order.
    Committed(Arc<Batch>),
    /// No more commits will come.
    Stopped,
}

pub(super) struct Batch {
    pub first: Revision,
    pub last: Revision,
    pub events: Vec<Event>,
}

pub(super) struct Writer {
    pub db: Arc<Database>,
    pub commands: mpsc::Receiver<Command>,
    pub hub: broadcast::Sender<Announcement>,
    pub revision: Arc<AtomicI64>,
    pub history: u64,
    pub max_batch: usize,
    /// Longest a commit waits for the writers the previous batch had.
    pub commit_delay: Duration,
    /// Counts what is queued, and wakes this thread when a batch is complete.
    pub arrivals: Arc<Arrivals>,
}

/// The writes of the next commit, and whether a `Stop` came after them.
#[derive(Default)]
struct Gathered {
    batch: Vec<(WriteOp, oneshot::Sender<Result<Outcome>>)>,
    stop: bool,
}

impl Gathered {
    fn push(&mut self, command: Command) {
        match command {
            Command::Write { op, reply } => self.batch.push((op, reply)),
            Command::Stop => self.stop = true,
        }
    }
}

/// A failure that sinks a whole batch; `fatal` when the commit itself failed and redb refuses
/// further writes until the file is reopened.
struct Abort {
    error: Error,
    fatal: bool,
}

fn abort(error: impl Into<redb::Error>) -> Abort {
    Abort {
        error: storage(error),
        fatal: false,
    }
}

impl Writer {
    pub(super) fn run(mut self) {
        self.arrivals.register_writer();
        let mut expected = 1;
        while let Some(command) = self.commands.blocking_recv() {
            let mut gathered = Gathered::default();
            self.take(&mut gathered, command);
            self.drain(&mut gathered);
            // Group commit under concurrency: the last batch says how many writers are active;
            // wait (briefly) for as many, so that they share one fsync instead of queueing
            // behind a commit each. A lone writer (last batch of one) never waits.
            // (`expected` is a batch's size, so never above `max_batch`; a zero delay never
            // waits.)
            let deadline = Instant::now() + self.commit_delay;
            while gathered.batch.len() < expected && !gathered.stop && Instant::now() < deadline {
                self.arrivals
                    .wait_for(expected - gathered.batch.len(), deadline);
                self.drain(&mut gathered);
            }
            let Gathered { batch, stop } = gathered;
            expected = batch.len().max(1);
            if !batch.is_empty() && !self.commit(batch) {
                tracing::error!("embedded store stopped accepting writes after a failed commit");
                break;
            }
            if stop {
                break;
            }
        }
        // Nobody listening is fine: watchers come and go.
        let _ = self.hub.send(Announcement::Stopped);
    }

    /// Adds a command taken off the queue.
    fn take(&self, gathered: &mut Gathered, command: Command) {
        self.arrivals.taken();
        gathered.push(command);
    }

    /// Adds whatever is already queued, up to `max_batch` writes or a `Stop`.
    fn drain(&mut self, gathered: &mut Gathered) {
        while !gathered.stop && gathered.batch.len() < self.max_batch {
            match self.commands.try_recv() {
                Ok(command) => self.take(gathered, command),
                Err(_) => break,
            }
        }
    }

    /// Commits one batch and answers its writers. Returns false when the store cannot go on.
    fn commit(&self, batch: Vec<(WriteOp, oneshot::Sender<Result<Outcome>>)>) -> bool {
        let (ops, replies): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
        match self.apply(&ops) {
            Ok((outcomes, committed)) => {
                if let Some(batch) = committed {
                    self.revision.store(batch.last, Ordering::Release);
                    let _ = self.hub.send(Announcement::Committed(Arc::new(batch)));
                }
                for (reply, outcome) in replies.into_iter().zip(outcomes) {
                    let _ = reply.send(outcome);
                }
                true
            }
            Err(Abort { error, fatal }) => {
                for reply in replies {
                    let _ = reply.send(Err(error.clone()));
                }
                !fatal
            }
        }
    }

    fn apply(&self, ops: &[WriteOp]) -> Result<(Vec<Result<Outcome>>, Option<Batch>), Abort> {
        let mut txn = self.db.begin_write().map_err(abort)?;
        txn.set_durability(Durability::Immediate).map_err(abort)?;
        let (outcomes, first, tables_meta, events) = {
            let mut tables = Tables::open(&txn)?;
            let first = tables.meta.revision + 1;
            let outcomes = ops
                .iter()
                .map(|op| tables.apply(op))
                .collect::<Result<Vec<_>, Abort>>()?;
            tables.keep_history(self.history)?;
            tables.save()?;
            (outcomes, first, tables.meta, tables.events)
        };
        txn.commit().map_err(|error| Abort {
            error: storage(error),
            fatal: true,
        })?;
        let committed = (!events.is_empty()).then(|| Batch {
            first,
            last: tables_meta.revision,
            events,
        });
        Ok((outcomes, committed))
    }
}

type KvTable<'t> = Table<'t, &'static str, Row<'static>>;
type LogTable<'t> = Table<'t, i64, LogRow<'static>>;

/// The tables of one write transaction, and what it has done so far.
struct Tables<'t> {
    kv: KvTable<'t>,
    log: LogTable<'t>,
    meta_table: Table<'t, &'static str, i64>,
    meta: Meta,
    events: Vec<Event>,
}

impl<'t> Tables<'t> {
    fn open(txn: &'t redb::WriteTransaction) -> Result<Self, Abort> {
        let meta_table = txn.open_table(META).map_err(abort)?;
        let meta = Meta::read(&meta_table).map_err(|error| Abort {
            error,
            fatal: false,
        })?;
        Ok(Self {
            kv: txn.open_table(KV).map_err(abort)?,
            log: txn.open_table(LOG).map_err(abort)?,
            meta_table,
            meta,
            events: Vec::new(),
        })
    }

    fn apply(&mut self, op: &WriteOp) -> Result<Result<Outcome>, Abort> {
        match op {
            WriteOp::Create { key, value } => self.create(key, value),
            WriteOp::Update {
                key,
                value,
                expected,
            } => self.update(key, value, *expected),
            WriteOp::Delete { key, expected } => self.delete(key, *expected),
            WriteOp::Compact { revision } => self.compact(*revision),
        }
    }

    fn current(&self, key: &str) -> Result<Option<KeyValue>, Abort> {
        Ok(self
            .kv
            .get(key)
            .map_err(abort)?
            .map(|row| key_value(key, row.value())))
    }

    /// `Conflict` unless `current` is at revision `expected`.
    fn check_expected(key: &str, current: &KeyValue, expected: Revision) -> Result<()> {
        if current.revision == expected {
            Ok(())
        } else {
            Err(Error::Conflict {
                key: key.to_owned(),
                expected,
                current_revision: current.revision,
                current: Some(Box::new(current.clone())),
            })
        }
    }

    fn next_revision(&mut self) -> Revision {
        self.meta.revision += 1;
        self.meta.revision
    }

    fn create(&mut self, key: &str, value: &Bytes) -> Result<Result<Outcome>, Abort> {
        if self.kv.get(key).map_err(abort)?.is_some() {
            return Ok(Err(Error::AlreadyExists {
                key: key.to_owned(),
            }));
        }
        let revision = self.next_revision();
        self.put(key, value, revision, None)?;
        Ok(Ok(Outcome::Written(revision)))
    }

    fn update(
        &mut self,
        key: &str,
        value: &Bytes,
        expected: Revision,
    ) -> Result<Result<Outcome>, Abort> {
        let Some(current) = self.current(key)? else {
            return Ok(Err(Error::NotFound {
                key: key.to_owned(),
            }));
        };
        if let Err(conflict) = Self::check_expected(key, &current, expected) {
            return Ok(Err(conflict));
        }
        let revision = self.next_revision();
        self.put(key, value, current.create_revision, Some(current))?;
        Ok(Ok(Outcome::Written(revision)))
    }

    /// Writes `key` at the revision just taken, logs it, and records the event.
    fn put(
        &mut self,
        key: &str,
        value: &Bytes,
        create_revision: Revision,
        prev: Option<KeyValue>,
    ) -> Result<(), Abort> {
        let revision = self.meta.revision;
        self.kv
            .insert(key, (create_revision, revision, value.as_ref()))
            .map_err(abort)?;
        let logged_prev = prev
            .as_ref()
            .map(|prev| (prev.create_revision, prev.revision, prev.value.as_ref()));
        self.log
            .insert(
                revision,
                (key, Some((create_revision, value.as_ref())), logged_prev),
            )
            .map_err(abort)?;
        self.events.push(Event::Put {
            kv: KeyValue {
                key: key.to_owned(),
                value: value.clone(),
                revision,
                create_revision,
            },
            prev,
        });
        Ok(())
    }

    fn delete(&mut self, key: &str, expected: Option<Revision>) -> Result<Result<Outcome>, Abort> {
        let Some(prev) = self.current(key)? else {
            return Ok(Err(Error::NotFound {
                key: key.to_owned(),
            }));
        };
        if let Some(expected) = expected
            && let Err(conflict) = Self::check_expected(key, &prev, expected)
        {
            return Ok(Err(conflict));
        }
        let revision = self.next_revision();
        self.kv.remove(key).map_err(abort)?;
        self.log
            .insert(
                revision,
                (
                    key,
                    None,
                    Some((prev.create_revision, prev.revision, prev.value.as_ref())),
                ),
            )
            .map_err(abort)?;
        self.events.push(Event::Delete {
            key: key.to_owned(),
            revision,
            prev: Some(prev.clone()),
        });
        Ok(Ok(Outcome::Deleted(Deleted { prev, revision })))
    }

    fn compact(&mut self, revision: Revision) -> Result<Result<Outcome>, Abort> {
        if revision > self.meta.revision {
            return Ok(Err(Error::FutureRevision {
                requested: revision,
            }));
        }
        if revision <= self.meta.compacted {
            return Ok(Err(Error::Expired {
                requested: revision,
            }));
        }
        self.drop_log_before(revision)?;
        Ok(Ok(Outcome::Compacted))
    }

    /// Compacts automatically so that the log keeps at most `history` revisions.
    fn keep_history(&mut self, history: u64) -> Result<(), Abort> {
        let history = i64::try_from(history).unwrap_or(i64::MAX);
        let keep_from = self.meta.revision.saturating_sub(history) + 1;
        if keep_from > self.meta.compacted {
            self.drop_log_before(keep_from)?;
        }
        Ok(())
    }

    fn drop_log_before(&mut self, revision: Revision) -> Result<(), Abort> {
        self.log
            .retain_in(..revision, |_, _| false)
            .map_err(abort)?;
        self.meta.compacted = revision;
        Ok(())
    }

    fn save(&mut self) -> Result<(), Abort> {
        self.meta
            .write(&mut self.meta_table)
            .map_err(|error| Abort {
                error,
                fatal: false,
            })
    }
}
