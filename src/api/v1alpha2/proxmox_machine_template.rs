//! ProxmoxMachineTemplate (v1alpha2): a ProxmoxMachine spec that Cluster API
//! machine sets and control planes stamp out. Immutable once created.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::proxmox_machine::ProxmoxMachineSpec;
use crate::api::common::{TemplateObjectMeta, is_zero, schema_with};

/// ProxmoxMachineTemplate is a template for ProxmoxMachine objects.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ProxmoxMachineTemplate {
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
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-capmox-required" = true))]
    pub spec: ProxmoxMachineTemplateSpec,
}

crate::api::common::list_kind!(ProxmoxMachineTemplateList, ProxmoxMachineTemplate);

/// ProxmoxMachineTemplateSpec holds the template of a ProxmoxMachine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ProxmoxMachineTemplateSpec {
    /// template is the ProxmoxMachine to create.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-capmox-required" = true))]
    pub template: ProxmoxMachineTemplateResource,
}

/// ProxmoxMachineTemplateResource is the metadata and spec of the
/// ProxmoxMachine created from a template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ProxmoxMachineTemplateResource {
    /// metadata holds labels and annotations for the created ProxmoxMachine.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("minProperties" = 1))]
    pub metadata: TemplateObjectMeta,

    /// spec is the spec of the created ProxmoxMachine.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-capmox-required" = true))]
    pub spec: ProxmoxMachineSpec,
}
