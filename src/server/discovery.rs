//! API discovery for the served group, computed from the registry's kinds and the co-tenant
//! kinds other providers define by CRD in our group-versions (listed without verbs, so that
//! the garbage collector and the namespace controller leave them alone while they are not
//! served; rebuilt when those change, `server::live`):
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

use crate::registry::catalog::Catalog;
use crate::registry::cotenant::{CoTenantKind, CoTenantSet, Serving};
use crate::registry::descriptor::{GroupVersion, ResourceDescriptor};

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
/// The verbs of a `status` or `scale` subresource.
pub const STATUS_VERBS: [&str; 3] = ["get", "patch", "update"];
/// The group, version and kind a `scale` subresource answers with.
const SCALE_KIND: [&str; 3] = ["autoscaling", "v1", "Scale"];

/// `base64(sha256("<group>/<storage version>/<Kind>")[..8])`, the same in every version.
pub fn storage_version_hash(descriptor: &ResourceDescriptor) -> String {
    stored_as_hash(descriptor, descriptor.storage_version().version)
}

/// The hash of a kind stored in `storage_version` (which may be a version it is not served
/// in here).
fn stored_as_hash(descriptor: &ResourceDescriptor, storage_version: &str) -> String {
    let text = format!("{}/{storage_version}/{}", descriptor.group, descriptor.kind);
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

/// The discovery documents of one group (the core group `""` included).
struct GroupDocuments {
    name: &'static str,
    /// Served versions, preferred first.
    versions: Vec<GroupVersion>,
    /// `APIGroup` (named groups) or `APIVersions` (core).
    document: Document,
    resource_lists: BTreeMap<&'static str, Document>,
    /// The group's `APIGroupDiscovery` item (before kind/apiVersion are set).
    item: Value,
    aggregated: BTreeMap<(Aggregated, &'static str), Document>,
}

/// Every discovery document of the served groups: `/apis` lists the named groups, `/api`
/// the core group when a kind of it is served (dev's Secret stand-in).
pub struct Discovery {
    groups: Vec<GroupDocuments>,
    core: Option<GroupDocuments>,
    group_list: Document,
    aggregated: BTreeMap<(Aggregated, &'static str), Document>,
}

fn group_version(version: GroupVersion) -> Value {
    json!({"groupVersion": version.api_version(), "version": version.as_str()})
}

/// `APIGroupDiscoveryList` and `APIGroupDiscovery` documents of `items`, per aggregated
/// version; the single-item form only when there is exactly one item.
fn aggregated_documents(items: &[&Value]) -> BTreeMap<(Aggregated, &'static str), Document> {
    let mut aggregated = BTreeMap::new();
    for version in [Aggregated::V2, Aggregated::V2beta1] {
        let api_version = format!("apidiscovery.k8s.io/{}", version.version());
        aggregated.insert(
            (version, "APIGroupDiscoveryList"),
            Document::new(json!({
                "kind": "APIGroupDiscoveryList", "apiVersion": api_version,
                "metadata": {}, "items": items,
            })),
        );
        if let [Value::Object(item)] = items {
            let mut item = item.clone();
            item.insert("kind".into(), json!("APIGroupDiscovery"));
            item.insert("apiVersion".into(), json!(api_version));
            aggregated.insert(
                (version, "APIGroupDiscovery"),
                Document::new(Value::Object(item)),
            );
        }
    }
    aggregated
}

impl GroupDocuments {
    fn new(catalog: &Catalog, cotenants: &CoTenantSet, name: &'static str) -> Self {
        // Co-tenant kinds served from their CRDs or through kube-apiserver are listed as ours
        // are; those not served, without verbs.
        let rests: Vec<Listed> = catalog
            .resources()
            .iter()
            .chain(cotenants.kinds.iter().filter_map(CoTenantKind::served))
            .map(|rest| Listed::new(rest.descriptor(), None))
            .chain(
                cotenants
                    .kinds
                    .iter()
                    .filter_map(CoTenantKind::delegated)
                    .map(|kind| Listed::new(kind.descriptor(), Some(kind.storage_version()))),
            )
            .filter(|r| r.descriptor.group == name)
            .collect();
        let mut versions: Vec<GroupVersion> = Vec::new();
        for rest in &rests {
            for v in &rest.descriptor.versions {
                if !versions.contains(&v.version) {
                    versions.push(v.version);
                }
            }
        }
        versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v.version)));
        let document = if name.is_empty() {
            Document::new(json!({
                "kind": "APIVersions",
                "versions": versions.iter().map(|v| v.as_str()).collect::<Vec<_>>(),
                "serverAddressByClientCIDRs": [],
            }))
        } else {
            Document::new(json!({
                "kind": "APIGroup", "apiVersion": "v1", "name": name,
                "versions": versions.iter().map(|v| group_version(*v)).collect::<Vec<_>>(),
                "preferredVersion": versions.first().map(|v| group_version(*v)),
            }))
        };
        let tenants = |v: GroupVersion| -> Vec<&CoTenantKind> {
            cotenants
                .in_version(v.version)
                .filter(|k| k.group == name && matches!(k.serving, Serving::Unserved(_)))
                .collect()
        };
        let resource_lists = versions
            .iter()
            .map(|&v| {
                (
                    v.version,
                    Document::new(resource_list(&rests, &tenants(v), v)),
                )
            })
            .collect();
        let discovery_versions: Vec<Value> = versions
            .iter()
            .map(|v| {
                json!({
                    "version": v.as_str(),
                    "resources": aggregated_resources(&rests, &tenants(*v), *v),
                    "freshness": "Current",
                })
            })
            .collect();
        let metadata = if name.is_empty() {
            json!({"creationTimestamp": null})
        } else {
            json!({"name": name, "creationTimestamp": null})
        };
        let item = json!({"metadata": metadata, "versions": discovery_versions});
        let aggregated = aggregated_documents(&[&item]);
        Self {
            name,
            versions,
            document,
            resource_lists,
            item,
            aggregated,
        }
    }

    /// The legacy `APIGroup` entry of `/apis`.
    fn list_entry(&self) -> Value {
        let mut entry = self.document.value.clone();
        if let Value::Object(map) = &mut entry {
            map.remove("kind");
            map.remove("apiVersion");
        }
        entry
    }
}

