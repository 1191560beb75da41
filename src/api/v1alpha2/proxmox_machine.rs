//! ProxmoxMachine (v1alpha2): one Cluster API machine as a Proxmox VE virtual
//! machine, cloned from a template and configured before its first boot.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use schemars::{JsonSchema, Schema};
use serde::{Deserialize, Serialize};

use super::shared::{NET_NAME_PATTERN, NetworkStatus, ZONE_PATTERN};
use crate::api::common::TAG_PATTERN;
use crate::api::common::{MachineAddress, TypedLocalObjectReference, is_zero, schema_with};

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
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-capmox-required" = true))]
    pub spec: ProxmoxMachineSpec,

    /// status is the observed state of the machine's virtual machine.
    #[serde(skip_serializing_if = "is_zero")]
    pub status: ProxmoxMachineStatus,
}

/// The template source rules hold for a ProxmoxMachine but not for the spec
/// inside a ProxmoxMachineTemplate; a kubernetesRelease is a template source
/// too (upstream's rules, which it passes, keep their messages). Upstream attaches the first two to the
/// machine's `spec` field (so they come first) and the third to the spec
/// type, which also puts it on templates; but ClusterClass templates get
/// their template source from ClusterClass patches, so upstream's own
/// ClusterClass flavor could not be created. Here it applies to machines
/// only, where a missing template source is an error.
fn machine_spec_rules(schema: &mut Schema) {
    const MESSAGE: &str = "must define either a SourceNode with a TemplateID or a TemplateSelector";
    crate::api::schema::prepend_validations(
        schema,
        "spec",
        &[
            (
                "has(self.kubernetesRelease) || [has(self.sourceNode), has(self.templateSelector)].exists_one(c, c)",
                MESSAGE,
            ),
            (
                "has(self.kubernetesRelease) || [has(self.templateID), has(self.templateSelector)].exists_one(c, c)",
                MESSAGE,
            ),
        ],
    );
    crate::api::schema::append_validations(
        schema,
        "spec",
        &[(
            "has(self.kubernetesRelease) || has(self.templateSelector) || (has(self.templateID) && has(self.sourceNode))",
            "Must specify either templateID or templateSelector",
        )],
    );
}

crate::api::common::list_kind!(ProxmoxMachineList, ProxmoxMachine);

/// ProxmoxMachineSpec is the desired state of a ProxmoxMachine: where its VM
/// is cloned from, how it is sized and how its network is set up.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.full || !has(self.format)", "message": "Must set full=true when specifying format"},
    {"rule": "self.full || !has(self.storage)", "message": "Must set full=true when specifying storage"},
    {
        "rule": "!has(self.kubernetesRelease) || !(has(self.sourceNode) || has(self.templateID) || has(self.templateSelector))",
        "message": "kubernetesRelease names the template: sourceNode, templateID and templateSelector must not be set with it"
    }
]))]
pub struct ProxmoxMachineSpec {
    /// sourceNode is the Proxmox node that holds the template VM given by
    /// templateID. The VM is cloned onto this node unless allowedNodes (here
    /// or on the ProxmoxCluster) spread VMs over several nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub source_node: Option<String>,

    /// templateID is the VMID of the template VM to clone.
    #[serde(rename = "templateID", skip_serializing_if = "Option::is_none")]
    pub template_id: Option<i32>,

    /// templateSelector finds the template VM by its Proxmox tags instead of
    /// by templateID.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template_selector: Option<TemplateSelector>,

    /// kubernetesRelease takes the template from a ProxmoxKubernetesRelease
    /// in the machine's namespace, instead of sourceNode with templateID or
    /// templateSelector: the release it names or, when it names none, the
    /// release whose version is the Machine's spec.version. The template is
    /// chosen when the VM is cloned and recorded in status.template; a later
    /// change of the release does not touch the VM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubernetes_release: Option<KubernetesReleaseReference>,

    /// description is the description given to the new VM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,

    /// format is the disk format of a full clone on file storage.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["raw", "qcow2", "vmdk"]))]
    pub format: Option<String>,

    /// full makes a full copy of all disks (true, the default) instead of a
    /// linked clone. Cloning a VM that is not a template always copies fully.
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

