//! `meta.k8s.io` Table and PartialObjectMetadata(List) conversions, matching the CRD table
//! convertor (apiextensions `tableconvertor`) and the apiserver's `asTable` /
//! `asPartialObjectMetadata(List)`.

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::error::RegistryError;
use super::field_error::{FieldError, FieldPath};
use super::gofmt;
use super::jsonpath::JsonPath;
use super::meta::{ListMeta, MetaVersion};

/// ObjectMeta's swagger text for `name` (the implicit Name column's description).
const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating \
    resources, although some resources may allow a client to request the generation of an \
    appropriate name automatically. Name is primarily intended for creation idempotence and \
    configuration definition. Cannot be updated. More info: \
    https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

/// ObjectMeta's swagger text for `creationTimestamp` (the default Age column's description).
const CREATION_TIMESTAMP_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the \
    server time when this object was created. It is not guaranteed to be set in happens-before \
    order across separate operations. Clients may not set this value. It is represented in \
    RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: \
    https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// A printer column as a CRD declares it (`additionalPrinterColumns`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrinterColumn {
    pub name: String,
    /// `string`, `integer`, `number`, `boolean` or `date`.
    pub column_type: String,
    pub format: String,
    pub description: String,
    pub priority: i32,
    pub json_path: String,
}

impl PrinterColumn {
    /// The column kube serves when a version declares none.
    pub fn default_age() -> Self {
        Self {
            name: "Age".to_owned(),
            column_type: "date".to_owned(),
            format: String::new(),
            description: CREATION_TIMESTAMP_DESCRIPTION.to_owned(),
            priority: 0,
            json_path: ".metadata.creationTimestamp".to_owned(),
        }
    }
}

/// `metav1.TableColumnDefinition` (all fields always present, as kube serialises them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TableColumnDefinition {
    pub name: String,
    #[serde(rename = "type")]
    pub column_type: String,
    pub format: String,
    pub description: String,
    pub priority: i32,
}

/// `includeObject`: what each row carries in `object`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    #[default]
    Metadata,
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query parameter with kube's validation message.
    pub fn from_query(value: Option<&str>) -> Result<Self, RegistryError> {
        match value.unwrap_or("") {
            "" | "Metadata" => Ok(Self::Metadata),
            "None" => Ok(Self::None),
            "Object" => Ok(Self::Object),
            other => Err(RegistryError::BadRequest(format!(
                "Unable to convert to Table as requested: {}",
                FieldError::invalid(
                    &FieldPath::new("includeObject"),
                    other,
                    "must be 'Metadata', 'Object', 'None', or empty"
                )
            ))),
        }
    }
}

/// Options of one Table rendering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableOptions {
    pub include_object: IncludeObject,
    /// Omit `columnDefinitions` (every watch event after the first).
    pub no_headers: bool,
    pub meta_version: MetaVersion,
}

impl Default for TableOptions {
    fn default() -> Self {
        Self {
            include_object: IncludeObject::Metadata,
            no_headers: false,
            meta_version: MetaVersion::V1,
        }
    }
}

#[derive(Debug, Clone)]
struct Column {
    path: JsonPath,
    column_type: String,
}

/// Renders objects of one kind and version as Tables.
#[derive(Debug, Clone)]
pub struct TableConvertor {
    headers: Vec<TableColumnDefinition>,
    columns: Vec<Column>,
}

/// A printer column whose JSONPath does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unrecognized column definition {}", gofmt::quote(.0))]
pub struct ColumnDefinitionError(pub String);

impl TableConvertor {
    /// Builds the convertor: the implicit Name column, then the declared columns (or the
    /// default Age column when none are declared).
    pub fn new(columns: &[PrinterColumn]) -> Result<Self, ColumnDefinitionError> {
        let defaulted;
        let columns = if columns.is_empty() {
            defaulted = [PrinterColumn::default_age()];
            &defaulted[..]
        } else {
            columns
        };
        let mut headers = vec![TableColumnDefinition {
            name: "Name".to_owned(),
            column_type: "string".to_owned(),
            format: "name".to_owned(),
            description: NAME_DESCRIPTION.to_owned(),
            priority: 0,
        }];
        let mut parsed = Vec::with_capacity(columns.len());
        for col in columns {
            let path = JsonPath::parse(&col.json_path)
                .map_err(|_| ColumnDefinitionError(col.json_path.clone()))?;
            let description = if col.description.is_empty() {
                format!(
                    "Custom resource definition column (in JSONPath format): {}",
                    col.json_path
                )
            } else {
                col.description.clone()
            };
            headers.push(TableColumnDefinition {
                name: col.name.clone(),
                column_type: col.column_type.clone(),
                format: col.format.clone(),
                description,
                priority: col.priority,
            });
            parsed.push(Column {
                path,
                column_type: col.column_type.clone(),
            });
        }
        Ok(Self {
            headers,
            columns: parsed,
        })
    }

