//! Prefix watches on etcd that survive connection failures.
//!
//! A watch keeps the revision of the last event or progress mark it delivered (`seen`). When the
//! gRPC stream breaks, it opens a new one from `seen + 1`, retrying with backoff for the
//! configured time; etcd replays what happened meanwhile from its history, or cancels the watch
//! with a compaction revision, which ends the stream with `Expired`.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{
    EventType, WatchOptions, WatchRequestSender, WatchResponse, WatchResponseStream,
};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::EtcdStore;
use super::errors::{Retry, classify};
use super::keys::Keys;
use super::progress::{ProgressGate, Verdict};
use crate::error::{Error, Result};
use crate::types::{Event, Revision};
use crate::watch::{ProgressTimer, WatchStream};

const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// One gRPC watch stream.
struct Session {
    requests: WatchRequestSender,
    responses: WatchResponseStream,
    watch_id: i64,
    progress: ProgressGate,
}

enum Wake {
    Response(Result<Option<WatchResponse>, etcd_client::Error>),
    Progress,
}

pub(super) async fn watch(store: &EtcdStore, prefix: &str, after: Revision) -> Result<WatchStream> {
    // etcd accepts a watch from a compacted revision and cancels it a moment later; a read at
    // the first revision needed tells the caller up front instead.
    store
        .check_readable(after + 1)
        .await
        .map_err(|error| match error {
            Error::Expired { .. } => Error::Expired { requested: after },
            other => other,
        })?;
    let full_prefix = store.keys.full(prefix);
    let first = open(store, &full_prefix, after + 1).await?;

    let store = store.clone();
    let requested = Arc::new(Notify::new());
    let progress = requested.clone();
    let events = async_stream::stream! {
        let mut session = Some(first);
        let mut seen = after;
        let mut timer = ProgressTimer::new(store.settings.progress_interval);
        let mut progress_due = false;
        // The last progress mark passed on; an event at or below it would break the promise.
        let mut promised: Revision = 0;
        loop {
            let Some(current) = session.as_mut() else {
                match reconnect(&store, &full_prefix, seen).await {
                    Ok(fresh) => session = Some(fresh),
                    Err(error) => {
                        yield Err(error);
                        return;
                    }
                }
                continue;
            };
            if progress_due {
                progress_due = false;
                if current.requests.request_progress().await.is_err() {
                    progress_due = true;
                    session = None;
                    continue;
                }
            }
            let wake = tokio::select! {
                response = current.responses.message() => Wake::Response(response),
                () = requested.notified() => Wake::Progress,
                () = timer.tick() => Wake::Progress,
            };
            let response = match wake {
                Wake::Progress => {
                    progress_due = true;
                    continue;
                }
                Wake::Response(Ok(Some(response))) => response,
                Wake::Response(Ok(None) | Err(_)) => {
                    session = None;
                    continue;
                }
            };
            if response.canceled() {
                if response.compact_revision() > 0 {
                    yield Err(Error::Expired { requested: seen });
                    return;
                }
                // Cancelled for another reason (e.g. the member lost its leader): start over.
                session = None;
                continue;
            }
            if response.created() {
                continue;
            }
            if response.events().is_empty() {
                let revision = response.header().map(|header| header.revision()).unwrap_or_default();
                let periodic = response.watch_id() == current.watch_id;
                match current.progress.judge(revision, periodic, Instant::now()) {
                    Verdict::Relay(revision) if revision >= seen && revision > promised => {
                        seen = revision;
                        promised = revision;
                        yield Ok(Event::Progress { revision });
                    }
                    Verdict::AskAgain => progress_due = true,
                    Verdict::Relay(_) | Verdict::Ignore => {}
                }
                continue;
            }
            for event in response.events() {
                let event = match convert(&store.keys, event) {
                    Ok(event) if event.revision() <= promised => {
                        // etcd sent a mark ahead of this event: a client may already have
                        // resumed past it, so only a fresh list is safe.
                        tracing::warn!(promised, revision = event.revision(), "etcd progress mark overtook an event");
                        Err(Error::Expired { requested: seen })
                    }
                    other => other,
                };
                match event {
                    Ok(event) => {
                        seen = seen.max(event.revision());
                        yield Ok(event);
                    }
                    Err(error) => {
                        yield Err(error);
                        return;
                    }
                }
            }
        }
    };
    Ok(WatchStream::new(events, progress))
}

/// Opens a watch stream from `start` on the current endpoint and waits until etcd confirms it.
async fn open(store: &EtcdStore, full_prefix: &str, start: Revision) -> Result<Session> {
    let options = WatchOptions::new()
        .with_prefix()
        .with_prev_key()
        .with_progress_notify()
        .with_start_revision(start);
    let (index, member) = store.members.current();
    let mut client = member.watch.clone();
    let opening = async {
        let stream = client.watch(full_prefix, Some(options)).await?;
        let (requests, mut responses) = stream.split();
        let first = responses.message().await?;
        Ok::<_, etcd_client::Error>((requests, responses, first))
    };
    let (requests, responses, first) =
        match tokio::time::timeout(store.settings.request_timeout, opening).await {
            Ok(Ok(opened)) => opened,
            Ok(Err(error)) => {
                let (error, retry) = classify(error, Some(start));
                if retry != Retry::Never {
                    store.members.failed(index);
                }
                return Err(error);
            }
            Err(_) => {
                store.members.failed(index);
                return Err(Error::Unavailable(
                    "etcd did not confirm the watch in time".into(),
                ));
            }
        };
    match first {
        Some(response) if response.canceled() && response.compact_revision() > 0 => {
            Err(Error::Expired {
                requested: start - 1,
            })
        }
        Some(response) if response.created() && !response.canceled() => {
            let created_at = response
                .header()
                .map_or(Revision::MAX, |header| header.revision());
            Ok(Session {
                requests,
                responses,
                watch_id: response.watch_id(),
                progress: ProgressGate::new(
                    store.settings.progress_trust,
                    start,
                    created_at,
                    Instant::now(),
                ),
            })
        }
        Some(response) => Err(Error::Unavailable(format!(
            "etcd refused the watch: {}",
            response.cancel_reason()
        ))),
        None => Err(Error::Unavailable("etcd closed the watch stream".into())),
    }
}

/// Reopens the watch after `seen`, retrying transient failures until the retry timeout.
async fn reconnect(store: &EtcdStore, full_prefix: &str, seen: Revision) -> Result<Session> {
    let deadline = Instant::now() + store.settings.watch_retry_timeout;
    let mut backoff = FIRST_BACKOFF;
    loop {
        match open(store, full_prefix, seen + 1).await {
            Ok(session) => return Ok(session),
            Err(Error::Expired { .. }) => return Err(Error::Expired { requested: seen }),
            Err(error) if Instant::now() + backoff >= deadline => {
                return Err(Error::Unavailable(format!(
                    "watch could not reconnect to etcd: {error}"
                )));
            }
            Err(error) => {
                tracing::debug!(%error, seen, "etcd watch reconnecting");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

fn convert(keys: &Keys, event: &etcd_client::Event) -> Result<Event> {
    let kv = event
        .kv()
        .cloned()
        .ok_or_else(|| Error::Internal("etcd sent a watch event without a key".into()))?;
    let prev = event
        .prev_kv()
        .cloned()
        .map(|prev| keys.key_value(prev))
        .transpose()?;
    Ok(match event.event_type() {
        EventType::Put => Event::Put {
            kv: keys.key_value(kv)?,
            prev,
        },
        EventType::Delete => Event::Delete {
            key: keys.relative(kv.key())?,
            revision: kv.mod_revision(),
            prev,
        },
    })
}
