//! API discovery for the served group, computed once from the registry's kinds:
//! `/apis/<group>/<version>` (APIResourceList, the aggregator's availability check), and
//! `/apis`, `/apis/<group>` both in the legacy form (APIGroupList, APIGroup) and as
//! aggregated discovery (`apidiscovery.k8s.io` v2 and v2beta1), chosen strictly by `Accept`:
//! kubectl 1.27 asks for v2beta1 only and fails on a v2 answer. Bodies are deterministic
//! and carry an ETag; `If-None-Match` gets a 304.

use std::collections::BTreeMap;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde_json::{Value, json};

use crate::api::{KindDescriptor, Version};
use crate::registry::catalog::Catalog;

use super::error::ApiError;
use super::headers::{etag_value, if_none_match, sha512_hex};
use super::negotiation::{self, Capabilities, Encoding, parse_accept};
use super::response;

/// The verbs of a custom resource's main endpoint, in kube's order.
pub const RESOURCE_VERBS: [&str; 8] = [
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "create",
    "update",
    "watch",
];
/// The verbs of a `status` subresource.
pub const STATUS_VERBS: [&str; 3] = ["get", "patch", "update"];

/// `base64(sha256("<group>/<storage version>/<Kind>")[..8])`, the same in every version.
pub fn storage_version_hash(descriptor: &KindDescriptor) -> String {
    let text = format!(
        "{}/{}/{}",
        descriptor.group,
        descriptor.storage_version(),
        descriptor.kind
    );
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(&digest.as_ref()[..8])
}

/// A body ready to send, with its ETag.
#[derive(Debug, Clone)]
struct Document {
    value: Value,
    etag: String,
}

impl Document {
    fn new(value: Value) -> Self {
        let etag = sha512_hex(value.to_string().as_bytes());
        Self { value, etag }
    }
}

/// The aggregated discovery versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Aggregated {
    V2,
    V2beta1,
}

impl Aggregated {
    fn version(self) -> &'static str {
        match self {
            Self::V2 => "v2",
            Self::V2beta1 => "v2beta1",
        }
    }
}

/// What a discovery request was answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Legacy(Encoding),
    /// Aggregated, as the list (`APIGroupDiscoveryList`) or a single group.
    Aggregated(Aggregated, &'static str),
}

