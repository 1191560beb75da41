//! An in-cluster IPAM provider: what `cluster-api-ipam-provider-in-cluster` does for
//! `IPAddressClaim`s whose `spec.poolRef` is an `InClusterIPPool` or
//! `GlobalInClusterIPPool` (API group `ipam.cluster.x-k8s.io`).
//!
//! A pass over a claim: skip it while its Cluster (`spec.clusterName`, else the
//! cluster-name label) is missing or paused, or its pool is paused; add the finalizer
//! `ipam.cluster.x-k8s.io/ReleaseAddress`; find the claim's `IPAddress` (same name) or
//! allocate the lowest free address with [`crate::management::ipam_allocator`] — the
//! addresses in use are read from the `IPAddress`es of that pool on every allocation, so
//! a restart never hands out an address twice — and create it (owned by the claim as
//! controller and by the pool, the cluster-name label, the finalizer
//! `ipam.cluster.x-k8s.io/ProtectAddress`); then set `status.addressRef` and `Ready`.
//! A missing pool is `Ready=False/PoolNotReady`, a full one `Ready=False/PoolExhausted`.
//! A deleted claim has its address deleted (finalizer removed) and then loses its own
//! finalizer; an address whose claim is gone (or is a newer claim of the same name) is
//! released as well.
//!
//! Not emulated: `addressReuseGracePeriodSeconds` (released addresses are free at once),
//! the pools' validation webhook and their `status.ipAddresses` counts, the prefix pools.
//! One instance at a time: allocation is serialised in this loop, not across processes.

use std::collections::BTreeSet;
use std::net::IpAddr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::{Value, json};

use super::driver::{Next, Reconcile};
use super::error::EmulationError;
use super::meta::{
    add_finalizer, has_finalizer, is_deleting, meta_str, remove_finalizer, set_at, set_condition,
};
use crate::controller::conditions::Status;
use crate::controller::seams::ManagementError;
use crate::management::ipam_allocator::{AllocError, address_for, next_free};
use crate::management::kube::changes::ObjectKey;
use crate::management::kube::kinds::Kind;
use crate::management::kube::objects::{Objects, encode};
use crate::management::types::{
    CLUSTER_NAME_LABEL, Cluster, IN_CLUSTER_POOL_API_VERSION, IPAM_GROUP, IpAddress,
    IpAddressClaim, IpPool, PAUSED_ANNOTATION, PoolKind, PoolRef, has_annotation, label,
};

/// The claim finalizer: the address is released before the claim goes.
pub const RELEASE_FINALIZER: &str = "ipam.cluster.x-k8s.io/ReleaseAddress";
/// The address finalizer: only the provider deletes an allocated address.
pub const PROTECT_FINALIZER: &str = "ipam.cluster.x-k8s.io/ProtectAddress";

const READY: &str = "Ready";

/// The in-cluster pool kind a reference names, if it names one.
fn in_cluster_pool(pool_ref: &PoolRef) -> Option<PoolKind> {
    if pool_ref.api_group != IPAM_GROUP || pool_ref.name.is_empty() {
        return None;
    }
    PoolKind::from_kind(&pool_ref.kind)
}

/// The uid of the claim that controls an address.
fn claim_owner_uid(address: &IpAddress) -> Option<&str> {
    address
        .metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.kind == "IPAddressClaim" && o.controller == Some(true))
        .map(|o| o.uid.as_str())
}

/// Whether this provider allocated the address (its finalizer and a controlling claim):
/// only those are ever released; addresses others made are left alone.
fn allocated_here(address: &IpAddress) -> bool {
    claim_owner_uid(address).is_some()
        && address
            .metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|f| f == PROTECT_FINALIZER))
}

fn pool_namespace(kind: PoolKind, namespace: &str) -> &str {
    match kind {
        PoolKind::InCluster => namespace,
        PoolKind::GlobalInCluster => "",
    }
}

/// The IPAM loop's reconciler (see the module documentation).
pub struct Ipam {
    objects: Objects,
}

impl Ipam {
    pub fn new(objects: Objects) -> Self {
        Self { objects }
    }

    /// Deletes an address this provider allocated, finalizer included.
    async fn release(&self, address: &IpAddress) -> Result<(), EmulationError> {
        let namespace = address.metadata.namespace.as_deref().unwrap_or_default();
        let name = address.metadata.name.as_deref().unwrap_or_default();
        let uid = address.metadata.uid.as_deref();
        self.objects
            .delete(Kind::IpAddress, namespace, name, uid)
            .await?;
        if let Some(mut left) = self.objects.get(Kind::IpAddress, namespace, name).await?
            && Some(meta_str(&left, "uid")) == uid
            && remove_finalizer(&mut left, PROTECT_FINALIZER)
        {
            self.objects.replace(Kind::IpAddress, &left).await?;
        }
        Ok(())
    }