    pub fn column_definitions(&self) -> &[TableColumnDefinition] {
        &self.headers
    }

    /// The cells of one row: the name, then one cell per column.
    pub fn cells(&self, object: &Value, now: Timestamp) -> Vec<Value> {
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mut cells = Vec::with_capacity(1 + self.columns.len());
        cells.push(Value::String(name.to_owned()));
        for column in &self.columns {
            let cell = column.path.first(object).map_or(Value::Null, |v| {
                cell_for_value(&column.column_type, &v, now)
            });
            cells.push(cell);
        }
        cells
    }

    /// A Table for a single object (GET, watch events).
    pub fn object_table(&self, object: &Value, options: &TableOptions, now: Timestamp) -> Value {
        let meta = ListMeta {
            resource_version: resource_version(object),
            ..ListMeta::default()
        };
        self.table(&meta, std::slice::from_ref(object), options, now)
    }

    /// A Table for a list page.
    pub fn list_table(
        &self,
        list_meta: &ListMeta,
        items: &[Value],
        options: &TableOptions,
        now: Timestamp,
    ) -> Value {
        self.table(list_meta, items, options, now)
    }

    fn table(
        &self,
        meta: &ListMeta,
        items: &[Value],
        options: &TableOptions,
        now: Timestamp,
    ) -> Value {
        let rows: Vec<Value> = items
            .iter()
            .map(|item| {
                let object = match options.include_object {
                    IncludeObject::None => Value::Null,
                    IncludeObject::Metadata => partial_object_metadata(item, options.meta_version),
                    IncludeObject::Object => item.clone(),
                };
                json!({"cells": self.cells(item, now), "object": object})
            })
            .collect();
        // kube sends `null` without headers; an empty list is friendlier and equally valid.
        let headers = if options.no_headers {
            Vec::new()
        } else {
            self.headers.clone()
        };
        json!({
            "kind": "Table",
            "apiVersion": options.meta_version.api_version(),
            "metadata": meta,
            "columnDefinitions": headers,
            "rows": rows,
        })
    }
}

fn resource_version(object: &Value) -> String {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The cell for a column type, as `cellForJSONValue` and the string printer build it.
/// Present-but-null values give an empty cell (client-go would print `<no value>`).
pub fn cell_for_value(column_type: &str, value: &Value, now: Timestamp) -> Value {
    match (column_type, value) {
        (_, Value::Null) => Value::Null,
        ("string", v) => Value::String(print_value(v)),
        ("integer", Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .map_or(Value::Null, Value::from),
        ("number", Value::Number(n)) => n.as_f64().map_or(Value::Null, Value::from),
        ("boolean", Value::Bool(b)) => Value::Bool(*b),
        ("date", Value::String(s)) => Value::String(age_of(s, now)),
        _ => Value::Null,
    }
}

/// client-go's `PrintResults` for one value: containers as compact JSON, scalars as text.
pub fn print_value(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.to_string(),
            (None, Some(u)) => u.to_string(),
            _ => n.as_f64().map(gofmt::format_float).unwrap_or_default(),
        },
        Value::Null => "null".to_owned(),
        container => gofmt::go_json_escape(&container.to_string()),
    }
}

/// The age shown for an RFC 3339 timestamp: `<unknown>` when empty, `<invalid>` when
/// unparsable, else kube's human duration since then.
pub fn age_of(timestamp: &str, now: Timestamp) -> String {
    if timestamp.is_empty() || timestamp == "null" {
        return "<unknown>".to_owned();
    }
    match timestamp.parse::<Timestamp>() {
        Ok(t) => human_duration(now.duration_since(t)),
        Err(_) => "<invalid>".to_owned(),
    }
}

