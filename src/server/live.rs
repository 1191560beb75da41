//! Documents derived from the co-tenant kinds (discovery, the OpenAPI v3 documents): built
//! again on the first request after those changed (their generation moved), and shared
//! as they are until then.

use std::sync::{Arc, RwLock};

use crate::registry::cotenant::{CoTenantSet, CoTenants};

type Build<T> = Box<dyn Fn(&CoTenantSet) -> T + Send + Sync>;

/// A `T` built from the co-tenant kinds as they are now.
pub struct Live<T> {
    cotenants: Option<Arc<CoTenants>>,
    build: Build<T>,
    built: RwLock<(u64, Arc<T>)>,
}

impl<T> Live<T> {
    /// Builds the first `T`; without co-tenants (`None`) it never changes.
    pub fn new(
        cotenants: Option<Arc<CoTenants>>,
        build: impl Fn(&CoTenantSet) -> T + Send + Sync + 'static,
    ) -> Self {
        let (generation, set) = snapshot(cotenants.as_deref());
        let built = Arc::new(build(&set));
        Self {
            cotenants,
            build: Box::new(build),
            built: RwLock::new((generation, built)),
        }
    }

    /// The `T` of the co-tenant kinds known now.
    pub fn current(&self) -> Arc<T> {
        let generation = self.cotenants.as_ref().map_or(0, |c| c.generation());
        if let Ok(built) = self.built.read()
            && built.0 == generation
        {
            return Arc::clone(&built.1);
        }
        let (generation, set) = snapshot(self.cotenants.as_deref());
        let rebuilt = Arc::new((self.build)(&set));
        if let Ok(mut built) = self.built.write() {
            *built = (generation, Arc::clone(&rebuilt));
        }
        rebuilt
    }
}

fn snapshot(cotenants: Option<&CoTenants>) -> (u64, Arc<CoTenantSet>) {
    cotenants.map_or_else(Default::default, |c| (c.generation(), c.current()))
}
