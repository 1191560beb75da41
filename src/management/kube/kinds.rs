//! The kinds reached through the kube client, with the coordinates kube-rs needs for
//! `Api<DynamicObject>` (group, version, plural, scope). The management types in
//! [`crate::management::types`] carry no type metadata, so the adapters add it from here.

use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};

use crate::management::types::{CAPI_GROUP, IPAM_GROUP, PoolKind};

/// A kind of the management cluster (or our own group, reached through the same client).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Cluster API `Cluster` (v1beta2).
    Cluster,
    /// Cluster API `Machine` (v1beta2).
    Machine,
    /// IPAM `IPAddressClaim` (v1beta2).
    IpAddressClaim,
    /// IPAM `IPAddress` (v1beta2).
    IpAddress,
    /// The in-cluster provider's namespaced pool (v1alpha2).
    InClusterIpPool,
    /// The in-cluster provider's cluster-scoped pool (v1alpha2).
    GlobalInClusterIpPool,
    /// Our `ProxmoxCluster` (v1alpha2, the hub).
    ProxmoxCluster,
    /// Our `ProxmoxMachine` (v1alpha2, the hub).
    ProxmoxMachine,
}

impl Kind {
    /// API group, version, kind name and plural.
    fn coordinates(self) -> (&'static str, &'static str, &'static str, &'static str) {
        match self {
            Self::Cluster => (CAPI_GROUP, "v1beta2", "Cluster", "clusters"),
            Self::Machine => (CAPI_GROUP, "v1beta2", "Machine", "machines"),
            Self::IpAddressClaim => (IPAM_GROUP, "v1beta2", "IPAddressClaim", "ipaddressclaims"),
            Self::IpAddress => (IPAM_GROUP, "v1beta2", "IPAddress", "ipaddresses"),
            Self::InClusterIpPool => (
                IPAM_GROUP,
                "v1alpha2",
                "InClusterIPPool",
                "inclusterippools",
            ),
            Self::GlobalInClusterIpPool => (
                IPAM_GROUP,
                "v1alpha2",
                "GlobalInClusterIPPool",
                "globalinclusterippools",
            ),
            Self::ProxmoxCluster => (
                crate::api::GROUP,
                "v1alpha2",
                "ProxmoxCluster",
                "proxmoxclusters",
            ),
            Self::ProxmoxMachine => (
                crate::api::GROUP,
                "v1alpha2",
                "ProxmoxMachine",
                "proxmoxmachines",
            ),
        }
    }

    /// The pool kind's entry.
    pub fn of_pool(kind: PoolKind) -> Self {
        match kind {
            PoolKind::InCluster => Self::InClusterIpPool,
            PoolKind::GlobalInCluster => Self::GlobalInClusterIpPool,
        }
    }

    /// The API group.
    pub fn group(self) -> &'static str {
        self.coordinates().0
    }

    /// The kind name (`Cluster`, `IPAddressClaim`, ...).
    pub fn name(self) -> &'static str {
        self.coordinates().2
    }

    /// `group/version`.
    pub fn api_version(self) -> String {
        let (group, version, _, _) = self.coordinates();
        format!("{group}/{version}")
    }

    /// Whether objects of the kind live in a namespace.
    pub fn namespaced(self) -> bool {
        self != Self::GlobalInClusterIpPool
    }

    /// kube-rs's description of the resource.
    pub fn resource(self) -> ApiResource {
        let (group, version, kind, plural) = self.coordinates();
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
    }

    /// The API for one namespace (ignored for cluster-scoped kinds).
    pub fn api(self, client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
        if self.namespaced() {
            Api::namespaced_with(client.clone(), namespace, &self.resource())
        } else {
            Api::all_with(client.clone(), &self.resource())
        }
    }

    /// The API across all namespaces.
    pub fn api_all(self, client: &kube::Client) -> Api<DynamicObject> {
        Api::all_with(client.clone(), &self.resource())
    }

    /// `Kind ns/name` (or `Kind name` for cluster-scoped objects), for messages.
    pub fn describe(self, namespace: &str, name: &str) -> String {
        if self.namespaced() {
            format!("{} {namespace}/{name}", self.name())
        } else {
            format!("{} {name}", self.name())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_name_the_served_paths() {
        let pool = Kind::GlobalInClusterIpPool.resource();
        assert_eq!(pool.api_version, "ipam.cluster.x-k8s.io/v1alpha2");
        assert_eq!(pool.plural, "globalinclusterippools");
        assert!(!Kind::GlobalInClusterIpPool.namespaced());
        assert_eq!(
            Kind::ProxmoxMachine.api_version(),
            "infrastructure.cluster.x-k8s.io/v1alpha2"
        );
        assert_eq!(Kind::of_pool(PoolKind::InCluster).name(), "InClusterIPPool");
        assert_eq!(
            Kind::IpAddress.describe("ns", "a"),
            "IPAddress ns/a".to_string()
        );
        assert_eq!(
            Kind::GlobalInClusterIpPool.describe("ns", "g"),
            "GlobalInClusterIPPool g"
        );
    }
}
