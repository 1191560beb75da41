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
