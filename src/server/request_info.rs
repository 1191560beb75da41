//! What a request is about, derived from method, path and query exactly as kube-apiserver's
//! `RequestInfoFactory` does: the authorization verb (`list`, `watch`, `deletecollection`, …),
//! group, version, namespace, resource, subresource and name.

use axum::extract::Query;
use axum::http::{Method, Uri};

use crate::registry::field_selector::{FieldSelector, NAME_FIELD};
use crate::registry::validation::is_path_segment_name;

/// The request's attributes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestInfo {
    pub is_resource_request: bool,
    pub path: String,
    /// Lower-case authorization verb: `get`, `list`, `watch`, `create`, `update`, `patch`,
    /// `delete`, `deletecollection`; for non-resource requests the lower-case HTTP method.
    pub verb: String,
    pub api_prefix: String,
    pub api_group: String,
    pub api_version: String,
    pub namespace: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
    pub parts: Vec<String>,
    /// The raw selectors of list/watch/deletecollection requests (for authorization).
    pub label_selector: String,
    pub field_selector: String,
}

/// A path that names a resource request but cannot be interpreted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unable to determine kind and namespace from url, {0}")]
pub struct RequestInfoError(pub String);

/// The decoded query pairs of a URI, in order (undecodable queries read as empty).
pub fn query_pairs(uri: &Uri) -> Vec<(String, String)> {
    Query::<Vec<(String, String)>>::try_from_uri(uri)
        .map(|Query(pairs)| pairs)
        .unwrap_or_default()
}

fn query_value<'a>(query: &'a [(String, String)], key: &str) -> Option<&'a str> {
    query
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

impl RequestInfo {
    /// Interprets a request. `query` holds the decoded query pairs in order.
    pub fn new(
        method: &Method,
        path: &str,
        query: &[(String, String)],
    ) -> Result<Self, RequestInfoError> {
        let mut info = Self {
            path: path.to_owned(),
            verb: method.as_str().to_ascii_lowercase(),
            ..Self::default()
        };
        let trimmed = path.trim_matches('/');
        let mut parts: Vec<&str> = if trimmed.is_empty() {
            Vec::new()
        } else {
            trimmed.split('/').collect()
        };
        if parts.len() < 3 || !matches!(parts[0], "api" | "apis") {
            return Ok(info);
        }
        info.api_prefix = parts[0].to_owned();
        parts.remove(0);
        if info.api_prefix == "apis" {
            if parts.len() < 3 {
                return Ok(info);
            }
            info.api_group = parts.remove(0).to_owned();
        }
        info.is_resource_request = true;
        info.api_version = parts.remove(0).to_owned();

        let via_path_prefix = matches!(parts.first(), Some(&("proxy" | "watch")));
        if via_path_prefix {
            if parts.len() < 2 {
                return Err(RequestInfoError(path.to_owned()));
            }
            info.verb = parts.remove(0).to_owned();
        } else {
            info.verb = match *method {
                Method::POST => "create",
                Method::GET | Method::HEAD => "get",
                Method::PUT => "update",
                Method::PATCH => "patch",
                Method::DELETE => "delete",
                _ => "",
            }
            .to_owned();
        }

        if parts.first() == Some(&"namespaces")
            && let Some(namespace) = parts.get(1)
        {
            info.namespace = (*namespace).to_owned();
            // `namespaces/<ns>/<resource>…` addresses a namespaced resource, while
            // `namespaces/<ns>/status` is a subresource of the namespace itself.
            if parts.len() > 2 && !matches!(parts[2], "status" | "finalize") {
                parts.drain(..2);
            }
        }
        info.parts = parts.iter().map(|p| (*p).to_owned()).collect();
        if parts.len() >= 3 && info.verb != "proxy" {
            info.subresource = parts[2].to_owned();
        }
        if parts.len() >= 2 {
            info.name = parts[1].to_owned();
        }
        if let Some(resource) = parts.first() {
            info.resource = (*resource).to_owned();
        }

        if info.name.is_empty() && info.verb == "get" {
            let watch = query_value(query, "watch")
                .is_some_and(|v| !(v == "0" || v.eq_ignore_ascii_case("false")));
            info.verb = if watch { "watch" } else { "list" }.to_owned();
            let exact_name = query_value(query, "fieldSelector")
                .and_then(|s| FieldSelector::parse(s).ok())
                .and_then(|s| s.requires_exact_match(NAME_FIELD).map(str::to_owned));
            if let Some(name) = exact_name.filter(|n| is_path_segment_name(n).is_empty()) {
                info.name = name;
            }
        }
        if info.name.is_empty() && info.verb == "delete" {
            info.verb = "deletecollection".to_owned();
        }
        if !via_path_prefix && matches!(info.verb.as_str(), "list" | "watch" | "deletecollection") {
            info.field_selector = query_value(query, "fieldSelector")
                .unwrap_or_default()
                .to_owned();
            info.label_selector = query_value(query, "labelSelector")
                .unwrap_or_default()
                .to_owned();
        }
        Ok(info)
    }

