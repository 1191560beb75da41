//! Object references with the exact schema Kubernetes publishes for the
//! `core/v1` reference types (atomic maps, `name` defaulting to `""`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::is_zero;

/// A reference to an object in the same namespace, by name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-map-type" = "atomic"))]
pub struct LocalObjectReference {
    /// name of the referent. This field is effectively required, but due to
    /// backwards compatibility is allowed to be empty.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(extend("x-capmox-default" = ""))]
    pub name: String,
}

/// A reference to a Secret by name and, optionally, namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-map-type" = "atomic"))]
pub struct SecretReference {
    /// name is unique within a namespace to reference a secret resource.
    #[serde(skip_serializing_if = "is_zero")]
    pub name: String,

    /// namespace defines the space within which the secret name must be unique.
    #[serde(skip_serializing_if = "is_zero")]
    pub namespace: String,
}

/// A reference to an object of a given API group and kind in the same
/// namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-map-type" = "atomic"))]
pub struct TypedLocalObjectReference {
    /// apiGroup is the group of the referenced resource. If it is not
    /// specified, the kind must be in the core API group. For any other
    /// third-party type, apiGroup is required.
    #[serde(rename = "apiGroup", skip_serializing_if = "Option::is_none")]
    pub api_group: Option<String>,

    /// kind is the type of resource being referenced.
    #[schemars(extend("x-capmox-required" = true))]
    pub kind: String,

    /// name is the name of the resource being referenced.
    #[schemars(extend("x-capmox-required" = true))]
    pub name: String,
}
