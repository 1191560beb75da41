//! The kinds this server serves, each as one [`Strategy`], and the REST registry built from
//! them over one store. Adding a kind is one more line in [`strategies`].

use std::sync::Arc;

use capmox_storage::Store;

use crate::api::resource::{
    ClusterKind, ClusterTemplateKind, KubernetesReleaseKind, MachineKind, MachineTemplateKind,
};

use super::admission::Admission;
use super::encoded_cache::EncodedCache;
use super::object_store::{ObjectStore, StorageObserver};
use super::rest::{ResourceRest, RestConfig};
use super::strategy::{KindStrategy, Strategy};
use super::table::ColumnDefinitionError;

/// The strategy of every kind, in the order discovery lists them.
pub fn strategies() -> Vec<Arc<dyn Strategy>> {
    vec![
        Arc::new(KindStrategy::<ClusterKind>::new()),
        Arc::new(KindStrategy::<ClusterTemplateKind>::new()),
        Arc::new(KindStrategy::<KubernetesReleaseKind>::new()),
        Arc::new(KindStrategy::<MachineKind>::new()),
        Arc::new(KindStrategy::<MachineTemplateKind>::new()),
    ]
}

/// Every served kind's REST operations.
pub struct Catalog {
    resources: Vec<Arc<ResourceRest>>,
    parts: Parts,
}

/// What every kind's REST operations are built over.
struct Parts {
    store: Store,
    observer: Arc<dyn StorageObserver>,
    config: RestConfig,
    encoded: Arc<EncodedCache>,
    admission: Arc<dyn Admission>,
}

impl Parts {
    fn rest(&self, strategy: Arc<dyn Strategy>) -> Result<ResourceRest, ColumnDefinitionError> {
        let descriptor = strategy.descriptor();
        let objects = ObjectStore::new(
            self.store.clone(),
            descriptor.group,
            descriptor.plural,
            Arc::clone(&self.observer),
        );
        ResourceRest::new(
            strategy,
            objects,
            self.config.clone(),
            Arc::clone(&self.encoded),
            Arc::clone(&self.admission),
        )
    }
}

impl Catalog {
    /// The REST registry of `strategies` over `store`; every write passes `admission`.
    pub fn new(
        strategies: Vec<Arc<dyn Strategy>>,
        store: &Store,
        observer: Arc<dyn StorageObserver>,
        config: &RestConfig,
        admission: Arc<dyn Admission>,
    ) -> Result<Self, ColumnDefinitionError> {
        let parts = Parts {
            store: store.clone(),
            observer,
            config: config.clone(),
            encoded: Arc::new(EncodedCache::new(config.encoded_cache_bytes)),
            admission,
        };
        let resources = strategies
            .into_iter()
            .map(|strategy| parts.rest(strategy).map(Arc::new))
            .collect::<Result<_, _>>()?;
        Ok(Self { resources, parts })
    }

    /// The REST operations of a kind that arrives at run time (a co-tenant's, from its CRD),
    /// over the same store, cache and admission as the catalog's own kinds. It is not added
    /// to the catalog: whoever keeps such kinds serves it.
    pub fn rest_for(
        &self,
        strategy: Arc<dyn Strategy>,
    ) -> Result<ResourceRest, ColumnDefinitionError> {
        self.parts.rest(strategy)
    }

    /// The store every kind's objects are in.
    pub fn store(&self) -> &Store {
        &self.parts.store
    }

    /// The served kinds.
    pub fn resources(&self) -> &[Arc<ResourceRest>] {
        &self.resources
    }

    /// The kind served as `plural` in `group`.
    pub fn resource(&self, group: &str, plural: &str) -> Option<&Arc<ResourceRest>> {
        self.resources.iter().find(|r| {
            let d = r.descriptor();
            d.group == group && d.plural == plural
        })
    }
}
