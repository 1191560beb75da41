//! WATCH: storage events converted to the watcher's version and filtered by its selectors
//! (an object entering the selection is ADDED, leaving it DELETED), the initial state as
//! ADDED events (also for `sendInitialEvents`, ended by the `k8s.io/initial-events-end`
//! bookmark), bookmarks from store progress marks, and 410 for a start that is too old.

use std::sync::Arc;
use std::time::Duration;

use capmox_storage::{Error as StorageError, Event as StorageEvent, KeyValue, Revision};
use futures::{Stream, StreamExt};
use serde_json::Value;

use crate::registry::descriptor::GroupVersion;
use crate::registry::error::RegistryError;
use crate::registry::list_options::{ListOptions, WatchStart};
use crate::registry::object_store::{map_error, set_resource_version};
use crate::registry::strategy::Strategy;
use crate::registry::watch_event::{EventType, bookmark_object};

use super::ResourceRest;

/// One event for a watcher, its object in the watcher's version.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub event_type: EventType,
    pub object: Value,
}

const WATCH_TOO_OLD: &str = "The resourceVersion for the provided watch is too old.";

/// Converts and filters storage events for one watcher.
struct Lens {
    strategy: Arc<dyn Strategy>,
    version: GroupVersion,
    options: ListOptions,
}

impl Lens {
    fn selects(&self, object: &Value) -> bool {
        self.options.label_selector.matches_object(object)
            && self.options.field_selector.matches_object(object)
    }

    fn unfiltered(&self) -> bool {
        self.options.label_selector.is_empty() && self.options.field_selector.is_empty()
    }

    fn hub(kv: &KeyValue) -> Result<Value, RegistryError> {
        serde_json::from_slice(&kv.value).map_err(|e| {
            RegistryError::Internal(format!("the stored object cannot be decoded: {e}"))
        })
    }

    fn present(&self, hub: Value, revision: Revision) -> Result<Value, RegistryError> {
        let mut object = self
            .strategy
            .encode(self.version, hub)
            .map_err(|e| RegistryError::Internal(e.to_string()))?;
        set_resource_version(&mut object, revision);
        Ok(object)
    }

    fn bookmark(&self, revision: Revision, initial_events_end: bool) -> Event {
        Event {
            event_type: EventType::Bookmark,
            object: bookmark_object(
                &self.version.api_version(),
                self.strategy.descriptor().kind,
                u64::try_from(revision).unwrap_or(0),
                initial_events_end,
            ),
        }
    }

    /// The watcher's view of one storage event, if any.
    fn view(&self, event: StorageEvent) -> Result<Option<Event>, RegistryError> {
        let event = match event {
            StorageEvent::Put { kv, prev } => {
                let hub = Self::hub(&kv)?;
                let now = self.selects(&hub);
                let before = match &prev {
                    None => false,
                    Some(_) if self.unfiltered() => true,
                    Some(prev) => self.selects(&Self::hub(prev)?),
                };
                match (before, now) {
                    (_, true) => Event {
                        event_type: if before {
                            EventType::Modified
                        } else {
                            EventType::Added
                        },
                        object: self.present(hub, kv.revision)?,
                    },
                    // Left the selection: its last selected state, at this revision.
                    (true, false) => match &prev {
                        Some(prev) => Event {
                            event_type: EventType::Deleted,
                            object: self.present(Self::hub(prev)?, kv.revision)?,
                        },
                        None => return Ok(None),
                    },
                    (false, false) => return Ok(None),
                }
            }
            StorageEvent::Delete {
                revision,
                prev: Some(prev),
                ..
            } => {
                let hub = Self::hub(&prev)?;
                if !self.selects(&hub) {
                    return Ok(None);
                }
                Event {
                    event_type: EventType::Deleted,
                    object: self.present(hub, revision)?,
                }
            }
            StorageEvent::Delete { prev: None, .. } => return Ok(None),
            StorageEvent::Progress { revision } if self.options.allow_watch_bookmarks => {
                self.bookmark(revision, false)
            }
            StorageEvent::Progress { .. } => return Ok(None),
        };
        Ok(Some(event))
    }
}

fn watch_error(e: StorageError) -> RegistryError {
    match e {
        StorageError::Expired { .. } => RegistryError::Expired {
            message: WATCH_TOO_OLD.to_owned(),
            continue_token: None,
        },
        other => map_error(other, None),
    }
}

impl ResourceRest {
    /// Opens a watch. Errors known before the first event (a start that is too old or too
    /// new, an unreadable store) are returned here; later ones end the stream as its last
    /// item.
    pub async fn watch(
        &self,
        version: GroupVersion,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<impl Stream<Item = Result<Event, RegistryError>> + Send + 'static, RegistryError>
    {
        let Some(prefix) = self.store.list_prefix(namespace) else {
            return Err(self.not_found(namespace.unwrap_or_default()));
        };
        let lens = Lens {
            strategy: Arc::clone(&self.strategy),
            version,
            options: options.clone(),
        };
        let mut initial = Vec::new();
        let after = match options.watch_start()? {
            WatchStart::InitialState {
                min_revision,
                end_bookmark,
                ..
            } => {
                let mut all = options.clone();
                all.limit = 0;
                all.continue_token.clear();
                all.resource_version.clear();
                all.resource_version_match.clear();
                let listed = self.list(version, namespace, &all).await?;
                let revision: Revision = listed.meta.resource_version.parse().unwrap_or(0);
                let current = u64::try_from(revision).unwrap_or(0);
                if current < min_revision {
                    return Err(RegistryError::TooLargeResourceVersion {
                        requested: min_revision,
                        current,
                    });
                }
                initial.extend(listed.items.into_iter().map(|object| Event {
                    event_type: EventType::Added,
                    object,
                }));
                if end_bookmark {
                    initial.push(lens.bookmark(revision, true));
                }
                revision
            }
            WatchStart::ChangesAfter(Some(rv)) => Revision::try_from(rv).unwrap_or(Revision::MAX),
            WatchStart::ChangesAfter(None) => self.store.current_revision().await?,
        };
        let mut changes = match self.store.watch(&prefix, after).await {
            Ok(changes) => changes,
            Err(e @ StorageError::FutureRevision { .. }) => return Err(self.store.error(e).await),
            Err(e) => return Err(watch_error(e)),
        };
        let interval = self.config.bookmark_interval.max(Duration::from_millis(10));
        let bookmarks = options.allow_watch_bookmarks;
        Ok(async_stream::stream! {
            for event in initial {
                yield Ok(event);
            }
            let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
            loop {
                tokio::select! {
                    next = changes.next() => match next {
                        None => break,
                        Some(Err(e)) => {
                            yield Err(watch_error(e));
                            break;
                        }
                        Some(Ok(event)) => match lens.view(event) {
                            Ok(Some(event)) => yield Ok(event),
                            Ok(None) => {}
                            Err(e) => {
                                yield Err(e);
                                break;
                            }
                        },
                    },
                    _ = ticker.tick(), if bookmarks => changes.request_progress(),
                }
            }
        })
    }
}
