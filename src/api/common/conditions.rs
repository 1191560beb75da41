//! Cluster API v1beta1 conditions, used by the v1alpha1 status blocks.
//! (v1alpha2 uses `metav1.Condition` from k8s-openapi.)

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::is_zero;

/// One observation of the state of a Cluster API object, in the Cluster API
/// v1beta1 form (with a severity).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct V1Beta1Condition {
    /// type of condition in CamelCase or in foo.example.com/CamelCase.
    /// Many .condition.type values are consistent across resources like
    /// Available, but because arbitrary conditions can be useful (see
    /// .node.status.conditions), the ability to deconflict is important.
    #[serde(rename = "type")]
    #[schemars(extend("x-capmox-required" = true), length(min = 1, max = 256))]
    pub type_: String,

    /// status of the condition, one of True, False, Unknown.
    #[schemars(extend("x-capmox-required" = true))]
    pub status: String,

    /// severity provides an explicit classification of Reason code, so the
    /// users or machines can immediately understand the current situation and
    /// act accordingly. The Severity field MUST be set only when Status=False.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(length(max = 32))]
    pub severity: String,

    /// lastTransitionTime is the last time the condition transitioned from one
    /// status to another. This should be when the underlying condition changed.
    /// If that is not known, then using the time when the API field changed is
    /// acceptable.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-capmox-required" = true))]
    pub last_transition_time: Option<Time>,

    /// reason is the reason for the condition's last transition in CamelCase.
    /// The specific API may choose whether or not this field is considered a
    /// guaranteed API. This field may be empty.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(length(min = 1, max = 256))]
    pub reason: String,

    /// message is a human readable message indicating details about the
    /// transition. This field may be empty.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(length(min = 1, max = 10240))]
    pub message: String,
}
