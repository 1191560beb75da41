//! Management-cluster objects, reduced to the fields the controller reads or writes.
//!
//! The shapes follow Cluster API v1beta2 (`cluster.x-k8s.io`), CAPI IPAM v1beta2
//! (`ipam.cluster.x-k8s.io` claims and addresses) and the in-cluster IPAM provider's
//! v1alpha2 pools. Every struct decodes leniently (`#[serde(default)]`), so objects written
//! by newer releases still read.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};

use crate::api::common::is_zero;

/// API group of Cluster API core objects.
pub const CAPI_GROUP: &str = "cluster.x-k8s.io";
/// apiVersion of Cluster API core objects.
pub const CAPI_API_VERSION: &str = "cluster.x-k8s.io/v1beta2";
/// API group of IPAM objects (claims, addresses, in-cluster pools).
pub const IPAM_GROUP: &str = "ipam.cluster.x-k8s.io";
/// apiVersion of `IPAddressClaim` and `IPAddress`.
pub const IPAM_API_VERSION: &str = "ipam.cluster.x-k8s.io/v1beta2";
/// apiVersion of the in-cluster provider's pools.
pub const IN_CLUSTER_POOL_API_VERSION: &str = "ipam.cluster.x-k8s.io/v1alpha2";

/// Label naming the Cluster API cluster an object belongs to.
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";
/// Label marking control-plane Machines.
pub const CONTROL_PLANE_LABEL: &str = "cluster.x-k8s.io/control-plane";
/// Annotation pausing reconciliation of an object.
pub const PAUSED_ANNOTATION: &str = "cluster.x-k8s.io/paused";
/// Annotation telling that an infrastructure cluster is managed by someone else.
pub const MANAGED_BY_ANNOTATION: &str = "cluster.x-k8s.io/managed-by";

/// A reference by API group, kind and name (Cluster API v1beta2 contract reference).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(default, rename_all = "camelCase")]
pub struct GroupKindName {
    /// API group.
    #[serde(skip_serializing_if = "is_zero")]
    pub api_group: String,
    /// Kind.
    #[serde(skip_serializing_if = "is_zero")]
    pub kind: String,
    /// Name.
    #[serde(skip_serializing_if = "is_zero")]
    pub name: String,
}

/// A reference by name only.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(default)]
pub struct NameRef {
    /// Name.
    #[serde(skip_serializing_if = "is_zero")]
    pub name: String,
}

/// Host and port of an API server.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(default)]
pub struct Endpoint {
    /// DNS name or address.
    #[serde(skip_serializing_if = "is_zero")]
    pub host: String,
    /// TCP port.
    #[serde(skip_serializing_if = "is_zero")]
    pub port: i32,
}

/// Cluster API `Cluster`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct Cluster {
    /// Standard metadata.
    pub metadata: ObjectMeta,
    /// Desired state.
    pub spec: ClusterSpec,
    /// Observed state.
    pub status: ClusterStatus,
}

/// `Cluster.spec`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct ClusterSpec {
    /// Stops every controller from reconciling the cluster's objects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// The infrastructure cluster (our ProxmoxCluster).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub infrastructure_ref: Option<GroupKindName>,
    /// The endpoint CAPI copied from the infrastructure cluster (or the user set).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<Endpoint>,
}

/// `Cluster.status`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct ClusterStatus {
    /// Provisioning milestones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initialization: Option<ClusterInitialization>,
}

/// `Cluster.status.initialization`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(default, rename_all = "camelCase")]
pub struct ClusterInitialization {
    /// The infrastructure cluster reported provisioned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub infrastructure_provisioned: Option<bool>,
    /// The control plane is up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_plane_initialized: Option<bool>,
}

impl Cluster {
    /// `spec.paused` or the paused annotation.
    pub fn is_paused(&self) -> bool {
        self.spec.paused == Some(true) || has_annotation(&self.metadata, PAUSED_ANNOTATION)
    }

    /// CAPI marked the infrastructure provisioned.
    pub fn infrastructure_provisioned(&self) -> bool {
        self.status
            .initialization
            .as_ref()
            .and_then(|i| i.infrastructure_provisioned)
            == Some(true)
    }
}

/// Cluster API `Machine`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct Machine {
    /// Standard metadata.
    pub metadata: ObjectMeta,
    /// Desired state.
    pub spec: MachineSpec,
    /// Observed state.
    pub status: MachineStatus,
}

/// `Machine.spec`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct MachineSpec {
    /// The cluster the machine belongs to.
    #[serde(skip_serializing_if = "is_zero")]
    pub cluster_name: String,
    /// Bootstrap configuration.
    pub bootstrap: Bootstrap,
    /// Kubernetes version of the machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The infrastructure machine (our ProxmoxMachine).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub infrastructure_ref: Option<GroupKindName>,
    /// The failure domain the machine must be placed in (a name of the
    /// ProxmoxCluster's `status.failureDomains`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_domain: Option<String>,
}

/// `Machine.spec.bootstrap`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(default, rename_all = "camelCase")]
pub struct Bootstrap {
    /// Secret holding the bootstrap data (keys `value`, `format`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_secret_name: Option<String>,
}

/// `Machine.status`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct MachineStatus {
    /// The Kubernetes node once it joined.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_ref: Option<NameRef>,
    /// Conditions (`Available`, `Ready`, ...).
    #[serde(skip_serializing_if = "is_zero")]
    pub conditions: Vec<Condition>,
}

