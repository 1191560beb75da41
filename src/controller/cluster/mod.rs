//! The ProxmoxCluster reconciler: credentials (global or `credentialsRef`, with owner
//! reference and finalizer on the Secret), one in-cluster IP pool per IP config and zone,
//! the control-plane endpoint (given, or claimed from a pool), and the
//! `ProxmoxAvailable`/`Ready` conditions plus `initialization.provisioned`. Deletion
//! waits for the cluster's ProxmoxMachines, then releases the endpoint claim, the pools
//! and the Secret, and removes the finalizer.

pub mod endpoint;
pub mod pools;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};

use super::action::Action;
use super::clients::{self, ClientFactory, Connection, Credentials, CredentialsError};
use super::clock::Clock;
use super::conditions::Status;
use super::error::ReconcileError;
use super::handle::{Handle, add_finalizer, remove_finalizer};
use super::names::{CLUSTER_FINALIZER, PROXMOX_AVAILABLE, SECRET_FINALIZER, cluster_reason};
use super::seams::{InfraStore, Management};
use crate::api::Version;
use crate::api::common::SecretReference;
use crate::api::v1alpha2::{ApiEndpoint, ProxmoxCluster, ProxmoxMachine, PveClusterStatus};
use crate::management::types::{
    CAPI_GROUP, CLUSTER_NAME_LABEL, Cluster, MANAGED_BY_ANNOTATION, PAUSED_ANNOTATION, PoolKind,
    has_annotation, owner_name,
};
use endpoint::Vip;

/// Timings of the cluster reconciler.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// Requeue while the cluster's machines are being deleted.
    pub machines_poll: Duration,
    /// Requeue while the endpoint claim waits for IPAM.
    pub endpoint_poll: Duration,
    /// Requeue after a credentials problem (the Secret is not watched).
    pub credentials_retry: Duration,
    /// Requeue while claims on a pool about to be deleted wait for IPAM to release their
    /// addresses (the pool's reuse grace period; its webhook refuses the deletion meanwhile).
    pub release_poll: Duration,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            machines_poll: Duration::from_secs(10),
            endpoint_poll: Duration::from_secs(5),
            credentials_retry: Duration::from_secs(30),
            release_poll: Duration::from_secs(5),
        }
    }
}

/// Reconciles ProxmoxClusters.
pub struct ClusterReconciler<S, M> {
    store: S,
    mgmt: M,
    clients: Arc<ClientFactory>,
    clock: Arc<dyn Clock>,
    config: ClusterConfig,
}

fn owner_cluster(pc: &ProxmoxCluster) -> Option<String> {
    owner_name(&pc.metadata, "Cluster", CAPI_GROUP)
}

/// The owner reference a credentials Secret gets (not a controller reference: several
/// clusters may share the Secret).
fn secret_owner(pc: &ProxmoxCluster) -> OwnerReference {
    OwnerReference {
        api_version: Version::V1alpha2.api_version().to_string(),
        kind: "ProxmoxCluster".to_string(),
        name: pc.metadata.name.clone().unwrap_or_default(),
        uid: pc.metadata.uid.clone().unwrap_or_default(),
        controller: None,
        block_owner_deletion: None,
    }
}

/// Every credentials Secret the cluster names: its own and its failure domains'.
fn secret_refs(pc: &ProxmoxCluster) -> Vec<SecretReference> {
    let mut refs: Vec<SecretReference> = Vec::new();
    let named = pc.spec.credentials_ref.iter().chain(
        pc.spec
            .failure_domains
            .iter()
            .filter_map(|d| d.credentials_ref.as_ref()),
    );
    for reference in named {
        if !refs.contains(reference) {
            refs.push(reference.clone());
        }
    }
    refs
}

/// What a check of one Proxmox VE cluster saw.
fn report(
    credentials: &Credentials,
    domains: Vec<String>,
    connected: &Result<Connection, CredentialsError>,
) -> PveClusterStatus {
    let endpoint = Some(credentials.url.clone());
    match connected {
        Ok(c) => PveClusterStatus {
            endpoint,
            name: Some(c.cluster.clone()),
            version: Some(c.version.clone()),
            failure_domains: domains,
            reachable: true,
            ..PveClusterStatus::default()
        },
        Err(e) => PveClusterStatus {
            endpoint,
            failure_domains: domains,
            message: Some(e.to_string()),
            ..PveClusterStatus::default()
        },
    }
}

