//! ProxmoxMachine (v1alpha1, deprecated): one Cluster API machine as a Proxmox
//! VE virtual machine.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use schemars::{JsonSchema, Schema};
use serde::{Deserialize, Serialize};

use crate::api::common::{
    MachineAddress, TAG_PATTERN, TypedLocalObjectReference, V1Beta1Condition, is_zero, schema_with,
};

/// ProxmoxMachine is a Cluster API machine backed by a Proxmox VE virtual
/// machine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
#[schemars(transform = machine_spec_rules)]
pub struct ProxmoxMachine {
    /// apiVersion defines the versioned schema of this representation of an object.
    #[serde(skip_serializing_if = "is_zero")]
    pub api_version: String,

    /// kind is a string value representing the REST resource this object represents.
    #[serde(skip_serializing_if = "is_zero")]
    pub kind: String,

    /// metadata is the standard object metadata.
    #[schemars(schema_with = "schema_with::object_meta")]
    pub metadata: ObjectMeta,

    /// spec is the desired state of the machine's virtual machine.
    pub spec: ProxmoxMachineSpec,

    /// status is the observed state of the machine's virtual machine.
    pub status: ProxmoxMachineStatus,
}

/// The template source rules that hold for a ProxmoxMachine but not for the
/// spec inside a ProxmoxMachineTemplate.
fn machine_spec_rules(schema: &mut Schema) {
    crate::api::schema::prepend_validations(
        schema,
        "spec",
        &[
            (
                "[has(self.sourceNode), has(self.templateSelector)].exists_one(c, c)",
                "must define either SourceNode with TemplateID, OR TemplateSelector",
            ),
            (
                "[has(self.templateID), has(self.templateSelector)].exists_one(c, c)",
                "must define either SourceNode with TemplateID, OR TemplateSelector.",
            ),
        ],
    );
}

crate::api::common::list_kind!(ProxmoxMachineList, ProxmoxMachine);

/// ProxmoxMachineSpec is the desired state of a ProxmoxMachine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.full || !has(self.format)", "message": "Must set full=true when specifying format"},
    {"rule": "self.full || !has(self.storage)", "message": "Must set full=true when specifying storage"}
]))]
pub struct ProxmoxMachineSpec {
    /// sourceNode is the Proxmox node that holds the template VM given by
    /// templateID.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(length(min = 1))]
    pub source_node: String,

    /// templateID is the VMID of the template VM to clone.
    #[serde(rename = "templateID", skip_serializing_if = "Option::is_none")]
    pub template_id: Option<i32>,

    /// templateSelector finds the template VM by its Proxmox tags.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template_selector: Option<TemplateSelector>,

    /// description is the description given to the new VM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,

    /// format is the disk format of a full clone on file storage.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["raw", "qcow2", "vmdk"]))]
    pub format: Option<String>,

    /// full makes a full copy of all disks (the default) instead of a linked
    /// clone.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-capmox-default" = true))]
    pub full: Option<bool>,

    /// pool is the Proxmox resource pool the new VM is added to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,

    /// snapName is the snapshot of the template to clone from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snap_name: Option<String>,

    /// storage is the target storage of a full clone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,

    /// target is the node to clone onto. Only allowed if the template is on
    /// shared storage. Replaced by allowedNodes in v1alpha2.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,

    /// providerID is the VM's BIOS UUID prefixed with `proxmox://`. It is set
    /// by the controller.
    #[serde(rename = "providerID", skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,

    /// virtualMachineID is the Proxmox VMID of the machine's VM.
    #[serde(rename = "virtualMachineID", skip_serializing_if = "Option::is_none")]
    pub virtual_machine_id: Option<i64>,

    /// numSockets is the number of CPU sockets of the VM; 0 keeps the
    /// template's value.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(range(min = 1))]
    pub num_sockets: i32,

    /// numCores is the number of cores per CPU socket; 0 keeps the template's
    /// value.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(range(min = 1))]
    pub num_cores: i32,

    /// memoryMiB is the VM's memory in MiB, a multiple of 8; 0 keeps the
    /// template's value.
    #[serde(rename = "memoryMiB", skip_serializing_if = "is_zero")]
    #[schemars(extend("multipleOf" = 8))]
    pub memory_mib: i32,

