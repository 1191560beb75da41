//! A co-tenant's CRD read as this registry serves kinds: the descriptor (names, scope,
//! versions, status subresource, printer columns), each version's structural schema, and
//! where its objects live ([`Home`]): in this server's store when every version it is served
//! or stored in is ours, else in kube-apiserver's, which still serves the other versions. A
//! CRD this server cannot serve faithfully is refused with the reason, which the server
//! answers as a 503 for the kind.

use serde_json::Value;

use crate::api::Version;
use crate::api::schema::Structural;

use super::super::cotenant::CoTenantKind;
use super::super::descriptor::{ResourceDescriptor, VersionInfo};
use super::super::scale::ScalePaths;
use super::super::table::PrinterColumn;
use super::interned;

/// One served version of a CRD kind.
#[derive(Debug, Clone, Copy)]
pub struct CustomVersion {
    pub version: Version,
    pub schema: &'static Structural,
}

/// Where a CRD kind's objects live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Home {
    /// In this server's store, at this storage version.
    Here(Version),
    /// In kube-apiserver's storage: the CRD is stored or also served in a version outside
    /// our group-versions, which kube-apiserver serves from its own storage. Requests for our
    /// versions go to it at this version (the storage version when kube serves it).
    Kube(&'static str),
}

/// What a CRD defines, as served here.
#[derive(Debug, Clone)]
pub struct Definition {
    /// The kind in our group-versions only.
    pub descriptor: ResourceDescriptor,
    pub versions: Vec<CustomVersion>,
    pub home: Home,
    /// The CRD's storage version, wherever it lies (discovery's `storageVersionHash`).
    pub storage_version: &'static str,
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
    let storage_version = declared
        .iter()
        .find(|v| flag(v, "storage"))
        .and_then(|v| text(v, "name"))
        .ok_or("its CRD marks no version as the storage version")?;
    let home = home(declared, storage_version)?;
    let mut versions = Vec::new();
    let mut infos = Vec::new();
    // Versions outside ours are kube-apiserver's to serve (then `home` is kube).
    for (entry, version) in declared
        .iter()
        .filter(|v| flag(v, "served"))
        .filter_map(|v| Some((v, Version::from_name(text(v, "name")?)?)))
    {
        let name = version.as_str();
        let schema_json = entry
            .pointer("/schema/openAPIV3Schema")
            .ok_or_else(|| format!("its version {name} has no openAPIV3Schema"))?;
        let schema = interned::schema(schema_json)
            .map_err(|e| format!("its schema of {name} is not structural: {e}"))?;
        versions.push(CustomVersion { version, schema });
        infos.push(VersionInfo {
            version: version.into(),
            storage: home == Home::Here(version),
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
    if let Home::Here(storage) = home
        && !versions.iter().any(|v| v.version == storage)
    {
        return Err("its CRD marks no served version as the storage version".to_owned());
    }
    let strategy = spec
        .pointer("/conversion/strategy")
        .and_then(Value::as_str)
        .unwrap_or("None");
    let converts = versions.len() > 1 || matches!(home, Home::Kube(_));
    if converts && !matches!(strategy, "None" | "Webhook") {
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
        home,
        storage_version: interned::name(storage_version),
    })
}

/// Where the objects of a CRD with `declared` versions live: here when every version it is
/// stored or served in is ours; else kube-apiserver's, reached at the storage version or,
/// when kube does not serve that, at the first version kube serves.
fn home(declared: &[Value], storage: &str) -> Result<Home, String> {
    let served_outside: Vec<&str> = declared
        .iter()
        .filter(|v| flag(v, "served"))
        .filter_map(|v| text(v, "name"))
        .filter(|name| Version::from_name(name).is_none())
        .collect();
    if let Some(version) = Version::from_name(storage).filter(|_| served_outside.is_empty()) {
        return Ok(Home::Here(version));
    }
    let reached = served_outside
        .iter()
        .find(|name| **name == storage)
        .or(served_outside.first())
        .ok_or_else(|| {
            format!(
                "its storage version {storage} lies outside the group-versions this server \
                 holds, and kube-apiserver serves it in no version but ours"
            )
        })?;
    Ok(Home::Kube(interned::name(reached)))
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
}
