//! ProxmoxCluster (v1alpha2): the infrastructure of one Cluster API cluster on
//! Proxmox VE — node IP pools, DNS, the control-plane endpoint and the
//! credentials used to reach Proxmox.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::proxmox_machine::VmIdRange;
use super::shared::ZONE_PATTERN;
use crate::api::common::{
    LocalObjectReference, SecretReference, TypedLocalObjectReference, is_zero, schema_with,
};

/// ProxmoxCluster is the infrastructure of a Cluster API cluster on Proxmox VE.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ProxmoxCluster {
    /// apiVersion defines the versioned schema of this representation of an object.
    #[serde(skip_serializing_if = "is_zero")]
    pub api_version: String,

    /// kind is a string value representing the REST resource this object represents.
    #[serde(skip_serializing_if = "is_zero")]
    pub kind: String,

    /// metadata is the standard object metadata.
    #[schemars(schema_with = "schema_with::object_meta")]
    pub metadata: ObjectMeta,

    /// spec is the desired state of the cluster's Proxmox infrastructure.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-capmox-required" = true))]
    pub spec: ProxmoxClusterSpec,

    /// status is the observed state of the cluster's Proxmox infrastructure.
    #[serde(skip_serializing_if = "is_zero")]
    pub status: ProxmoxClusterStatus,
}

crate::api::common::list_kind!(ProxmoxClusterList, ProxmoxCluster);

/// ProxmoxClusterSpec is the desired state of a ProxmoxCluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ProxmoxClusterSpec {
    /// controlPlaneEndpoint is the address (host and port) at which the
    /// workload cluster's Kubernetes API server is reachable. When it is not
    /// given and controlPlaneEndpointIPPoolRef is set, the endpoint is claimed
    /// from that pool and published here by the controller.
    #[serde(skip_serializing_if = "is_zero")]
    pub control_plane_endpoint: ApiEndpoint,

    /// controlPlaneEndpointIPPoolRef references the IPAM pool
    /// (InClusterIPPool or GlobalInClusterIPPool of apiGroup
    /// ipam.cluster.x-k8s.io) from which the control-plane endpoint address
    /// (the VIP) is claimed when controlPlaneEndpoint is not given. The port
    /// defaults to 6443. Ignored once controlPlaneEndpoint is set.
    #[serde(
        rename = "controlPlaneEndpointIPPoolRef",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(extend("x-kubernetes-validations" = [
        {
            "rule": "self.apiGroup == 'ipam.cluster.x-k8s.io'",
            "message": "controlPlaneEndpointIPPoolRef allows only IPAM apiGroup ipam.cluster.x-k8s.io"
        },
        {
            "rule": "self.kind == 'InClusterIPPool' || self.kind == 'GlobalInClusterIPPool'",
            "message": "controlPlaneEndpointIPPoolRef allows either InClusterIPPool or GlobalInClusterIPPool"
        }
    ]))]
    pub control_plane_endpoint_ip_pool_ref: Option<TypedLocalObjectReference>,

    /// externalManagedControlPlane tells that the control plane is managed
    /// outside of this provider (for example by a hosted control plane
    /// provider), which then sets controlPlaneEndpoint itself. The endpoint is
    /// not checked against the node pools in that case.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-capmox-default" = false))]
    pub external_managed_control_plane: Option<bool>,

    /// allowedNodes lists the Proxmox nodes that VMs of this cluster may be
    /// placed on. VMs may then be cloned onto another node than the one that
    /// holds the template.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub allowed_nodes: Vec<String>,

    /// failureDomains are groups of Proxmox nodes that fail independently
    /// (racks, rooms, power feeds). They are reported in
    /// status.failureDomains, so that Cluster API spreads control-plane and
    /// MachineDeployment machines across them, and a Machine in a failure
    /// domain is placed on one of its nodes only.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(
        length(max = 100),
        extend(
            "x-kubernetes-list-type" = "map",
            "x-kubernetes-list-map-keys" = ["name"]
        )
    )]
    pub failure_domains: Vec<FailureDomainSpec>,

    /// schedulerHints tunes how VMs are placed onto nodes, for example to
    /// overcommit memory or to keep a safety margin free on every node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduler_hints: Option<SchedulerHints>,

    /// ipv4Config is the IPv4 pool the nodes' addresses are taken from, with
    /// its prefix and gateway. Together with ipv6Config it gives dual stack.
    /// Optional: without either, machines take their addresses by DHCP or from
    /// their devices' ipPoolRefs.
    #[serde(rename = "ipv4Config", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self.addresses.size() > 0",
        "message": "IPv4Config addresses must be provided"
    }]))]
    pub ipv4_config: Option<IpConfigSpec>,

    /// ipv6Config is the IPv6 pool the nodes' addresses are taken from, with
    /// its prefix and gateway. Together with ipv4Config it gives dual stack.
    /// Optional: without either, machines take their addresses by DHCP or from
    /// their devices' ipPoolRefs.
    #[serde(rename = "ipv6Config", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self.addresses.size() > 0",
        "message": "IPv6Config addresses must be provided"
    }]))]
    pub ipv6_config: Option<IpConfigSpec>,

    /// dnsServers are the name servers the machines use.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-capmox-required" = true), length(min = 1), extend("x-kubernetes-list-type" = "set"))]
    pub dns_servers: Vec<String>,

    /// zoneConfig gives the IP pools and DNS servers of further deployment
    /// zones; machines select a zone with spec.network.zone.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["zone"]
    ))]
    pub zone_config: Vec<ZoneConfigSpec>,

    /// credentialsRef references the Secret holding the Proxmox credentials
    /// of this cluster. Without it the controller's own credentials are used.
    /// When its namespace is empty, the ProxmoxCluster's namespace is used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credentials_ref: Option<SecretReference>,
}