/// Puts `seen` in `status.pveClusters` (in place of the entry of the same failure
/// domains), keeping the name and version last seen, and `since` while `reachable` stays.
fn record(h: &mut Handle<ProxmoxCluster>, mut seen: PveClusterStatus, now: Timestamp) {
    let list = &mut h.status.pve_clusters;
    let previous = list
        .iter()
        .position(|r| r.failure_domains == seen.failure_domains)
        .map(|i| list.remove(i));
    seen.since = match &previous {
        Some(p) if p.reachable == seen.reachable && p.endpoint == seen.endpoint => p.since.clone(),
        _ => Some(Time(now)),
    };
    if let Some(p) = previous.filter(|p| p.endpoint == seen.endpoint) {
        seen.name = seen.name.or(p.name);
        seen.version = seen.version.or(p.version);
    }
    list.push(seen);
    list.sort_by(|a, b| a.failure_domains.cmp(&b.failure_domains));
}

fn same_owner(a: &OwnerReference, b: &OwnerReference) -> bool {
    a.kind == b.kind
        && a.name == b.name
        && a.api_version.split('/').next() == b.api_version.split('/').next()
}

impl<S: InfraStore, M: Management> ClusterReconciler<S, M> {
    /// A reconciler over the given seams.
    pub fn new(
        store: S,
        mgmt: M,
        clients: Arc<ClientFactory>,
        clock: Arc<dyn Clock>,
        config: ClusterConfig,
    ) -> Self {
        Self {
            store,
            mgmt,
            clients,
            clock,
            config,
        }
    }

    /// One pass over the ProxmoxCluster `namespace/name`.
    pub async fn reconcile(&self, namespace: &str, name: &str) -> Result<Action, ReconcileError> {
        let Some(pc) = self.store.get::<ProxmoxCluster>(namespace, name).await? else {
            return Ok(Action::AwaitChange);
        };
        if has_annotation(&pc.metadata, MANAGED_BY_ANNOTATION) {
            return Ok(Action::AwaitChange);
        }
        let Some(cluster_name) = owner_cluster(&pc) else {
            return Ok(Action::AwaitChange);
        };
        let cluster = self.mgmt.cluster(namespace, &cluster_name).await?;
        let now = self.clock.now();
        let mut h = Handle::new(pc);
        let paused = cluster.as_ref().is_some_and(Cluster::is_paused)
            || has_annotation(&h.obj.metadata, PAUSED_ANNOTATION);
        h.set_paused(paused, now);
        if paused {
            h.save_status(&self.store).await?;
            return Ok(Action::AwaitChange);
        }
        let result = if h.obj.metadata.deletion_timestamp.is_some() {
            self.delete(&mut h, cluster.as_ref(), &cluster_name, now)
                .await
        } else {
            self.provision(&mut h, &cluster_name, now).await
        };
        match h.save_status(&self.store).await {
            Ok(()) | Err(super::seams::StoreError::NotFound(_)) => result,
            Err(e) => result.and(Err(e.into())),
        }
    }

    fn available(
        h: &mut Handle<ProxmoxCluster>,
        status: Status,
        reason: &str,
        message: &str,
        now: Timestamp,
    ) {
        h.set_condition(PROXMOX_AVAILABLE, status, reason, message, now);
        h.summarize(&[PROXMOX_AVAILABLE], now);
    }

