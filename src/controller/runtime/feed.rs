//! Feeds the work queue from the registry, in process: one reflector per kind (a full
//! list, then a watch from the list's resourceVersion with bookmarks, resumed from the last
//! resourceVersion seen, relisted when the store answers 410 Expired), the periodic resync
//! of every object, and the triggers other code sends.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

use super::index::Index;
use super::key::{ObjectKey, ReconcileKind, Trigger};
use super::queue::WorkQueue;
use crate::api::Version;
use crate::controller::action::spread;
use crate::registry::RegistryError;
use crate::registry::list_options::ListOptions;
use crate::registry::rest::ResourceRest;
use crate::registry::watch_event::EventType;

/// Pause before a failed list or watch is tried again: doubling from 200 ms to 30 s.
const RETRY_BASE: Duration = Duration::from_millis(200);
const RETRY_MAX: Duration = Duration::from_secs(30);

/// The watched objects and the queue their keys go to.
pub struct Feed {
    index: Mutex<Index>,
    queue: Arc<WorkQueue<ObjectKey>>,
}

impl Feed {
    pub fn new(queue: Arc<WorkQueue<ObjectKey>>) -> Self {
        Self {
            index: Mutex::new(Index::default()),
            queue,
        }
    }

    fn index(&self) -> MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn enqueue(&self, keys: Vec<ObjectKey>) {
        for key in keys {
            self.queue.add(key);
        }
    }

    /// Queues what a trigger names.
    pub fn trigger(&self, trigger: Trigger) {
        let keys = self.index().resolve(trigger);
        self.enqueue(keys);
    }

    /// Queues every known object.
    pub fn resync(&self) {
        let keys = self.index().all();
        tracing::debug!(objects = keys.len(), "periodic resync");
        self.enqueue(keys);
    }

    /// Follows `kind` through `rest` until the task is dropped.
    pub async fn reflect(self: Arc<Self>, kind: ReconcileKind, rest: Arc<ResourceRest>) {
        let mut failures = 0u32;
        loop {
            let listed = match rest
                .list(Version::V1alpha2.into(), None, &ListOptions::default())
                .await
            {
                Ok(listed) => listed,
                Err(error) => {
                    failures += 1;
                    tracing::warn!(kind = kind.as_str(), %error, "listing failed");
                    pause(failures).await;
                    continue;
                }
            };
            failures = 0;
            let keys = self.index().replace(kind, &listed.items);
            tracing::debug!(kind = kind.as_str(), objects = listed.items.len(), "listed");
            self.enqueue(keys);
            let mut resource_version = listed.meta.resource_version;
            // Watch from the last resourceVersion seen until the store forgot it.
            loop {
                match self.watch(kind, &rest, &mut resource_version).await {
                    Ok(()) => failures = 0,
                    Err(RegistryError::Expired { .. }) => {
                        tracing::info!(kind = kind.as_str(), %resource_version, "watch expired, relisting");
                        break;
                    }
                    Err(error) => {
                        failures += 1;
                        tracing::warn!(kind = kind.as_str(), %error, "watch failed");
                    }
                }
                pause(failures.max(1)).await;
            }
        }
    }

    /// One watch from `resource_version`, advancing it with every event and bookmark;
    /// `Ok` when the stream ends.
    async fn watch(
        &self,
        kind: ReconcileKind,
        rest: &ResourceRest,
        resource_version: &mut String,
    ) -> Result<(), RegistryError> {
        let options = ListOptions {
            resource_version: resource_version.clone(),
            allow_watch_bookmarks: true,
            ..ListOptions::default()
        };
        let events = rest.watch(Version::V1alpha2.into(), None, &options).await?;
        futures::pin_mut!(events);
        while let Some(event) = events.next().await {
            let event = event?;
            if let Some(rv) = event
                .object
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
            {
                *resource_version = rv.to_owned();
            }
            let keys = match event.event_type {
                EventType::Added | EventType::Modified => self.index().upsert(kind, &event.object),
                EventType::Deleted => self.index().remove(kind, &event.object),
                _ => continue,
            };
            self.enqueue(keys);
        }
        Ok(())
    }

    /// Queues every object every `period` (±10 %) until the task is dropped.
    pub async fn resync_every(self: Arc<Self>, period: Duration) {
        loop {
            tokio::time::sleep(spread(period, 0.1)).await;
            self.resync();
        }
    }
}

