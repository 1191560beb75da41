//! What the generic REST machinery knows of a kind: its names, scope and, per served
//! group-version, the status subresource, deprecation and printer columns. It is built from
//! `api::KindDescriptor` for this server's kinds and from static tables for kinds of other
//! groups (the schemaless stand-ins of `dev`), so nothing below depends on `api::Version`.

use std::fmt;

use crate::api::{self, KindDescriptor};

use super::scale::ScalePaths;
use super::table::PrinterColumn;

/// A group-version a kind is served in; the core group is `""`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupVersion {
    pub group: &'static str,
    pub version: &'static str,
}

impl GroupVersion {
    pub const fn new(group: &'static str, version: &'static str) -> Self {
        Self { group, version }
    }

    /// The version's name, e.g. `v1beta2`.
    pub fn as_str(self) -> &'static str {
        self.version
    }

    /// The `apiVersion` of objects in this version (`v1` in the core group).
    pub fn api_version(self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The version of this server's own group, if it is one.
    pub fn api(self) -> Option<api::Version> {
        (self.group == api::GROUP)
            .then(|| api::Version::from_name(self.version))
            .flatten()
    }
}

impl From<api::Version> for GroupVersion {
    fn from(version: api::Version) -> Self {
        Self::new(api::GROUP, version.as_str())
    }
}

impl fmt::Display for GroupVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.version)
    }
}

/// One served version of a kind.
#[derive(Debug, Clone)]
pub struct VersionInfo {
    pub version: GroupVersion,
    /// Whether objects are stored in this version (exactly one is).
    pub storage: bool,
    pub deprecated: bool,
    /// The warning a deprecated version's requests get instead of kube's default one (a
    /// CRD's `deprecationWarning`).
    pub deprecation_warning: Option<String>,
    pub status_subresource: bool,
    /// The `scale` subresource's fields, when the version has one.
    pub scale: Option<ScalePaths>,
    /// The extra table columns (besides Name; Age is added when there are none).
    pub printer_columns: Vec<PrinterColumn>,
    /// Fields a field selector may name besides `metadata.name` and `metadata.namespace` (a
    /// CRD's `selectableFields`, as `spec.color`).
    pub selectable_fields: Vec<String>,
}

/// A kind as the registry serves it.
#[derive(Debug, Clone)]
pub struct ResourceDescriptor {
    pub group: &'static str,
    pub kind: &'static str,
    pub list_kind: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    pub namespaced: bool,
    /// The served versions, oldest first.
    pub versions: Vec<VersionInfo>,
}

impl ResourceDescriptor {
    /// A kind of this server's group, in the versions its descriptor serves.
    pub fn from_kind(kind: &'static KindDescriptor) -> Self {
        let versions = kind
            .versions
            .iter()
            .filter(|v| v.served)
            .map(|v| VersionInfo {
                version: v.version.into(),
                storage: v.storage,
                deprecated: v.deprecated,
                deprecation_warning: None,
                status_subresource: v.status_subresource,
                scale: None,
                printer_columns: v
                    .printer_columns
                    .iter()
                    .map(|c| PrinterColumn {
                        name: c.name.to_owned(),
                        column_type: c.type_.to_owned(),
                        format: String::new(),
                        description: c.description.to_owned(),
                        priority: c.priority,
                        json_path: c.json_path.to_owned(),
                    })
                    .collect(),
                selectable_fields: Vec::new(),
            })
            .collect();
        Self {
            group: kind.group,
            kind: kind.kind,
            list_kind: kind.list_kind,
            plural: kind.plural,
            singular: kind.singular,
            short_names: kind.short_names,
            categories: kind.categories,
            namespaced: kind.namespaced,
            versions,
        }
    }

    /// The served version `version`, if any.
    pub fn version(&self, version: GroupVersion) -> Option<&VersionInfo> {
        self.versions.iter().find(|v| v.version == version)
    }

    /// The served version named `name` (`v1beta2`).
    pub fn version_named(&self, name: &str) -> Option<GroupVersion> {
        self.versions
            .iter()
            .map(|v| v.version)
            .find(|v| v.version == name)
    }

    /// The version objects are stored in (the newest served one if none is marked).
    pub fn storage_version(&self) -> GroupVersion {
        self.versions
            .iter()
            .find(|v| v.storage)
            .or(self.versions.last())
            .map_or(GroupVersion::new(self.group, ""), |v| v.version)
    }

    pub fn serves(&self, version: GroupVersion) -> bool {
        self.version(version).is_some()
    }

    /// Whether `version` has the `status` subresource.
    pub fn has_status(&self, version: GroupVersion) -> bool {
        self.version(version).is_some_and(|v| v.status_subresource)
    }

    /// Where `version`'s `scale` subresource reads and writes, if it has one.
    pub fn scale(&self, version: GroupVersion) -> Option<&ScalePaths> {
        self.version(version).and_then(|v| v.scale.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_versions_of_core_and_named_groups() {
        assert_eq!(GroupVersion::new("", "v1").api_version(), "v1");
        let gv = GroupVersion::new("cluster.x-k8s.io", "v1beta2");
        assert_eq!(gv.api_version(), "cluster.x-k8s.io/v1beta2");
        assert_eq!(gv.api(), None);
        let own = GroupVersion::from(api::Version::V1alpha1);
        assert_eq!(own.api(), Some(api::Version::V1alpha1));
    }

    #[test]
    fn own_kinds_keep_their_versions() {
        let d = ResourceDescriptor::from_kind(api::Kind::ProxmoxMachine.descriptor());
        assert_eq!(d.versions.len(), 2);
        assert_eq!(d.storage_version(), api::Version::V1alpha2.into());
        assert!(d.has_status(api::Version::V1alpha1.into()));
        assert_eq!(
            d.version_named("v1alpha1"),
            Some(api::Version::V1alpha1.into())
        );
        assert_eq!(d.version_named("v1"), None);
    }
}
