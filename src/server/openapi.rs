//! The OpenAPI endpoints, with kube-openapi's caching semantics:
//!
//! - `/openapi/v3`: the index of the served group-versions, each with a `serverRelativeURL`
//!   carrying the document's hash;
//! - `/openapi/v3/apis/<group>/<version>`: the document, our kinds and the co-tenant kinds
//!   served there; `?hash=` equal to its hash makes it immutable for a year;
//! - `/openapi/v2`: one Swagger 2.0 document of every served version (what the aggregator
//!   merges into kube-apiserver's), in JSON or protobuf.
//!
//! A v3 document is rendered again when the co-tenant kinds change (`server::live`); the
//! bytes (and so the hashes) depend only on the binary and those kinds' CRDs, so every
//! replica answers identically. A request with another hash gets the current document, not
//! kube-openapi's 301: kube-aggregator keeps one group-version's v3 index entry and handler
//! for each APIService that serves it, our APIService and, for a co-tenant's CRD, its own
//! apiextensions, picks one of each at random per request, and refuses a backend's redirect;
//! so a request proxied here may carry the CRDs' hash (docs/api.md). v3 is served as JSON
//! only (kubectl asks for JSON); v2 also as gnostic protobuf, which kubectl ≤ 1.28 requires
//! (`openapi_proto`). v2 holds our kinds only: kube-apiserver publishes the CRDs' in its own
//! and the aggregator merges the two.

use std::collections::BTreeMap;

use std::sync::Arc;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::api::openapi::CustomKind;
use crate::api::openapi::paths::PathKind;
use crate::api::{GROUP, Version, openapi as documents};
use crate::registry::cotenant::{CoTenantKind, CoTenantSet, CoTenants};

use super::error::ApiError;
use super::headers::{etag_value, if_none_match, sha512_hex};
use super::live::Live;
use super::negotiation::parse_accept;
use super::openapi_proto;

/// Rendered bytes and their hash.
#[derive(Debug, Clone)]
struct Rendered {
    bytes: Vec<u8>,
    hash: String,
}

impl Rendered {
    fn new(value: &Value) -> Self {
        Self::from_bytes(value.to_string().into_bytes())
    }

    fn from_bytes(bytes: Vec<u8>) -> Self {
        // kube-openapi's ETag: upper-case hex SHA-512 of the document.
        let hash = sha512_hex(&bytes).to_ascii_uppercase();
        Self { bytes, hash }
    }
}

/// The v3 documents of the served versions and their index.
struct V3Documents {
    documents: BTreeMap<Version, Rendered>,
    index: Rendered,
}

impl V3Documents {
    fn new(versions: &[Version], cotenants: &CoTenantSet) -> Self {
        let documents: BTreeMap<Version, Rendered> = versions
            .iter()
            .map(|&v| {
                let served = served_in(cotenants, v);
                let custom: Vec<CustomKind> = served
                    .iter()
                    .filter_map(|(kind, names)| {
                        Some(CustomKind {
                            names: *names,
                            schema: version_schema(kind, v)?,
                        })
                    })
                    .collect();
                (v, Rendered::new(&documents::v3_json_with(v, &custom)))
            })
            .collect();
        let paths: Map<String, Value> = documents
            .iter()
            .map(|(v, doc)| {
                (
                    v3_path(*v),
                    json!({"serverRelativeURL": format!("/openapi/v3/{}?hash={}", v3_path(*v), doc.hash)}),
                )
            })
            .collect();
        Self {
            documents,
            index: Rendered::new(&json!({ "paths": paths })),
        }
    }
}

/// The co-tenant kinds served in `version`, with the names their paths take.
fn served_in(cotenants: &CoTenantSet, version: Version) -> Vec<(&CoTenantKind, PathKind<'_>)> {
    cotenants
        .in_version(version.as_str())
        .filter_map(|kind| {
            let d = kind.served_descriptor()?;
            let info = d
                .versions
                .iter()
                .find(|i| i.version.api() == Some(version))?;
            let names = PathKind {
                kind: d.kind,
                list_kind: d.list_kind,
                plural: d.plural,
                namespaced: d.namespaced,
                status: info.status_subresource,
            };
            Some((kind, names))
        })
        .collect()
}

