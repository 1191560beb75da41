//! The metadata block of a template resource (Cluster API `ObjectMeta`):
//! only labels and annotations, copied onto objects created from the template.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::is_zero;

/// Labels and annotations that are copied onto the objects created from a
/// template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct TemplateObjectMeta {
    /// labels is a map of string keys and values that can be used to organize
    /// and categorize (scope and select) objects.
    #[serde(skip_serializing_if = "is_zero")]
    pub labels: BTreeMap<String, String>,

    /// annotations is an unstructured key value map stored with a resource
    /// that may be set by external tools to store and retrieve arbitrary
    /// metadata. They are not queryable and should be preserved when modifying
    /// objects.
    #[serde(skip_serializing_if = "is_zero")]
    pub annotations: BTreeMap<String, String>,
}