/// FailureDomainSpec is a group of Proxmox nodes that fails independently of
/// the others.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct FailureDomainSpec {
    /// name is the failure domain's name, as Machines refer to it in
    /// spec.failureDomain.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(
        extend("x-capmox-required" = true),
        length(min = 1, max = 256),
        regex(pattern = r"^[a-z0-9]([-a-z0-9._]*[a-z0-9])?$")
    )]
    pub name: String,

    /// nodes are the Proxmox nodes of the failure domain; a node belongs to
    /// one failure domain at most.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(
        extend("x-capmox-required" = true),
        length(min = 1),
        extend("x-kubernetes-list-type" = "set")
    )]
    pub nodes: Vec<String>,

    /// controlPlane tells whether control-plane machines may be placed in the
    /// failure domain (default true).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-capmox-default" = true))]
    pub control_plane: Option<bool>,

    /// credentialsRef references the Secret (keys url, token, secret and
    /// optionally insecure and root_ca, as the cluster's credentialsRef) of
    /// the Proxmox VE cluster that holds this failure domain's nodes, so that
    /// one Kubernetes cluster can span several Proxmox VE clusters. Without
    /// it the domain is in the cluster's own Proxmox VE cluster. When its
    /// namespace is empty, the ProxmoxCluster's namespace is used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credentials_ref: Option<SecretReference>,

    /// vmIDRange restricts the VMIDs of the VMs placed in this failure
    /// domain, in place of the machines' own vmIDRange (VMIDs are per Proxmox
    /// VE cluster, so each may reserve its own range).
    #[serde(rename = "vmIDRange", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self.end >= self.start",
        "message": "end should be greater than or equal to start"
    }]))]
    pub vm_id_range: Option<VmIdRange>,
}

/// ApiEndpoint is a host and port at which a Kubernetes API server listens.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
#[schemars(extend(
    "minProperties" = 1,
    "x-kubernetes-validations" = [{
        "rule": "self.port > 0 && self.port < 65536",
        "message": "port must be within 1-65535"
    }]
))]
pub struct ApiEndpoint {
    /// host is the DNS name or IP address the API server is reachable at.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(length(min = 1, max = 512))]
    pub host: String,

    /// port is the TCP port the API server listens on.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
}

/// ZoneConfigSpec gives the network configuration of one deployment zone.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ZoneConfigSpec {
    /// zone is the name of the deployment zone.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-capmox-required" = true), pattern(ZONE_PATTERN))]
    pub zone: Option<String>,

    /// ipv4Config is the zone's IPv4 pool with its prefix and gateway.
    #[serde(rename = "ipv4Config", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self.addresses.size() > 0",
        "message": "IPv4Config addresses must be provided"
    }]))]
    pub ipv4_config: Option<IpConfigSpec>,

    /// ipv6Config is the zone's IPv6 pool with its prefix and gateway.
    #[serde(rename = "ipv6Config", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self.addresses.size() > 0",
        "message": "IPv6Config addresses must be provided"
    }]))]
    pub ipv6_config: Option<IpConfigSpec>,

    /// dnsServers are the name servers the machines of this zone use.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-capmox-required" = true), length(min = 1), extend("x-kubernetes-list-type" = "set"))]
    pub dns_servers: Vec<String>,
}

/// IpConfigSpec is an IP address pool with the network's prefix and gateway.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct IpConfigSpec {
    /// addresses are the IP addresses that may be assigned, as single
    /// addresses, ranges (`10.0.0.10-10.0.0.20`) or CIDRs (`10.0.0.0/28`).
    /// They need not be contiguous.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-capmox-required" = true), extend("x-kubernetes-list-type" = "set"))]
    pub addresses: Vec<String>,

    /// prefix is the length of the network prefix.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-capmox-required" = true), range(min = 1, max = 128))]
    pub prefix: i32,

    /// gateway is the network's gateway address.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-capmox-required" = true), length(min = 1))]
    pub gateway: String,

    /// metric is the route metric of the default route through the gateway.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("x-capmox-default" = 100))]
    pub metric: Option<i32>,
}