    /// providerID is the VM's BIOS UUID in the form
    /// proxmox://6c3fa683-bef9-4425-b413-eaa45a9d6191. It is set by the
    /// controller.
    #[serde(rename = "providerID", skip_serializing_if = "is_zero")]
    #[schemars(
        length(min = 46, max = 46),
        pattern(
            "^proxmox://[a-fA-F0-9]{8}-[a-fA-F0-9]{4}-[a-fA-F0-9]{4}-[a-fA-F0-9]{4}-[a-fA-F0-9]{12}$"
        )
    )]
    pub provider_id: String,

    /// virtualMachineID is the Proxmox VMID of the machine's VM. It is set by
    /// the controller.
    #[serde(rename = "virtualMachineID", skip_serializing_if = "Option::is_none")]
    pub virtual_machine_id: Option<i64>,

    /// numSockets is the number of CPU sockets of the VM. When not set, the
    /// template's value is kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub num_sockets: Option<i32>,

    /// numCores is the number of cores per CPU socket. When not set, the
    /// template's value is kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub num_cores: Option<i32>,

    /// memoryMiB is the VM's memory in MiB, a multiple of 8. When not set,
    /// the template's value is kept.
    #[serde(rename = "memoryMiB", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("multipleOf" = 8))]
    pub memory_mib: Option<i32>,

    /// cpuType is the CPU model the VM shows its guest (Proxmox's `cpu`
    /// option), for example `host`, `x86-64-v2-AES`, `kvm64`, or a custom model
    /// as `custom-<name>`; set before the first start, so one template serves
    /// several CPU types. When not set, the template's is kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 64),
        regex(pattern = r"^(custom-)?[a-zA-Z0-9][a-zA-Z0-9_.+-]*$")
    )]
    pub cpu_type: Option<String>,

    /// cloudInitDrive is the CD-ROM drive the bootstrap seed (the NoCloud
    /// ISO, for cloud-init and Ignition alike) is attached on. The default,
    /// `ide0`, does not exist on machines without an IDE controller, such as
    /// ARM64 `virt`: they need `scsi` or `sata`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloud_init_drive: Option<CloudInitDrive>,

    /// haResource registers the VM as a Proxmox VE HA resource once it runs,
    /// so that the HA manager restarts or relocates it when its node fails.
    /// Deleting the machine removes the resource with the VM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ha_resource: Option<HaResource>,

    /// pciDevices pass host PCI devices (GPUs, NICs, accelerators) through to
    /// the VM, written as its `hostpci0`, `hostpci1`, … options, in this
    /// order, before its first start; a replacement machine gets them again.
    /// Each is either a Proxmox VE resource mapping (`mapping`: the way that
    /// works on every node that maps a device, and needs only the
    /// `Mapping.Use` privilege) or raw host device IDs (`deviceIDs`: the VM can
    /// only run on a node that has them, and Proxmox VE lets only root@pam set
    /// them).
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(
        length(max = 16),
        extend("x-kubernetes-list-type" = "atomic"),
        extend("x-kubernetes-validations" = [{
            "rule": "self.filter(d, has(d.primaryGPU) && d.primaryGPU).size() <= 1",
            "message": "at most one device may be the primary GPU"
        }])
    )]
    pub pci_devices: Vec<PciDevice>,

    /// disks configures the VM's disks before its first start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disks: Option<Storage>,

    /// network configures the VM's network devices.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-capmox-required" = true))]
    pub network: Option<NetworkSpec>,

    /// vmIDRange restricts the VMIDs the new VM may get.
    #[serde(rename = "vmIDRange", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self.end >= self.start",
        "message": "end should be greater than or equal to start"
    }]))]
    pub vm_id_range: Option<VmIdRange>,

    /// checks switches off readiness checks that some guest operating systems
    /// cannot pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checks: Option<ProxmoxMachineChecks>,

    /// metadataSettings tunes the cloud-init meta-data given to the VM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata_settings: Option<MetadataSettings>,

    /// allowedNodes restricts the Proxmox nodes the VM may be cloned onto.
    /// When not set, the ProxmoxCluster's allowedNodes apply.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
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
    /// matchTags are the tags the template must carry. How they are compared
    /// with the template's tags is set by matchPolicy; more than one matching
    /// template is an error.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(
        extend("x-capmox-required" = true),
        length(min = 1),
        inner(pattern(TAG_PATTERN)),
        extend("x-kubernetes-list-type" = "set")
    )]
    pub match_tags: Vec<String>,

    /// matchPolicy decides how matchTags are compared with a template's tags:
    /// `exact` (the default) needs the same set of tags, `uniqueSubset` needs
    /// all of matchTags and allows more, `bestSubset` picks the template with
    /// all of matchTags and the fewest extra tags.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("enum" = ["exact", "uniqueSubset", "bestSubset"], "x-capmox-default" = "exact"))]
    pub match_policy: String,
}

