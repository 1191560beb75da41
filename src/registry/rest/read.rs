//! GET and LIST: resourceVersion semantics, selectors, and consistent pages with continue
//! tokens (every page of a list is read at the first page's revision).

use std::sync::Arc;

use capmox_storage::{Error as StorageError, Listed, Revision};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::registry::continue_token;
use crate::registry::descriptor::GroupVersion;
use crate::registry::error::RegistryError;
use crate::registry::list_options::{ListOptions, ListStart, parse_resource_version};
use crate::registry::meta::ListMeta;
use crate::registry::object_store::{Stored, map_error};

use super::ResourceRest;

/// One page of a list, in the request's version: items as JSON values, or serialized
/// (`list_json`).
#[derive(Debug, Clone, PartialEq)]
pub struct ListResult<T = Value> {
    pub items: Vec<T>,
    pub meta: ListMeta,
}

impl ListResult {
    /// The list object (`<Kind>List`); `items` is `[]` when empty, never `null`.
    pub fn into_value(self, api_version: &str, list_kind: &str) -> Value {
        json!({
            "apiVersion": api_version,
            "kind": list_kind,
            "metadata": self.meta,
            "items": self.items,
        })
    }
}

const LIST_TOO_OLD: &str = "The resourceVersion for the provided list is too old.";
const CONTINUE_TOO_OLD: &str = "The provided continue parameter is too old to display a consistent list result. \
    You can start a new list without the continue parameter, or use the continue token in this response to \
    retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - \
    objects that were created, modified, or deleted between the time the first chunk was returned and now may \
    show up in the list.";

fn selects(options: &ListOptions, object: &Value) -> bool {
    options.label_selector.matches_object(object) && options.field_selector.matches_object(object)
}

/// What a LIST reads of each stored object; the key names where a next page starts.
trait ListedItem {
    fn key(&self) -> &str;
}

impl ListedItem for Stored {
    fn key(&self) -> &str {
        &self.key
    }
}

/// A stored object as a plain JSON LIST reads it: its encoding in the request's version when the
/// cache holds it (its stored bytes then never leave the store), else the stored object.
enum ListedJson {
    Encoded { key: String, json: Arc<RawValue> },
    Stored(Stored),
}

impl ListedItem for ListedJson {
    fn key(&self) -> &str {
        match self {
            ListedJson::Encoded { key, .. } => key,
            ListedJson::Stored(stored) => &stored.key,
        }
    }
}

/// The stored object, its value copied out of the store.
fn copied(listed: Listed<'_>) -> Stored {
    listed.to_key_value()
}

fn to_u64(revision: Revision) -> u64 {
    u64::try_from(revision).unwrap_or(0)
}

fn to_revision(rv: u64) -> Revision {
    Revision::try_from(rv).unwrap_or(Revision::MAX)
}

impl ResourceRest {
    /// GET: `resourceVersion` "" or "0" reads the latest; "N" must not be older than N.
    pub async fn get(
        &self,
        version: GroupVersion,
        namespace: &str,
        name: &str,
        resource_version: &str,
    ) -> Result<Value, RegistryError> {
        let stored = self.get_stored(namespace, name, resource_version).await?;
        self.read_in(version, &stored)
    }

    /// [`Self::get`] serialized, for the plain JSON answer: encoded once per revision and
    /// version (`EncodedCache`), as LISTs and watches read it.
    pub async fn get_json(
        &self,
        version: GroupVersion,
        namespace: &str,
        name: &str,
        resource_version: &str,
    ) -> Result<Arc<RawValue>, RegistryError> {
        let stored = self.get_stored(namespace, name, resource_version).await?;
        self.read_json_in(version, &stored)
    }

    async fn get_stored(
        &self,
        namespace: &str,
        name: &str,
        resource_version: &str,
    ) -> Result<Stored, RegistryError> {
        let min = parse_resource_version(resource_version)?;
        let key = self.key(namespace, name)?;
        let stored = self.store.get(&key).await?;
        if min > 0 {
            let current = to_u64(self.store.current_revision().await?);
            if current < min {
                return Err(RegistryError::TooLargeResourceVersion {
                    requested: min,
                    current,
                });
            }
        }
        stored.ok_or_else(|| self.not_found(name))
    }

    /// A stored object in `version`, serialized, from the cache of encoded objects.
    fn read_json_in(
        &self,
        version: GroupVersion,
        stored: &Stored,
    ) -> Result<Arc<RawValue>, RegistryError> {
        super::cached_json(
            &self.encoded,
            self.strategy.as_ref(),
            (stored.revision, version, self.reader),
            &stored.key,
            &stored.value,
        )
    }

