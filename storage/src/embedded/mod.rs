//! The embedded single-node backend: one redb file, a global revision, durable group commits and
//! a bounded change log for watches and reads in the recent past.

mod arrivals;
mod read;
mod tables;
mod watch;
mod writer;

use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use redb::{Database, DatabaseError};
use tokio::sync::{broadcast, mpsc, oneshot};

use self::arrivals::Arrivals;
use self::tables::{KV, LOG, META, Meta, storage};
use self::writer::{Announcement, Command, Outcome, WriteOp, Writer};
use crate::config::EmbeddedConfig;
use crate::error::{Error, Result};
use crate::types::{Deleted, KeyValue, ListPage, ListQuery, Listed, Revision};
use crate::watch::WatchStream;

/// The database file inside the data directory.
pub const DATA_FILE: &str = "capmox.redb";

#[derive(Clone)]
pub(crate) struct EmbeddedStore {
    shared: Arc<Shared>,
}

struct Shared {
    db: Arc<Database>,
    commands: mpsc::Sender<Command>,
    arrivals: Arc<Arrivals>,
    hub: broadcast::Sender<Announcement>,
    /// The revision of the latest durable commit.
    revision: Arc<AtomicI64>,
    writer: Mutex<Option<JoinHandle<()>>>,
    progress_interval: Option<Duration>,
}

fn closed() -> Error {
    Error::Unavailable("the embedded store is closed".into())
}

impl EmbeddedStore {
    pub(crate) async fn open(config: EmbeddedConfig) -> Result<Self> {
        if config.history == 0 || config.max_batch == 0 || config.watch_buffer == 0 {
            return Err(Error::InvalidArgument(
                "history, max_batch and watch_buffer must be at least 1".into(),
            ));
        }
        let dir = config.data_dir.clone();
        let (db, meta) = tokio::task::spawn_blocking(move || open_file(&dir))
            .await
            .map_err(Error::internal)??;
        let db = Arc::new(db);
        let revision = Arc::new(AtomicI64::new(meta.revision));
        let (commands, queue) = mpsc::channel(config.max_batch.saturating_mul(4));
        let (hub, _) = broadcast::channel(config.watch_buffer);
        let arrivals = Arc::new(Arrivals::default());
        let writer = Writer {
            db: db.clone(),
            commands: queue,
            hub: hub.clone(),
            revision: revision.clone(),
            history: config.history,
            max_batch: config.max_batch,
            commit_delay: config.commit_delay,
            arrivals: arrivals.clone(),
        };
        let writer = std::thread::Builder::new()
            .name("capmox-store-writer".into())
            .spawn(move || writer.run())
            .map_err(Error::internal)?;
        Ok(Self {
            shared: Arc::new(Shared {
                db,
                commands,
                arrivals,
                hub,
                revision,
                writer: Mutex::new(Some(writer)),
                progress_interval: config.progress_interval,
            }),
        })
    }

    /// Commits what is queued, stops the writer and waits for it.
    pub(crate) async fn close(self) {
        if self.shared.commands.send(Command::Stop).await.is_ok() {
            self.shared.arrivals.stop_arrived();
        }
        let writer = self
            .shared
            .writer
            .lock()
            .map(|mut writer| writer.take())
            .unwrap_or_default();
        if let Some(writer) = writer {
            let _ = tokio::task::spawn_blocking(move || writer.join()).await;
        }
    }

    async fn write(&self, op: WriteOp) -> Result<Outcome> {
        let (reply, outcome) = oneshot::channel();
        self.shared
            .commands
            .send(Command::Write { op, reply })
            .await
            .map_err(|_| closed())?;
        self.shared.arrivals.arrived();
        outcome.await.map_err(|_| closed())?
    }

    /// Runs a read on the blocking pool: redb reads are synchronous and a list can take a while.
    /// (A point read does not: see `get`.)
    async fn read<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Database) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let db = self.shared.db.clone();
        tokio::task::spawn_blocking(move || read(&db))
            .await
            .map_err(Error::internal)?
    }

    /// A point read runs where it is asked for: one B-tree lookup in an MVCC snapshot (redb
    /// caches the pages) costs less than the hand-off to the blocking pool and back.
    pub(crate) async fn get(&self, key: &str) -> Result<KeyValue> {
        read::get(&self.shared.db, key)
    }

    pub(crate) async fn create(&self, key: &str, value: Bytes) -> Result<Revision> {
        let key = key.to_owned();
        match self.write(WriteOp::Create { key, value }).await? {
            Outcome::Written(revision) => Ok(revision),
            _ => Err(unexpected_outcome()),
        }
    }

    pub(crate) async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected: Revision,
    ) -> Result<Revision> {
        let key = key.to_owned();
        match self
            .write(WriteOp::Update {
                key,
                value,
                expected,
            })
            .await?
        {
            Outcome::Written(revision) => Ok(revision),
            _ => Err(unexpected_outcome()),
        }
    }

    pub(crate) async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<Deleted> {
        let key = key.to_owned();
        match self.write(WriteOp::Delete { key, expected }).await? {
            Outcome::Deleted(deleted) => Ok(deleted),
            _ => Err(unexpected_outcome()),
        }
    }

    pub(crate) async fn list<T: Send + 'static>(
        &self,
        query: ListQuery,
        read: impl FnMut(Listed<'_>) -> T + Send + 'static,
    ) -> Result<ListPage<T>> {
        self.read(move |db| read::list(db, &query, read)).await
    }

    pub(crate) async fn watch(&self, prefix: &str, after: Revision) -> Result<WatchStream> {
        // Subscribe before looking at the log: see `watch` for why this makes the hand-off gapless.
        let live = self.shared.hub.subscribe();
        let meta = self.read(read::current_meta).await?;
        if !meta.covers_events_after(after) {
            return Err(Error::Expired { requested: after });
        }
        Ok(watch::stream(
            self.shared.db.clone(),
            live,
            prefix.to_owned(),
            after,
            self.shared.progress_interval,
        ))
    }

    pub(crate) async fn current_revision(&self) -> Result<Revision> {
        Ok(self.shared.revision.load(Ordering::Acquire))
    }

    pub(crate) async fn compact(&self, revision: Revision) -> Result<()> {
        match self.write(WriteOp::Compact { revision }).await? {
            Outcome::Compacted => Ok(()),
            _ => Err(unexpected_outcome()),
        }
    }
}

fn unexpected_outcome() -> Error {
    Error::Internal("the embedded writer answered a different kind of write".into())
}

/// Opens (or creates) the database file and makes sure every table exists.
fn open_file(dir: &Path) -> Result<(Database, Meta)> {
    std::fs::create_dir_all(dir).map_err(|error| {
        Error::Internal(format!("cannot create data dir {}: {error}", dir.display()))
    })?;
    let path = dir.join(DATA_FILE);
    let db = Database::create(&path).map_err(|error| match error {
        DatabaseError::DatabaseAlreadyOpen => Error::Unavailable(format!(
            "{} is already open in another store or process",
            path.display()
        )),
        other => storage(other),
    })?;
    let txn = db.begin_write().map_err(storage)?;
    let meta = {
        let mut meta_table = txn.open_table(META).map_err(storage)?;
        Meta::initialize(&mut meta_table)?;
        txn.open_table(KV).map_err(storage)?;
        txn.open_table(LOG).map_err(storage)?;
        Meta::read(&meta_table)?
    };
    txn.commit().map_err(storage)?;
    Ok((db, meta))
}
