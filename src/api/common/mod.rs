//! Pieces shared by both API versions: object references, the CAPI template
//! metadata, Cluster API v1beta1 conditions, and serde/schema helpers.

pub mod conditions;
pub mod machine_address;
pub mod refs;
pub mod schema_with;
pub mod template_meta;

pub use conditions::V1Beta1Condition;
pub use machine_address::MachineAddress;
pub use refs::{LocalObjectReference, SecretReference, TypedLocalObjectReference};
pub use template_meta::TemplateObjectMeta;

/// Pattern of a Proxmox tag (VM tags and template selector tags). Upstream
/// writes `^(?i)[a-z0-9_][a-z0-9_\-\+\.]*$`; inline flags are not valid
/// ECMA-262, so an OpenAPI document carrying them is invalid. This is the
/// same language without the flag.
pub const TAG_PATTERN: &str = r"^[a-zA-Z0-9_][a-zA-Z0-9_\-\+\.]*$";

/// `skip_serializing_if` helper mirroring Go's `omitempty`/`omitzero`: the
/// zero value of a field is left out of the JSON.
pub fn is_zero<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// Defines the List kind of a kind: `apiVersion`, `kind`, list metadata and
/// the items, the same for every kind.
macro_rules! list_kind {
    ($list:ident, $item:ident) => {
        #[doc = concat!(stringify!($list), " is a list of ", stringify!($item), " objects.")]
        #[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default, PartialEq)]
        #[serde(default, rename_all = "camelCase")]
        pub struct $list {
            /// apiVersion of the list.
            #[serde(skip_serializing_if = "crate::api::common::is_zero")]
            pub api_version: String,
            /// kind of the list.
            #[serde(skip_serializing_if = "crate::api::common::is_zero")]
            pub kind: String,
            /// metadata is the standard list metadata.
            pub metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta,
            /// items are the objects of the list.
            pub items: Vec<$item>,
        }
    };
}
pub(crate) use list_kind;