    /// The addresses already handed out from a pool.
    async fn used(
        &self,
        kind: PoolKind,
        namespace: &str,
        pool: &str,
    ) -> Result<BTreeSet<IpAddr>, EmulationError> {
        let scope = (kind == PoolKind::InCluster).then_some(namespace);
        let addresses = self.objects.list(Kind::IpAddress, scope, "").await?;
        Ok(addresses
            .into_iter()
            .filter_map(|v| serde_json::from_value::<IpAddress>(v).ok())
            .filter(|a| {
                in_cluster_pool(&a.spec.pool_ref) == Some(kind) && a.spec.pool_ref.name == pool
            })
            .filter_map(|a| a.spec.address.parse().ok())
            .collect())
    }

    /// Allocates the lowest free address of `pool` and creates the claim's `IPAddress`.
    async fn allocate(
        &self,
        claim: &IpAddressClaim,
        pool: &IpPool,
        kind: PoolKind,
        cluster: Option<&str>,
    ) -> Result<Result<IpAddress, AllocError>, EmulationError> {
        let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
        let pool_name = pool.metadata.name.as_deref().unwrap_or_default();
        let used = self.used(kind, namespace, pool_name).await?;
        let describe = Kind::of_pool(kind).describe(namespace, pool_name);
        let ip = match next_free(&describe, &pool.spec, &used) {
            Ok(ip) => ip,
            Err(e) => return Ok(Err(e)),
        };
        let mut address = address_for(claim, pool, ip);
        address.metadata.labels =
            cluster.map(|c| [(CLUSTER_NAME_LABEL.to_string(), c.to_string())].into());
        address.metadata.finalizers = Some(vec![PROTECT_FINALIZER.to_string()]);
        address
            .metadata
            .owner_references
            .get_or_insert_with(Vec::new)
            .push(OwnerReference {
                api_version: IN_CLUSTER_POOL_API_VERSION.to_string(),
                kind: kind.as_str().to_string(),
                name: pool_name.to_string(),
                uid: pool.metadata.uid.clone().unwrap_or_default(),
                controller: Some(false),
                block_owner_deletion: Some(true),
            });
        let name = address.metadata.name.clone().unwrap_or_default();
        match self
            .objects
            .create(Kind::IpAddress, &encode(Kind::IpAddress, &address)?)
            .await
        {
            Ok(created) => Ok(Ok(serde_json::from_value(created).unwrap_or(address))),
            // Someone else's address of that name: the next pass looks at it.
            Err(ManagementError::AlreadyExists(_)) => {
                Err(ManagementError::Conflict(Kind::IpAddress.describe(namespace, &name)).into())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Whether the claim's Cluster exists and is not paused (the provider's gate); claims
    /// without a cluster are served.
    async fn cluster_allows(
        &self,
        namespace: &str,
        claim: &IpAddressClaim,
    ) -> Result<bool, EmulationError> {
        let name = claim
            .spec
            .cluster_name
            .as_deref()
            .filter(|n| !n.is_empty())
            .or_else(|| label(&claim.metadata, CLUSTER_NAME_LABEL));
        let Some(name) = name else {
            return Ok(true);
        };
        let cluster: Option<Cluster> = self
            .objects
            .get_typed(Kind::Cluster, namespace, name)
            .await?;
        Ok(cluster.is_some_and(|c| !c.is_paused()))
    }

    /// Writes the claim's status if `edit` changed it.
    async fn write_status(
        &self,
        mut claim: Value,
        edit: impl FnOnce(&mut Value) -> bool,
    ) -> Result<(), EmulationError> {
        if edit(&mut claim) {
            self.objects
                .replace_status(Kind::IpAddressClaim, &claim)
                .await?;
        }
        Ok(())
    }

    async fn reconcile_claim(
        &self,
        namespace: &str,
        mut value: Value,
        claim: IpAddressClaim,
        kind: PoolKind,
        address: Option<IpAddress>,
    ) -> Result<Next, EmulationError> {
        if is_deleting(&value) {
            if !has_finalizer(&value, RELEASE_FINALIZER) {
                return Ok(Next::Done);
            }
            if let Some(address) = &address {
                self.release(address).await?;
            }
            remove_finalizer(&mut value, RELEASE_FINALIZER);
            self.objects.replace(Kind::IpAddressClaim, &value).await?;
            return Ok(Next::RelistAll);
        }
        if !self.cluster_allows(namespace, &claim).await? {
            return Ok(Next::Done);
        }
        let pool_name = &claim.spec.pool_ref.name;
        let pool_kind = Kind::of_pool(kind);
        let pool: Option<IpPool> = self
            .objects
            .get_typed(pool_kind, pool_namespace(kind, namespace), pool_name)
            .await?;
        let Some(pool) = pool else {
            let message = format!("{} not found", pool_kind.describe(namespace, pool_name));
            return self
                .write_status(value, |c| {
                    set_condition(c, READY, Status::False, "PoolNotReady", &message)
                })
                .await
                .map(|()| Next::Done);
        };
        if has_annotation(&pool.metadata, PAUSED_ANNOTATION) {
            return Ok(Next::Done);
        }
        if add_finalizer(&mut value, RELEASE_FINALIZER) {
            value = self.objects.replace(Kind::IpAddressClaim, &value).await?;
        }
        let cluster = claim
            .spec
            .cluster_name
            .clone()
            .filter(|n| !n.is_empty())
            .or_else(|| label(&claim.metadata, CLUSTER_NAME_LABEL).map(str::to_string));
        let address = match address {
            Some(address) => address,
            None => match self
                .allocate(&claim, &pool, kind, cluster.as_deref())
                .await?
            {
                Ok(address) => address,
                Err(error) => {
                    let reason = match error {
                        AllocError::Exhausted(_) => "PoolExhausted",
                        _ => "AllocationFailed",
                    };
                    let message = error.to_string();
                    return self
                        .write_status(value, |c| {
                            set_condition(c, READY, Status::False, reason, &message)
                        })
                        .await
                        .map(|()| Next::Done);
                }
            },
        };
        let address_name = address.metadata.name.clone().unwrap_or_default();
        let message = format!("allocated {}", address.spec.address);
        self.write_status(value, |c| {
            let referenced = set_at(c, &["status", "addressRef"], json!({"name": address_name}));
            set_condition(c, READY, Status::True, READY, &message) | referenced
        })
        .await
        .map(|()| Next::Done)
    }
}

impl Reconcile for Ipam {
    fn name(&self) -> &'static str {
        "ipam"
    }

    async fn keys(&self) -> Result<Vec<ObjectKey>, EmulationError> {
        let mut keys = BTreeSet::new();
        for claim in self.objects.list(Kind::IpAddressClaim, None, "").await? {
            if let Ok(claim) = serde_json::from_value::<IpAddressClaim>(claim)
                && in_cluster_pool(&claim.spec.pool_ref).is_some()
            {
                keys.insert(key(&claim.metadata));
            }
        }
        for address in self.objects.list(Kind::IpAddress, None, "").await? {
            if let Ok(address) = serde_json::from_value::<IpAddress>(address)
                && in_cluster_pool(&address.spec.pool_ref).is_some()
            {
                keys.insert(key(&address.metadata));
            }
        }
        Ok(keys.into_iter().collect())
    }

    async fn reconcile(&self, (namespace, name): &ObjectKey) -> Result<Next, EmulationError> {
        let value = self
            .objects
            .get(Kind::IpAddressClaim, namespace, name)
            .await?;
        // A read failure must fail the pass: taken for "no address", it would allocate twice.
        let address = self
            .objects
            .get(Kind::IpAddress, namespace, name)
            .await?
            .and_then(|v| serde_json::from_value::<IpAddress>(v).ok())
            .filter(|a| in_cluster_pool(&a.spec.pool_ref).is_some());
        let claim = value
            .as_ref()
            .and_then(|v| serde_json::from_value::<IpAddressClaim>(v.clone()).ok());
        let (Some(value), Some(claim)) = (value, claim) else {
            // No claim (or not one this provider can read): an address allocated here is
            // an orphan.
            if let Some(address) = address.filter(allocated_here) {
                self.release(&address).await?;
                return Ok(Next::RelistAll);
            }
            return Ok(Next::Done);
        };
        let Some(kind) = in_cluster_pool(&claim.spec.pool_ref) else {
            return Ok(Next::Done);
        };
        let uid = claim.metadata.uid.as_deref().unwrap_or_default();
        let address = match address {
            // An address left by an earlier claim of the same name.
            Some(stale)
                if allocated_here(&stale)
                    && claim_owner_uid(&stale).is_some_and(|owner| owner != uid) =>
            {
                self.release(&stale).await?;
                None
            }
            other => other,
        };
        self.reconcile_claim(namespace, value, claim, kind, address)
            .await
    }
}

fn key(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> ObjectKey {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool_ref(group: &str, kind: &str, name: &str) -> PoolRef {
        PoolRef {
            api_group: group.into(),
            kind: kind.into(),
            name: name.into(),
        }
    }

    #[test]
    fn only_in_cluster_pools_of_the_ipam_group_are_served() {
        assert_eq!(
            in_cluster_pool(&pool_ref(IPAM_GROUP, "InClusterIPPool", "p")),
            Some(PoolKind::InCluster)
        );
        assert_eq!(
            in_cluster_pool(&pool_ref(IPAM_GROUP, "GlobalInClusterIPPool", "p")),
            Some(PoolKind::GlobalInCluster)
        );
        assert_eq!(
            in_cluster_pool(&pool_ref(
                "ipam.cluster.x-k8s.io/v1alpha2",
                "InClusterIPPool",
                "p"
            )),
            None
        );
        assert_eq!(
            in_cluster_pool(&pool_ref(IPAM_GROUP, "InClusterPrefixPool", "p")),
            None
        );
        assert_eq!(
            in_cluster_pool(&pool_ref(IPAM_GROUP, "InClusterIPPool", "")),
            None
        );
    }
}