/// SchedulerHints tunes how VMs are placed onto Proxmox nodes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct SchedulerHints {
    /// memoryAdjustment scales each node's memory, in percent, when deciding
    /// whether a VM fits: 300 allows allocating three times the node's memory,
    /// 95 keeps 5% free, and 0 switches the memory check off. Defaults to 100.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub memory_adjustment: Option<i64>,

    /// cpuAdjustment scales each node's logical CPUs, in percent, when deciding
    /// whether a VM fits, counting the CPUs (sockets × cores) of every VM on
    /// the node as memoryAdjustment counts their memory: 400 allows four vCPUs
    /// per logical CPU, 100 none beyond them. 0, the default, leaves CPUs out
    /// of placement.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub cpu_adjustment: Option<i64>,
}

/// ProxmoxClusterStatus is the observed state of a ProxmoxCluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ProxmoxClusterStatus {
    /// conditions are the observations of the cluster's state. Known types
    /// are Ready, ProxmoxAvailable and Paused.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(schema_with = "schema_with::metav1_conditions")]
    pub conditions: Vec<Condition>,

    /// initialization reports the provisioning of the cluster's
    /// infrastructure, as the Cluster API contract defines it.
    #[serde(skip_serializing_if = "is_zero")]
    pub initialization: ProxmoxClusterInitializationStatus,

    /// inClusterIPPoolRef references the in-cluster IP pools created for the
    /// cluster's default network.
    #[serde(rename = "inClusterIPPoolRef", skip_serializing_if = "is_zero")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub in_cluster_ip_pool_ref: Vec<LocalObjectReference>,

    /// inClusterZoneRef lists the in-cluster IP pools created per zone.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["zone"]
    ))]
    pub in_cluster_zone_ref: Vec<InClusterZoneRef>,

    /// nodeLocations records the Proxmox node chosen for each machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_locations: Option<NodeLocations>,

    /// failureDomains are the failure domains of spec.failureDomains, sorted
    /// by name, as the Cluster API contract reads them.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["name"]
    ))]
    pub failure_domains: Vec<FailureDomain>,

    /// pveClusters reports each Proxmox VE cluster the cluster's machines
    /// live in: the cluster's own and those of failure domains with their own
    /// credentialsRef, whether it answers, and since when.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub pve_clusters: Vec<PveClusterStatus>,
}

/// PveClusterStatus is what the controller last saw of one Proxmox VE
/// cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct PveClusterStatus {
    /// endpoint is the URL of the Proxmox VE API (absent when its credentials
    /// cannot be read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,

    /// name is the Proxmox VE cluster's name (a standalone node's own name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,

    /// version is the pve-manager version it reports.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,

    /// failureDomains are the failure domains in this Proxmox VE cluster;
    /// empty for the cluster's own when no domain uses it.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub failure_domains: Vec<String>,

    /// reachable tells whether it answered the controller's last check.
    pub reachable: bool,

    /// since is when reachable last changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,

    /// message says why it is not reachable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// FailureDomain is a failure domain as Cluster API reads it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct FailureDomain {
    /// name is the failure domain's name.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-capmox-required" = true), length(min = 1, max = 256))]
    pub name: String,

    /// controlPlane tells whether control-plane machines may be placed in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<bool>,

    /// attributes describe the failure domain: `nodes`, its Proxmox nodes
    /// separated by commas.
    #[serde(skip_serializing_if = "is_zero")]
    pub attributes: std::collections::BTreeMap<String, String>,
}

/// ProxmoxClusterInitializationStatus reports the provisioning of the
/// cluster's infrastructure.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct ProxmoxClusterInitializationStatus {
    /// provisioned is true once the cluster's infrastructure is fully
    /// provisioned (Cluster API contract field).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioned: Option<bool>,
}

/// InClusterZoneRef names the in-cluster IP pools of one zone.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct InClusterZoneRef {
    /// zone is the deployment zone.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(ZONE_PATTERN), extend("x-capmox-default" = "default"))]
    pub zone: Option<String>,

    /// inClusterIPPoolRefV4 references the zone's IPv4 pool.
    #[serde(
        rename = "inClusterIPPoolRefV4",
        skip_serializing_if = "Option::is_none"
    )]
    pub in_cluster_ip_pool_ref_v4: Option<LocalObjectReference>,

    /// inClusterIPPoolRefV6 references the zone's IPv6 pool.
    #[serde(
        rename = "inClusterIPPoolRefV6",
        skip_serializing_if = "Option::is_none"
    )]
    pub in_cluster_ip_pool_ref_v6: Option<LocalObjectReference>,
}

/// NodeLocations records where the cluster's machines were placed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeLocations {
    /// controlPlane lists the placements of control-plane machines.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub control_plane: Vec<NodeLocation>,

    /// workers lists the placements of worker machines.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub workers: Vec<NodeLocation>,
}

/// NodeLocation is the Proxmox node one machine's VM was placed on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeLocation {
    /// machine references the ProxmoxMachine.
    #[schemars(extend("x-capmox-required" = true))]
    pub machine: LocalObjectReference,

    /// node is the Proxmox node.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-capmox-required" = true), length(min = 1))]
    pub node: String,

    /// zone is the deployment zone of the machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(ZONE_PATTERN))]
    pub zone: Option<String>,
}
