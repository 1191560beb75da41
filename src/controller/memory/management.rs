//! [`MemoryManagement`]: the management cluster's objects in memory, with an IPAM
//! provider that fulfils claims from in-cluster pools ([`crate::management::ipam_allocator`]).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::MutexGuard;

use k8s_openapi::api::core::v1::Secret;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::table::{ObjectTable, Part, TableError};
use super::{Backend, Faults, State};
use crate::controller::seams::{Management, ManagementError};
use crate::management::ipam_allocator::{address_for, next_free};
use crate::management::types::{Cluster, IpAddress, IpAddressClaim, IpPool, Machine, PoolKind};

const CLUSTER: &str = "Cluster";
const MACHINE: &str = "Machine";
const SECRET: &str = "Secret";
const CLAIM: &str = "IPAddressClaim";
const ADDRESS: &str = "IPAddress";

/// A [`Management`] cluster in memory. Clones share the same objects.
#[derive(Clone)]
pub struct MemoryManagement {
    /// `extra`: fulfil claims as soon as they are created.
    backend: Backend<bool>,
}

impl Default for MemoryManagement {
    fn default() -> Self {
        Self::new()
    }
}

fn to_json<T: Serialize>(object: &T) -> Value {
    serde_json::to_value(object).unwrap_or(Value::Null)
}

fn decode<T: DeserializeOwned>(value: Value) -> Result<T, ManagementError> {
    serde_json::from_value(value).map_err(|e| ManagementError::Unavailable(format!("decode: {e}")))
}

fn mgmt_error(e: TableError, what: &str) -> ManagementError {
    match e {
        TableError::NotFound => ManagementError::Invalid(format!("{what} not found")),
        TableError::Conflict => ManagementError::Conflict(what.to_string()),
        TableError::AlreadyExists => ManagementError::AlreadyExists(what.to_string()),
        TableError::Invalid(m) => ManagementError::Invalid(m),
    }
}

fn pool_namespace(kind: PoolKind, namespace: &str) -> &str {
    match kind {
        PoolKind::InCluster => namespace,
        PoolKind::GlobalInCluster => "",
    }
}