    /// LIST in one namespace or all: selectors, `limit`/`continue`, resourceVersion and
    /// resourceVersionMatch.
    pub async fn list(
        &self,
        version: GroupVersion,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<ListResult, RegistryError> {
        self.list_items(namespace, options, copied, |stored| {
            let object = self.read_in(version, stored)?;
            Ok(selects(options, &object).then_some(object))
        })
        .await
    }

    /// LIST with every item serialized: without selectors each stored object goes straight
    /// from its typed form to JSON (the plain JSON answer of a large list), once per revision
    /// and version (`EncodedCache`).
    pub async fn list_json(
        &self,
        version: GroupVersion,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<ListResult<Arc<RawValue>>, RegistryError> {
        let filtered = !options.label_selector.is_empty() || !options.field_selector.is_empty();
        if filtered {
            let page = self.list(version, namespace, options).await?;
            let items = page
                .items
                .iter()
                .map(|object| serde_json::value::to_raw_value(object).map(Arc::from))
                .collect::<Result<_, _>>()
                .map_err(|e| RegistryError::Internal(format!("encoding the object: {e}")))?;
            return Ok(ListResult {
                items,
                meta: page.meta,
            });
        }
        let (encoded, reader) = (Arc::clone(&self.encoded), self.reader);
        let read = move |listed: Listed<'_>| match encoded
            .cached(listed.key, (listed.revision, version, reader))
        {
            Some(json) => ListedJson::Encoded {
                key: listed.key.to_owned(),
                json,
            },
            None => ListedJson::Stored(listed.to_key_value()),
        };
        self.list_items(namespace, options, read, |listed| match listed {
            ListedJson::Encoded { json, .. } => Ok(Some(Arc::clone(json))),
            ListedJson::Stored(stored) => self.read_json_in(version, stored).map(Some),
        })
        .await
    }

    /// The paging loop of a LIST; `read` takes what the LIST needs of each stored object out of
    /// the store, `item` makes the answer's item of it, `None` when the selectors drop it.
    async fn list_items<S: ListedItem + Send + 'static, T>(
        &self,
        namespace: Option<&str>,
        options: &ListOptions,
        read: impl FnMut(Listed<'_>) -> S + Clone + Send + 'static,
        mut item: impl FnMut(&S) -> Result<Option<T>, RegistryError>,
    ) -> Result<ListResult<T>, RegistryError> {
        let Some(prefix) = self.store.list_prefix(namespace) else {
            return Ok(ListResult {
                items: Vec::new(),
                meta: ListMeta::default(),
            });
        };
        let start = options.list_start(&prefix)?;
        let (mut at, mut start_after, min_revision) = match &start {
            ListStart::Latest | ListStart::Any => (None, None, 0),
            ListStart::NotOlderThan(rv) => (None, None, *rv),
            ListStart::Exact(rv) => (Some(to_revision(*rv)), None, 0),
            ListStart::Continue {
                start_key,
                revision,
            } => (
                revision.map(to_revision),
                // Tokens name the key after the last one returned (`<key>\0`).
                Some(
                    start_key
                        .strip_suffix('\u{0}')
                        .unwrap_or(start_key)
                        .to_owned(),
                ),
                0,
            ),
        };
        let limit = usize::try_from(options.limit).unwrap_or(0);
        let filtered = !options.label_selector.is_empty() || !options.field_selector.is_empty();
        let mut items = Vec::new();
        let mut meta = ListMeta::default();
        loop {
            let fetch = match (limit, filtered) {
                (0, _) => None,
                (limit, false) => Some(limit - items.len()),
                // Selectors drop items: read ahead so pages fill in few round trips.
                (limit, true) => Some((limit - items.len()).max(100)),
            };
            let page = match self
                .store
                .list_with(&prefix, start_after.as_deref(), fetch, at, read.clone())
                .await
            {
                Ok(page) => page,
                Err(e) => return Err(self.list_error(e, &start, &prefix).await),
            };
            if to_u64(page.revision) < min_revision {
                return Err(RegistryError::TooLargeResourceVersion {
                    requested: min_revision,
                    current: to_u64(page.revision),
                });
            }
            at = Some(page.revision);
            meta.resource_version = page.revision.to_string();
            let count = page.items.len();
            for (index, stored) in page.items.iter().enumerate() {
                if let Some(object) = item(stored)? {
                    items.push(object);
                }
                let full = limit > 0 && items.len() == limit;
                let more_after = index + 1 < count || page.more;
                if full && more_after {
                    meta.continue_token =
                        continue_token::encode_after(stored.key(), &prefix, page.revision)?;
                    if !filtered {
                        let unread = i64::try_from(count - index - 1).unwrap_or(0);
                        meta.remaining_item_count =
                            Some(page.remaining.unwrap_or(0).saturating_add(unread));
                    }
                    return Ok(ListResult { items, meta });
                }
            }
            match page.items.last() {
                Some(last) if page.more => start_after = Some(last.key().to_owned()),
                _ => return Ok(ListResult { items, meta }),
            }
        }
    }

    async fn list_error(&self, e: StorageError, start: &ListStart, prefix: &str) -> RegistryError {
        match (e, start) {
            (StorageError::Expired { .. }, ListStart::Continue { start_key, .. }) => {
                // A token for the rest of the list at the latest revision.
                match continue_token::encode(start_key, prefix, -1) {
                    Ok(token) => RegistryError::Expired {
                        message: CONTINUE_TOO_OLD.to_owned(),
                        continue_token: Some(token),
                    },
                    Err(e) => e,
                }
            }
            (StorageError::Expired { .. }, _) => RegistryError::Expired {
                message: LIST_TOO_OLD.to_owned(),
                continue_token: None,
            },
            (e @ StorageError::FutureRevision { .. }, _) => self.store.error(e).await,
            (e, _) => map_error(e, None),
        }
    }
}
