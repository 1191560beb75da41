//! Watches on the embedded store: history from the log, then live commits, without gaps.
//!
//! Live commits arrive as broadcast batches that carry contiguous global revisions. A watcher
//! tracks `seen`, the highest revision it has accounted for (delivered or filtered out). The
//! broadcast subscription is taken before the log is first read, so every commit after that
//! read reaches the watcher. Whenever a batch does not start right after `seen` — at the hand-off
//! from the log, or after the watcher lagged and the broadcast dropped batches — the watcher reads
//! the missing revisions from the log instead; batches it already covered are skipped. If the log
//! no longer reaches back to `seen`, the watch ends with `Expired`.

use std::sync::Arc;
use std::time::Duration;

use redb::Database;
use tokio::sync::Notify;
use tokio::sync::broadcast::{self, error::RecvError};

use super::read::{self, LogChunk};
use super::writer::Announcement;
use crate::error::{Error, Result};
use crate::types::{Event, Revision};
use crate::watch::{ProgressTimer, WatchStream};

/// Revisions read from the log per step while catching up (bounds memory per watcher).
const CATCH_UP_CHUNK: i64 = 1024;

enum Wake {
    Announcement(Result<Announcement, RecvError>),
    Progress,
}

/// A watch of `prefix` from `after`. `live` must have been subscribed before this call reads
/// anything, so that no commit falls between the log and the broadcast.
pub(super) fn stream(
    db: Arc<Database>,
    mut live: broadcast::Receiver<Announcement>,
    prefix: String,
    after: Revision,
    progress_interval: Option<Duration>,
) -> WatchStream {
    let requested = Arc::new(Notify::new());
    let progress = requested.clone();
    let events = async_stream::stream! {
        let mut seen = after;
        let mut timer = ProgressTimer::new(progress_interval);
        let mut behind = true;
        let mut progress_due = false;
        loop {
            if behind {
                let chunk = match read_log(&db, &prefix, seen).await {
                    Ok(chunk) => chunk,
                    Err(error) => {
                        yield Err(error);
                        return;
                    }
                };
                for event in chunk.events {
                    yield Ok(event);
                }
                seen = chunk.upto;
                behind = seen < chunk.current;
                if !behind && progress_due {
                    progress_due = false;
                    yield Ok(Event::Progress { revision: chunk.current });
                }
                continue;
            }
            let wake = tokio::select! {
                announcement = live.recv() => Wake::Announcement(announcement),
                () = requested.notified() => Wake::Progress,
                () = timer.tick() => Wake::Progress,
            };
            match wake {
                Wake::Announcement(Ok(Announcement::Committed(batch))) => {
                    if batch.last <= seen {
                        continue;
                    }
                    if batch.first > seen + 1 {
                        behind = true;
                        continue;
                    }
                    for event in &batch.events {
                        if event.revision() > seen
                            && event.key().is_some_and(|key| key.starts_with(&prefix))
                        {
                            yield Ok(event.clone());
                        }
                    }
                    seen = batch.last;
                }
                // Batches were dropped; the next one shows the gap and the log fills it.
                Wake::Announcement(Err(RecvError::Lagged(_))) => {}
                Wake::Announcement(Ok(Announcement::Stopped) | Err(RecvError::Closed)) => {
                    yield Err(Error::Unavailable("the embedded store was closed".into()));
                    return;
                }
                // Catch up with the store first, so the mark covers its current revision.
                Wake::Progress => {
                    behind = true;
                    progress_due = true;
                }
            }
        }
    };
    WatchStream::new(events, progress)
}

async fn read_log(db: &Arc<Database>, prefix: &str, after: Revision) -> Result<LogChunk> {
    let db = db.clone();
    let prefix = prefix.to_owned();
    tokio::task::spawn_blocking(move || read::read_log(&db, &prefix, after, CATCH_UP_CHUNK))
        .await
        .map_err(Error::internal)?
}