impl Machine {
    /// The machine's cluster: `spec.clusterName`, else the cluster-name label.
    pub fn cluster_name(&self) -> Option<&str> {
        Some(self.spec.cluster_name.as_str())
            .filter(|n| !n.is_empty())
            .or_else(|| label(&self.metadata, CLUSTER_NAME_LABEL))
    }

    /// Whether the machine is part of the control plane.
    pub fn is_control_plane(&self) -> bool {
        self.metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(CONTROL_PLANE_LABEL))
    }

    /// The node joined and CAPI reports the machine `Available`.
    pub fn node_joined(&self) -> bool {
        self.status
            .node_ref
            .as_ref()
            .is_some_and(|n| !n.name.is_empty())
            && self
                .status
                .conditions
                .iter()
                .any(|c| c.type_ == "Available" && c.status == "True")
    }
}

/// The pool an IPAM object points at.
pub type PoolRef = GroupKindName;

/// `IPAddressClaim` (ipam.cluster.x-k8s.io/v1beta2).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct IpAddressClaim {
    /// Standard metadata.
    pub metadata: ObjectMeta,
    /// Desired state.
    pub spec: IpAddressClaimSpec,
    /// Observed state.
    pub status: IpAddressClaimStatus,
}

/// `IPAddressClaim.spec` (immutable).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(default, rename_all = "camelCase")]
pub struct IpAddressClaimSpec {
    /// The pool to allocate from.
    pub pool_ref: PoolRef,
    /// The Cluster API cluster (for pausing and move).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
}

/// `IPAddressClaim.status`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct IpAddressClaimStatus {
    /// The allocated `IPAddress` (same name as the claim).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address_ref: Option<NameRef>,
    /// `Ready` with reasons such as `PoolExhausted`.
    #[serde(skip_serializing_if = "is_zero")]
    pub conditions: Vec<Condition>,
}

/// `IPAddress` (ipam.cluster.x-k8s.io/v1beta2).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct IpAddress {
    /// Standard metadata.
    pub metadata: ObjectMeta,
    /// The address.
    pub spec: IpAddressSpec,
}

/// `IPAddress.spec`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(default, rename_all = "camelCase")]
pub struct IpAddressSpec {
    /// The claim it was allocated for.
    pub claim_ref: NameRef,
    /// The pool it came from.
    pub pool_ref: PoolRef,
    /// The address, without prefix.
    pub address: String,
    /// Prefix length of the network.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<i32>,
    /// Gateway of the network.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
}

/// Which of the in-cluster provider's pool kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PoolKind {
    /// `InClusterIPPool`, namespaced.
    InCluster,
    /// `GlobalInClusterIPPool`, cluster-scoped.
    GlobalInCluster,
}

impl PoolKind {
    /// The kind name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InCluster => "InClusterIPPool",
            Self::GlobalInCluster => "GlobalInClusterIPPool",
        }
    }

    /// Parses a kind name.
    pub fn from_kind(kind: &str) -> Option<Self> {
        match kind {
            "InClusterIPPool" => Some(Self::InCluster),
            "GlobalInClusterIPPool" => Some(Self::GlobalInCluster),
            _ => None,
        }
    }
}

/// `InClusterIPPool` or `GlobalInClusterIPPool` (ipam.cluster.x-k8s.io/v1alpha2); both
/// have the same spec. `metadata.namespace` is empty for the global kind.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct IpPool {
    /// `InClusterIPPool` or `GlobalInClusterIPPool`.
    pub kind: String,
    /// Standard metadata.
    pub metadata: ObjectMeta,
    /// The address space.
    pub spec: IpPoolSpec,
}

/// Spec of the in-cluster pools.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(default, rename_all = "camelCase")]
pub struct IpPoolSpec {
    /// Addresses, `a-b` ranges and CIDRs, all of one family.
    pub addresses: Vec<String>,
    /// Prefix length of the network.
    pub prefix: i32,
    /// Gateway (never allocated).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// Allow the network and broadcast addresses of CIDR entries.
    #[serde(skip_serializing_if = "is_zero")]
    pub allocate_reserved_ip_addresses: bool,
    /// Addresses never handed out.
    #[serde(skip_serializing_if = "is_zero")]
    pub excluded_addresses: Vec<String>,
    /// How long a released address is held back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address_reuse_grace_period_seconds: Option<i32>,
}

impl IpPool {
    /// The pool kind, if it is one of the in-cluster kinds.
    pub fn pool_kind(&self) -> Option<PoolKind> {
        PoolKind::from_kind(&self.kind)
    }
}

/// The name of the owner of kind `kind` from API group `group`.
pub fn owner_name(meta: &ObjectMeta, kind: &str, group: &str) -> Option<String> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|o| o.kind == kind && o.api_version.split('/').next() == Some(group))
        .map(|o| o.name.clone())
}

/// A label's value.
pub fn label<'m>(meta: &'m ObjectMeta, key: &str) -> Option<&'m str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

/// An annotation's value.
pub fn annotation<'m>(meta: &'m ObjectMeta, key: &str) -> Option<&'m str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

/// Whether the annotation is present (any value).
pub fn has_annotation(meta: &ObjectMeta, key: &str) -> bool {
    meta.annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(key))
}

/// Labels or annotations as a map that may be absent.
pub fn map_of(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
    entries
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A Secret's value for `key` (from `data`, else `stringData`).
pub fn secret_value(secret: &k8s_openapi::api::core::v1::Secret, key: &str) -> Option<Vec<u8>> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| b.0.clone())
        .or_else(|| {
            secret
                .string_data
                .as_ref()
                .and_then(|d| d.get(key))
                .map(|s| s.clone().into_bytes())
        })
}

/// Whether `meta` has a deletion timestamp.
pub fn is_deleting(meta: &ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some()
}
