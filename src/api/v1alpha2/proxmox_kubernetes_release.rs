//! ProxmoxKubernetesRelease (v1alpha2 only): a Kubernetes version and where its template VMs
//! are, so that machines name a release instead of a template. When image-builder rebuilds the
//! templates (a CVE fix), the release changes once and every cluster's next machines clone the
//! new templates; machines that exist keep theirs (`ProxmoxMachine.status.template`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::proxmox_machine::TemplateSelector;
use crate::api::common::{is_zero, schema_with};

/// A Kubernetes version as Cluster API writes it (`v1.34.8`, `1.34.8`, `v1.35.0-rc.1`):
/// semantic versioning with an optional leading `v`.
pub const KUBERNETES_VERSION_PATTERN: &str = r"^v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$";

/// ProxmoxKubernetesRelease is a Kubernetes release built into Proxmox VE
/// template VMs: the version they run and where they are.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ProxmoxKubernetesRelease {
    /// apiVersion defines the versioned schema of this representation of an object.
    #[serde(skip_serializing_if = "is_zero")]
    pub api_version: String,

    /// kind is a string value representing the REST resource this object represents.
    #[serde(skip_serializing_if = "is_zero")]
    pub kind: String,

    /// metadata is the standard object metadata.
    #[schemars(schema_with = "schema_with::object_meta")]
    pub metadata: ObjectMeta,

    /// spec is the release: its version and templates.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-capmox-required" = true))]
    pub spec: ProxmoxKubernetesReleaseSpec,
}

crate::api::common::list_kind!(ProxmoxKubernetesReleaseList, ProxmoxKubernetesRelease);

/// ProxmoxKubernetesReleaseSpec is a Kubernetes version and its template VMs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ProxmoxKubernetesReleaseSpec {
    /// version is the Kubernetes version the templates run, for example
    /// `v1.34.8`. A ProxmoxMachine whose kubernetesRelease names no release
    /// uses the release whose version is its Machine's spec.version (a
    /// leading `v` does not count).
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(
        extend("x-capmox-required" = true),
        length(min = 1, max = 256),
        regex(pattern = KUBERNETES_VERSION_PATTERN)
    )]
    pub version: String,

    /// templates are the template VMs of the release. A machine clones from
    /// the sources that apply to its failure domain (those that name it, or
    /// else those that name none); a template found on several nodes is
    /// cloned from the copy on the node the machine is scheduled to.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(
        extend("x-capmox-required" = true),
        length(min = 1, max = 64),
        extend("x-kubernetes-list-type" = "atomic")
    )]
    pub templates: Vec<ReleaseTemplate>,
}

/// ReleaseTemplate is one source of the release's template VMs: a template
/// by VMID on a node, or templates found by their Proxmox tags.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.templateSelector) ? !has(self.sourceNode) && !has(self.templateID) : has(self.sourceNode) && has(self.templateID)",
    "message": "must define either a sourceNode with a templateID or a templateSelector"
}]))]
pub struct ReleaseTemplate {
    /// sourceNode is the Proxmox node that holds the template VM given by
    /// templateID.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub source_node: Option<String>,

    /// templateID is the VMID of the template VM on sourceNode.
    #[serde(rename = "templateID", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 100, max = 999_999_999))]
    pub template_id: Option<i32>,

    /// templateSelector finds the template VMs by their Proxmox tags: one
    /// template, or one copy per node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template_selector: Option<TemplateSelector>,

    /// failureDomains restricts this source to machines in these failure
    /// domains of their ProxmoxCluster. When not set, the source serves the
    /// machines of every domain that no other source names.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(
        length(max = 100),
        inner(length(min = 1, max = 256)),
        extend("x-kubernetes-list-type" = "set")
    )]
    pub failure_domains: Vec<String>,
}
