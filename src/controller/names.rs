//! Names shared with upstream CAPMOX: finalizers, labels, annotations, condition types
//! and reasons. Keeping upstream's spelling lets tools written for CAPMOX (and objects
//! it wrote) keep working.

/// Finalizer of a ProxmoxCluster.
pub const CLUSTER_FINALIZER: &str = "proxmoxcluster.infrastructure.cluster.x-k8s.io";
/// Finalizer of a ProxmoxMachine.
pub const MACHINE_FINALIZER: &str = "proxmoxmachine.infrastructure.cluster.x-k8s.io";
/// Finalizer on a credentials Secret used by ProxmoxClusters.
pub const SECRET_FINALIZER: &str = "proxmoxcluster.infrastructure.cluster.x-k8s.io/secret";

/// Label carrying the deployment zone (pools, claims, machines).
pub const ZONE_LABEL: &str = "topology.kubernetes.io/proxmox-zone";
/// The zone of machines and pools without an explicit zone.
pub const DEFAULT_ZONE: &str = "default";

/// Pool annotation: `ipv4` or `ipv6`.
pub const IP_FAMILY_ANNOTATION: &str = "ipam.capmox.cluster.x-k8s.io/ip-family";
/// Pool annotation: metric of the default route through the pool's gateway.
pub const GATEWAY_METRIC_ANNOTATION: &str = "ipam.capmox.cluster.x-k8s.io/gateway-metric";
/// Legacy pool annotation with the same meaning (read first; the prefixed one wins).
pub const LEGACY_METRIC_ANNOTATION: &str = "metric";
/// Claim annotation: position of the pool in the device's pool list.
pub const POOL_REF_COUNTER_ANNOTATION: &str = "ipam.capmox.cluster.x-k8s.io/pool-ref-counter";
/// Claim annotation: the address comes from a default (cluster or zone) pool.
pub const DEFAULT_GATEWAY_ANNOTATION: &str = "ipam.capmox.cluster.x-k8s.io/default-gateway";

/// Condition summarising an object.
pub const READY: &str = "Ready";
/// Condition surfacing a pause.
pub const PAUSED: &str = "Paused";
/// ProxmoxCluster condition: Proxmox reachable with valid credentials.
pub const PROXMOX_AVAILABLE: &str = "ProxmoxAvailable";
/// ProxmoxMachine condition whose reason is the provisioning phase.
pub const VM_PROVISIONED: &str = "VirtualMachineProvisioned";
/// ProxmoxMachine condition, present only with DHCP devices: whether their leased
/// addresses are known (the guest agent reports them). Not part of `Ready`.
pub const DHCP_ADDRESSES_KNOWN: &str = "DHCPAddressesKnown";

/// Reasons of `DHCPAddressesKnown`.
pub mod dhcp_reason {
    /// The guest agent reported an address for every DHCP device.
    pub const REPORTED: &str = "ReportedByGuestAgent";
    /// `checks.skipQemuGuestAgent`: nothing can report the leases.
    pub const NO_GUEST_AGENT: &str = "GuestAgentSkipped";
}

/// Cluster reasons (`ProxmoxAvailable`).
pub mod cluster_reason {
    /// Everything is in place.
    pub const PROVISIONED: &str = "Provisioned";
    /// Proxmox cannot be reached or refused the credentials.
    pub const PROXMOX_UNREACHABLE: &str = "ProxmoxUnreachable";
    /// No credentials (neither global nor `credentialsRef`) or the Secret is missing.
    pub const CREDENTIALS_NOT_FOUND: &str = "CredentialsNotFound";
    /// The control-plane endpoint is not known yet.
    pub const MISSING_CONTROL_PLANE_ENDPOINT: &str = "MissingControlPlaneEndpoint";
    /// The cluster is being deleted.
    pub const DELETING: &str = "Deleting";
}

/// Reason of a `Paused` condition.
pub const PAUSED_REASON: &str = "Paused";
/// Reason of a `Paused=False` condition.
pub const NOT_PAUSED_REASON: &str = "NotPaused";
