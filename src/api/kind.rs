//! The kinds and their descriptors: everything the generic registry and
//! discovery need to know about a kind without kind-specific code.

use super::{GROUP, Version};

/// One of the kinds served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// ProxmoxCluster.
    ProxmoxCluster,
    /// ProxmoxClusterTemplate.
    ProxmoxClusterTemplate,
    /// ProxmoxKubernetesRelease (v1alpha2 only).
    ProxmoxKubernetesRelease,
    /// ProxmoxMachine.
    ProxmoxMachine,
    /// ProxmoxMachineTemplate.
    ProxmoxMachineTemplate,
}

impl Kind {
    /// Every kind, in alphabetical order.
    pub const ALL: [Kind; 5] = [
        Kind::ProxmoxCluster,
        Kind::ProxmoxClusterTemplate,
        Kind::ProxmoxKubernetesRelease,
        Kind::ProxmoxMachine,
        Kind::ProxmoxMachineTemplate,
    ];

    /// The kinds `version` serves, in alphabetical order.
    pub fn served_in(version: Version) -> impl Iterator<Item = Kind> {
        Kind::ALL
            .into_iter()
            .filter(move |k| k.descriptor().serves(version))
    }

    /// The kind's descriptor.
    pub fn descriptor(self) -> &'static KindDescriptor {
        match self {
            Kind::ProxmoxCluster => &PROXMOX_CLUSTER,
            Kind::ProxmoxClusterTemplate => &PROXMOX_CLUSTER_TEMPLATE,
            Kind::ProxmoxKubernetesRelease => &PROXMOX_KUBERNETES_RELEASE,
            Kind::ProxmoxMachine => &PROXMOX_MACHINE,
            Kind::ProxmoxMachineTemplate => &PROXMOX_MACHINE_TEMPLATE,
        }
    }

    /// The kind's name, e.g. `ProxmoxMachine`.
    pub fn as_str(self) -> &'static str {
        self.descriptor().kind
    }

    /// The kind with this name, if served.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The kind served under this plural resource name, if any.
    pub fn from_plural(plural: &str) -> Option<Kind> {
        Kind::ALL
            .into_iter()
            .find(|k| k.descriptor().plural == plural)
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything about a kind that does not depend on its fields.
#[derive(Debug)]
pub struct KindDescriptor {
    /// API group.
    pub group: &'static str,
    /// Kind name (`ProxmoxMachine`).
    pub kind: &'static str,
    /// Kind of the list (`ProxmoxMachineList`).
    pub list_kind: &'static str,
    /// Plural resource name (`proxmoxmachines`).
    pub plural: &'static str,
    /// Singular resource name (`proxmoxmachine`).
    pub singular: &'static str,
    /// Short names for kubectl (`moxm`).
    pub short_names: &'static [&'static str],
    /// Categories for kubectl (`cluster-api`).
    pub categories: &'static [&'static str],
    /// Whether objects live in namespaces (all do).
    pub namespaced: bool,
    /// Per version of the group, oldest first; a kind newer than v1alpha1 is not served there.
    pub versions: [VersionDescriptor; 2],
}

impl KindDescriptor {
    /// The descriptor of one version of this kind.
    pub fn version(&self, version: Version) -> &VersionDescriptor {
        match version {
            Version::V1alpha1 => &self.versions[0],
            Version::V1alpha2 => &self.versions[1],
        }
    }

    /// Whether `version` serves this kind.
    pub fn serves(&self, version: Version) -> bool {
        self.version(version).served
    }

    /// The versions that serve this kind, oldest first.
    pub fn served_versions(&self) -> impl Iterator<Item = Version> + '_ {
        self.versions.iter().filter(|v| v.served).map(|v| v.version)
    }

    /// The version objects are stored in.
    pub fn storage_version(&self) -> Version {
        self.versions
            .iter()
            .find(|v| v.storage)
            .map_or(Version::V1alpha2, |v| v.version)
    }
}

