//! Small `meta.k8s.io` shapes shared by lists, tables and metadata-only responses.

use serde::{Deserialize, Serialize};

/// `metav1.ListMeta`: what a list (or Table, or PartialObjectMetadataList) says about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ListMeta {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    #[serde(rename = "continue", skip_serializing_if = "String::is_empty")]
    pub continue_token: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remaining_item_count: Option<i64>,
}

/// The group-versions of `meta.k8s.io` that serve Table and PartialObjectMetadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetaVersion {
    V1,
    V1Beta1,
}

impl MetaVersion {
    /// `v1` / `v1beta1`.
    pub fn version(self) -> &'static str {
        match self {
            Self::V1 => "v1",
            Self::V1Beta1 => "v1beta1",
        }
    }

    /// `meta.k8s.io/v1` / `meta.k8s.io/v1beta1`.
    pub fn api_version(self) -> &'static str {
        match self {
            Self::V1 => "meta.k8s.io/v1",
            Self::V1Beta1 => "meta.k8s.io/v1beta1",
        }
    }

    pub fn from_version(version: &str) -> Option<Self> {
        match version {
            "v1" => Some(Self::V1),
            "v1beta1" => Some(Self::V1Beta1),
            _ => None,
        }
    }
}
