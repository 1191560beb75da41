//! The management cluster reached through `kube::Client`: [`KubeManagement`] (the
//! controller's [`Management`] seam), the change streams that requeue our objects when
//! their CAPI owners change ([`changes`]), and the JSON-level object access both use
//! ([`objects`]), which the `dev` emulation of CAPI and the IPAM provider reuses.
//!
//! Kinds: Cluster API `cluster.x-k8s.io/v1beta2` Cluster and Machine, core Secret,
//! `ipam.cluster.x-k8s.io/v1beta2` IPAddressClaim and IPAddress, and the in-cluster
//! provider's `ipam.cluster.x-k8s.io/v1alpha2` InClusterIPPool / GlobalInClusterIPPool
//! (cluster-scoped). Errors map from kube's `Status` once ([`error`]).

pub mod changes;
pub mod error;
pub mod kinds;
pub mod objects;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};

use self::error::management_error;
use self::kinds::Kind;
use self::objects::{Objects, decode, encode, label_selector};
use crate::controller::seams::{Management, ManagementError};
use crate::management::types::{Cluster, IpAddress, IpAddressClaim, IpPool, Machine, PoolKind};

/// How often `apply_pool` re-reads and retries after a conflict before giving up with
/// `Conflict` (the reconciler's back-off takes over from there).
const APPLY_ATTEMPTS: usize = 5;

/// [`Management`] over a `kube::Client`.
#[derive(Clone)]
pub struct KubeManagement {
    objects: Objects,
}

impl KubeManagement {
    pub fn new(client: kube::Client) -> Self {
        Self {
            objects: Objects::new(client),
        }
    }

    fn secrets(&self, namespace: &str) -> Api<Secret> {
        Api::namespaced(self.objects.client().clone(), namespace)
    }

    /// One attempt of [`Management::apply_pool`]: create, or merge into the stored pool.
    async fn apply_pool_once(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        pool: &IpPool,
    ) -> Result<IpPool, ManagementError> {
        let Some(mut stored) = self.objects.get(kind, namespace, name).await? else {
            let mut fresh = encode(kind, pool)?;
            if !kind.namespaced() {
                fresh["metadata"]
                    .as_object_mut()
                    .map(|m| m.remove("namespace"));
            }
            let created = self.objects.create(kind, &fresh).await?;
            return decode(kind, created);
        };
        let wanted = encode(kind, pool)?;
        stored["spec"] = wanted["spec"].clone();
        for field in ["labels", "annotations"] {
            if let Some(entries) = wanted["metadata"][field].as_object() {
                let target = &mut stored["metadata"][field];
                if !target.is_object() {
                    *target = serde_json::json!({});
                }
                for (k, v) in entries {
                    target[k] = v.clone();
                }
            }
        }
        if !wanted["metadata"]["ownerReferences"].is_null() {
            stored["metadata"]["ownerReferences"] = wanted["metadata"]["ownerReferences"].clone();
        }
        decode(kind, self.objects.replace(kind, &stored).await?)
    }
}

fn pool_namespace(kind: PoolKind, namespace: &str) -> &str {
    match kind {
        PoolKind::InCluster => namespace,
        PoolKind::GlobalInCluster => "",
    }
}

impl Management for KubeManagement {
    async fn cluster(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Cluster>, ManagementError> {
        self.objects.get_typed(Kind::Cluster, namespace, name).await
    }

    async fn machine(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Machine>, ManagementError> {
        self.objects.get_typed(Kind::Machine, namespace, name).await
    }

    async fn secret(&self, namespace: &str, name: &str) -> Result<Option<Secret>, ManagementError> {
        self.secrets(namespace)
            .get_opt(name)
            .await
            .map_err(|e| management_error(e, &format!("Secret {namespace}/{name}")))
    }

    async fn update_secret_metadata(&self, secret: &Secret) -> Result<Secret, ManagementError> {
        let namespace = secret.metadata.namespace.clone().unwrap_or_default();
        let name = secret.metadata.name.clone().unwrap_or_default();
        let what = format!("Secret {namespace}/{name}");
        if secret
            .metadata
            .resource_version
            .as_deref()
            .is_none_or(str::is_empty)
        {
            return Err(ManagementError::Invalid(format!(
                "{what}: a metadata update needs the resourceVersion it was computed from"
            )));
        }
        // The stored data is written back as read, so only the metadata can change; the
        // caller's resourceVersion makes the PUT fail if anything changed meanwhile.
        let api = self.secrets(&namespace);
        let mut stored = api
            .get_opt(&name)
            .await
            .map_err(|e| management_error(e, &what))?
            .ok_or_else(|| ManagementError::Conflict(format!("{what} (not found)")))?;
        stored.metadata = secret.metadata.clone();
        api.replace(&name, &PostParams::default(), &stored)
            .await
            .map_err(|e| management_error(e, &what))
    }

    async fn claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<IpAddressClaim>, ManagementError> {
        self.objects
            .get_typed(Kind::IpAddressClaim, namespace, name)
            .await
    }

    async fn create_claim(
        &self,
        claim: &IpAddressClaim,
    ) -> Result<IpAddressClaim, ManagementError> {
        let mut value = encode(Kind::IpAddressClaim, claim)?;
        if let Some(map) = value.as_object_mut() {
            map.remove("status");
        }
        let created = self.objects.create(Kind::IpAddressClaim, &value).await?;
        decode(Kind::IpAddressClaim, created)
    }

    async fn delete_claim(&self, namespace: &str, name: &str) -> Result<(), ManagementError> {
        self.objects
            .delete(Kind::IpAddressClaim, namespace, name, None)
            .await
    }

    async fn list_claims(
        &self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<Vec<IpAddressClaim>, ManagementError> {
        self.objects
            .list(
                Kind::IpAddressClaim,
                Some(namespace),
                &label_selector(labels),
            )
            .await?
            .into_iter()
            .map(|v| decode(Kind::IpAddressClaim, v))
            .collect()
    }

    async fn ip_address(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<IpAddress>, ManagementError> {
        self.objects
            .get_typed(Kind::IpAddress, namespace, name)
            .await
    }

    async fn pool(
        &self,
        kind: PoolKind,
        namespace: &str,
        name: &str,
    ) -> Result<Option<IpPool>, ManagementError> {
        self.objects
            .get_typed(Kind::of_pool(kind), pool_namespace(kind, namespace), name)
            .await
    }

    async fn apply_pool(&self, pool: &IpPool) -> Result<IpPool, ManagementError> {
        let pool_kind = pool.pool_kind().ok_or_else(|| {
            ManagementError::Invalid(format!("unknown pool kind {:?}", pool.kind))
        })?;
        let kind = Kind::of_pool(pool_kind);
        let namespace = pool_namespace(
            pool_kind,
            pool.metadata.namespace.as_deref().unwrap_or_default(),
        );
        let name = pool.metadata.name.as_deref().unwrap_or_default();
        for _ in 0..APPLY_ATTEMPTS {
            // A conflict (or a create racing another) is resolved by reading again.
            match self.apply_pool_once(kind, namespace, name, pool).await {
                Err(ManagementError::Conflict(_) | ManagementError::AlreadyExists(_)) => {}
                done => return done,
            }
        }
        Err(ManagementError::Conflict(kind.describe(namespace, name)))
    }

    async fn delete_pool(
        &self,
        kind: PoolKind,
        namespace: &str,
        name: &str,
    ) -> Result<(), ManagementError> {
        self.objects
            .delete(
                Kind::of_pool(kind),
                pool_namespace(kind, namespace),
                name,
                None,
            )
            .await
    }
}
