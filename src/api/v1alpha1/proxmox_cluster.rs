//! ProxmoxCluster (v1alpha1, deprecated): the infrastructure of one Cluster API
//! cluster on Proxmox VE.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::proxmox_machine::ProxmoxMachineSpec;
use crate::api::common::{
    LocalObjectReference, SecretReference, V1Beta1Condition, is_zero, schema_with,
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
    pub spec: ProxmoxClusterSpec,

    /// status is the observed state of the cluster's Proxmox infrastructure.
    pub status: ProxmoxClusterStatus,
}

crate::api::common::list_kind!(ProxmoxClusterList, ProxmoxCluster);

/// ProxmoxClusterSpec is the desired state of a ProxmoxCluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ProxmoxClusterSpec {
    /// controlPlaneEndpoint is the address (host and port) at which the
    /// workload cluster's Kubernetes API server is reachable.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self.port > 0 && self.port < 65536",
        "message": "port must be within 1-65535"
    }]))]
    pub control_plane_endpoint: Option<ApiEndpoint>,

    /// externalManagedControlPlane tells that the control plane is managed
    /// outside of this provider, which then sets controlPlaneEndpoint itself.
    #[serde(skip_serializing_if = "is_zero")]
    pub external_managed_control_plane: bool,

    /// allowedNodes lists the Proxmox nodes that VMs of this cluster may be
    /// placed on.
    #[serde(skip_serializing_if = "is_zero")]
    pub allowed_nodes: Vec<String>,

    /// schedulerHints tunes how VMs are placed onto nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduler_hints: Option<SchedulerHints>,

    /// ipv4Config is the IPv4 pool the nodes' addresses are taken from.
    /// Optional: without either, machines take their addresses by DHCP or from
    /// their devices' pools.
    #[serde(rename = "ipv4Config", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self.addresses.size() > 0",
        "message": "IPv4Config addresses must be provided"
    }]))]
    pub ipv4_config: Option<IpConfigSpec>,

    /// ipv6Config is the IPv6 pool the nodes' addresses are taken from.
    /// Optional: without either, machines take their addresses by DHCP or from
    /// their devices' pools.
    #[serde(rename = "ipv6Config", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self.addresses.size() > 0",
        "message": "IPv6Config addresses must be provided"
    }]))]
    pub ipv6_config: Option<IpConfigSpec>,

    /// dnsServers are the name servers the machines use.
    #[schemars(extend("x-capmox-required" = true), length(min = 1))]
    pub dns_servers: Vec<String>,

    /// cloneSpec held per-machine-type clone settings. It has no effect and
    /// does not exist in v1alpha2.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clone_spec: Option<ProxmoxClusterCloneSpec>,

    /// credentialsRef references the Secret holding the Proxmox credentials
    /// of this cluster. When its namespace is empty, the ProxmoxCluster's
    /// namespace is used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credentials_ref: Option<SecretReference>,
}

/// ApiEndpoint is a host and port at which a Kubernetes API server listens
/// (Cluster API v1beta1).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ApiEndpoint {
    /// host is the DNS name or IP address the API server is reachable at.
    #[schemars(length(max = 512))]
    pub host: String,

    /// port is the TCP port the API server listens on.
    pub port: i32,
}

/// ProxmoxClusterCloneSpec is the clone configuration of v1alpha1 clusters.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ProxmoxClusterCloneSpec {
    /// machineSpec maps a machine type to its ProxmoxMachine spec.
    #[serde(rename = "machineSpec")]
    #[schemars(extend("x-capmox-required" = true))]
    pub machine_spec: BTreeMap<String, ProxmoxMachineSpec>,

    /// sshAuthorizedKeys are the SSH keys put onto the VMs.
    #[serde(rename = "sshAuthorizedKeys", skip_serializing_if = "Option::is_none")]
    pub ssh_authorized_keys: Option<Vec<String>>,

    /// virtualIPNetworkInterface is the interface the control-plane VIP binds to.
    #[serde(rename = "virtualIPNetworkInterface")]
    pub virtual_ip_network_interface: String,
}

/// IpConfigSpec is an IP address pool with the network's prefix and gateway.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct IpConfigSpec {
    /// addresses are the IP addresses that may be assigned, as single
    /// addresses, ranges or CIDRs. They need not be contiguous.
    #[schemars(extend("x-capmox-required" = true))]
    pub addresses: Vec<String>,

    /// prefix is the length of the network prefix.
    #[schemars(extend("x-capmox-required" = true), schema_with = "schema_with::integer", range(max = 128))]
    pub prefix: i64,

    /// gateway is the network's gateway address.
    #[serde(skip_serializing_if = "is_zero")]
    pub gateway: String,

    /// metric is the route metric of the default route through the gateway.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-capmox-required" = true), extend("x-capmox-default" = 100))]
    pub metric: Option<u32>,
}

/// SchedulerHints tunes how VMs are placed onto Proxmox nodes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct SchedulerHints {
    /// memoryAdjustment scales each node's memory, in percent, when deciding
    /// whether a VM fits; 0 switches the memory check off. Defaults to 100.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_adjustment: Option<u64>,
}

/// ProxmoxClusterStatus is the observed state of a ProxmoxCluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ProxmoxClusterStatus {
    /// ready tells whether the cluster's infrastructure is ready.
    #[schemars(extend("x-capmox-default" = false))]
    pub ready: bool,

    /// inClusterIpPoolRef references the in-cluster IP pools created for the
    /// cluster.
    #[serde(rename = "inClusterIpPoolRef", skip_serializing_if = "is_zero")]
    pub in_cluster_ip_pool_ref: Vec<LocalObjectReference>,

    /// nodeLocations records the Proxmox node chosen for each machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_locations: Option<NodeLocations>,

    /// failureReason is a terse, machine-readable reason for a terminal
    /// reconciliation problem that needs manual intervention.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,

    /// failureMessage is a human-readable description of a terminal
    /// reconciliation problem that needs manual intervention.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,

    /// conditions are the observations of the cluster's state.
    #[serde(skip_serializing_if = "is_zero")]
    pub conditions: Vec<V1Beta1Condition>,
}

/// NodeLocations records where the cluster's machines were placed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeLocations {
    /// controlPlane lists the placements of control-plane machines.
    #[serde(skip_serializing_if = "is_zero")]
    pub control_plane: Vec<NodeLocation>,

    /// workers lists the placements of worker machines.
    #[serde(skip_serializing_if = "is_zero")]
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
    #[schemars(extend("x-capmox-required" = true))]
    pub node: String,
}