/// Picks the form from `Accept`: the first clause asking for aggregated discovery in a
/// version we serve, or for plain JSON/YAML. `as_kinds` are the aggregated kinds this
/// endpoint can produce.
fn negotiate(accept: Option<&str>, as_kinds: &[&'static str]) -> Result<Form, ApiError> {
    let accept = accept.map(str::trim).unwrap_or("");
    if accept.is_empty() {
        return Ok(Form::Legacy(Encoding::Json));
    }
    for range in parse_accept(accept) {
        let param = |name: &str| {
            range
                .params
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        let json_like = matches!(
            (range.main_type.as_str(), range.subtype.as_str()),
            ("application", "json") | ("application", "*") | ("*", "*")
        );
        if param("g").is_some() || param("as").is_some() || param("v").is_some() {
            let version = match param("v") {
                Some("v2") => Aggregated::V2,
                Some("v2beta1") => Aggregated::V2beta1,
                _ => continue,
            };
            let kind = as_kinds.iter().find(|k| Some(**k) == param("as"));
            if json_like
                && param("g") == Some("apidiscovery.k8s.io")
                && let Some(kind) = kind
            {
                return Ok(Form::Aggregated(version, kind));
            }
            continue;
        }
        if let Ok(negotiated) = negotiation::negotiate_output(
            Some(&format!("{}/{}", range.main_type, range.subtype)),
            Capabilities::PLAIN,
        ) {
            return Ok(Form::Legacy(negotiated.encoding));
        }
    }
    Err(ApiError::not_acceptable(&[
        "application/json",
        "application/yaml",
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList",
    ]))
}

/// Every discovery document of the served group.
pub struct Discovery {
    group: String,
    /// Served versions, preferred first.
    versions: Vec<Version>,
    group_list: Document,
    group_document: Document,
    resource_lists: BTreeMap<Version, Document>,
    aggregated: BTreeMap<(Aggregated, &'static str), Document>,
}

fn group_version(group: &str, version: Version) -> Value {
    json!({"groupVersion": format!("{group}/{version}"), "version": version.as_str()})
}

impl Discovery {
    /// The documents for `catalog`'s kinds (one group).
    pub fn new(catalog: &Catalog) -> Self {
        let group = catalog
            .resources()
            .first()
            .map_or(crate::api::GROUP, |r| r.descriptor().group)
            .to_owned();
        // Newest first: v1alpha2 is preferred.
        let mut versions: Vec<Version> = Version::ALL
            .into_iter()
            .filter(|v| catalog.resources().iter().any(|r| r.serves(*v)))
            .collect();
        versions.reverse();
        let api_group = json!({
            "name": group,
            "versions": versions.iter().map(|v| group_version(&group, *v)).collect::<Vec<_>>(),
            "preferredVersion": versions.first().map(|v| group_version(&group, *v)),
        });
        let group_list = Document::new(json!({
            "kind": "APIGroupList", "apiVersion": "v1", "groups": [api_group.clone()],
        }));
        let mut group_doc = api_group;
        if let Value::Object(map) = &mut group_doc {
            map.insert("kind".into(), json!("APIGroup"));
            map.insert("apiVersion".into(), json!("v1"));
        }
        let resource_lists = versions
            .iter()
            .map(|&v| (v, Document::new(resource_list(catalog, &group, v))))
            .collect();
        let discovery_versions: Vec<Value> = versions
            .iter()
            .map(|v| {
                json!({
                    "version": v.as_str(),
                    "resources": aggregated_resources(catalog, *v),
                    "freshness": "Current",
                })
            })
            .collect();
        let mut item = serde_json::Map::new();
        item.insert(
            "metadata".into(),
            json!({"name": group, "creationTimestamp": null}),
        );
        item.insert("versions".into(), Value::Array(discovery_versions));
        let mut aggregated = BTreeMap::new();
        for version in [Aggregated::V2, Aggregated::V2beta1] {
            let api_version = format!("apidiscovery.k8s.io/{}", version.version());
            let mut item = item.clone();
            aggregated.insert(
                (version, "APIGroupDiscoveryList"),
                Document::new(json!({
                    "kind": "APIGroupDiscoveryList", "apiVersion": api_version,
                    "metadata": {}, "items": [Value::Object(item.clone())],
                })),
            );
            item.insert("kind".into(), json!("APIGroupDiscovery"));
            item.insert("apiVersion".into(), json!(api_version));
            aggregated.insert(
                (version, "APIGroupDiscovery"),
                Document::new(Value::Object(item)),
            );
        }
        Self {
            group,
            versions,
            group_list,
            group_document: Document::new(group_doc),
            resource_lists,
            aggregated,
        }
    }

    /// The served group's name.
    pub fn group_name(&self) -> &str {
        &self.group
    }

    /// Served versions, preferred first.
    pub fn versions(&self) -> &[Version] {
        &self.versions
    }

    /// `GET /apis`.
    pub fn apis(&self, headers: &HeaderMap) -> Response {
        self.negotiated(headers, &["APIGroupDiscoveryList"], &self.group_list)
    }

    /// `GET /apis/<group>`; `None` for another group.
    pub fn group(&self, group: &str, headers: &HeaderMap) -> Option<Response> {
        (group == self.group).then(|| {
            self.negotiated(
                headers,
                &["APIGroupDiscovery", "APIGroupDiscoveryList"],
                &self.group_document,
            )
        })
    }

    /// `GET /apis/<group>/<version>`; `None` when not served.
    pub fn resources(&self, group: &str, version: &str, headers: &HeaderMap) -> Option<Response> {
        if group != self.group {
            return None;
        }
        let version = Version::from_name(version)?;
        let document = self.resource_lists.get(&version)?;
        Some(self.send(headers, Form::Legacy(Encoding::Json), document))
    }

    fn negotiated(
        &self,
        headers: &HeaderMap,
        kinds: &[&'static str],
        legacy: &Document,
    ) -> Response {
        let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
        match negotiate(accept, kinds) {
            Ok(Form::Aggregated(version, kind)) => match self.aggregated.get(&(version, kind)) {
                Some(document) => self.send(headers, Form::Aggregated(version, kind), document),
                None => ApiError::internal("missing discovery document").into_response(),
            },
            Ok(form) => self.send(headers, form, legacy),
            Err(e) => e.into_response(),
        }
    }

    fn send(&self, headers: &HeaderMap, form: Form, document: &Document) -> Response {
        let mut response = if if_none_match(headers, &document.etag) {
            StatusCode::NOT_MODIFIED.into_response()
        } else {
            match form {
                Form::Legacy(encoding) => response::object(
                    StatusCode::OK,
                    &negotiation::Negotiated {
                        encoding,
                        ..negotiation::Negotiated::JSON
                    },
                    &document.value,
                ),
                Form::Aggregated(version, kind) => {
                    let mut response = response::object(
                        StatusCode::OK,
                        &negotiation::Negotiated::JSON,
                        &document.value,
                    );
                    if let Ok(ct) = HeaderValue::from_str(&format!(
                        "application/json;g=apidiscovery.k8s.io;v={};as={kind}",
                        version.version()
                    )) {
                        response.headers_mut().insert(header::CONTENT_TYPE, ct);
                    }
                    response
                }
            }
        };
        let out = response.headers_mut();
        out.insert(header::ETAG, etag_value(&document.etag));
        out.insert(header::VARY, HeaderValue::from_static("Accept"));
        if matches!(form, Form::Aggregated(..)) {
            out.insert(header::CACHE_CONTROL, HeaderValue::from_static("public"));
        }
        response
    }
}

/// The legacy `APIResourceList` of one version.
fn resource_list(catalog: &Catalog, group: &str, version: Version) -> Value {
    let mut resources = Vec::new();
    for rest in catalog.resources().iter().filter(|r| r.serves(version)) {
        let d = rest.descriptor();
        let mut entry = json!({
            "name": d.plural,
            "singularName": d.singular,
            "namespaced": d.namespaced,
            "kind": d.kind,
            "verbs": RESOURCE_VERBS,
            "storageVersionHash": storage_version_hash(d),
        });
        if !d.short_names.is_empty() {
            entry["shortNames"] = json!(d.short_names);
        }
        if !d.categories.is_empty() {
            entry["categories"] = json!(d.categories);
        }
        resources.push(entry);
        if rest.has_status(version) {
            resources.push(json!({
                "name": format!("{}/status", d.plural),
                "singularName": "",
                "namespaced": d.namespaced,
                "kind": d.kind,
                "verbs": STATUS_VERBS,
            }));
        }
    }
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": format!("{group}/{version}"),
        "resources": resources,
    })
}

/// The resources of one version in aggregated discovery.
fn aggregated_resources(catalog: &Catalog, version: Version) -> Vec<Value> {
    catalog
        .resources()
        .iter()
        .filter(|r| r.serves(version))
        .map(|rest| {
            let d = rest.descriptor();
            let kind = json!({"group": d.group, "version": version.as_str(), "kind": d.kind});
            let mut entry = json!({
                "resource": d.plural,
                "responseKind": kind,
                "scope": if d.namespaced { "Namespaced" } else { "Cluster" },
                "singularResource": d.singular,
                "verbs": RESOURCE_VERBS,
            });
            if !d.short_names.is_empty() {
                entry["shortNames"] = json!(d.short_names);
            }
            if !d.categories.is_empty() {
                entry["categories"] = json!(d.categories);
            }
            if rest.has_status(version) {
                entry["subresources"] = json!([{
                    "subresource": "status",
                    "responseKind": kind,
                    "verbs": STATUS_VERBS,
                }]);
            }
            entry
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_version_hash_is_kube_s() {
        // base64(sha256("infrastructure.cluster.x-k8s.io/v1alpha2/ProxmoxMachine")[..8])
        let hash = storage_version_hash(crate::api::Kind::ProxmoxMachine.descriptor());
        assert_eq!(hash.len(), 12);
        let digest = ring::digest::digest(
            &ring::digest::SHA256,
            b"infrastructure.cluster.x-k8s.io/v1alpha2/ProxmoxMachine",
        );
        assert_eq!(
            hash,
            base64::engine::general_purpose::STANDARD.encode(&digest.as_ref()[..8])
        );
    }

    #[test]
    fn negotiation_is_strict() {
        const LIST: &[&str] = &["APIGroupDiscoveryList"];
        let v2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(
            negotiate(Some(v2), LIST).expect("v2"),
            Form::Aggregated(Aggregated::V2, "APIGroupDiscoveryList")
        );
        // kubectl 1.27/1.28: v2beta1 only, then plain JSON.
        let beta = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(
            negotiate(Some(beta), LIST).expect("v2beta1"),
            Form::Aggregated(Aggregated::V2beta1, "APIGroupDiscoveryList")
        );
        // An unknown discovery version falls through to the plain clause.
        let future =
            "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList,application/json";
        assert_eq!(
            negotiate(Some(future), LIST).expect("legacy"),
            Form::Legacy(Encoding::Json)
        );
        assert_eq!(
            negotiate(None, LIST).expect("default"),
            Form::Legacy(Encoding::Json)
        );
        assert_eq!(
            negotiate(Some("application/yaml"), LIST).expect("yaml"),
            Form::Legacy(Encoding::Yaml)
        );
        assert!(negotiate(Some("application/vnd.kubernetes.protobuf"), LIST).is_err());
        assert!(
            negotiate(
                Some("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"),
                &["APIGroupDiscovery"]
            )
            .is_err()
        );
    }
}
