//! ProxmoxClusterTemplate (v1alpha1, deprecated): a ProxmoxCluster spec that Cluster API
//! ClusterClasses stamp out.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::proxmox_cluster::ProxmoxClusterSpec;
use crate::api::common::{TemplateObjectMeta, is_zero, schema_with};

/// ProxmoxClusterTemplate is a template for ProxmoxCluster objects.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ProxmoxClusterTemplate {
    /// apiVersion defines the versioned schema of this representation of an object.
    #[serde(skip_serializing_if = "is_zero")]
    pub api_version: String,

    /// kind is a string value representing the REST resource this object represents.
    #[serde(skip_serializing_if = "is_zero")]
    pub kind: String,

    /// metadata is the standard object metadata.
    #[schemars(schema_with = "schema_with::object_meta")]
    pub metadata: ObjectMeta,

    /// spec holds the template.
    pub spec: ProxmoxClusterTemplateSpec,
}

crate::api::common::list_kind!(ProxmoxClusterTemplateList, ProxmoxClusterTemplate);

/// ProxmoxClusterTemplateSpec holds the template of a ProxmoxCluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ProxmoxClusterTemplateSpec {
    /// template is the ProxmoxCluster to create.
    #[schemars(extend("x-capmox-required" = true))]
    pub template: ProxmoxClusterTemplateResource,
}

/// ProxmoxClusterTemplateResource is the metadata and spec of the
/// ProxmoxCluster created from a template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ProxmoxClusterTemplateResource {
    /// metadata holds labels and annotations for the created ProxmoxCluster.
    #[serde(skip_serializing_if = "is_zero")]
    pub metadata: TemplateObjectMeta,

    /// spec is the spec of the created ProxmoxCluster.
    #[schemars(extend("x-capmox-required" = true))]
    pub spec: ProxmoxClusterSpec,
}
