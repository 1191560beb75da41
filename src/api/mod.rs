//! The API of `infrastructure.cluster.x-k8s.io`: the types of each served
//! version, their schemas, decoding, defaulting and validation.
//!
//! ```text
//! v1alpha1/, v1alpha2/  the types, a file per kind (+ List kinds); v1alpha2 is the hub
//! common/               shared pieces: object refs, template metadata, v1beta1 Condition
//! kind.rs               Kind + KindDescriptor (plural, short names, categories, per version
//!                       served/storage/status subresource/printer columns)
//! schema/               structural schemas generated from the types, pruning
//! decode.rs             body → typed object: unknown fields per fieldValidation, schema
//!                       defaults, type errors as field errors
//! defaults/             schema defaults, v1alpha2's positional device names, upstream's
//!                       defaulting webhook on the hub
//! validation/           OpenAPI rules, list types, CEL-equivalent rules (on the request
//!                       version's JSON, ratcheted on updates: `ratchet`), upstream's
//!                       webhook rules (on the hub)
//! conversion/           v1alpha1 ⇄ v1alpha2 (`Spoke`), with the stored hub as context
//! field.rs              field errors rendered like apimachinery's `field.Error`
//! resource.rs           the per-kind surface: `Resource`, `HubConversion`, `admit`
//! manifest.rs           one manifest's object converted offline (`convert`), as written
//! openapi/              the OpenAPI v3/v2 documents, their `paths`, printer columns
//! ```
//!
//! The registry drives a kind through [`resource`] without kind-specific code
//! (`registry::strategy::KindStrategy`):
//!
//! ```text
//! decode::<R>(version, body, fieldValidation)  → Versioned<R>, pruned and defaulted JSON,
//!                                                warnings
//! to_hub::<R>(object, stored)                   → hub (v1alpha2 as is, v1alpha1 by R::to_hub)
//! R::default_hub(&mut hub)                      → upstream's defaulting webhook
//! validation::validate_schema(version, kind, &json, old_json)
//!                                               → OpenAPI rules, list types, CEL rules,
//!                                                 ratcheted against the stored object
//! R::validate_create(&hub) / R::validate_update(&new, &old)
//!                                               → upstream's webhook rules (not on /status)
//! encode::<R>(version, &hub)                    → the JSON a client of `version` reads
//! ```
//!
//! [`resource::admit`] runs that write path and returns the hub to store plus warnings, or an
//! `AdmitError` (`Decode`, `Conversion`, `Invalid` with one field error per cause), which
//! `registry::strategy` maps to 400 or 422. The kinds are the marker types `ClusterKind`,
//! `ClusterTemplateKind`, `KubernetesReleaseKind`, `MachineKind` and `MachineTemplateKind`; a kind
//! that only v1alpha2 serves has `unserved::NotServed` as its v1alpha1 type. Nothing here knows HTTP or
//! storage. docs/api.md describes the API itself and the deliberate differences from upstream.

pub mod common;
pub mod conversion;
pub mod decode;
pub mod defaults;
pub mod field;
pub mod kind;
pub mod manifest;
pub mod object;
pub mod openapi;
pub mod resource;
pub mod schema;
pub mod unserved;
pub mod v1alpha1;
pub mod v1alpha2;
pub mod validation;

pub use kind::{Kind, KindDescriptor, PrinterColumn, VersionDescriptor};
pub use object::ApiObject;

/// The API group served.
pub const GROUP: &str = "infrastructure.cluster.x-k8s.io";

/// A served version of the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Version {
    /// The deprecated version, converted to and from the hub.
    V1alpha1,
    /// The storage version and conversion hub.
    V1alpha2,
}

impl Version {
    /// Every served version, oldest first.
    pub const ALL: [Version; 2] = [Version::V1alpha1, Version::V1alpha2];

    /// The version's name, e.g. `v1alpha2`.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V1alpha1 => "v1alpha1",
            Version::V1alpha2 => "v1alpha2",
        }
    }

    /// `group/version`, the `apiVersion` of objects in this version.
    pub fn api_version(self) -> &'static str {
        match self {
            Version::V1alpha1 => "infrastructure.cluster.x-k8s.io/v1alpha1",
            Version::V1alpha2 => "infrastructure.cluster.x-k8s.io/v1alpha2",
        }
    }

    /// The version named by an `apiVersion` of this group, if it is served.
    pub fn from_api_version(api_version: &str) -> Option<Version> {
        Version::ALL
            .into_iter()
            .find(|v| v.api_version() == api_version)
    }

    /// The version with this name (`v1alpha1`, `v1alpha2`), if it is served.
    pub fn from_name(name: &str) -> Option<Version> {
        Version::ALL.into_iter().find(|v| v.as_str() == name)
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
