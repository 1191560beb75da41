//! The OpenAPI documents of each group-version, in the shape kube-apiserver
//! publishes for CRDs: one schema per kind and list kind, named
//! `io.x-k8s.cluster.infrastructure.<version>.<Kind>`, with the
//! `metav1` definitions they reference. OpenAPI v3 (`/openapi/v3/apis/<g>/<v>`)
//! goes through the `openapiv3` model; Swagger 2.0 (`/openapi/v2`) is plain
//! JSON, as no maintained crate models it. `paths` lists every endpoint of
//! the group-version with the operations and parameters kubectl reads.

mod metav1;
pub mod paths;

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::{GROUP, Kind, PrinterColumn, Version, schema};
use paths::PathKind;

/// Which OpenAPI flavour a schema is written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// OpenAPI 3.0: references under `#/components/schemas/`, `$ref`
    /// siblings expressed with `allOf`.
    V3,
    /// Swagger 2.0: references under `#/definitions/`.
    V2,
}

impl Flavor {
    fn reference(self, name: &str) -> String {
        match self {
            Flavor::V3 => format!("#/components/schemas/{name}"),
            Flavor::V2 => format!("#/definitions/{name}"),
        }
    }

    /// A reference to `name` with a description beside it.
    fn described_ref(self, name: &str, description: &str) -> Value {
        match self {
            Flavor::V3 => json!({
                "allOf": [{ "$ref": self.reference(name) }],
                "description": description,
            }),
            Flavor::V2 => json!({ "$ref": self.reference(name), "description": description }),
        }
    }
}

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
const API_VERSION_DOC: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DOC: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const OBJECT_META_DOC: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const LIST_META_DOC: &str = "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

/// The definition name kube-apiserver gives a kind of this group
/// (reversed group, then version and kind).
pub fn definition_name(version: Version, kind_name: &str) -> String {
    let reversed: Vec<&str> = GROUP.split('.').rev().collect();
    format!("{}.{version}.{kind_name}", reversed.join("."))
}

fn gvk(version: Version, kind_name: &str) -> Value {
    json!([{ "group": GROUP, "version": version.as_str(), "kind": kind_name }])
}

fn type_meta_properties(properties: &mut Map<String, Value>) {
    properties.insert(
        "apiVersion".into(),
        json!({ "description": API_VERSION_DOC, "type": "string" }),
    );
    properties.insert(
        "kind".into(),
        json!({ "description": KIND_DOC, "type": "string" }),
    );
}

/// The published schema of a kind: its structural schema with type meta,
/// a reference to ObjectMeta and the GVK extension.
pub fn kind_schema(version: Version, kind: Kind, flavor: Flavor) -> Value {
    published(
        schema::object_schema(version, kind).clone(),
        version,
        kind.as_str(),
        flavor,
    )
}

/// A kind's schema as kube-apiserver publishes a CRD's: type meta, a reference to ObjectMeta
/// and the GVK extension added to what the schema declares.
fn published(mut schema: Value, version: Version, kind_name: &str, flavor: Flavor) -> Value {
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        type_meta_properties(properties);
        properties.insert(
            "metadata".into(),
            flavor.described_ref(OBJECT_META, OBJECT_META_DOC),
        );
    }
    if let Value::Object(node) = &mut schema {
        node.insert(
            "x-kubernetes-group-version-kind".into(),
            gvk(version, kind_name),
        );
    }
    schema
}

/// The published schema of a kind's list.
pub fn list_schema(version: Version, kind: PathKind, flavor: Flavor) -> Value {
    let mut properties = Map::new();
    type_meta_properties(&mut properties);
    properties.insert(
        "items".into(),
        json!({
            "description": format!(
                "List of {}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md",
                kind.plural
            ),
            "type": "array",
            "items": { "$ref": flavor.reference(&definition_name(version, kind.kind)) },
        }),
    );
    properties.insert(
        "metadata".into(),
        flavor.described_ref(LIST_META, LIST_META_DOC),
    );
    json!({
        "description": format!("{} is a list of {}", kind.list_kind, kind.kind),
        "type": "object",
        "required": ["items"],
        "properties": properties,
        "x-kubernetes-group-version-kind": gvk(version, kind.list_kind),
    })
}

/// All schemas of a group-version document, by definition name.
fn definitions(version: Version, flavor: Flavor) -> Map<String, Value> {
    let mut definitions = metav1::definitions(flavor);
    for kind in Kind::served_in(version) {
        definitions.insert(
            definition_name(version, kind.as_str()),
            kind_schema(version, kind, flavor),
        );
        definitions.insert(
            definition_name(version, kind.descriptor().list_kind),
            list_schema(version, PathKind::of(kind, version), flavor),
        );
    }
    definitions
}

