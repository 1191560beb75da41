//! A co-tenant's CRD read as this registry serves kinds: the descriptor (names, scope,
//! versions, status subresource, printer columns) and each served version's structural
//! schema. A CRD this server cannot serve faithfully is refused with the reason, which the
//! server answers as a 503 for the kind.

use serde_json::Value;

use crate::api::Version;
use crate::api::schema::Structural;

use super::super::cotenant::CoTenantKind;
use super::super::descriptor::{GroupVersion, ResourceDescriptor, VersionInfo};
use super::super::scale::ScalePaths;
use super::super::table::PrinterColumn;
use super::interned;

/// One served version of a CRD kind.
#[derive(Debug, Clone, Copy)]
pub struct CustomVersion {
    pub version: Version,
    pub schema: &'static Structural,
}

/// What a CRD defines, as served here.
#[derive(Debug, Clone)]
pub struct Definition {
    pub descriptor: ResourceDescriptor,
    pub versions: Vec<CustomVersion>,
    pub storage: Version,
}

fn text<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

fn flag(value: &Value, key: &str) -> bool {
    value.get(key).and_then(Value::as_bool) == Some(true)
}

/// Reads the CRD `spec` of `kind` (whose names the co-tenant set has already checked
/// against ours).
pub fn read(kind: &CoTenantKind, spec: &Value) -> Result<Definition, String> {
    let declared = spec
        .get("versions")
        .and_then(Value::as_array)
        .ok_or("its CRD declares no versions")?;
    if let Some(storage) = declared
        .iter()
        .find(|v| flag(v, "storage"))
        .and_then(|v| text(v, "name"))
        .filter(|name| Version::from_name(name).is_none())
    {
        return Err(format!(
            "its storage version {storage} lies outside the group-versions this server holds, \
             so kube-apiserver keeps its objects"
        ));
    }
    let served: Vec<&Value> = declared.iter().filter(|v| flag(v, "served")).collect();
    let mut versions = Vec::new();
    let mut infos = Vec::new();
    for entry in &served {
        let name = text(entry, "name").unwrap_or_default();
        let version = Version::from_name(name).ok_or_else(|| {
            format!(
                "it is also served in {name}, outside the group-versions this server holds, \
                 which kube-apiserver serves from its own storage"
            )
        })?;
        let schema_json = entry
            .pointer("/schema/openAPIV3Schema")
            .ok_or_else(|| format!("its version {name} has no openAPIV3Schema"))?;
        let schema = interned::schema(schema_json)
            .map_err(|e| format!("its schema of {name} is not structural: {e}"))?;
        versions.push(CustomVersion { version, schema });
        infos.push(VersionInfo {
            version: version.into(),
            storage: flag(entry, "storage"),
            deprecated: flag(entry, "deprecated"),
            deprecation_warning: text(entry, "deprecationWarning").map(str::to_owned),
            status_subresource: entry.pointer("/subresources/status").is_some(),
            scale: entry
                .pointer("/subresources/scale")
                .and_then(ScalePaths::from_crd),
            printer_columns: printer_columns(entry),
            selectable_fields: selectable_fields(entry),
        });
    }
    let storage = infos
        .iter()
        .find(|v| v.storage)
        .and_then(|v| v.version.api())
        .ok_or("its CRD marks no served version as the storage version")?;
    let strategy = spec
        .pointer("/conversion/strategy")
        .and_then(Value::as_str)
        .unwrap_or("None");
    if versions.len() > 1 && !matches!(strategy, "None" | "Webhook") {
        return Err(format!(
            "its versions convert through a {strategy} conversion, which kube does not know"
        ));
    }
    // Oldest first, as the registry lists versions.
    versions.sort_by_key(|v| v.version);
    infos.sort_by_key(|v| v.version.api());
    let names = spec.get("names").unwrap_or(&Value::Null);
    let categories: Vec<String> = names
        .get("categories")
        .and_then(Value::as_array)
        .map(|c| {
            c.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let list_kind = text(names, "listKind")
        .map(str::to_owned)
        .unwrap_or_else(|| format!("{}List", kind.kind));
    Ok(Definition {
        descriptor: ResourceDescriptor {
            group: crate::api::GROUP,
            kind: interned::name(&kind.kind),
            list_kind: interned::name(&list_kind),
            plural: interned::name(&kind.plural),
            singular: interned::name(&kind.singular),
            short_names: interned::names(&kind.short_names),
            categories: interned::names(&categories),
            namespaced: kind.namespaced,
            versions: infos,
        },
        versions,
        storage,
    })
}

/// A version's `selectableFields` as field selectors name them (`.spec.color` → `spec.color`).
fn selectable_fields(version: &Value) -> Vec<String> {
    version
        .get("selectableFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|field| text(field, "jsonPath"))
        .map(|path| path.trim_start_matches('.').to_owned())
        .collect()
}

fn printer_columns(version: &Value) -> Vec<PrinterColumn> {
    let Some(columns) = version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    columns
        .iter()
        .map(|c| PrinterColumn {
            name: text(c, "name").unwrap_or_default().to_owned(),
            column_type: text(c, "type").unwrap_or("string").to_owned(),
            format: text(c, "format").unwrap_or_default().to_owned(),
            description: text(c, "description").unwrap_or_default().to_owned(),
            priority: c
                .get("priority")
                .and_then(Value::as_i64)
                .and_then(|p| i32::try_from(p).ok())
                .unwrap_or(0),
            json_path: text(c, "jsonPath").unwrap_or_default().to_owned(),
        })
        .collect()
}

impl Definition {
    /// The schema of a served version.
    pub fn schema(&self, version: Version) -> Option<&'static Structural> {
        self.versions
            .iter()
            .find(|v| v.version == version)
            .map(|v| v.schema)
    }

    /// Whether objects are read in `version` as stored (no `apiVersion` rewrite).
    pub fn is_storage(&self, version: GroupVersion) -> bool {
        version.api() == Some(self.storage)
    }
}
