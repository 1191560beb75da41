//! The stand-in kinds' names and scope, shared by the stand-in tests and the fake
//! management cluster (tests/it/auth/fake_objects.rs, also built into the API benchmark).

/// One stand-in kind: its API path pieces and a minimal object.
pub struct KindCase {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
    pub status: bool,
}

pub const KINDS: [KindCase; 7] = [
    KindCase {
        api_version: "cluster.x-k8s.io/v1beta2",
        kind: "Cluster",
        plural: "clusters",
        namespaced: true,
        status: true,
    },
    KindCase {
        api_version: "cluster.x-k8s.io/v1beta2",
        kind: "Machine",
        plural: "machines",
        namespaced: true,
        status: true,
    },
    KindCase {
        api_version: "v1",
        kind: "Secret",
        plural: "secrets",
        namespaced: true,
        status: false,
    },
    KindCase {
        api_version: "ipam.cluster.x-k8s.io/v1beta2",
        kind: "IPAddressClaim",
        plural: "ipaddressclaims",
        namespaced: true,
        status: true,
    },
    KindCase {
        api_version: "ipam.cluster.x-k8s.io/v1beta2",
        kind: "IPAddress",
        plural: "ipaddresses",
        namespaced: true,
        status: false,
    },
    KindCase {
        api_version: "ipam.cluster.x-k8s.io/v1alpha2",
        kind: "InClusterIPPool",
        plural: "inclusterippools",
        namespaced: true,
        status: true,
    },
    KindCase {
        api_version: "ipam.cluster.x-k8s.io/v1alpha2",
        kind: "GlobalInClusterIPPool",
        plural: "globalinclusterippools",
        namespaced: false,
        status: true,
    },
];
