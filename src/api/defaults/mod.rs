//! Defaulting. Two stages, as for a CRD with a defaulting webhook:
//!
//! 1. [`apply`]: the request version's schema defaults (and v1alpha2's
//!    positional device names) on the decoded JSON, before the typed object
//!    exists — kube-apiserver applies CRD schema defaults while decoding.
//! 2. [`webhook`]: upstream's defaulting webhook on the hub (v1alpha2) object,
//!    after conversion.

pub mod schema;
pub mod v1alpha2;
pub mod webhook;

use serde_json::Value;

use super::{Kind, Version};

/// Applies the schema defaults of `kind` in `version` to an object's JSON,
/// plus the version's own defaults that a schema cannot express.
pub fn apply(version: Version, kind: Kind, object: &mut Value) {
    schema::apply(object, super::schema::structural(version, kind));
    if version == Version::V1alpha2 {
        v1alpha2::name_devices_by_position(kind, object);
    }
}