/// KubernetesReleaseReference names the ProxmoxKubernetesRelease a machine's
/// template comes from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct KubernetesReleaseReference {
    /// name is the release's name. When not set, the release whose
    /// spec.version is the Machine's spec.version.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub name: Option<String>,
}

/// PciDevice is one host PCI device passed through to the VM (one
/// `hostpciN` option).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.mapping) != has(self.deviceIDs)",
    "message": "exactly one of mapping and deviceIDs must be set"
}]))]
pub struct PciDevice {
    /// mapping is the name of a PCI resource mapping of the datacenter
    /// (Datacenter → Resource Mappings, `/cluster/mapping/pci`). The machine
    /// is placed on a node where the mapping has a device no other VM holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 2, max = 128),
        regex(pattern = r"^[a-zA-Z][a-zA-Z0-9_-]+$")
    )]
    pub mapping: Option<String>,

    /// deviceIDs are host PCI addresses, `[domain:]bus:device[.function]`
    /// such as `0000:01:00.0`, or `01:00` for every function of the device;
    /// several are passed through as one multi-function device.
    #[serde(rename = "deviceIDs", skip_serializing_if = "is_zero")]
    #[schemars(
        length(min = 1, max = 8),
        inner(regex(pattern = r"^([a-fA-F0-9]{4,}:)?[a-fA-F0-9]{2}:[a-fA-F0-9]{2}(\.[a-fA-F0-9])?$")),
        extend("x-kubernetes-list-type" = "set")
    )]
    pub device_ids: Vec<String>,

    /// pcie attaches the device on the PCI Express bus (`pcie=1`), which needs
    /// the VM's `q35` machine type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pcie: Option<bool>,

    /// rombar makes the device's ROM visible to the guest (`rombar`, on when
    /// not set).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rombar: Option<bool>,

    /// primaryGPU makes the device the VM's primary graphics card (`x-vga=1`).
    #[serde(rename = "primaryGPU", skip_serializing_if = "Option::is_none")]
    pub primary_gpu: Option<bool>,

    /// mdev is the mediated-device type created on the device at the VM's
    /// start (a vGPU profile such as `nvidia-35`), instead of passing the
    /// whole device through.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[a-zA-Z0-9_.:-]+$"))]
    pub mdev: Option<String>,
}

/// HaResource is how the Proxmox VE HA manager looks after the VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct HaResource {
    /// group is the HA group that restricts and orders the nodes the VM may
    /// run on. It must exist in Proxmox VE. When not set, any node.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 128),
        regex(pattern = r"^[a-zA-Z][a-zA-Z0-9_.-]*$")
    )]
    pub group: Option<String>,

    /// state is the requested state: `started` (default; the HA manager keeps
    /// the VM running), `stopped`, `disabled` or `ignored`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend(
        "enum" = ["started", "stopped", "disabled", "ignored"],
        "x-capmox-default" = "started"
    ))]
    pub state: Option<String>,

    /// maxRestart is how often the HA manager restarts the VM on its node
    /// after a failed start before it relocates it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 10), extend("x-capmox-default" = 1))]
    pub max_restart: Option<i32>,

    /// maxRelocate is how often the HA manager relocates the VM to another
    /// node after failed starts.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 10), extend("x-capmox-default" = 1))]
    pub max_relocate: Option<i32>,
}

/// CloudInitDrive names the drive the bootstrap seed is attached on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.slot <= (self.bus == 'scsi' ? 30 : self.bus == 'sata' ? 5 : 3)",
    "message": "slot must be 0-3 on ide, 0-5 on sata and 0-30 on scsi"
}]))]
pub struct CloudInitDrive {
    /// bus is the controller the drive is on: `ide`, `sata` or `scsi`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["ide", "sata", "scsi"], "x-capmox-default" = "ide"))]
    pub bus: Option<String>,

    /// slot is the drive's number on its bus (`scsi30` is bus scsi, slot 30).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("x-capmox-default" = 0))]
    pub slot: Option<i32>,
}

impl CloudInitDrive {
    /// The drive key, `ide0` when nothing is said.
    pub fn key(drive: Option<&Self>) -> String {
        let bus = drive.and_then(|d| d.bus.as_deref()).unwrap_or("ide");
        let slot = drive.and_then(|d| d.slot).unwrap_or(0);
        format!("{bus}{slot}")
    }
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

