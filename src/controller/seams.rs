//! The two seams the controller reaches the outside through, besides the Proxmox client:
//!
//! * [`InfraStore`]: our own objects (ProxmoxMachine, ProxmoxCluster hubs) with optimistic
//!   concurrency. In the server it is the registry (every write obeys the same rules as a
//!   client's); tests use [`crate::controller::memory::MemoryInfraStore`].
//! * [`Management`]: the management cluster's objects (CAPI Cluster/Machine, Secrets,
//!   IPAM). In `serve` and `dev` it is `management::kube::KubeManagement` over a kube client
//!   (in `dev`, of the dev server itself, which serves stand-ins of those kinds); in tests
//!   [`crate::controller::memory::MemoryManagement`]. The controller never names the kube
//!   implementation: `run::controller` passes it in.
//!
//! Both are plain traits with `Send` futures so reconcilers can run on any executor.
//! Reads of absent objects answer `Ok(None)`; deleting an absent object is `Ok(())`.

use std::collections::BTreeMap;
use std::future::Future;

use k8s_openapi::api::core::v1::Secret;

use crate::api::object::ApiObject;
use crate::management::types::{Cluster, IpAddress, IpAddressClaim, IpPool, Machine, PoolKind};

/// Errors of the [`InfraStore`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The object to update does not exist (any more).
    #[error("{0} not found")]
    NotFound(String),
    /// The object changed since it was read (resourceVersion mismatch).
    #[error("conflict writing {0}: the object has been modified")]
    Conflict(String),
    /// The write was refused (validation).
    #[error("{0}")]
    Invalid(String),
    /// The store could not be reached or failed.
    #[error("store unavailable: {0}")]
    Unavailable(String),
}

/// Errors of the [`Management`] cluster.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ManagementError {
    /// The object changed since it was read.
    #[error("conflict writing {0}: the object has been modified")]
    Conflict(String),
    /// A create found the name taken.
    #[error("{0} already exists")]
    AlreadyExists(String),
    /// The write was refused (validation, immutable field).
    #[error("{0}")]
    Invalid(String),
    /// The API server could not be reached or failed.
    #[error("management cluster unavailable: {0}")]
    Unavailable(String),
}

/// Our own objects (hub types), read and written with optimistic concurrency.
///
/// `update` writes `metadata` and `spec` (the status of the stored object is kept);
/// `update_status` writes `status` only. Both check `metadata.resourceVersion` and return
/// the stored object. When an update removes the last finalizer of an object being
/// deleted, the object is gone and `update` answers `Ok(None)`.
pub trait InfraStore: Send + Sync + 'static {
    /// Reads one object.
    fn get<T: ApiObject>(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<T>, StoreError>> + Send;

    /// Lists the objects of a namespace whose labels include all of `labels`.
    fn list<T: ApiObject>(
        &self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
    ) -> impl Future<Output = Result<Vec<T>, StoreError>> + Send;

    /// Writes metadata and spec.
    fn update<T: ApiObject>(
        &self,
        object: &T,
    ) -> impl Future<Output = Result<Option<T>, StoreError>> + Send;

    /// Writes the status.
    fn update_status<T: ApiObject>(
        &self,
        object: &T,
    ) -> impl Future<Output = Result<T, StoreError>> + Send;
}

/// The management cluster's objects the controller reads and writes.
pub trait Management: Send + Sync + 'static {
    /// A Cluster API Cluster.
    fn cluster(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<Cluster>, ManagementError>> + Send;

    /// A Cluster API Machine.
    fn machine(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<Machine>, ManagementError>> + Send;

    /// A Secret.
    fn secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<Secret>, ManagementError>> + Send;

    /// Replaces a Secret's metadata (owner references, finalizers); checks
    /// `resourceVersion`.
    fn update_secret_metadata(
        &self,
        secret: &Secret,
    ) -> impl Future<Output = Result<Secret, ManagementError>> + Send;

    /// An `IPAddressClaim`.
    fn claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<IpAddressClaim>, ManagementError>> + Send;

    /// Creates an `IPAddressClaim` (`AlreadyExists` when the name is taken).
    fn create_claim(
        &self,
        claim: &IpAddressClaim,
    ) -> impl Future<Output = Result<IpAddressClaim, ManagementError>> + Send;

    /// Deletes an `IPAddressClaim` (absent is fine).
    fn delete_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<(), ManagementError>> + Send;

    /// The claims of a namespace whose labels include all of `labels`.
    fn list_claims(
        &self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
    ) -> impl Future<Output = Result<Vec<IpAddressClaim>, ManagementError>> + Send;

    /// An `IPAddress`.
    fn ip_address(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<IpAddress>, ManagementError>> + Send;

    /// An `InClusterIPPool` (`namespace` given) or `GlobalInClusterIPPool`.
    fn pool(
        &self,
        kind: PoolKind,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<IpPool>, ManagementError>> + Send;

    /// Creates the pool or updates its spec, labels and annotations (annotations and
    /// labels not named in `pool` are kept).
    fn apply_pool(
        &self,
        pool: &IpPool,
    ) -> impl Future<Output = Result<IpPool, ManagementError>> + Send;

    /// Deletes a pool (absent is fine).
    fn delete_pool(
        &self,
        kind: PoolKind,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<(), ManagementError>> + Send;
}