    /// disks configures the VM's disks before its first start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disks: Option<Storage>,

    /// network configures the VM's network devices.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkSpec>,

    /// vmIDRange restricts the VMIDs the new VM may get.
    #[serde(rename = "vmIDRange", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self.end >= self.start",
        "message": "end should be greater than or equal to start"
    }]))]
    pub vm_id_range: Option<VmIdRange>,

    /// checks switches off readiness checks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checks: Option<ProxmoxMachineChecks>,

    /// metadataSettings tunes the cloud-init meta-data given to the VM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata_settings: Option<MetadataSettings>,

    /// allowedNodes restricts the Proxmox nodes the VM may be cloned onto.
    #[serde(skip_serializing_if = "is_zero")]
    pub allowed_nodes: Vec<String>,

    /// tags are Proxmox tags set on the VM. They cannot be changed once set.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(
        length(min = 1),
        inner(pattern(TAG_PATTERN)),
        extend("x-kubernetes-list-type" = "set")
    )]
    pub tags: Vec<String>,
}

/// TemplateSelector finds a template VM by its Proxmox tags.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct TemplateSelector {
    /// matchTags are the tags the template must carry, compared as matchPolicy
    /// says.
    #[schemars(
        extend("x-capmox-required" = true),
        length(min = 1),
        inner(pattern(TAG_PATTERN)),
        extend("x-kubernetes-list-type" = "set")
    )]
    pub match_tags: Vec<String>,

    /// matchPolicy decides how matchTags are compared with a template's tags:
    /// exact (the default), uniqueSubset or bestSubset.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("enum" = ["exact", "uniqueSubset", "bestSubset"], "x-capmox-default" = "exact"))]
    pub match_policy: String,
}

/// Storage configures the VM's disks.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct Storage {
    /// bootVolume resizes the boot disk. It can only be set once.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self == oldSelf",
        "message": "Value is immutable"
    }]))]
    pub boot_volume: Option<DiskSize>,
}

/// DiskSize names a disk and its size.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct DiskSize {
    /// disk is the disk device to resize, for example `scsi0`.
    #[schemars(extend("x-capmox-required" = true))]
    pub disk: String,

    /// sizeGb is the size in gigabytes; it must not be smaller than the
    /// template's disk.
    #[schemars(extend("x-capmox-required" = true), range(min = 5))]
    pub size_gb: i32,
}

/// NetworkSpec configures the VM's network devices.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct NetworkSpec {
    /// default is the primary network device, net0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<NetworkDevice>,

    /// additionalDevices are further network devices (net1, …).
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub additional_devices: Vec<AdditionalNetworkDevice>,

    /// vrfs are VRF devices set up in the guest.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub vrfs: Vec<VrfDevice>,
}

/// NetworkDevice is a network device of the VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct NetworkDevice {
    /// bridge is the Proxmox bridge the device is attached to.
    #[schemars(extend("x-capmox-required" = true), length(min = 1))]
    pub bridge: String,

    /// model is the emulated network card; virtio when not set.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend(
        "enum" = ["e1000", "virtio", "rtl8139", "vmxnet3"],
        "x-capmox-default" = "virtio"
    ))]
    pub model: Option<String>,

    /// mtu is the device's MTU. 1 makes a virtio device inherit the bridge's
    /// MTU.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self == 1 || ( self >= 576 && self <= 65520)",
        "message": "invalid MTU value"
    }]))]
    pub mtu: Option<u16>,

    /// vlan is the 802.1Q VLAN tag of the device.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 4094))]
    pub vlan: Option<u16>,

    /// dnsServers are the name servers of this device. When not set, the
    /// ProxmoxCluster's dnsServers apply.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(length(min = 1))]
    pub dns_servers: Vec<String>,

    /// ipv4PoolRef references the IPAM pool this device gets its IPv4 address
    /// from. For net0 the cluster's pool is used when it is not set.
    #[serde(rename = "ipv4PoolRef", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {
            "rule": "self.apiGroup == 'ipam.cluster.x-k8s.io'",
            "message": "ipv4PoolRef allows only IPAM apiGroup ipam.cluster.x-k8s.io"
        },
        {
            "rule": "self.kind == 'InClusterIPPool' || self.kind == 'GlobalInClusterIPPool'",
            "message": "ipv4PoolRef allows either InClusterIPPool or GlobalInClusterIPPool"
        }
    ]))]
    pub ipv4_pool_ref: Option<TypedLocalObjectReference>,

    /// ipv6PoolRef references the IPAM pool this device gets its IPv6 address
    /// from. For net0 the cluster's pool is used when it is not set.
    #[serde(rename = "ipv6PoolRef", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {
            "rule": "self.apiGroup == 'ipam.cluster.x-k8s.io'",
            "message": "ipv6PoolRef allows only IPAM apiGroup ipam.cluster.x-k8s.io"
        },
        {
            "rule": "self.kind == 'InClusterIPPool' || self.kind == 'GlobalInClusterIPPool'",
            "message": "ipv6PoolRef allows either InClusterIPPool or GlobalInClusterIPPool"
        }
    ]))]
    pub ipv6_pool_ref: Option<TypedLocalObjectReference>,
}