    /// additionalVolumes are data disks beyond the boot volume, created on
    /// the drives they name before the VM first starts (and on a running VM
    /// when added later), and grown when their size grows. Once the VM
    /// exists a volume can only grow: it cannot shrink, move or be removed.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["disk"]
    ))]
    pub additional_volumes: Vec<AdditionalVolume>,
}

/// AdditionalVolume is a data disk of the VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct AdditionalVolume {
    /// disk is the drive the volume is attached on, for example `scsi1`,
    /// `virtio0` or `sata1`: slots 0-3 on ide, 0-5 on sata, 0-30 on scsi
    /// and 0-15 on virtio. A drive the template already has a disk on is
    /// taken as this volume (and grown to sizeGb).
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(
        extend("x-capmox-required" = true),
        regex(pattern = r"^(ide|sata|scsi|virtio)[0-9]{1,2}$")
    )]
    pub disk: String,

    /// sizeGb is the size in gigabytes (GiB, as Proxmox counts them).
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-capmox-required" = true), range(min = 1, max = 131072))]
    pub size_gb: i32,

    /// storage is the Proxmox storage the volume is allocated on. When not
    /// set, the machine's storage, else the boot volume's.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub storage: Option<String>,

    /// format is the volume's format; when not set, the storage's default.
    /// Block storages (LVM, ZFS, Ceph) only hold `raw`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["raw", "qcow2", "vmdk"]))]
    pub format: Option<String>,

    /// discard passes the guest's TRIM through to the storage, so that
    /// freed blocks are released on thin storages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub discard: Option<bool>,

    /// ioThread gives the drive its own I/O thread (scsi and virtio only;
    /// scsi needs the `virtio-scsi-single` controller).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io_thread: Option<bool>,

    /// ssd presents the drive to the guest as a solid-state disk (not on
    /// virtio).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ssd: Option<bool>,
}

/// DiskSize names a disk and its size.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct DiskSize {
    /// disk is the disk device to resize, for example `scsi0`, `ide0` or
    /// `sata0`.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-capmox-required" = true), length(min = 1))]
    pub disk: String,

    /// sizeGb is the size in gigabytes. Proxmox cannot shrink disks, so it
    /// must not be smaller than the template's disk.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-capmox-required" = true), range(min = 5))]
    pub size_gb: i32,
}

/// NetworkSpec configures the VM's network devices and virtual devices.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct NetworkSpec {
    /// zone selects the deployment zone of the ProxmoxCluster whose IP pools
    /// and DNS servers the machine uses.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(ZONE_PATTERN))]
    pub zone: Option<String>,

    /// networkDevices are the VM's network devices. A device without a name
    /// is named after its position in the list (`net0`, `net1`, …); the names
    /// must end up being net0 to net(N-1).
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(
        extend("x-capmox-required" = true),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"])
    )]
    pub network_devices: Vec<NetworkDevice>,

    /// vrfs are VRF devices set up in the guest.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub vrfs: Vec<VrfDevice>,
}

/// NetworkDevice is one network device of the VM and its guest configuration.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct NetworkDevice {
    /// bridge is the Proxmox bridge the device is attached to.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub bridge: Option<String>,

    /// defaultIPv4 attaches the cluster's (or zone's) IPv4 pool to this
    /// device. When no device sets it, it is set on net0.
    #[serde(rename = "defaultIPv4", skip_serializing_if = "Option::is_none")]
    pub default_ipv4: Option<bool>,

    /// defaultIPv6 attaches the cluster's (or zone's) IPv6 pool to this
    /// device. When no device sets it, it is set on net0.
    #[serde(rename = "defaultIPv6", skip_serializing_if = "Option::is_none")]
    pub default_ipv6: Option<bool>,

    /// dhcp4 lets the guest configure IPv4 on this device by DHCP. A device
    /// may use DHCP, IP pools, both, or neither (bridge only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dhcp4: Option<bool>,

    /// dhcp6 lets the guest configure IPv6 on this device by DHCPv6.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dhcp6: Option<bool>,

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
        "rule": "self == 1 || (self >= 576 && self <= 65520)",
        "message": "invalid MTU value"
    }]))]
    pub mtu: Option<i32>,

    /// vlan is the 802.1Q VLAN tag of the device.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 4094))]
    pub vlan: Option<i32>,

    /// queues is the number of packet queues of the device (multiqueue).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub queues: Option<i32>,

    /// name is the Proxmox name of the device (`net0`, `net1`, …). When not
    /// set, the device is named after its position in networkDevices.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(length(min = 4), pattern(NET_NAME_PATTERN))]
    pub name: String,

    /// ipPoolRef references IPAM pools (InClusterIPPool or
    /// GlobalInClusterIPPool) this device gets an address from, one per pool,
    /// after the default pools.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(
        transform = ip_pool_ref_item_rules,
        extend("x-kubernetes-list-type" = "atomic")
    )]
    pub ip_pool_ref: Vec<TypedLocalObjectReference>,

    /// dnsServers are the name servers of this device. When not set, the
    /// ProxmoxCluster's dnsServers apply.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(length(min = 1), extend("x-kubernetes-list-type" = "set"))]
    pub dns_servers: Vec<String>,

    /// Routes and routing policies of the device.
    #[serde(flatten)]
    pub routing: Routing,

    /// linkMtu is the MTU configured inside the guest for this device.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self == 1 || (self >= 576 && self <= 65520)",
        "message": "invalid MTU value"
    }]))]
    pub link_mtu: Option<i32>,
}