    async fn provision(
        &self,
        h: &mut Handle<ProxmoxCluster>,
        cluster: &str,
        now: Timestamp,
    ) -> Result<Action, ReconcileError> {
        h.write_spec(&self.store, |o| {
            add_finalizer(&mut o.metadata, CLUSTER_FINALIZER)
        })
        .await?;
        // Credentials and reachability: each failure domain's own Proxmox VE cluster is
        // reported, and one that fails stops nothing but its machines.
        self.report_domain_clusters(h, now).await?;
        let own_needed = h.obj.spec.failure_domains.is_empty()
            || h.obj.spec.credentials_ref.is_some()
            || h.obj
                .spec
                .failure_domains
                .iter()
                .any(|d| d.credentials_ref.is_none());
        let credentials = match self.credentials(h, None).await {
            Ok(c) => Some(c),
            Err(CredentialsError::NotFound(_)) if !own_needed => None,
            Err(CredentialsError::Management(e)) => return Err(e.into()),
            Err(e) => {
                Self::available(
                    h,
                    Status::False,
                    cluster_reason::CREDENTIALS_NOT_FOUND,
                    &e.to_string(),
                    now,
                );
                return Ok(Action::Requeue(self.config.credentials_retry));
            }
        };
        if let Some(credentials) = credentials {
            let connected = self.clients.connect(&credentials).await;
            let domains = clients::sources(&h.obj).swap_remove(0).domains;
            record(h, report(&credentials, domains, &connected), now);
            if let Err(e) = connected {
                Self::available(
                    h,
                    Status::False,
                    cluster_reason::PROXMOX_UNREACHABLE,
                    &e.to_string(),
                    now,
                );
                return Err(ReconcileError::Credentials(e.to_string()));
            }
        }
        // IP pools.
        let desired = match pools::desired_pools(&h.obj) {
            Ok(d) => d,
            Err(message) => {
                Self::available(
                    h,
                    Status::False,
                    cluster_reason::PROXMOX_UNREACHABLE,
                    &message,
                    now,
                );
                return Ok(Action::AwaitChange);
            }
        };
        let namespace = h.namespace().to_string();
        for d in &desired {
            let name = d.pool.metadata.name.clone().unwrap_or_default();
            let stored = self
                .mgmt
                .pool(PoolKind::InCluster, &namespace, &name)
                .await?;
            if !stored.is_some_and(|s| pools::up_to_date(&s, &d.pool)) {
                self.mgmt.apply_pool(&d.pool).await?;
            }
        }
        let (refs, zones) = pools::status_refs(&desired);
        h.status.in_cluster_ip_pool_ref = refs;
        h.status.in_cluster_zone_ref = zones;
        // Control-plane endpoint.
        if let Some(action) = self.endpoint(h, cluster, now).await? {
            return Ok(action);
        }
        self.prune_locations(h).await?;
        h.status.failure_domains = super::failure_domains::reported(&h.obj.spec.failure_domains);
        Self::available(h, Status::True, cluster_reason::PROVISIONED, "", now);
        h.status.initialization.provisioned = Some(true);
        // A failure domain's Proxmox VE cluster that does not answer is checked again
        // soon, so that its recovery shows; otherwise changes and the resync bring the
        // next check.
        if h.status.pve_clusters.iter().any(|r| !r.reachable) {
            return Ok(Action::Requeue(self.config.credentials_retry));
        }
        Ok(Action::AwaitChange)
    }

    /// Checks the Proxmox VE cluster of every failure domain with its own
    /// `credentialsRef` and records what it saw in `status.pveClusters`.
    async fn report_domain_clusters(
        &self,
        h: &mut Handle<ProxmoxCluster>,
        now: Timestamp,
    ) -> Result<(), ReconcileError> {
        let sources = clients::sources(&h.obj);
        h.status
            .pve_clusters
            .retain(|r| sources.iter().any(|s| s.domains == r.failure_domains));
        for source in sources.into_iter().filter(|s| s.secret.is_some()) {
            let seen = match self.credentials(h, source.secret.as_ref()).await {
                Ok(credentials) => {
                    let checked = self.clients.connect_now(&credentials).await;
                    report(&credentials, source.domains, &checked)
                }
                Err(CredentialsError::Management(e)) => return Err(e.into()),
                Err(e) => PveClusterStatus {
                    failure_domains: source.domains,
                    message: Some(e.to_string()),
                    ..PveClusterStatus::default()
                },
            };
            record(h, seen, now);
        }
        Ok(())
    }

    /// Reads the credentials of one source (`None`: the cluster's own) and, from a
    /// Secret, marks the Secret as used.
    async fn credentials(
        &self,
        h: &mut Handle<ProxmoxCluster>,
        secret: Option<&SecretReference>,
    ) -> Result<Credentials, CredentialsError> {
        let Some(reference) = secret.or(h.obj.spec.credentials_ref.as_ref()).cloned() else {
            return self.clients.credentials(&h.obj, &self.mgmt).await;
        };
        let namespace = clients::secret_namespace(&reference, &h.obj);
        let secret = self
            .mgmt
            .secret(&namespace, &reference.name)
            .await?
            .ok_or_else(|| CredentialsError::NotFound("credentials secret not found".into()))?;
        let credentials = Credentials::from_secret(&secret)?;
        let owner = secret_owner(&h.obj);
        let mut updated = secret.clone();
        let refs = updated
            .metadata
            .owner_references
            .get_or_insert_with(Vec::new);
        match refs.iter_mut().find(|r| same_owner(r, &owner)) {
            Some(r) => *r = owner,
            None => refs.push(owner),
        }
        add_finalizer(&mut updated.metadata, SECRET_FINALIZER);
        if updated.metadata != secret.metadata {
            self.mgmt.update_secret_metadata(&updated).await?;
        }
        Ok(credentials)
    }