/// A kind defined by a CRD in one of our versions (a co-tenant), as its document shows it.
#[derive(Clone, Debug)]
pub struct CustomKind<'a> {
    pub names: PathKind<'a>,
    /// The version's `openAPIV3Schema`.
    pub schema: &'a Value,
}

fn info(version: Version) -> Value {
    json!({ "title": format!("{GROUP}/{version}"), "version": env!("CARGO_PKG_VERSION") })
}

/// The OpenAPI v3 document of a group-version as built, before it goes
/// through the `openapiv3` model.
pub fn v3_json(version: Version) -> Value {
    v3_json_with(version, &[])
}

/// The OpenAPI v3 document of a group-version with CRD kinds served beside ours, each
/// published as kube-apiserver publishes a CRD's.
pub fn v3_json_with(version: Version, custom: &[CustomKind]) -> Value {
    let flavor = Flavor::V3;
    let mut paths = paths::paths(version, flavor);
    let mut schemas = definitions(version, flavor);
    for kind in custom {
        let names = kind.names;
        paths::add_paths(&mut paths, version, flavor, names);
        schemas.insert(
            definition_name(version, names.kind),
            published(kind.schema.clone(), version, names.kind, flavor),
        );
        schemas.insert(
            definition_name(version, names.list_kind),
            list_schema(version, names, flavor),
        );
    }
    json!({
        "openapi": "3.0.0",
        "info": info(version),
        "paths": paths,
        "components": { "schemas": schemas },
    })
}

/// The OpenAPI v3 document of a group-version in the `openapiv3` model.
pub fn v3_document(version: Version) -> Result<openapiv3::OpenAPI, serde_json::Error> {
    serde_json::from_value(v3_json(version))
}

/// The Swagger 2.0 document of a group-version.
pub fn v2_document(version: Version) -> Value {
    json!({
        "swagger": "2.0",
        "info": info(version),
        "paths": paths::paths(version, Flavor::V2),
        "definitions": definitions(version, Flavor::V2),
    })
}

/// The printer columns of every kind per version, in the CRD form
/// (`additionalPrinterColumns`).
pub fn printer_columns() -> Value {
    let column = |c: &PrinterColumn| {
        json!({
            "name": c.name,
            "type": c.type_,
            "jsonPath": c.json_path,
            "description": c.description,
            "priority": c.priority,
        })
    };
    let per_version = |version: Version| -> Map<String, Value> {
        Kind::served_in(version)
            .map(|kind| {
                let columns = kind.descriptor().version(version).printer_columns;
                (
                    kind.as_str().to_owned(),
                    Value::Array(columns.iter().map(column).collect()),
                )
            })
            .collect()
    };
    Value::Object(
        Version::ALL
            .into_iter()
            .map(|v| (v.as_str().to_owned(), Value::Object(per_version(v))))
            .collect(),
    )
}

/// One generated file: its path below the output directory and contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedFile {
    /// Relative path, e.g. `v3/infrastructure.cluster.x-k8s.io_v1alpha2.json`.
    pub path: PathBuf,
    /// Pretty-printed JSON with a final newline.
    pub contents: String,
}

fn pretty(value: &impl serde::Serialize) -> Result<String, serde_json::Error> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    Ok(text)
}

/// Every document the `openapi` command writes.
pub fn generated_files() -> Result<Vec<GeneratedFile>, serde_json::Error> {
    let mut files = Vec::new();
    for version in Version::ALL {
        let name = format!("{GROUP}_{version}.json");
        files.push(GeneratedFile {
            path: Path::new("v3").join(&name),
            contents: pretty(&v3_document(version)?)?,
        });
        files.push(GeneratedFile {
            path: Path::new("v2").join(&name),
            contents: pretty(&v2_document(version))?,
        });
    }
    files.push(GeneratedFile {
        path: PathBuf::from("printer-columns.json"),
        contents: pretty(&printer_columns())?,
    });
    Ok(files)
}

/// Why the documents could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// A document could not be serialized.
    #[error("cannot render the OpenAPI documents: {0}")]
    Render(#[from] serde_json::Error),
    /// A file could not be written.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// Writes every document below `dir` and returns the paths written.
pub fn write_all(dir: &Path) -> Result<Vec<PathBuf>, WriteError> {
    let mut written = Vec::new();
    for file in generated_files()? {
        let path = dir.join(&file.path);
        let io = |source| WriteError::Io {
            path: path.clone(),
            source,
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        std::fs::write(&path, &file.contents).map_err(io)?;
        written.push(path);
    }
    Ok(written)
}