impl Discovery {
    /// The documents for `catalog`'s kinds and the co-tenant kinds of its groups, groups in
    /// the catalog's order.
    pub fn new(catalog: &Catalog, cotenants: &CoTenantSet) -> Self {
        let mut names: Vec<&'static str> = Vec::new();
        for rest in catalog.resources() {
            let group = rest.descriptor().group;
            if !names.contains(&group) {
                names.push(group);
            }
        }
        let core = names
            .iter()
            .any(|n| n.is_empty())
            .then(|| GroupDocuments::new(catalog, cotenants, ""));
        let groups: Vec<GroupDocuments> = names
            .into_iter()
            .filter(|n| !n.is_empty())
            .map(|n| GroupDocuments::new(catalog, cotenants, n))
            .collect();
        let group_list = Document::new(json!({
            "kind": "APIGroupList", "apiVersion": "v1",
            "groups": groups.iter().map(GroupDocuments::list_entry).collect::<Vec<_>>(),
        }));
        let items: Vec<&Value> = groups.iter().map(|g| &g.item).collect();
        let aggregated = aggregated_documents(&items);
        Self {
            groups,
            core,
            group_list,
            aggregated,
        }
    }

    /// The served versions of `group`, preferred first.
    pub fn versions(&self, group: &str) -> Vec<GroupVersion> {
        self.named(group)
            .map(|g| g.versions.clone())
            .unwrap_or_default()
    }

    fn named(&self, group: &str) -> Option<&GroupDocuments> {
        if group.is_empty() {
            return self.core.as_ref();
        }
        self.groups.iter().find(|g| g.name == group)
    }

    /// `GET /apis`.
    pub fn apis(&self, headers: &HeaderMap) -> Response {
        self.negotiated(
            headers,
            &["APIGroupDiscoveryList"],
            &self.aggregated,
            &self.group_list,
        )
    }

    /// `GET /api`: the core group's versions (none unless a core kind is served).
    pub fn core(&self, headers: &HeaderMap) -> Response {
        match &self.core {
            Some(core) => self.negotiated(
                headers,
                &["APIGroupDiscoveryList"],
                &core.aggregated,
                &core.document,
            ),
            None => {
                let empty = Document::new(
                    json!({"kind": "APIVersions", "versions": [], "serverAddressByClientCIDRs": []}),
                );
                self.send(headers, Form::Legacy(Encoding::Json), &empty)
            }
        }
    }

    /// `GET /apis/<group>`; `None` for a group not served.
    pub fn group(&self, group: &str, headers: &HeaderMap) -> Option<Response> {
        let documents = self.groups.iter().find(|g| g.name == group)?;
        Some(self.negotiated(
            headers,
            &["APIGroupDiscovery", "APIGroupDiscoveryList"],
            &documents.aggregated,
            &documents.document,
        ))
    }

    /// `GET /apis/<group>/<version>` (or `/api/<version>` for group `""`); `None` when not
    /// served.
    pub fn resources(&self, group: &str, version: &str, headers: &HeaderMap) -> Option<Response> {
        let document = self.named(group)?.resource_lists.get(version)?;
        Some(self.send(headers, Form::Legacy(Encoding::Json), document))
    }