/// The rules every `ipPoolRef` entry obeys.
fn ip_pool_ref_item_rules(schema: &mut Schema) {
    crate::api::schema::append_item_validations(
        schema,
        &[
            (
                "self.apiGroup == 'ipam.cluster.x-k8s.io'",
                "ipPoolRef allows only IPAM apiGroup ipam.cluster.x-k8s.io",
            ),
            (
                "self.kind == 'InClusterIPPool' || self.kind == 'GlobalInClusterIPPool'",
                "ipPoolRef allows either InClusterIPPool or GlobalInClusterIPPool",
            ),
        ],
    );
}

/// Routing holds the routes and routing policies of a device or VRF.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct Routing {
    /// routes are the routes of this device.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(length(min = 1), extend("x-kubernetes-list-type" = "atomic"))]
    pub routes: Vec<RouteSpec>,

    /// routingPolicy are policy rules (Linux FIB rules) for this device.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(length(min = 1), extend("x-kubernetes-list-type" = "atomic"))]
    pub routing_policy: Vec<RoutingPolicySpec>,
}

/// RouteSpec is an IPv4 or IPv6 route.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct RouteSpec {
    /// to is the destination: a CIDR, an address, or the placeholder
    /// `default`/`all`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,

    /// via is the gateway address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,

    /// metric is the route's metric.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub metric: Option<i32>,

    /// table is the routing table the route goes into.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<i32>,

    /// is6 marks the route as IPv6. It is needed only when `to` is a
    /// placeholder and `via` is not set; otherwise the family follows `via`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is6: Option<bool>,
}

/// RoutingPolicySpec is a Linux FIB rule.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct RoutingPolicySpec {
    /// to matches the destination: a CIDR, an address, or `default`/`all`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,

    /// from matches the source: a CIDR, an address, or `default`/`all`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,

    /// table is the routing table the rule looks up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<i32>,

    /// priority is the rule's position in the FIB rule list.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        range(max = 4_294_967_295_i64),
        extend("x-kubernetes-validations" = [{
            "rule": "(self > 0 && self < 32765) || (self > 32766)",
            "message": "Cowardly refusing to insert FIB rule matching kernel rules"
        }])
    )]
    pub priority: Option<i64>,

    /// is6 marks the rule as IPv6. It is needed only when `to`/`from` use a
    /// placeholder and neither gives an address to take the family from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is6: Option<bool>,
}

/// VrfDevice is a VRF (virtual routing and forwarding) device in the guest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct VrfDevice {
    /// interfaces are the network devices enslaved to the VRF.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(
        inner(length(min = 4), pattern(NET_NAME_PATTERN)),
        extend("x-kubernetes-list-type" = "atomic")
    )]
    pub interfaces: Vec<String>,

    /// name is the VRF device's name, unique within the VM.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-capmox-required" = true), length(min = 3))]
    pub name: String,

    /// table is the routing table of the VRF's l3mdev device.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(
        extend("x-capmox-required" = true),
        range(min = 1, max = 4_294_967_295_i64),
        extend("x-kubernetes-validations" = [{
            "rule": "(self > 0 && self < 254) || (self > 255)",
            "message": "Cowardly refusing to insert l3mdev rules into kernel tables"
        }])
    )]
    pub table: i32,

    /// Routes and routing policies of the VRF.
    #[serde(flatten)]
    pub routing: Routing,
}