    /// Settles `spec.controlPlaneEndpoint`; `Some` when the pass has to wait.
    async fn endpoint(
        &self,
        h: &mut Handle<ProxmoxCluster>,
        cluster: &str,
        now: Timestamp,
    ) -> Result<Option<Action>, ReconcileError> {
        let given = !h.obj.spec.control_plane_endpoint.host.is_empty();
        if given {
            // A user-set endpoint wins; release a claim it does not use.
            if h.obj.spec.control_plane_endpoint_ip_pool_ref.is_some()
                && let Some(claimed) = endpoint::claimed_address(&self.mgmt, &h.obj).await?
                && claimed != h.obj.spec.control_plane_endpoint.host
            {
                endpoint::release(&self.mgmt, &h.obj).await?;
            }
            return Ok(None);
        }
        if h.obj.spec.external_managed_control_plane == Some(true) {
            Self::available(
                h,
                Status::False,
                cluster_reason::MISSING_CONTROL_PLANE_ENDPOINT,
                "The ProxmoxCluster is missing or waiting for a ControlPlaneEndpoint",
                now,
            );
            return Ok(Some(Action::AwaitChange));
        }
        if h.obj.spec.control_plane_endpoint_ip_pool_ref.is_none() {
            Self::available(
                h,
                Status::False,
                cluster_reason::MISSING_CONTROL_PLANE_ENDPOINT,
                "spec.controlPlaneEndpoint is not set and there is no controlPlaneEndpointIPPoolRef to claim it from",
                now,
            );
            return Ok(Some(Action::AwaitChange));
        }
        match endpoint::claim(&self.mgmt, &h.obj, cluster).await? {
            Vip::Address(host) => {
                let port = match h.obj.spec.control_plane_endpoint.port {
                    p if p > 0 => p,
                    _ => endpoint::DEFAULT_PORT,
                };
                h.write_spec(&self.store, |o| {
                    o.spec.control_plane_endpoint = ApiEndpoint { host, port }
                })
                .await?;
                Ok(None)
            }
            Vip::Pending => {
                let pool = h
                    .obj
                    .spec
                    .control_plane_endpoint_ip_pool_ref
                    .as_ref()
                    .map(|p| p.name.clone())
                    .unwrap_or_default();
                Self::available(
                    h,
                    Status::False,
                    cluster_reason::MISSING_CONTROL_PLANE_ENDPOINT,
                    &format!("waiting for an address from {pool} for the control-plane endpoint"),
                    now,
                );
                Ok(Some(Action::Requeue(self.config.endpoint_poll)))
            }
            Vip::Conflict(message) => {
                Self::available(
                    h,
                    Status::False,
                    cluster_reason::MISSING_CONTROL_PLANE_ENDPOINT,
                    &message,
                    now,
                );
                Ok(Some(Action::Requeue(self.config.credentials_retry)))
            }
        }
    }

    /// Drops node locations of machines that no longer exist.
    async fn prune_locations(&self, h: &mut Handle<ProxmoxCluster>) -> Result<(), ReconcileError> {
        if h.status.node_locations.is_none() {
            return Ok(());
        }
        let machines = self.machines(h).await?;
        let exists = |name: &str| {
            machines
                .iter()
                .any(|m| m.metadata.name.as_deref() == Some(name))
        };
        if let Some(locations) = h.status.node_locations.as_mut() {
            locations.control_plane.retain(|l| exists(&l.machine.name));
            locations.workers.retain(|l| exists(&l.machine.name));
            if locations.control_plane.is_empty() && locations.workers.is_empty() {
                h.status.node_locations = None;
            }
        }
        Ok(())
    }

    async fn machines(
        &self,
        h: &Handle<ProxmoxCluster>,
    ) -> Result<Vec<ProxmoxMachine>, ReconcileError> {
        let Some(cluster) = owner_cluster(&h.obj) else {
            return Ok(Vec::new());
        };
        let labels = BTreeMap::from([(CLUSTER_NAME_LABEL.to_string(), cluster)]);
        Ok(self.store.list(h.namespace(), &labels).await?)
    }