    /// The verb label kube uses in metrics: `GET`, `LIST`, `WATCH`, `POST`, `PUT`, `PATCH`,
    /// `APPLY`, `DELETE`, `DELETECOLLECTION`, or the HTTP method for non-resource requests.
    pub fn metrics_verb(&self, method: &Method, is_apply: bool) -> String {
        if !self.is_resource_request {
            return method.as_str().to_owned();
        }
        match self.verb.as_str() {
            "list" => "LIST",
            "watch" => "WATCH",
            "create" => "POST",
            "update" => "PUT",
            "patch" if is_apply => "APPLY",
            "patch" => "PATCH",
            "deletecollection" => "DELETECOLLECTION",
            "delete" => "DELETE",
            "get" => "GET",
            _ => return method.as_str().to_owned(),
        }
        .to_owned()
    }

    /// `namespace` when the request is namespaced, `cluster` for cluster-wide resource
    /// requests, `resource` for named objects (kube's `scope` metric label).
    pub fn scope(&self) -> &'static str {
        if !self.is_resource_request {
            ""
        } else if !self.name.is_empty() {
            "resource"
        } else if !self.namespace.is_empty() {
            "namespace"
        } else {
            "cluster"
        }
    }
}

/// A `RequestInfo` from literal query pairs, for tests.
#[cfg(test)]
pub(crate) fn request_info_for_test(
    method: Method,
    path: &str,
    query: &[(&str, &str)],
) -> RequestInfo {
    let query: Vec<(String, String)> = query
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect();
    RequestInfo::new(&method, path, &query).expect("request info")
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::request_info_for_test as info;

    const P: &str = "/apis/infrastructure.cluster.x-k8s.io/v1alpha2";

    #[test]
    fn resource_requests() {
        // (method, path, query, (verb, namespace, resource, name, subresource))
        type Case<'a> = (
            Method,
            String,
            Vec<(&'a str, &'a str)>,
            (&'a str, &'a str, &'a str, &'a str, &'a str),
        );
        let cases: Vec<Case> = vec![
            (
                Method::GET,
                format!("{P}/namespaces/ns/proxmoxmachines"),
                vec![],
                ("list", "ns", "proxmoxmachines", "", ""),
            ),
            (
                Method::GET,
                format!("{P}/namespaces/ns/proxmoxmachines"),
                vec![("watch", "true")],
                ("watch", "ns", "proxmoxmachines", "", ""),
            ),
            (
                Method::GET,
                format!("{P}/namespaces/ns/proxmoxmachines"),
                vec![("watch", "0")],
                ("list", "ns", "proxmoxmachines", "", ""),
            ),
            (
                Method::GET,
                format!("{P}/proxmoxmachines"),
                vec![],
                ("list", "", "proxmoxmachines", "", ""),
            ),
            (
                Method::GET,
                format!("{P}/namespaces/ns/proxmoxmachines/m1"),
                vec![],
                ("get", "ns", "proxmoxmachines", "m1", ""),
            ),
            (
                Method::HEAD,
                format!("{P}/namespaces/ns/proxmoxmachines/m1"),
                vec![],
                ("get", "ns", "proxmoxmachines", "m1", ""),
            ),
            (
                Method::PUT,
                format!("{P}/namespaces/ns/proxmoxmachines/m1/status"),
                vec![],
                ("update", "ns", "proxmoxmachines", "m1", "status"),
            ),
            (
                Method::PATCH,
                format!("{P}/namespaces/ns/proxmoxmachines/m1"),
                vec![],
                ("patch", "ns", "proxmoxmachines", "m1", ""),
            ),
            (
                Method::POST,
                format!("{P}/namespaces/ns/proxmoxmachines"),
                vec![],
                ("create", "ns", "proxmoxmachines", "", ""),
            ),
            (
                Method::DELETE,
                format!("{P}/namespaces/ns/proxmoxmachines/m1"),
                vec![],
                ("delete", "ns", "proxmoxmachines", "m1", ""),
            ),
            (
                Method::DELETE,
                format!("{P}/namespaces/ns/proxmoxmachines"),
                vec![],
                ("deletecollection", "ns", "proxmoxmachines", "", ""),
            ),
            (
                Method::GET,
                format!("{P}/namespaces/ns/proxmoxmachines"),
                vec![("fieldSelector", "metadata.name=m1"), ("watch", "1")],
                ("watch", "ns", "proxmoxmachines", "m1", ""),
            ),
            (
                Method::GET,
                format!("{P}/watch/namespaces/ns/proxmoxmachines"),
                vec![],
                ("watch", "ns", "proxmoxmachines", "", ""),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/ns".to_owned(),
                vec![],
                ("get", "ns", "namespaces", "ns", ""),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/ns/status".to_owned(),
                vec![],
                ("get", "ns", "namespaces", "ns", "status"),
            ),
        ];
        for (method, path, query, (verb, ns, resource, name, sub)) in cases {
            let i = info(method, &path, &query);
            assert!(i.is_resource_request, "{path}");
            assert_eq!(
                (
                    i.verb.as_str(),
                    i.namespace.as_str(),
                    i.resource.as_str(),
                    i.name.as_str(),
                    i.subresource.as_str()
                ),
                (verb, ns, resource, name, sub),
                "{path} {query:?}"
            );
            assert_eq!(
                i.api_group,
                if path.starts_with("/api/") {
                    ""
                } else {
                    "infrastructure.cluster.x-k8s.io"
                }
            );
        }
        let selectors = info(
            Method::GET,
            &format!("{P}/proxmoxmachines"),
            &[
                ("labelSelector", "a=b"),
                ("fieldSelector", "metadata.namespace=x"),
            ],
        );
        assert_eq!(
            (
                selectors.label_selector.as_str(),
                selectors.field_selector.as_str()
            ),
            ("a=b", "metadata.namespace=x")
        );
    }

    #[test]
    fn non_resource_requests() {
        for path in [
            "/",
            "/healthz",
            "/readyz",
            "/apis",
            "/apis/infrastructure.cluster.x-k8s.io",
            P,
            "/api/v1",
            "/openapi/v3/apis/g/v",
            "/version",
        ] {
            let i = info(Method::GET, path, &[]);
            assert!(!i.is_resource_request, "{path}");
            assert_eq!(i.verb, "get");
        }
        let post = info(Method::POST, "/apis", &[]);
        assert_eq!(post.verb, "post");
        let err =
            RequestInfo::new(&Method::GET, &format!("{P}/watch"), &[]).expect_err("bad watch path");
        assert!(
            err.to_string()
                .starts_with("unable to determine kind and namespace from url")
        );
    }

    #[test]
    fn metrics_verbs_and_scope() {
        let list = info(Method::GET, &format!("{P}/proxmoxmachines"), &[]);
        assert_eq!(
            (
                list.metrics_verb(&Method::GET, false).as_str(),
                list.scope()
            ),
            ("LIST", "cluster")
        );
        let apply = info(
            Method::PATCH,
            &format!("{P}/namespaces/a/proxmoxmachines/m"),
            &[],
        );
        assert_eq!(
            (
                apply.metrics_verb(&Method::PATCH, true).as_str(),
                apply.scope()
            ),
            ("APPLY", "resource")
        );
        let health = info(Method::GET, "/healthz", &[]);
        assert_eq!(
            (
                health.metrics_verb(&Method::GET, false).as_str(),
                health.scope()
            ),
            ("GET", "")
        );
    }
}