/// AdditionalNetworkDevice is a network device besides net0, with its own
/// routes and policies.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.ipv4PoolRef != null || self.ipv6PoolRef != null",
    "message": "at least one pool reference must be set, either ipv4PoolRef or ipv6PoolRef"
}]))]
pub struct AdditionalNetworkDevice {
    /// The device itself.
    #[serde(flatten)]
    pub device: NetworkDevice,

    /// name is the Proxmox name of the device; it must be unique and must not
    /// be net0.
    #[schemars(
        extend("x-capmox-required" = true),
        length(min = 1),
        extend("x-kubernetes-validations" = [{
            "rule": "self != 'net0'",
            "message": "additional network devices doesn't allow net0"
        }])
    )]
    pub name: String,

    /// Routes and routing policies of the device.
    #[serde(flatten)]
    pub routing: Routing,

    /// linkMtu is the MTU configured inside the guest for this device.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self == 1 || ( self >= 576 && self <= 65520)",
        "message": "invalid MTU value"
    }]))]
    pub link_mtu: Option<u16>,
}

/// Routing holds the routes and routing policies of a device or VRF.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct Routing {
    /// routes are the routes of this device.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(length(min = 1))]
    pub routes: Vec<RouteSpec>,

    /// routingPolicy are policy rules (Linux FIB rules) for this device.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(length(min = 1))]
    pub routing_policy: Vec<RoutingPolicySpec>,
}

/// RouteSpec is an IPv4 or IPv6 route.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct RouteSpec {
    /// to is the destination subnet.
    #[serde(skip_serializing_if = "is_zero")]
    pub to: String,

    /// via is the gateway address.
    #[serde(skip_serializing_if = "is_zero")]
    pub via: String,

    /// metric is the route's metric.
    #[serde(skip_serializing_if = "is_zero")]
    pub metric: u32,

    /// table is the routing table the route goes into.
    #[serde(skip_serializing_if = "is_zero")]
    pub table: u32,
}

/// RoutingPolicySpec is a Linux FIB rule.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct RoutingPolicySpec {
    /// to matches the destination subnet.
    #[serde(skip_serializing_if = "is_zero")]
    pub to: String,

    /// from matches the source subnet.
    #[serde(skip_serializing_if = "is_zero")]
    pub from: String,

    /// table is the routing table the rule looks up; for a VRF it should be
    /// the VRF's table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<u32>,

    /// priority is the rule's position in the FIB rule list.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(
        range(max = 4_294_967_295_u64),
        extend("x-kubernetes-validations" = [{
            "rule": "(self > 0 && self < 32765) || (self > 32766)",
            "message": "Cowardly refusing to insert FIB rule matching kernel rules"
        }])
    )]
    pub priority: u32,
}

/// VrfDevice is a VRF device in the guest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct VrfDevice {
    /// interfaces are the network devices enslaved to the VRF.
    #[serde(skip_serializing_if = "is_zero")]
    pub interfaces: Vec<String>,

    /// name is the VRF device's name, unique within the VM.
    #[schemars(extend("x-capmox-required" = true), length(min = 3))]
    pub name: String,

    /// table is the routing table of the VRF's l3mdev device.
    #[schemars(
        extend("x-capmox-required" = true),
        range(max = 4_294_967_295_u64),
        extend("x-kubernetes-validations" = [{
            "rule": "(self > 0 && self < 254) || (self > 255)",
            "message": "Cowardly refusing to insert l3mdev rules into kernel tables"
        }])
    )]
    pub table: u32,

    /// Routes and routing policies of the VRF.
    #[serde(flatten)]
    pub routing: Routing,
}