/// VmIdRange is an inclusive range of Proxmox VMIDs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct VmIdRange {
    /// start is the first VMID of the range.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-capmox-required" = true), range(min = 100, max = 999_999_999))]
    pub start: i64,

    /// end is the last VMID of the range.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-capmox-required" = true), range(min = 100, max = 999_999_999))]
    pub end: i64,
}

/// ProxmoxMachineChecks switches off readiness checks.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ProxmoxMachineChecks {
    /// skipCloudInitStatus does not wait for cloud-init to finish, for guests
    /// without cloud-init such as Talos.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip_cloud_init_status: Option<bool>,

    /// skipQemuGuestAgent does not wait for the QEMU guest agent (and so not
    /// for cloud-init either), for guests without the agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip_qemu_guest_agent: Option<bool>,
}

/// MetadataSettings tunes the cloud-init meta-data of the VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct MetadataSettings {
    /// providerIDInjection adds `provider-id: proxmox://<uuid>` to the
    /// cloud-init meta-data.
    #[serde(
        rename = "providerIDInjection",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(extend("x-capmox-required" = true))]
    pub provider_id_injection: Option<bool>,
}

/// ProxmoxMachineStatus is the observed state of a ProxmoxMachine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ProxmoxMachineStatus {
    /// conditions are the observations of the machine's state. Known types
    /// are Ready and VirtualMachineProvisioned.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(schema_with = "schema_with::metav1_conditions")]
    pub conditions: Vec<Condition>,

    /// initialization reports the provisioning of the machine's
    /// infrastructure, as the Cluster API contract defines it.
    #[serde(skip_serializing_if = "is_zero")]
    pub initialization: ProxmoxMachineInitializationStatus,

    /// addresses are the addresses of the VM.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub addresses: Vec<MachineAddress>,

    /// vmStatus is the state of the VM: notfound, pending or ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vm_status: Option<String>,

    /// bootstrapDataProvided tells whether the bootstrap data was given to the
    /// VM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bootstrap_data_provided: Option<bool>,

    /// ipAddresses are the VM's IP addresses per network device; the entry
    /// `default` holds the addresses from the default pools.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["net"]))]
    pub ip_addresses: Vec<IpAddressesSpec>,

    /// network is the guest's view of each network device.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub network: Vec<NetworkStatus>,

    /// proxmoxNode is the Proxmox node the VM runs on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxmox_node: Option<String>,

    /// pveCluster is the name of the Proxmox VE cluster the VM lives in (a
    /// standalone node's own name), recorded when its VMID is chosen; every
    /// later step checks it still reaches that cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pve_cluster: Option<String>,

    /// failureDomain is the failure domain of the ProxmoxCluster the VM's
    /// node belongs to (the Cluster API v1beta2 contract field for
    /// Machine.status.failureDomain).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub failure_domain: Option<String>,

    /// template is the template VM the VM was cloned from, recorded when the
    /// clone is requested.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template: Option<ClonedTemplate>,

    /// taskRef is the UPID of the Proxmox task in flight for the VM. It is
    /// managed by the controller.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_ref: Option<String>,

    /// retryAfter is the time before which a failed task is not retried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<Time>,
}

/// ClonedTemplate is the template VM a VM was cloned from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ClonedTemplate {
    /// sourceNode is the node of the template VM.
    #[serde(skip_serializing_if = "is_zero")]
    pub source_node: String,

    /// templateID is the VMID of the template VM.
    #[serde(rename = "templateID", skip_serializing_if = "is_zero")]
    pub template_id: i64,

    /// kubernetesRelease is the ProxmoxKubernetesRelease that named the
    /// template, when the machine has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubernetes_release: Option<String>,

    /// kubernetesVersion is that release's spec.version at the time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
}

/// ProxmoxMachineInitializationStatus reports the provisioning of the
/// machine's infrastructure.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct ProxmoxMachineInitializationStatus {
    /// provisioned is true once the machine's infrastructure is fully
    /// provisioned (Cluster API contract field).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioned: Option<bool>,
}

/// IpAddressesSpec lists the IP addresses of one network device.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct IpAddressesSpec {
    /// net is the network device (`net0`, …) or `default` for the default
    /// pools' addresses.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-capmox-required" = true), length(min = 4), pattern("^(net[0-9]+|default)$"))]
    pub net: String,

    /// ipv4 are the device's IPv4 addresses.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub ipv4: Vec<String>,

    /// ipv6 are the device's IPv6 addresses.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub ipv6: Vec<String>,
}
