//! WATCH: storage events converted to the watcher's version and filtered by its selectors
//! (an object entering the selection is ADDED, leaving it DELETED), the initial state as
//! ADDED events (also for `sendInitialEvents`, ended by the `k8s.io/initial-events-end`
//! bookmark), bookmarks from store progress marks, and 410 for a start that is too old.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use capmox_storage::{Error as StorageError, Event as StorageEvent, KeyValue, Revision};
use futures::{Stream, StreamExt};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::registry::descriptor::GroupVersion;
use crate::registry::encoded_cache::{EncodedCache, ReaderId};
use crate::registry::error::RegistryError;
use crate::registry::list_options::{ListOptions, WatchStart};
use crate::registry::object_store::{map_error, set_resource_version};
use crate::registry::strategy::Strategy;
use crate::registry::watch_event::{EventType, bookmark_object};

use super::ResourceRest;
use super::read::ListResult;

/// One event for a watcher, its object in the watcher's version: a JSON value, or serialized
/// (`watch_json`).
#[derive(Debug, Clone, PartialEq)]
pub struct Event<T = Value> {
    pub event_type: EventType,
    pub object: T,
}

const WATCH_TOO_OLD: &str = "The resourceVersion for the provided watch is too old.";

/// Filters storage events for one watcher, by its selectors.
struct Lens {
    strategy: Arc<dyn Strategy>,
    version: GroupVersion,
    options: ListOptions,
}

/// What one storage event shows a watcher.
enum Shown {
    Object(EventType, ShownObject),
    Bookmark(Revision),
}

/// A stored hub object as of `revision`.
struct ShownObject {
    key: String,
    value: Bytes,
    revision: Revision,
    /// What `key` held at `revision` (or, for a deletion, its last state at the deleting
    /// revision), so that its encoding may be shared by revision; not for an object leaving a
    /// watcher's selection, whose last state is shown at the revision of the write that moved
    /// it out.
    exact: bool,
}

impl Lens {
    fn selects(&self, object: &Value) -> bool {
        self.options.label_selector.matches_object(object)
            && self.options.field_selector.matches_object(object)
    }

    fn unfiltered(&self) -> bool {
        self.options.label_selector.is_empty() && self.options.field_selector.is_empty()
    }

    /// Whether the watcher's selectors select the stored object `kv`.
    fn selects_stored(&self, kv: &KeyValue) -> Result<bool, RegistryError> {
        if self.unfiltered() {
            return Ok(true);
        }
        let hub: Value = serde_json::from_slice(&kv.value).map_err(|e| {
            RegistryError::Internal(format!("the stored object cannot be decoded: {e}"))
        })?;
        Ok(self.selects(&hub))
    }

    /// The object of a BOOKMARK at `revision`.
    fn bookmark(&self, revision: Revision, initial_events_end: bool) -> Value {
        bookmark_object(
            &self.version.api_version(),
            self.strategy.descriptor().kind,
            u64::try_from(revision).unwrap_or(0),
            initial_events_end,
        )
    }

    /// The watcher's view of one storage event, if any.
    fn view(&self, event: StorageEvent) -> Result<Option<Shown>, RegistryError> {
        let shown = match event {
            StorageEvent::Put { kv, prev } => {
                let now = self.selects_stored(&kv)?;
                let before = match &prev {
                    None => false,
                    Some(prev) => self.selects_stored(prev)?,
                };
                match (before, now, prev) {
                    (_, true, _) => Shown::Object(
                        if before {
                            EventType::Modified
                        } else {
                            EventType::Added
                        },
                        ShownObject {
                            key: kv.key,
                            value: kv.value,
                            revision: kv.revision,
                            exact: true,
                        },
                    ),
                    // Left the selection: its last selected state, at this revision.
                    (true, false, Some(prev)) => Shown::Object(
                        EventType::Deleted,
                        ShownObject {
                            key: kv.key,
                            value: prev.value,
                            revision: kv.revision,
                            exact: false,
                        },
                    ),
                    _ => return Ok(None),
                }
            }
            StorageEvent::Delete {
                revision,
                prev: Some(prev),
                ..
            } => {
                if !self.selects_stored(&prev)? {
                    return Ok(None);
                }
                Shown::Object(
                    EventType::Deleted,
                    ShownObject {
                        key: prev.key,
                        value: prev.value,
                        revision,
                        exact: true,
                    },
                )
            }
            StorageEvent::Delete { prev: None, .. } => return Ok(None),
            StorageEvent::Progress { revision } if self.options.allow_watch_bookmarks => {
                Shown::Bookmark(revision)
            }
            StorageEvent::Progress { .. } => return Ok(None),
        };
        Ok(Some(shown))
    }
}