/// What differs between the versions of a kind.
#[derive(Debug)]
pub struct VersionDescriptor {
    /// The version.
    pub version: Version,
    /// Whether the version is served.
    pub served: bool,
    /// Whether objects are stored in this version (exactly one is).
    pub storage: bool,
    /// Whether the version has a deprecation warning.
    pub deprecated: bool,
    /// Whether the `status` subresource exists in this version.
    pub status_subresource: bool,
    /// The extra columns of `kubectl get` (besides NAME).
    pub printer_columns: &'static [PrinterColumn],
}

/// An additional printer column, as in a CRD's `additionalPrinterColumns`.
#[derive(Debug, PartialEq, Eq)]
pub struct PrinterColumn {
    /// Column header.
    pub name: &'static str,
    /// OpenAPI type of the cell (`string`).
    pub type_: &'static str,
    /// JSONPath (kubectl syntax) of the value, relative to the object.
    pub json_path: &'static str,
    /// Column description.
    pub description: &'static str,
    /// 0 for the default view, higher for `-o wide`.
    pub priority: i32,
}

const fn column(
    name: &'static str,
    type_: &'static str,
    json_path: &'static str,
    description: &'static str,
) -> PrinterColumn {
    PrinterColumn {
        name,
        type_,
        json_path,
        description,
        priority: 0,
    }
}

const fn string_column(
    name: &'static str,
    json_path: &'static str,
    description: &'static str,
) -> PrinterColumn {
    column(name, "string", json_path, description)
}

const fn versions(
    v1alpha1_status: bool,
    v1alpha2_status: bool,
    v1alpha1_columns: &'static [PrinterColumn],
    v1alpha2_columns: &'static [PrinterColumn],
) -> [VersionDescriptor; 2] {
    [
        VersionDescriptor {
            version: Version::V1alpha1,
            served: true,
            storage: false,
            deprecated: false,
            status_subresource: v1alpha1_status,
            printer_columns: v1alpha1_columns,
        },
        VersionDescriptor {
            version: Version::V1alpha2,
            served: true,
            storage: true,
            deprecated: false,
            status_subresource: v1alpha2_status,
            printer_columns: v1alpha2_columns,
        },
    ]
}

const CLUSTER_COLUMNS_V1ALPHA1: &[PrinterColumn] = &[
    string_column(
        "Cluster",
        ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",
        "Cluster",
    ),
    string_column("Ready", ".status.ready", "Cluster infrastructure is ready"),
    string_column("Endpoint", ".spec.controlPlaneEndpoint", "API Endpoint"),
];

const CLUSTER_COLUMNS_V1ALPHA2: &[PrinterColumn] = &[
    string_column(
        "Cluster",
        ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",
        "Cluster",
    ),
    string_column(
        "Ready",
        ".status.initialization.provisioned",
        "Cluster infrastructure is ready",
    ),
    string_column("Endpoint", ".spec.controlPlaneEndpoint", "API Endpoint"),
];

const MACHINE_COLUMNS_V1ALPHA1: &[PrinterColumn] = &[
    string_column(
        "Cluster",
        ".metadata.labels.cluster\\.x-k8s\\.io/cluster-name",
        "Cluster to which this ProxmoxMachine belongs",
    ),
    string_column("Ready", ".status.ready", "Machine ready status"),
    string_column(
        "Node",
        ".status.proxmoxNode",
        "Proxmox Node that the machine was deployed on",
    ),
    string_column("Provider_ID", ".spec.providerID", "Provider ID"),
    string_column(
        "Machine",
        ".metadata.ownerReferences[?(@.kind==\"Machine\")].name",
        "Machine object which owns with this ProxmoxMachine",
    ),
];

const MACHINE_COLUMNS_V1ALPHA2: &[PrinterColumn] = &[
    string_column(
        "Cluster",
        ".metadata.labels.cluster\\.x-k8s\\.io/cluster-name",
        "Cluster to which this ProxmoxMachine belongs",
    ),
    string_column(
        "Ready",
        ".status.initialization.provisioned",
        "Machine ready status",
    ),
    string_column(
        "Node",
        ".status.proxmoxNode",
        "Proxmox Node that the machine was deployed on",
    ),
    string_column("Provider_ID", ".spec.providerID", "Provider ID"),
    string_column(
        "Machine",
        ".metadata.ownerReferences[?(@.kind==\"Machine\")].name",
        "Machine object which owns with this ProxmoxMachine",
    ),
];