async fn pause(failures: u32) {
    let factor = 2u32.saturating_pow(failures.saturating_sub(1).min(10));
    tokio::time::sleep(spread(
        RETRY_BASE.saturating_mul(factor).min(RETRY_MAX),
        0.2,
    ))
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::action::{Action, ErrorPolicy};
    use crate::controller::runtime::Outcome;
    use serde_json::json;

    #[tokio::test]
    async fn resync_and_triggers_queue_the_known_objects() {
        let queue = Arc::new(WorkQueue::new(ErrorPolicy::default()));
        let feed = Feed::new(Arc::clone(&queue));
        let machine = |name: &str| {
            json!({"metadata": {"namespace": "ns", "name": name,
                "labels": {"cluster.x-k8s.io/cluster-name": "c1"}}})
        };
        let keys = feed.index().replace(
            ReconcileKind::ProxmoxMachine,
            &[machine("m1"), machine("m2")],
        );
        assert_eq!(keys.len(), 2);
        assert_eq!(queue.depth(), 0, "nothing queued by the index itself");
        feed.resync();
        assert_eq!(queue.depth(), 2);
        let m1 = queue.next().await.expect("m1");
        let m2 = queue.next().await.expect("m2");
        queue.done(m1, Outcome::Done(Action::AwaitChange));
        queue.done(m2, Outcome::Done(Action::AwaitChange));
        feed.trigger(Trigger::Cluster {
            namespace: "ns".into(),
            name: "c1".into(),
        });
        assert_eq!(queue.depth(), 2, "the cluster's machines");
        feed.trigger(Trigger::Object(ObjectKey::machine("ns", "m1")));
        assert_eq!(queue.depth(), 2, "already queued");
    }

    fn machine_body(name: &str) -> Value {
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
            "kind": "ProxmoxMachine",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"sourceNode": "pve1", "templateID": 9000, "numCores": 2, "memoryMiB": 1024,
                "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0"}]}},
        })
    }

    /// Takes the next key from the queue (within 5 s) and marks it done.
    async fn take(queue: &WorkQueue<ObjectKey>) -> ObjectKey {
        let key = tokio::time::timeout(std::time::Duration::from_secs(5), queue.next())
            .await
            .expect("a key arrives")
            .expect("queue open");
        queue.done(key.clone(), Outcome::Done(Action::AwaitChange));
        key
    }

    #[tokio::test]
    async fn the_reflector_lists_then_follows_and_a_compacted_start_expires() {
        use crate::registry::catalog::{Catalog, strategies};
        use crate::registry::object_store::NoObserver;
        use crate::registry::request_options::WriteOptions;
        use crate::registry::rest::RestConfig;

        let dir = tempfile::tempdir().expect("dir");
        let store =
            capmox_storage::Store::open(capmox_storage::EmbeddedConfig::new(dir.path().join("db")))
                .await
                .expect("store");
        let catalog = Catalog::new(
            strategies(),
            &store,
            Arc::new(NoObserver),
            &RestConfig::default(),
            Arc::new(crate::registry::admission::NoAdmission),
        )
        .expect("catalog");
        let rest = Arc::clone(
            catalog
                .resource("infrastructure.cluster.x-k8s.io", "proxmoxmachines")
                .expect("served"),
        );
        let create = |name: &'static str| {
            let rest = Arc::clone(&rest);
            async move {
                rest.create(
                    Version::V1alpha2.into(),
                    "ns",
                    machine_body(name),
                    &[],
                    &WriteOptions::default(),
                )
                .await
                .expect("created");
            }
        };
        create("m1").await;
        let queue = Arc::new(WorkQueue::new(ErrorPolicy::default()));
        let feed = Arc::new(Feed::new(Arc::clone(&queue)));
        let reflector = tokio::spawn(
            Arc::clone(&feed).reflect(ReconcileKind::ProxmoxMachine, Arc::clone(&rest)),
        );
        assert_eq!(take(&queue).await, ObjectKey::machine("ns", "m1"), "listed");
        create("m2").await;
        assert_eq!(
            take(&queue).await,
            ObjectKey::machine("ns", "m2"),
            "watched"
        );
        feed.resync();
        let mut both = vec![take(&queue).await, take(&queue).await];
        both.sort();
        assert_eq!(
            both,
            vec![
                ObjectKey::machine("ns", "m1"),
                ObjectKey::machine("ns", "m2")
            ]
        );
        reflector.abort();

        // A watch from a compacted resourceVersion answers Expired: the reflector relists.
        let now = store.current_revision().await.expect("revision");
        store.compact(now).await.expect("compacted");
        let mut old = "1".to_owned();
        let answer = feed
            .watch(ReconcileKind::ProxmoxMachine, &rest, &mut old)
            .await;
        assert!(
            matches!(answer, Err(RegistryError::Expired { .. })),
            "{answer:?}"
        );
    }
}