    async fn delete(
        &self,
        h: &mut Handle<ProxmoxCluster>,
        cluster: Option<&Cluster>,
        cluster_name: &str,
        now: Timestamp,
    ) -> Result<Action, ReconcileError> {
        if cluster.is_some_and(|c| c.metadata.deletion_timestamp.is_none()) {
            Self::available(
                h,
                Status::False,
                cluster_reason::DELETING,
                &format!("deletion was requested but owning cluster {cluster_name} wasn't deleted"),
                now,
            );
            return Ok(Action::AwaitChange);
        }
        let machines = self.machines(h).await?;
        if !machines.is_empty() {
            Self::available(
                h,
                Status::False,
                cluster_reason::DELETING,
                &format!("waiting for {} machine(s) to be deleted", machines.len()),
                now,
            );
            return Ok(Action::Requeue(self.config.machines_poll));
        }
        endpoint::release(&self.mgmt, &h.obj).await?;
        let namespace = h.namespace().to_string();
        let names: Vec<String> = pools::desired_pools(&h.obj)
            .unwrap_or_default()
            .iter()
            .filter_map(|d| d.pool.metadata.name.clone())
            .chain(
                h.obj
                    .status
                    .in_cluster_ip_pool_ref
                    .iter()
                    .map(|r| r.name.clone()),
            )
            .collect();
        let mut ours = Vec::new();
        for name in names {
            let Some(pool) = self
                .mgmt
                .pool(PoolKind::InCluster, &namespace, &name)
                .await?
            else {
                continue;
            };
            if pool
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true) && Some(&o.uid) == h.obj.metadata.uid.as_ref())
            {
                ours.push(name);
            }
        }
        // The pools' webhook refuses a deletion while addresses are allocated; their claims
        // go only once IPAM has released them (after the reuse grace period). Waiting for
        // them, rather than failing the deletion into exponential back-off, deletes the pools
        // within one poll of their last release.
        let holding = self.claims_on(&namespace, &ours).await?;
        if holding > 0 {
            Self::available(
                h,
                Status::False,
                cluster_reason::DELETING,
                &format!(
                    "waiting for IPAM to release {holding} address claim(s) on the cluster's pools"
                ),
                now,
            );
            return Ok(Action::Requeue(self.config.release_poll));
        }
        for name in ours {
            self.mgmt
                .delete_pool(PoolKind::InCluster, &namespace, &name)
                .await?;
        }
        for reference in secret_refs(&h.obj) {
            self.release_secret(h, reference).await?;
        }
        h.write_spec(&self.store, |o| {
            remove_finalizer(&mut o.metadata, CLUSTER_FINALIZER)
        })
        .await?;
        Ok(Action::AwaitChange)
    }

    /// The claims in `namespace` on one of the InClusterIPPools `pools`.
    async fn claims_on(&self, namespace: &str, pools: &[String]) -> Result<usize, ReconcileError> {
        if pools.is_empty() {
            return Ok(0);
        }
        let claims = self.mgmt.list_claims(namespace, &BTreeMap::new()).await?;
        Ok(claims
            .iter()
            .filter(|c| {
                let pool = &c.spec.pool_ref;
                pool.kind == PoolKind::InCluster.as_str() && pools.contains(&pool.name)
            })
            .count())
    }

    /// Removes this cluster's owner reference from the credentials Secret, or — as the
    /// last owner — the finalizer (the reference stays, so the garbage collector removes
    /// the Secret with its last ProxmoxCluster, as upstream intends).
    async fn release_secret(
        &self,
        h: &Handle<ProxmoxCluster>,
        reference: SecretReference,
    ) -> Result<(), ReconcileError> {
        let namespace = clients::secret_namespace(&reference, &h.obj);
        let Some(secret) = self.mgmt.secret(&namespace, &reference.name).await? else {
            return Ok(());
        };
        let owner = secret_owner(&h.obj);
        let mut updated = secret.clone();
        let refs = updated
            .metadata
            .owner_references
            .clone()
            .unwrap_or_default();
        if refs.len() > 1 {
            updated.metadata.owner_references = Some(
                refs.into_iter()
                    .filter(|r| !same_owner(r, &owner))
                    .collect(),
            );
        } else if refs.iter().any(|r| same_owner(r, &owner)) {
            remove_finalizer(&mut updated.metadata, SECRET_FINALIZER);
        }
        if updated.metadata != secret.metadata {
            self.mgmt.update_secret_metadata(&updated).await?;
        }
        Ok(())
    }
}