static PROXMOX_CLUSTER: KindDescriptor = KindDescriptor {
    group: GROUP,
    kind: "ProxmoxCluster",
    list_kind: "ProxmoxClusterList",
    plural: "proxmoxclusters",
    singular: "proxmoxcluster",
    short_names: &[],
    categories: &["cluster-api"],
    namespaced: true,
    versions: versions(
        true,
        true,
        CLUSTER_COLUMNS_V1ALPHA1,
        CLUSTER_COLUMNS_V1ALPHA2,
    ),
};

static PROXMOX_CLUSTER_TEMPLATE: KindDescriptor = KindDescriptor {
    group: GROUP,
    kind: "ProxmoxClusterTemplate",
    list_kind: "ProxmoxClusterTemplateList",
    plural: "proxmoxclustertemplates",
    singular: "proxmoxclustertemplate",
    short_names: &["pct"],
    categories: &["cluster-api"],
    namespaced: true,
    // Upstream declares a status subresource in v1alpha1 although the type
    // has no status field; kept so that clients see the same API.
    versions: versions(true, false, &[], &[]),
};

/// A kind new in v1alpha2: v1alpha1 is upstream's API, which has no such kind.
const fn v1alpha2_only(columns: &'static [PrinterColumn]) -> [VersionDescriptor; 2] {
    let [mut v1alpha1, v1alpha2] = versions(false, false, &[], columns);
    v1alpha1.served = false;
    [v1alpha1, v1alpha2]
}

const RELEASE_COLUMNS: &[PrinterColumn] = &[
    string_column(
        "Version",
        ".spec.version",
        "Kubernetes version of the templates",
    ),
    column(
        "Template",
        "integer",
        ".spec.templates[0].templateID",
        "VMID of the first template source",
    ),
    string_column(
        "Node",
        ".spec.templates[0].sourceNode",
        "Node of the first template source",
    ),
    string_column(
        "Tags",
        ".spec.templates[0].templateSelector.matchTags",
        "Tags of the first template source",
    ),
    // Listed, as in a CRD: kube adds Age only to kinds without columns of their own.
    column(
        "Age",
        "date",
        ".metadata.creationTimestamp",
        "Time since the release was created",
    ),
];

static PROXMOX_KUBERNETES_RELEASE: KindDescriptor = KindDescriptor {
    group: GROUP,
    kind: "ProxmoxKubernetesRelease",
    list_kind: "ProxmoxKubernetesReleaseList",
    plural: "proxmoxkubernetesreleases",
    singular: "proxmoxkubernetesrelease",
    short_names: &["pkr"],
    categories: &["cluster-api"],
    namespaced: true,
    versions: v1alpha2_only(RELEASE_COLUMNS),
};

static PROXMOX_MACHINE: KindDescriptor = KindDescriptor {
    group: GROUP,
    kind: "ProxmoxMachine",
    list_kind: "ProxmoxMachineList",
    plural: "proxmoxmachines",
    singular: "proxmoxmachine",
    short_names: &["moxm"],
    categories: &["cluster-api", "proxmox"],
    namespaced: true,
    versions: versions(
        true,
        true,
        MACHINE_COLUMNS_V1ALPHA1,
        MACHINE_COLUMNS_V1ALPHA2,
    ),
};

static PROXMOX_MACHINE_TEMPLATE: KindDescriptor = KindDescriptor {
    group: GROUP,
    kind: "ProxmoxMachineTemplate",
    list_kind: "ProxmoxMachineTemplateList",
    plural: "proxmoxmachinetemplates",
    singular: "proxmoxmachinetemplate",
    short_names: &["pmt"],
    categories: &["cluster-api"],
    namespaced: true,
    versions: versions(false, false, &[], &[]),
};