/// apimachinery `duration.HumanDuration`.
pub fn human_duration(d: SignedDuration) -> String {
    let seconds = d.as_secs();
    if seconds < -1 {
        return "<invalid>".to_owned();
    }
    if seconds < 0 {
        return "0s".to_owned();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// An object as `PartialObjectMetadata` (its metadata only).
pub fn partial_object_metadata(object: &Value, meta_version: MetaVersion) -> Value {
    let metadata = object
        .get("metadata")
        .cloned()
        .unwrap_or_else(|| Value::Object(Map::new()));
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": meta_version.api_version(),
        "metadata": metadata,
    })
}

/// A list page as `PartialObjectMetadataList` (`items` is `[]`, never `null`).
pub fn partial_object_metadata_list(
    list_meta: &ListMeta,
    items: &[Value],
    meta_version: MetaVersion,
) -> Value {
    let items: Vec<Value> = items
        .iter()
        .map(|item| partial_object_metadata(item, meta_version))
        .collect();
    json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": meta_version.api_version(),
        "metadata": list_meta,
        "items": items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2026-01-10T12:00:00Z".parse().expect("timestamp")
    }

    fn machine(name: &str, created: &str) -> Value {
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
            "kind": "ProxmoxMachine",
            "metadata": {
                "name": name, "namespace": "default", "resourceVersion": "42",
                "creationTimestamp": created, "labels": {"cluster.x-k8s.io/cluster-name": "c1"},
                "ownerReferences": [{"kind": "Machine", "name": "machine-1"}]
            },
            "spec": {"providerID": "proxmox://abc", "numSockets": 2, "memoryMiB": 2048.0},
            "status": {"ready": true, "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}
        })
    }

    fn columns() -> Vec<PrinterColumn> {
        let col =
            |name: &str, ty: &str, path: &str, priority: i32, description: &str| PrinterColumn {
                name: name.into(),
                column_type: ty.into(),
                format: String::new(),
                description: description.into(),
                priority,
                json_path: path.into(),
            };
        vec![
            col(
                "Cluster",
                "string",
                ".metadata.labels['cluster.x-k8s.io/cluster-name']",
                0,
                "Cluster",
            ),
            col(
                "Ready",
                "string",
                ".status.ready",
                0,
                "Machine ready status",
            ),
            col("Node", "string", ".status.missing", 0, ""),
            col("Provider_ID", "string", ".spec.providerID", 0, ""),
            col(
                "Machine",
                "string",
                ".metadata.ownerReferences[?(@.kind==\"Machine\")].name",
                1,
                "",
            ),
            col("Sockets", "integer", ".spec.numSockets", 1, ""),
            col("Memory", "number", ".spec.memoryMiB", 1, ""),
            col("Addresses", "string", ".status.addresses", 1, ""),
            col("Age", "date", ".metadata.creationTimestamp", 0, ""),
        ]
    }

    #[test]
    fn renders_crd_style_table() {
        let conv = TableConvertor::new(&columns()).expect("columns");
        let items = [
            machine("m1", "2026-01-10T11:55:00Z"),
            machine("m2", "2026-01-08T12:00:00Z"),
        ];
        let list_meta = ListMeta {
            resource_version: "77".into(),
            continue_token: "tok".into(),
            remaining_item_count: Some(3),
        };
        let table = conv.list_table(&list_meta, &items, &TableOptions::default(), now());
        assert_eq!(table["kind"], "Table");
        assert_eq!(table["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(
            table["metadata"],
            json!({"resourceVersion": "77", "continue": "tok", "remainingItemCount": 3})
        );
        let defs = table["columnDefinitions"].as_array().expect("defs");
        assert_eq!(defs.len(), 10);
        assert_eq!(
            defs[0],
            json!({"name": "Name", "type": "string", "format": "name", "description": NAME_DESCRIPTION, "priority": 0})
        );
        assert_eq!(
            defs[3]["description"],
            "Custom resource definition column (in JSONPath format): .status.missing"
        );
        assert_eq!(defs[5]["priority"], 1);
        assert_eq!(
            table["rows"][0]["cells"],
            json!([
                "m1",
                "c1",
                "true",
                null,
                "proxmox://abc",
                "machine-1",
                2,
                2048.0,
                "[{\"address\":\"10.0.0.1\",\"type\":\"InternalIP\"}]",
                "5m"
            ])
        );
        assert_eq!(table["rows"][1]["cells"][9], "2d");
        assert_eq!(
            table["rows"][0]["object"],
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": items[0]["metadata"]})
        );
    }

    #[test]
    fn include_object_and_headers() {
        let conv = TableConvertor::new(&[]).expect("default columns");
        assert_eq!(
            conv.column_definitions()
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>(),
            ["Name", "Age"]
        );
        assert_eq!(
            conv.column_definitions()[1].description,
            CREATION_TIMESTAMP_DESCRIPTION
        );
        let obj = machine("m1", "2026-01-10T11:59:30Z");
        let opts = TableOptions {
            include_object: IncludeObject::Object,
            no_headers: true,
            meta_version: MetaVersion::V1Beta1,
        };
        let table = conv.object_table(&obj, &opts, now());
        assert_eq!(table["apiVersion"], "meta.k8s.io/v1beta1");
        assert_eq!(table["metadata"], json!({"resourceVersion": "42"}));
        assert_eq!(table["columnDefinitions"], json!([]));
        assert_eq!(table["rows"][0]["cells"], json!(["m1", "30s"]));
        assert_eq!(table["rows"][0]["object"], obj);
        let none = TableOptions {
            include_object: IncludeObject::None,
            ..TableOptions::default()
        };
        assert_eq!(
            conv.object_table(&obj, &none, now())["rows"][0]["object"],
            Value::Null
        );
    }

    #[test]
    fn include_object_query_parsing() {
        assert_eq!(IncludeObject::from_query(None), Ok(IncludeObject::Metadata));
        assert_eq!(
            IncludeObject::from_query(Some("Object")),
            Ok(IncludeObject::Object)
        );
        assert_eq!(
            IncludeObject::from_query(Some("All"))
                .expect_err("bad")
                .to_string(),
            "Unable to convert to Table as requested: includeObject: Invalid value: \"All\": \
             must be 'Metadata', 'Object', 'None', or empty"
        );
    }

    #[test]
    fn bad_column_path_is_reported() {
        let mut cols = columns();
        cols[0].json_path = ".a[".into();
        assert_eq!(
            TableConvertor::new(&cols)
                .expect_err("bad path")
                .to_string(),
            "unrecognized column definition \".a[\""
        );
    }

    #[test]
    fn cells_by_type() {
        let n = now();
        let cases = [
            ("integer", json!(3.9), json!(3)),
            ("integer", json!("3"), Value::Null),
            ("number", json!(3), json!(3.0)),
            ("boolean", json!(true), json!(true)),
            ("boolean", json!("true"), Value::Null),
            ("string", json!(1.5), json!("1.5")),
            ("string", json!(false), json!("false")),
            (
                "string",
                json!({"b": "<x>", "a": 1}),
                json!("{\"a\":1,\"b\":\"\\u003cx\\u003e\"}"),
            ),
            ("date", json!("nonsense"), json!("<invalid>")),
            ("date", json!(""), json!("<unknown>")),
            ("date", json!(5), Value::Null),
            ("string", Value::Null, Value::Null),
        ];
        for (ty, value, want) in cases {
            assert_eq!(cell_for_value(ty, &value, n), want, "{ty} {value}");
        }
    }

    #[test]
    fn human_durations_match_kube() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (150, "2m30s"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 5 * 60, "3h5m"),
            (8 * 3600, "8h"),
            (47 * 3600, "47h"),
            (48 * 3600, "2d"),
            (50 * 3600, "2d2h"),
            (8 * 24 * 3600, "8d"),
            (2 * 365 * 24 * 3600, "2y"),
            (2 * 365 * 24 * 3600 + 24 * 3600, "2y1d"),
            (9 * 365 * 24 * 3600, "9y"),
        ];
        for (secs, want) in cases {
            assert_eq!(
                human_duration(SignedDuration::from_secs(secs)),
                want,
                "{secs}s"
            );
        }
    }

    #[test]
    fn partial_metadata_list_keeps_list_meta() {
        let items = [machine("m1", "2026-01-10T11:55:00Z")];
        let list_meta = ListMeta {
            resource_version: "9".into(),
            ..ListMeta::default()
        };
        let list = partial_object_metadata_list(&list_meta, &items, MetaVersion::V1);
        assert_eq!(list["kind"], "PartialObjectMetadataList");
        assert_eq!(list["metadata"], json!({"resourceVersion": "9"}));
        assert_eq!(list["items"][0]["metadata"]["name"], "m1");
        let empty = partial_object_metadata_list(&ListMeta::default(), &[], MetaVersion::V1);
        assert_eq!(empty["items"], json!([]));
    }
}
