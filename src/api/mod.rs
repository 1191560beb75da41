//! The API of `infrastructure.cluster.x-k8s.io`: the types of each served
//! version, their schemas, decoding, defaulting and validation.
//!
//! See `docs/ARCHITECTURE.md` ("api/") for how the registry drives it.

pub mod common;
pub mod decode;
pub mod defaults;
pub mod field;
pub mod kind;
pub mod object;
pub mod openapi;
pub mod resource;
pub mod schema;
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