/// How a watch writes the objects of its events.
trait Presenter: Send + Sync + 'static {
    type Object: Send + 'static;

    /// The initial state, for a watch that starts with it (`options` without paging).
    async fn initial(
        &self,
        rest: &ResourceRest,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<ListResult<Self::Object>, RegistryError>;

    /// The shown object in the watcher's version.
    fn object(&self, shown: &ShownObject) -> Result<Self::Object, RegistryError>;

    fn bookmark(&self, object: Value) -> Result<Self::Object, RegistryError>;
}

/// Objects as JSON values, for watchers that transform them (Tables, metadata) or read them.
struct AsValues {
    strategy: Arc<dyn Strategy>,
    version: GroupVersion,
}

impl Presenter for AsValues {
    type Object = Value;

    async fn initial(
        &self,
        rest: &ResourceRest,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<ListResult, RegistryError> {
        rest.list(self.version, namespace, options).await
    }

    fn object(&self, shown: &ShownObject) -> Result<Value, RegistryError> {
        let mut object = self
            .strategy
            .read(self.version, &shown.value)
            .map_err(|e| RegistryError::Internal(e.to_string()))?;
        set_resource_version(&mut object, shown.revision);
        Ok(object)
    }

    fn bookmark(&self, object: Value) -> Result<Value, RegistryError> {
        Ok(object)
    }
}

/// Objects serialized, each revision once per version however many watchers (and LISTs) read
/// it (`EncodedCache`).
struct AsJson {
    strategy: Arc<dyn Strategy>,
    version: GroupVersion,
    encoded: Arc<EncodedCache>,
    reader: ReaderId,
}

impl Presenter for AsJson {
    type Object = Arc<RawValue>;

    async fn initial(
        &self,
        rest: &ResourceRest,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<ListResult<Arc<RawValue>>, RegistryError> {
        rest.list_json(self.version, namespace, options).await
    }

    fn object(&self, shown: &ShownObject) -> Result<Arc<RawValue>, RegistryError> {
        if shown.exact {
            return super::cached_json(
                &self.encoded,
                self.strategy.as_ref(),
                (shown.revision, self.version, self.reader),
                &shown.key,
                &shown.value,
            );
        }
        self.strategy
            .read_json(self.version, &shown.value, shown.revision)
            .map(Arc::from)
            .map_err(|e| RegistryError::Internal(e.to_string()))
    }

    fn bookmark(&self, object: Value) -> Result<Arc<RawValue>, RegistryError> {
        serde_json::value::to_raw_value(&object)
            .map(Arc::from)
            .map_err(|e| RegistryError::Internal(format!("encoding the bookmark: {e}")))
    }
}

/// The event a watcher is sent for what it is shown.
fn present<P: Presenter>(
    lens: &Lens,
    presenter: &P,
    shown: Option<Shown>,
) -> Result<Option<Event<P::Object>>, RegistryError> {
    let event = match shown {
        None => return Ok(None),
        Some(Shown::Object(event_type, shown)) => Event {
            event_type,
            object: presenter.object(&shown)?,
        },
        Some(Shown::Bookmark(revision)) => Event {
            event_type: EventType::Bookmark,
            object: presenter.bookmark(lens.bookmark(revision, false))?,
        },
    };
    Ok(Some(event))
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
    /// Opens a watch, its objects as JSON values. Errors known before the first event (a
    /// start that is too old or too new, an unreadable store) are returned here; later ones
    /// end the stream as its last item.
    pub async fn watch(
        &self,
        version: GroupVersion,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<impl Stream<Item = Result<Event, RegistryError>> + Send + 'static, RegistryError>
    {
        let presenter = AsValues {
            strategy: Arc::clone(&self.strategy),
            version,
        };
        self.watch_with(version, namespace, options, presenter)
            .await
    }

    /// [`Self::watch`] with every object serialized, for the plain JSON answer: an object is
    /// encoded once per revision and version, not once per watcher.
    pub async fn watch_json(
        &self,
        version: GroupVersion,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<
        impl Stream<Item = Result<Event<Arc<RawValue>>, RegistryError>> + Send + 'static,
        RegistryError,
    > {
        let presenter = AsJson {
            strategy: Arc::clone(&self.strategy),
            version,
            encoded: Arc::clone(&self.encoded),
            reader: self.reader,
        };
        self.watch_with(version, namespace, options, presenter)
            .await
    }

    /// The watch of both forms.
    async fn watch_with<P: Presenter>(
        &self,
        version: GroupVersion,
        namespace: Option<&str>,
        options: &ListOptions,
        presenter: P,
    ) -> Result<
        impl Stream<Item = Result<Event<P::Object>, RegistryError>> + Send + 'static,
        RegistryError,
    > {
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
                let listed = presenter.initial(self, namespace, &all).await?;
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
                    initial.push(Event {
                        event_type: EventType::Bookmark,
                        object: presenter.bookmark(lens.bookmark(revision, true))?,
                    });
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
                        Some(Ok(event)) => match lens.view(event).and_then(|shown| present(&lens, &presenter, shown)) {
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