/// The `openAPIV3Schema` a co-tenant's CRD gives `version`.
fn version_schema(kind: &CoTenantKind, version: Version) -> Option<&Value> {
    kind.spec
        .get("versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(version.as_str()))?
        .get("schema")?
        .get("openAPIV3Schema")
}

/// The OpenAPI documents of the served versions.
pub struct OpenApi {
    v3: Live<V3Documents>,
    v2: Rendered,
    /// The same Swagger document as gnostic protobuf (kubectl ≤ 1.28).
    v2_proto: Rendered,
}

fn v3_path(version: Version) -> String {
    format!("apis/{GROUP}/{version}")
}

impl OpenApi {
    /// Renders the documents of `versions`, with the co-tenant kinds served in them.
    pub fn new(versions: &[Version], cotenants: Option<Arc<CoTenants>>) -> Self {
        let own = versions.to_vec();
        let v3 = Live::new(cotenants, move |set| V3Documents::new(&own, set));
        let v2 = merged_v2(versions);
        Self {
            v3,
            v2_proto: Rendered::from_bytes(openapi_proto::encode(&v2)),
            v2: Rendered::new(&v2),
        }
    }

    /// `GET /openapi/v3`.
    pub fn v3_index(&self, headers: &HeaderMap) -> Response {
        json_only(headers, "application/json").map_or_else(IntoResponse::into_response, |()| {
            send(headers, &self.v3.current().index, None)
        })
    }

    /// `GET /openapi/v3/apis/<group>/<version>[?hash=…]`; `None` when not served.
    pub fn v3_document(
        &self,
        group: &str,
        version: &str,
        query: &[(String, String)],
        headers: &HeaderMap,
    ) -> Option<Response> {
        if group != GROUP {
            return None;
        }
        let version = Version::from_name(version)?;
        let documents = self.v3.current();
        let document = documents.documents.get(&version)?;
        if let Err(e) = json_only(headers, "application/json") {
            return Some(e.into_response());
        }
        let hash = query.iter().find(|(k, _)| k == "hash").map(|(_, v)| v);
        // Only the document a hash names may be cached as immutable under it.
        let immutable = hash.is_some_and(|hash| *hash == document.hash);
        Some(send(headers, document, immutable.then(immutable_headers)))
    }

    /// `GET /openapi/v2`: JSON, or protobuf when the client asks for it first.
    pub fn v2(&self, headers: &HeaderMap) -> Response {
        let accept = headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let protobuf = parse_accept(accept).iter().find_map(|r| {
            match (r.main_type.as_str(), r.subtype.as_str()) {
                ("application", sub)
                    if format!("application/{sub}") == openapi_proto::MEDIA_TYPE =>
                {
                    Some(true)
                }
                ("*", "*") | ("application", "*") | ("application", "json") => Some(false),
                _ => None,
            }
        });
        match protobuf {
            Some(true) => {
                let mut response = send(headers, &self.v2_proto, None);
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(openapi_proto::CONTENT_TYPE),
                );
                response
            }
            Some(false) => send(headers, &self.v2, None),
            None if accept.trim().is_empty() => send(headers, &self.v2, None),
            None => ApiError::not_acceptable(&["application/json", openapi_proto::MEDIA_TYPE])
                .into_response(),
        }
    }
}

/// `Cache-Control: public, immutable` and an `Expires` a year ahead, for hashed URLs.
fn immutable_headers() -> [(header::HeaderName, HeaderValue); 2] {
    let expires = (jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24 * 365))
        .strftime("%a, %d %b %Y %H:%M:%S GMT")
        .to_string();
    [
        (
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, immutable"),
        ),
        (
            header::EXPIRES,
            HeaderValue::from_str(&expires).unwrap_or_else(|_| HeaderValue::from_static("0")),
        ),
    ]
}

/// Whether the client accepts JSON (no `Accept`, `*/*`, `application/*`, `application/json`).
fn json_only(headers: &HeaderMap, media_type: &'static str) -> Result<(), ApiError> {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .trim();
    if accept.is_empty() {
        return Ok(());
    }
    let ok = parse_accept(accept).iter().any(|r| {
        matches!(
            (r.main_type.as_str(), r.subtype.as_str()),
            ("*", "*") | ("application", "*") | ("application", "json")
        )
    });
    if ok {
        Ok(())
    } else {
        Err(ApiError::not_acceptable(&[media_type]))
    }
}

fn send(
    headers: &HeaderMap,
    document: &Rendered,
    extra: Option<[(header::HeaderName, HeaderValue); 2]>,
) -> Response {
    let mut response = if if_none_match(headers, &document.hash) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut response = (StatusCode::OK, document.bytes.clone()).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    };
    let out = response.headers_mut();
    out.insert(header::ETAG, etag_value(&document.hash));
    out.insert(header::VARY, HeaderValue::from_static("Accept"));
    for (name, value) in extra.into_iter().flatten() {
        out.insert(name, value);
    }
    response
}

/// One Swagger 2.0 document with the paths and definitions of every version.
fn merged_v2(versions: &[Version]) -> Value {
    let mut paths = Map::new();
    let mut definitions = Map::new();
    for &version in versions {
        let document = documents::v2_document(version);
        if let Some(Value::Object(p)) = document.get("paths") {
            paths.extend(p.clone());
        }
        if let Some(Value::Object(d)) = document.get("definitions") {
            definitions.extend(d.clone());
        }
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "capmox-apiserver", "version": env!("CARGO_PKG_VERSION")},
        "paths": paths,
        "definitions": definitions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_deterministic() {
        let a = OpenApi::new(&Version::ALL, None);
        let b = OpenApi::new(&Version::ALL, None);
        let (a3, b3) = (a.v3.current(), b.v3.current());
        assert_eq!(a3.index.bytes, b3.index.bytes);
        assert_eq!(a.v2.hash, b.v2.hash);
        let index: Value = serde_json::from_slice(&a3.index.bytes).expect("json");
        let url =
            index["paths"]["apis/infrastructure.cluster.x-k8s.io/v1alpha2"]["serverRelativeURL"]
                .as_str()
                .expect("url");
        assert!(
            url.starts_with("/openapi/v3/apis/infrastructure.cluster.x-k8s.io/v1alpha2?hash="),
            "{url}"
        );
        let v1alpha2 = &a3.documents[&Version::V1alpha2];
        assert!(url.ends_with(&v1alpha2.hash));
        assert_eq!(v1alpha2.hash.len(), 128);
    }
}
