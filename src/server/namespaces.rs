//! Namespace lifecycle, as kube-apiserver's `NamespaceLifecycle` admission plugin does it for
//! the resources it serves itself: creating an object in a namespace that does not exist is
//! a 404 (`namespaces "x" not found`), in a namespace being deleted a 403 with the
//! `NamespaceTerminating` cause. The namespaces are the management cluster's, kept in an
//! informer; a namespace missing from it is looked up live before refusing, because a client
//! that creates a namespace and then an object in it (`kubectl apply -f` of both) is faster
//! than any watch.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};

use super::error::{ApiError, GroupResource, StatusCause};

/// How long a create waits for the first list of namespaces before it is refused.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// The cause kube adds to creates in a terminating namespace.
const NAMESPACE_TERMINATING_CAUSE: &str = "NamespaceTerminating";

/// Where the namespaces come from: the informer's cache, then a live read.
pub struct NamespaceLifecycle {
    cache: Store<Namespace>,
    api: Api<Namespace>,
    synced: AtomicBool,
}

/// Keeps the informer running; dropping it stops the watch.
pub type NamespaceInformer = crate::task::TaskGuard;

/// What a namespace lookup found.
enum Found {
    Active,
    Terminating,
    Missing,
}

fn found(namespace: &Namespace) -> Found {
    let terminating = namespace.metadata.deletion_timestamp.is_some()
        || namespace
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|phase| phase == "Terminating");
    if terminating {
        Found::Terminating
    } else {
        Found::Active
    }
}

impl NamespaceLifecycle {
    /// Starts the informer of the cluster's namespaces.
    pub fn start(client: kube::Client) -> (Arc<Self>, NamespaceInformer) {
        let api: Api<Namespace> = Api::all(client);
        let (cache, writer) = reflector::store();
        let lifecycle = Arc::new(Self {
            cache,
            api: api.clone(),
            synced: AtomicBool::new(false),
        });
        let informer = Arc::clone(&lifecycle);
        let task = tokio::spawn(async move {
            let events = reflector::reflector(writer, watcher(api, watcher::Config::default()))
                .default_backoff()
                .touched_objects();
            let ready = async {
                if informer.cache.wait_until_ready().await.is_ok() {
                    informer.synced.store(true, Ordering::Release);
                }
            };
            let drain = events.for_each(|event| async move {
                if let Err(e) = event {
                    tracing::warn!(error = %e, "watching namespaces");
                }
            });
            futures::join!(ready, drain);
        });
        (lifecycle, NamespaceInformer::new(task))
    }

    /// Whether the first list of namespaces has arrived (a readiness check).
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Admits the creation of `name` (empty with `generateName`) of `resource` in
    /// `namespace`.
    pub async fn admit_create(
        &self,
        resource: &GroupResource,
        namespace: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        if namespace.is_empty() {
            return Ok(());
        }
        if !self.is_synced()
            && tokio::time::timeout(READY_TIMEOUT, self.cache.wait_until_ready())
                .await
                .is_err()
        {
            return Err(ApiError::forbidden(
                resource,
                name,
                "not yet ready to handle request",
            ));
        }
        let state = match self.cache.get(&ObjectRef::new(namespace)) {
            Some(cached) => found(&cached),
            None => self.live(namespace).await?,
        };
        match state {
            Found::Active => Ok(()),
            Found::Missing => Err(ApiError::not_found(
                &GroupResource::new("", "namespaces"),
                namespace,
            )),
            Found::Terminating => Err(ApiError::forbidden(
                resource,
                name,
                &format!(
                    "unable to create new content in namespace {namespace} because it is being \
                     terminated"
                ),
            )
            .with_cause(StatusCause {
                reason: NAMESPACE_TERMINATING_CAUSE.to_owned(),
                message: format!("namespace {namespace} is being terminated"),
                field: "metadata.namespace".to_owned(),
            })),
        }
    }

    /// The labels of `namespace` (the namespace selectors of admission webhooks): from the
    /// informer, else read from the cluster; a missing namespace has none.
    pub async fn labels(
        &self,
        namespace: &str,
    ) -> Result<std::collections::BTreeMap<String, String>, kube::Error> {
        Ok(self
            .object(namespace)
            .await?
            .and_then(|ns| ns.metadata.labels)
            .unwrap_or_default())
    }

    /// The Namespace object (admission policies' `namespaceObject`): from the informer, else
    /// read from the cluster.
    pub async fn object(&self, namespace: &str) -> Result<Option<Namespace>, kube::Error> {
        if let Some(cached) = self.cache.get(&ObjectRef::new(namespace)) {
            return Ok(Some((*cached).clone()));
        }
        self.api.get_opt(namespace).await
    }

    /// A namespace the informer has not seen (yet), read from the cluster.
    async fn live(&self, namespace: &str) -> Result<Found, ApiError> {
        match self.api.get_opt(namespace).await {
            Ok(Some(ns)) => Ok(found(&ns)),
            Ok(None) => Ok(Found::Missing),
            Err(e) => Err(ApiError::internal(format!(
                "looking up namespace {namespace}: {e}"
            ))),
        }
    }
}
