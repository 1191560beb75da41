//! The values the store hands out.

use bytes::Bytes;

/// A point in the store's history. Every successful write moves it forward by one; it doubles
/// as the Kubernetes `resourceVersion` (etcd's `mod_revision`).
pub type Revision = i64;

/// A stored key with its value and revisions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    /// The key below the store's prefix, e.g. `/infrastructure.cluster.x-k8s.io/proxmoxmachines/ns/m1`.
    pub key: String,
    /// Opaque bytes (the API server stores JSON).
    pub value: Bytes,
    /// The revision of the last write of this key (`mod_revision`).
    pub revision: Revision,
    /// The revision that created this incarnation of the key.
    pub create_revision: Revision,
}

impl KeyValue {
    /// This key-value as a list lends it.
    pub fn listed(&self) -> Listed<'_> {
        Listed {
            key: &self.key,
            value: &self.value,
            revision: self.revision,
            create_revision: self.create_revision,
        }
    }
}

/// A listed key as the store holds it, lent to the reader of [`crate::Store::list_with`] for
/// the time of the read: the value is not copied unless the reader copies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listed<'a> {
    pub key: &'a str,
    pub value: &'a [u8],
    pub revision: Revision,
    pub create_revision: Revision,
}

impl Listed<'_> {
    /// The key and a copy of its value.
    pub fn to_key_value(self) -> KeyValue {
        KeyValue {
            key: self.key.to_owned(),
            value: Bytes::copy_from_slice(self.value),
            revision: self.revision,
            create_revision: self.create_revision,
        }
    }
}

/// The outcome of a delete: the object as it was, and the revision of the delete itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deleted {
    pub prev: KeyValue,
    pub revision: Revision,
}

/// One change seen by a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A create (`prev` is `None`) or an update (`prev` is the value before).
    Put {
        kv: KeyValue,
        prev: Option<KeyValue>,
    },
    /// A delete at `revision`; `prev` is the value before it.
    Delete {
        key: String,
        revision: Revision,
        prev: Option<KeyValue>,
    },
    /// Every event up to `revision` has been delivered (a bookmark).
    Progress { revision: Revision },
}

impl Event {
    /// The revision this event happened at (or the progress mark).
    pub fn revision(&self) -> Revision {
        match self {
            Event::Put { kv, .. } => kv.revision,
            Event::Delete { revision, .. } | Event::Progress { revision } => *revision,
        }
    }

    /// The key the event is about; `None` for progress marks.
    pub fn key(&self) -> Option<&str> {
        match self {
            Event::Put { kv, .. } => Some(&kv.key),
            Event::Delete { key, .. } => Some(key),
            Event::Progress { .. } => None,
        }
    }
}

/// One page of a list, read at a single revision: its keys, or what a reader made of each
/// ([`crate::Store::list_with`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListPage<T = KeyValue> {
    /// In ascending byte order of their keys.
    pub items: Vec<T>,
    /// The revision the page was read at; pass it back as `at` for the next page.
    pub revision: Revision,
    /// Whether keys follow this page.
    pub more: bool,
    /// How many keys follow this page (Kubernetes `remainingItemCount`).
    pub remaining: Option<i64>,
}

/// A list request as the backends receive it, checked by [`crate::Store::list`].
#[derive(Debug, Clone)]
pub(crate) struct ListQuery {
    pub prefix: String,
    pub start_after: Option<String>,
    /// `None`: no limit.
    pub limit: Option<usize>,
    /// `None`: the current revision.
    pub at: Option<Revision>,
}

impl ListQuery {
    /// The key to continue after, if it lies within the prefix's range at all; a key sorting
    /// before the prefix means "from the start".
    pub(crate) fn continue_after(&self) -> Option<&str> {
        self.start_after
            .as_deref()
            .filter(|after| *after >= self.prefix.as_str())
    }
}