    fn negotiated(
        &self,
        headers: &HeaderMap,
        kinds: &[&'static str],
        aggregated: &BTreeMap<(Aggregated, &'static str), Document>,
        legacy: &Document,
    ) -> Response {
        let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
        match negotiate(accept, kinds) {
            Ok(Form::Aggregated(version, kind)) => match aggregated.get(&(version, kind)) {
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

/// kube's version priority (`version.CompareKubeAwareVersionStrings`): GA before beta
/// before alpha, higher numbers first; other names last.
fn version_priority(version: &str) -> (u8, u64, u64) {
    let Some(rest) = version.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let Ok(major) = rest[..digits].parse::<u64>() else {
        return (0, 0, 0);
    };
    let (level, minor) = match &rest[digits..] {
        "" => return (3, major, 0),
        tail => match tail
            .strip_prefix("beta")
            .map(|m| (2, m))
            .or_else(|| tail.strip_prefix("alpha").map(|m| (1, m)))
        {
            Some((level, minor)) => (level, minor.parse::<u64>().unwrap_or(0)),
            None => return (0, 0, 0),
        },
    };
    (level, major, minor)
}

/// A kind discovery lists with its verbs.
struct Listed<'a> {
    descriptor: &'a ResourceDescriptor,
    /// Its storage version when not one of the versions it is served in here.
    stored_elsewhere: Option<&'a str>,
}

impl<'a> Listed<'a> {
    fn new(descriptor: &'a ResourceDescriptor, stored_elsewhere: Option<&'a str>) -> Self {
        Self {
            descriptor,
            stored_elsewhere,
        }
    }

    fn storage_version_hash(&self) -> String {
        match self.stored_elsewhere {
            Some(version) => stored_as_hash(self.descriptor, version),
            None => storage_version_hash(self.descriptor),
        }
    }
}

/// The legacy `APIResourceList` of one version: the served kinds, then the co-tenants' that
/// are not served, without verbs.
fn resource_list(rests: &[Listed], cotenants: &[&CoTenantKind], version: GroupVersion) -> Value {
    let mut resources = Vec::new();
    for rest in rests.iter().filter(|r| r.descriptor.serves(version)) {
        let d = rest.descriptor;
        let mut entry = json!({
            "name": d.plural,
            "singularName": d.singular,
            "namespaced": d.namespaced,
            "kind": d.kind,
            "verbs": RESOURCE_VERBS,
            "storageVersionHash": rest.storage_version_hash(),
        });
        if !d.short_names.is_empty() {
            entry["shortNames"] = json!(d.short_names);
        }
        if !d.categories.is_empty() {
            entry["categories"] = json!(d.categories);
        }
        resources.push(entry);
        if d.has_status(version) {
            resources.push(json!({
                "name": format!("{}/status", d.plural),
                "singularName": "",
                "namespaced": d.namespaced,
                "kind": d.kind,
                "verbs": STATUS_VERBS,
            }));
        }
        if d.scale(version).is_some() {
            resources.push(json!({
                "name": format!("{}/scale", d.plural),
                "singularName": "",
                "namespaced": d.namespaced,
                "group": SCALE_KIND[0],
                "version": SCALE_KIND[1],
                "kind": SCALE_KIND[2],
                "verbs": STATUS_VERBS,
            }));
        }
    }
    for kind in cotenants {
        let mut entry = json!({
            "name": kind.plural,
            "singularName": kind.singular,
            "namespaced": kind.namespaced,
            "kind": kind.kind,
            "verbs": [],
        });
        if !kind.short_names.is_empty() {
            entry["shortNames"] = json!(kind.short_names);
        }
        resources.push(entry);
    }
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": version.api_version(),
        "resources": resources,
    })
}

/// The resources of one version in aggregated discovery, co-tenants' without verbs.
fn aggregated_resources(
    rests: &[Listed],
    cotenants: &[&CoTenantKind],
    version: GroupVersion,
) -> Vec<Value> {
    let tenants = cotenants.iter().map(|kind| {
        let mut entry = json!({
            "resource": kind.plural,
            "responseKind": {"group": kind.group, "version": version.as_str(), "kind": kind.kind},
            "scope": if kind.namespaced { "Namespaced" } else { "Cluster" },
            "singularResource": kind.singular,
            "verbs": [],
        });
        if !kind.short_names.is_empty() {
            entry["shortNames"] = json!(kind.short_names);
        }
        entry
    });
    rests
        .iter()
        .filter(|r| r.descriptor.serves(version))
        .map(|rest| {
            let d = rest.descriptor;
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
            let mut subresources = Vec::new();
            if d.has_status(version) {
                subresources.push(json!({
                    "subresource": "status",
                    "responseKind": kind,
                    "verbs": STATUS_VERBS,
                }));
            }
            if d.scale(version).is_some() {
                subresources.push(json!({
                    "subresource": "scale",
                    "responseKind": {
                        "group": SCALE_KIND[0], "version": SCALE_KIND[1], "kind": SCALE_KIND[2],
                    },
                    "verbs": STATUS_VERBS,
                }));
            }
            if !subresources.is_empty() {
                entry["subresources"] = Value::Array(subresources);
            }
            entry
        })
        .chain(tenants)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_version_hash_is_kube_s() {
        // base64(sha256("infrastructure.cluster.x-k8s.io/v1alpha2/ProxmoxMachine")[..8])
        let hash = storage_version_hash(&ResourceDescriptor::from_kind(
            crate::api::Kind::ProxmoxMachine.descriptor(),
        ));
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
    fn versions_are_ordered_as_kube_orders_them() {
        let mut versions = [
            "v1alpha1", "v1beta2", "v1alpha2", "v2", "v1", "v1beta1", "foo",
        ];
        versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        assert_eq!(
            versions,
            [
                "v2", "v1", "v1beta2", "v1beta1", "v1alpha2", "v1alpha1", "foo"
            ]
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
