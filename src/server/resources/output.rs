//! Response representations of resource endpoints: the object or list itself (JSON or YAML),
//! a `Table` with the version's printer columns, or `PartialObjectMetadata(List)`, as
//! negotiated; warnings as `Warning` headers on every answer, errors included.

use std::sync::Arc;

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use jiff::Timestamp;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::registry::descriptor::GroupVersion;
use crate::registry::meta::{ListMeta, MetaVersion};
use crate::registry::table::{
    IncludeObject, TableConvertor, TableOptions, partial_object_metadata,
    partial_object_metadata_list,
};

use super::super::error::ApiError;
use super::super::headers::add_warnings;
use super::super::list_body::ListBody;
use super::super::negotiation::{Conversion, Encoding, Negotiated};
use super::super::response;

/// How one request's answers are written.
pub struct Output {
    /// The printer columns of the kind in `version`, if it has any.
    pub table: Option<Arc<TableConvertor>>,
    pub version: GroupVersion,
    pub negotiated: Negotiated,
    pub include_object: IncludeObject,
    pub warnings: Vec<String>,
}

impl Output {
    fn table_options(&self, meta_version: MetaVersion, no_headers: bool) -> TableOptions {
        TableOptions {
            include_object: self.include_object,
            no_headers,
            meta_version,
        }
    }

    /// An object in the negotiated representation.
    pub fn transform_object(&self, object: &Value, no_headers: bool) -> Value {
        match self.negotiated.conversion {
            None => object.clone(),
            Some(Conversion::Table(meta)) => match &self.table {
                Some(table) => table.object_table(
                    object,
                    &self.table_options(meta, no_headers),
                    Timestamp::now(),
                ),
                None => object.clone(),
            },
            Some(
                Conversion::PartialObjectMetadata(meta)
                | Conversion::PartialObjectMetadataList(meta),
            ) => partial_object_metadata(object, meta),
        }
    }

    /// A BOOKMARK's object: a Table watch gets an empty table with the revision.
    pub fn transform_bookmark(&self, object: &Value) -> Value {
        match self.negotiated.conversion {
            Some(Conversion::Table(meta)) => json!({
                "kind": "Table",
                "apiVersion": meta.api_version(),
                "metadata": {"resourceVersion": object.pointer("/metadata/resourceVersion")},
                "columnDefinitions": [],
                "rows": [],
            }),
            _ => self.transform_object(object, true),
        }
    }

    /// Answers with one object.
    pub fn object(self, code: StatusCode, object: &Value) -> Response {
        match self.negotiated.conversion {
            None => self.send(code, object),
            Some(conversion) => match conversion.check_target(false) {
                Ok(()) => {
                    let body = self.transform_object(object, false);
                    self.send(code, &body)
                }
                Err(e) => self.error(e),
            },
        }
    }

    /// Whether the answer is plain, compact JSON (no conversion, no YAML, not pretty), which
    /// can be written from serialized objects as they are.
    pub fn is_plain_json(&self) -> bool {
        self.negotiated.conversion.is_none()
            && self.negotiated.encoding == Encoding::Json
            && !self.negotiated.pretty
    }

    /// Answers 200 with a serialized object (see `is_plain_json`).
    pub fn json_object(self, object: &RawValue) -> Response {
        let size_hint = object.get().len();
        self.send_sized(StatusCode::OK, &object, size_hint)
    }

    /// Answers with a page of serialized items (see `is_plain_json`), sent in pieces
    /// (`ListBody`).
    pub fn json_list(
        self,
        items: Vec<Arc<RawValue>>,
        meta: &ListMeta,
        list_kind: &str,
    ) -> Response {
        let fields = match serde_json::to_vec(&self.list_fields(meta, list_kind)) {
            Ok(fields) => fields,
            Err(e) => return self.error(ApiError::internal(format!("encoding response: {e}"))),
        };
        let body = Response::new(Body::new(ListBody::new(&fields, items)));
        let response = response::typed(body, &self.negotiated);
        self.warned(response)
    }

    /// Answers with a list page.
    pub fn list(self, items: &[Value], meta: &ListMeta, list_kind: &str) -> Response {
        if let Some(conversion) = self.negotiated.conversion
            && let Err(e) = conversion.check_target(true)
        {
            return self.error(e);
        }
        let body = match self.negotiated.conversion {
            None => {
                // Serialized straight from the items: a large list is never copied.
                let list = List {
                    fields: self.list_fields(meta, list_kind),
                    items,
                };
                return self.send(StatusCode::OK, &list);
            }
            Some(Conversion::Table(meta_version)) => match &self.table {
                Some(table) => table.list_table(
                    meta,
                    items,
                    &self.table_options(meta_version, false),
                    Timestamp::now(),
                ),
                None => json!({"items": items}),
            },
            Some(
                Conversion::PartialObjectMetadataList(meta_version)
                | Conversion::PartialObjectMetadata(meta_version),
            ) => partial_object_metadata_list(meta, items, meta_version),
        };
        self.send(StatusCode::OK, &body)
    }

    /// Answers with a value that is never transformed (a `Status`, a deleted list).
    pub fn raw(self, code: StatusCode, value: &Value) -> Response {
        let negotiated = Negotiated {
            conversion: None,
            ..self.negotiated
        };
        let response = response::object(code, &negotiated, value);
        self.warned(response)
    }

    /// Answers with an error, keeping the warnings.
    pub fn error(self, error: ApiError) -> Response {
        with_warnings(error, &self.warnings)
    }

    fn send(self, code: StatusCode, body: &impl serde::Serialize) -> Response {
        self.send_sized(code, body, 0)
    }

    fn send_sized(
        self,
        code: StatusCode,
        body: &impl serde::Serialize,
        size_hint: usize,
    ) -> Response {
        let response = response::sized_object(code, &self.negotiated, body, size_hint);
        self.warned(response)
    }

    fn list_fields<'a>(&self, metadata: &'a ListMeta, kind: &'a str) -> ListFields<'a> {
        ListFields {
            api_version: self.version.api_version(),
            kind,
            metadata,
        }
    }

    fn warned(&self, mut response: Response) -> Response {
        add_warnings(response.headers_mut(), &self.warnings);
        response
    }
}

/// A `<Kind>List`'s own fields, its items written after them (`ListBody`).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ListFields<'a> {
    api_version: String,
    kind: &'a str,
    metadata: &'a ListMeta,
}

/// A `<Kind>List` borrowing its items.
#[derive(serde::Serialize)]
struct List<'a, T: serde::Serialize> {
    #[serde(flatten)]
    fields: ListFields<'a>,
    items: &'a [T],
}

/// An error response carrying warnings.
pub fn with_warnings(error: ApiError, warnings: &[String]) -> Response {
    let mut response = error.into_response();
    add_warnings(response.headers_mut(), warnings);
    response
}