/// VmIdRange is an inclusive range of Proxmox VMIDs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct VmIdRange {
    /// start is the first VMID of the range.
    #[schemars(extend("x-capmox-required" = true), range(min = 100, max = 999_999_999))]
    pub start: i64,

    /// end is the last VMID of the range.
    #[schemars(extend("x-capmox-required" = true), range(min = 100, max = 999_999_999))]
    pub end: i64,
}

/// ProxmoxMachineChecks switches off readiness checks.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ProxmoxMachineChecks {
    /// skipCloudInitStatus does not wait for cloud-init to finish.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip_cloud_init_status: Option<bool>,

    /// skipQemuGuestAgent does not wait for the QEMU guest agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip_qemu_guest_agent: Option<bool>,
}

/// MetadataSettings tunes the cloud-init meta-data of the VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct MetadataSettings {
    /// providerIDInjection adds `provider-id: proxmox://<uuid>` to the
    /// cloud-init meta-data.
    #[serde(rename = "providerIDInjection", skip_serializing_if = "is_zero")]
    pub provider_id_injection: bool,
}

/// ProxmoxMachineStatus is the observed state of a ProxmoxMachine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ProxmoxMachineStatus {
    /// ready tells whether the machine's infrastructure is ready.
    pub ready: bool,

    /// addresses are the addresses of the VM.
    #[serde(skip_serializing_if = "is_zero")]
    pub addresses: Vec<MachineAddress>,

    /// vmStatus is the state of the VM: notfound, pending or ready.
    #[serde(skip_serializing_if = "is_zero")]
    pub vm_status: String,

    /// bootstrapDataProvided tells whether the bootstrap data was given to the
    /// VM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bootstrap_data_provided: Option<bool>,

    /// ipAddresses maps a network device name (or `default`) to its addresses.
    #[serde(skip_serializing_if = "is_zero")]
    pub ip_addresses: BTreeMap<String, IpAddress>,

    /// network is the guest's view of each network device.
    #[serde(skip_serializing_if = "is_zero")]
    pub network: Vec<NetworkStatus>,

    /// proxmoxNode is the Proxmox node the VM runs on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxmox_node: Option<String>,

    /// taskRef is the UPID of the Proxmox task in flight for the VM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_ref: Option<String>,

    /// retryAfter is the time before which a failed task is not retried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<Time>,

    /// failureReason is a terse, machine-readable reason for a terminal
    /// reconciliation problem that needs manual intervention.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,

    /// failureMessage is a human-readable description of a terminal
    /// reconciliation problem that needs manual intervention.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,

    /// conditions are the observations of the machine's state.
    #[serde(skip_serializing_if = "is_zero")]
    pub conditions: Vec<V1Beta1Condition>,
}

/// IpAddress holds one IPv4 and one IPv6 address of a network device.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct IpAddress {
    /// ipv4 is the IPv4 address.
    #[serde(skip_serializing_if = "is_zero")]
    pub ipv4: String,

    /// ipv6 is the IPv6 address.
    #[serde(skip_serializing_if = "is_zero")]
    pub ipv6: String,
}

/// NetworkStatus is what the guest reports about one network interface.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct NetworkStatus {
    /// connected tells whether the interface is connected to the VM.
    #[serde(skip_serializing_if = "is_zero")]
    pub connected: bool,

    /// ipAddrs lists the IP addresses reported for the interface.
    #[serde(rename = "ipAddrs", skip_serializing_if = "is_zero")]
    pub ip_addrs: Vec<String>,

    /// macAddr is the MAC address of the interface.
    #[schemars(extend("x-capmox-required" = true))]
    pub mac_addr: String,

    /// networkName is the name of the network.
    #[serde(skip_serializing_if = "is_zero")]
    pub network_name: String,
}