impl MemoryManagement {
    /// An empty management cluster; claims are fulfilled by [`Self::settle_ipam`].
    pub fn new() -> Self {
        Self {
            backend: Backend::new(11, false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<bool>> {
        self.backend.lock()
    }

    /// Replaces the failure injection (seeded for reproducibility).
    pub fn set_faults(&self, faults: Faults, seed: u64) {
        self.backend.set_faults(faults, seed);
    }

    /// Fulfil claims as soon as they are created instead of in [`Self::settle_ipam`].
    pub fn allocate_on_create(&self, on: bool) {
        self.lock().extra = on;
    }

    /// Revision of the last write: changes whenever any object changes.
    pub fn revision(&self) -> u64 {
        self.lock().table.revision()
    }

    /// Stores a Cluster as CAPI would (no checks).
    pub fn put_cluster(&self, cluster: &Cluster) -> Cluster {
        let v = self.lock().table.put(CLUSTER, to_json(cluster));
        decode(v).unwrap_or_default()
    }

    /// Stores a Machine as CAPI would (no checks).
    pub fn put_machine(&self, machine: &Machine) -> Machine {
        let v = self.lock().table.put(MACHINE, to_json(machine));
        decode(v).unwrap_or_default()
    }

    /// Stores a Secret (no checks).
    pub fn put_secret(&self, secret: &Secret) -> Secret {
        let v = self.lock().table.put(SECRET, to_json(secret));
        decode(v).unwrap_or_default()
    }

    /// Stores a pool created by a user (no checks).
    pub fn put_pool(&self, pool: &IpPool) -> IpPool {
        let kind = pool.kind.clone();
        let v = self.lock().table.put(&kind, to_json(pool));
        decode(v).unwrap_or_default()
    }

    /// Stores a claim as IPAM holds it (no checks): e.g. one whose address waits out the
    /// pool's reuse grace period.
    pub fn put_claim(&self, claim: &IpAddressClaim) -> IpAddressClaim {
        let v = self.lock().table.put(CLAIM, to_json(claim));
        decode(v).unwrap_or_default()
    }

    /// Changes a Cluster in place (CAPI's side of the contract in tests); a no-op change
    /// writes nothing.
    pub fn edit_cluster(&self, namespace: &str, name: &str, f: impl FnOnce(&mut Cluster)) {
        self.edit(CLUSTER, namespace, name, f);
    }

    /// Changes a Machine in place (CAPI's side of the contract in tests).
    pub fn edit_machine(&self, namespace: &str, name: &str, f: impl FnOnce(&mut Machine)) {
        self.edit(MACHINE, namespace, name, f);
    }

    fn edit<T: Serialize + DeserializeOwned>(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
        f: impl FnOnce(&mut T),
    ) {
        let mut s = self.lock();
        let Some(mut object) = s
            .table
            .get(kind, namespace, name)
            .cloned()
            .and_then(|v| serde_json::from_value::<T>(v).ok())
        else {
            return;
        };
        let before = to_json(&object);
        f(&mut object);
        let after = to_json(&object);
        // Only a real change is a write (and a new revision).
        if after != before {
            s.table.put(kind, after);
        }
    }

    /// Deletes a Cluster or Machine as a user would.
    pub fn delete_object(&self, kind: &str, namespace: &str, name: &str) -> bool {
        self.lock().table.delete(kind, namespace, name)
    }

    /// Every claim in every namespace.
    pub fn claims(&self) -> Vec<IpAddressClaim> {
        self.all(CLAIM)
    }

    /// Every address in every namespace.
    pub fn addresses(&self) -> Vec<IpAddress> {
        self.all(ADDRESS)
    }

    /// Every pool of a kind.
    pub fn pools(&self, kind: PoolKind) -> Vec<IpPool> {
        self.all(kind.as_str())
    }

    /// A Secret without fault injection (for assertions).
    pub fn peek_secret(&self, namespace: &str, name: &str) -> Option<Secret> {
        self.peek(SECRET, namespace, name)
    }

    /// A Machine without fault injection (to change it as CAPI would).
    pub fn peek_machine(&self, namespace: &str, name: &str) -> Option<Machine> {
        self.peek(MACHINE, namespace, name)
    }

    fn peek<T: DeserializeOwned>(&self, kind: &str, namespace: &str, name: &str) -> Option<T> {
        let v = self.lock().table.get(kind, namespace, name).cloned()?;
        serde_json::from_value(v).ok()
    }

    fn all<T: DeserializeOwned>(&self, kind: &str) -> Vec<T> {
        self.lock()
            .table
            .list(kind, None, &BTreeMap::new())
            .into_iter()
            .filter_map(|v| serde_json::from_value(v).ok())
            .collect()
    }

    /// The IPAM provider's work: gives every pending claim whose pool exists the lowest
    /// free address. Returns how many claims were fulfilled.
    pub fn settle_ipam(&self) -> usize {
        let mut s = self.lock();
        let pending: Vec<IpAddressClaim> = s
            .table
            .list(CLAIM, None, &BTreeMap::new())
            .into_iter()
            .filter_map(|v| serde_json::from_value::<IpAddressClaim>(v).ok())
            .filter(|c| c.status.address_ref.is_none() && c.metadata.deletion_timestamp.is_none())
            .collect();
        pending
            .iter()
            .filter(|claim| allocate(&mut s.table, claim))
            .count()
    }

    async fn before(&self, what: &str) -> Result<(), ManagementError> {
        self.backend
            .before(what)
            .await
            .map_err(ManagementError::Unavailable)
    }

    fn after_write(&self, what: &str) -> Result<(), ManagementError> {
        self.backend
            .after_write(what)
            .map_err(ManagementError::Unavailable)
    }

    async fn read<T: DeserializeOwned>(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<T>, ManagementError> {
        self.before(name).await?;
        let value = self.lock().table.get(kind, namespace, name).cloned();
        value.map(decode).transpose()
    }
}

/// Allocates one claim in `table`; false when its pool is missing or exhausted.
fn allocate(table: &mut ObjectTable, claim: &IpAddressClaim) -> bool {
    let namespace = claim.metadata.namespace.clone().unwrap_or_default();
    let Some(kind) = PoolKind::from_kind(&claim.spec.pool_ref.kind) else {
        return false;
    };
    let Some(pool) = table
        .get(
            kind.as_str(),
            pool_namespace(kind, &namespace),
            &claim.spec.pool_ref.name,
        )
        .cloned()
        .and_then(|v| serde_json::from_value::<IpPool>(v).ok())
    else {
        return false;
    };
    let used: BTreeSet<IpAddr> = table
        .list(
            ADDRESS,
            (kind == PoolKind::InCluster).then_some(namespace.as_str()),
            &BTreeMap::new(),
        )
        .into_iter()
        .filter_map(|v| serde_json::from_value::<IpAddress>(v).ok())
        .filter(|a| {
            a.spec.pool_ref.kind == kind.as_str()
                && a.spec.pool_ref.name == claim.spec.pool_ref.name
        })
        .filter_map(|a| a.spec.address.parse().ok())
        .collect();
    let name = pool.metadata.name.clone().unwrap_or_default();
    let Ok(ip) = next_free(&name, &pool.spec, &used) else {
        return false;
    };
    let address = address_for(claim, &pool, ip);
    if table.create(ADDRESS, to_json(&address)).is_err() {
        return false;
    }
    let mut claimed = to_json(claim);
    claimed["status"]["addressRef"] = json!({"name": claim.metadata.name});
    table.update(CLAIM, &claimed, Part::Status).is_ok()
}

impl Management for MemoryManagement {
    async fn cluster(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Cluster>, ManagementError> {
        self.read(CLUSTER, namespace, name).await
    }

    async fn machine(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Machine>, ManagementError> {
        self.read(MACHINE, namespace, name).await
    }

    async fn secret(&self, namespace: &str, name: &str) -> Result<Option<Secret>, ManagementError> {
        self.read(SECRET, namespace, name).await
    }

    async fn update_secret_metadata(&self, secret: &Secret) -> Result<Secret, ManagementError> {
        let name = secret.metadata.name.clone().unwrap_or_default();
        self.before(&name).await?;
        let namespace = secret.metadata.namespace.clone().unwrap_or_default();
        let value = {
            let mut s = self.lock();
            let stored = s
                .table
                .get(SECRET, &namespace, &name)
                .cloned()
                .ok_or_else(|| ManagementError::Invalid(format!("Secret {name} not found")))?;
            let mut updated = stored;
            updated["metadata"] = to_json(&secret.metadata);
            s.table
                .update(SECRET, &updated, Part::Main)
                .map_err(|e| mgmt_error(e, &name))?
        };
        self.after_write(&name)?;
        match value {
            Some(v) => decode(v),
            None => Ok(secret.clone()),
        }
    }

    async fn claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<IpAddressClaim>, ManagementError> {
        self.read(CLAIM, namespace, name).await
    }

    async fn create_claim(
        &self,
        claim: &IpAddressClaim,
    ) -> Result<IpAddressClaim, ManagementError> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        self.before(&name).await?;
        let created = {
            let mut s = self.lock();
            let mut fresh = claim.clone();
            fresh.status = Default::default();
            let created = s
                .table
                .create(CLAIM, to_json(&fresh))
                .map_err(|e| mgmt_error(e, &name))?;
            let created: IpAddressClaim = decode(created)?;
            if s.extra {
                allocate(&mut s.table, &created);
            }
            created
        };
        self.after_write(&name)?;
        Ok(created)
    }

    async fn delete_claim(&self, namespace: &str, name: &str) -> Result<(), ManagementError> {
        self.before(name).await?;
        {
            // The provider releases the address together with the claim.
            let mut s = self.lock();
            s.table.delete(CLAIM, namespace, name);
            s.table.delete(ADDRESS, namespace, name);
        }
        self.after_write(name)
    }

    async fn list_claims(
        &self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<Vec<IpAddressClaim>, ManagementError> {
        self.before(namespace).await?;
        let values = self.lock().table.list(CLAIM, Some(namespace), labels);
        values.into_iter().map(decode).collect()
    }

    async fn ip_address(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<IpAddress>, ManagementError> {
        self.read(ADDRESS, namespace, name).await
    }

    async fn pool(
        &self,
        kind: PoolKind,
        namespace: &str,
        name: &str,
    ) -> Result<Option<IpPool>, ManagementError> {
        self.read(kind.as_str(), pool_namespace(kind, namespace), name)
            .await
    }

    async fn apply_pool(&self, pool: &IpPool) -> Result<IpPool, ManagementError> {
        let name = pool.metadata.name.clone().unwrap_or_default();
        self.before(&name).await?;
        let kind = pool.pool_kind().ok_or_else(|| {
            ManagementError::Invalid(format!("unknown pool kind {:?}", pool.kind))
        })?;
        let namespace =
            pool_namespace(kind, pool.metadata.namespace.as_deref().unwrap_or_default())
                .to_string();
        let applied = {
            let mut s = self.lock();
            match s.table.get(kind.as_str(), &namespace, &name).cloned() {
                None => s
                    .table
                    .create(kind.as_str(), to_json(pool))
                    .map_err(|e| mgmt_error(e, &name))?,
                Some(stored) => {
                    let mut current: IpPool = decode(stored)?;
                    current.spec = pool.spec.clone();
                    for (field, wanted) in [
                        (&mut current.metadata.labels, &pool.metadata.labels),
                        (
                            &mut current.metadata.annotations,
                            &pool.metadata.annotations,
                        ),
                    ] {
                        if let Some(wanted) = wanted {
                            field
                                .get_or_insert_with(BTreeMap::new)
                                .extend(wanted.clone());
                        }
                    }
                    if pool.metadata.owner_references.is_some() {
                        current.metadata.owner_references = pool.metadata.owner_references.clone();
                    }
                    s.table
                        .update(kind.as_str(), &to_json(&current), Part::Main)
                        .map_err(|e| mgmt_error(e, &name))?
                        .unwrap_or_else(|| to_json(&current))
                }
            }
        };
        self.after_write(&name)?;
        decode(applied)
    }

    async fn delete_pool(
        &self,
        kind: PoolKind,
        namespace: &str,
        name: &str,
    ) -> Result<(), ManagementError> {
        self.before(name).await?;
        self.lock()
            .table
            .delete(kind.as_str(), pool_namespace(kind, namespace), name);
        self.after_write(name)
    }
}
