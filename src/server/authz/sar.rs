//! Delegated authorization, as kube's `DelegatingAuthorizationOptions` do it: the health paths
//! for everyone, `system:masters` for everything, and every other request asked of the
//! management cluster with a SubjectAccessReview whose answer is cached briefly (allowed and
//! denied answers 10 s each by default).

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

use super::{Authorizer, Decision};
use crate::server::authn::{GROUP_MASTERS, UserInfo};
use crate::server::request_info::RequestInfo;
use crate::server::ttl_cache::TtlCache;

/// Non-resource paths allowed without asking (kube's `AlwaysAllowPaths`).
pub const ALWAYS_ALLOW_PATHS: &[&str] = &["/healthz", "/readyz", "/livez"];
/// kube's defaults for cached answers.
pub const DEFAULT_ALLOW_TTL: Duration = Duration::from_secs(10);
pub const DEFAULT_DENY_TTL: Duration = Duration::from_secs(10);
/// How long one SubjectAccessReview may take.
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
const CACHE_CAPACITY: usize = 8192;

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

/// The SubjectAccessReview spec for `user` doing the request `info` describes (kube's webhook
/// authorizer mapping: resource attributes for API resources, path and verb otherwise).
pub fn review_spec(user: &UserInfo, info: &RequestInfo) -> SubjectAccessReviewSpec {
    let (resource_attributes, non_resource_attributes) = if info.is_resource_request {
        (
            Some(ResourceAttributes {
                namespace: non_empty(&info.namespace),
                verb: non_empty(&info.verb),
                group: non_empty(&info.api_group),
                version: non_empty(&info.api_version),
                resource: non_empty(&info.resource),
                subresource: non_empty(&info.subresource),
                name: non_empty(&info.name),
                ..ResourceAttributes::default()
            }),
            None,
        )
    } else {
        (
            None,
            Some(NonResourceAttributes {
                path: non_empty(&info.path),
                verb: non_empty(&info.verb),
            }),
        )
    };
    SubjectAccessReviewSpec {
        user: non_empty(&user.name),
        uid: non_empty(&user.uid),
        groups: (!user.groups.is_empty()).then(|| user.groups.clone()),
        extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
        resource_attributes,
        non_resource_attributes,
    }
}

/// Asks the management cluster, caching answers by the exact review spec.
pub struct SubjectAccessReviewAuthorizer {
    reviews: Api<SubjectAccessReview>,
    cache: TtlCache<String, Decision>,
    allow_ttl: Duration,
    deny_ttl: Duration,
}

impl SubjectAccessReviewAuthorizer {
    pub fn new(client: kube::Client, allow_ttl: Duration, deny_ttl: Duration) -> Self {
        Self {
            reviews: Api::all(client),
            cache: TtlCache::new(CACHE_CAPACITY),
            allow_ttl,
            deny_ttl,
        }
    }

    async fn review(&self, spec: SubjectAccessReviewSpec) -> Decision {
        let key = match serde_json::to_string(&spec) {
            Ok(key) => key,
            Err(e) => return Decision::Error(format!("encoding the SubjectAccessReview: {e}")),
        };
        if let Some(decision) = self.cache.get(&key) {
            return decision;
        }
        let review = SubjectAccessReview {
            spec,
            ..SubjectAccessReview::default()
        };
        let created = match tokio::time::timeout(
            REVIEW_TIMEOUT,
            self.reviews.create(&PostParams::default(), &review),
        )
        .await
        {
            Ok(Ok(created)) => created,
            Ok(Err(e)) => return Decision::Error(format!("SubjectAccessReview failed: {e}")),
            Err(_) => {
                return Decision::Error(format!(
                    "SubjectAccessReview got no answer within {REVIEW_TIMEOUT:?}"
                ));
            }
        };
        let status = created.status.unwrap_or_default();
        if let Some(error) = status.evaluation_error.as_deref().filter(|e| !e.is_empty()) {
            tracing::debug!(%error, "SubjectAccessReview evaluation error");
        }
        let reason = status.reason.unwrap_or_default();
        let (decision, ttl) = if status.allowed {
            (Decision::Allow, self.allow_ttl)
        } else {
            (Decision::Deny(reason), self.deny_ttl)
        };
        self.cache.insert(key, decision.clone(), ttl);
        decision
    }
}

/// The authorizer of `serve`.
pub struct DelegatingAuthorizer {
    reviewer: SubjectAccessReviewAuthorizer,
}

impl DelegatingAuthorizer {
    pub fn new(reviewer: SubjectAccessReviewAuthorizer) -> Arc<Self> {
        Arc::new(Self { reviewer })
    }
}

/// The decision made without asking, if any.
pub fn local_decision(user: &UserInfo, info: &RequestInfo) -> Option<Decision> {
    let always_allowed =
        !info.is_resource_request && ALWAYS_ALLOW_PATHS.contains(&info.path.as_str());
    (always_allowed || user.in_group(GROUP_MASTERS)).then_some(Decision::Allow)
}

impl Authorizer for DelegatingAuthorizer {
    fn authorize<'a>(
        &'a self,
        user: &'a UserInfo,
        info: &'a RequestInfo,
    ) -> BoxFuture<'a, Decision> {
        Box::pin(async move {
            match local_decision(user, info) {
                Some(decision) => decision,
                None => self.reviewer.review(review_spec(user, info)).await,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Method;
    use serde_json::json;
    use std::collections::BTreeMap;

    use crate::server::request_info::request_info_for_test as info;

    fn alice() -> UserInfo {
        UserInfo {
            name: "alice".into(),
            uid: "u-1".into(),
            groups: vec!["devs".into(), "system:authenticated".into()],
            extra: BTreeMap::from([("scopes".to_owned(), vec!["a".to_owned(), "b".to_owned()])]),
        }
    }

    const P: &str = "/apis/infrastructure.cluster.x-k8s.io/v1alpha2";

    fn attributes(method: Method, path: &str, query: &[(&str, &str)]) -> serde_json::Value {
        let spec = review_spec(&alice(), &info(method, path, query));
        let value = serde_json::to_value(&spec).expect("json");
        value
            .get("resourceAttributes")
            .or_else(|| value.get("nonResourceAttributes"))
            .cloned()
            .expect("attributes")
    }

    #[test]
    fn spec_carries_the_user() {
        let spec = serde_json::to_value(review_spec(&alice(), &info(Method::GET, "/apis", &[])))
            .expect("json");
        assert_eq!(
            spec,
            json!({
                "user": "alice",
                "uid": "u-1",
                "groups": ["devs", "system:authenticated"],
                "extra": {"scopes": ["a", "b"]},
                "nonResourceAttributes": {"path": "/apis", "verb": "get"}
            })
        );
    }

    #[test]
    fn verbs_and_attributes_map_like_kube() {
        let ns = format!("{P}/namespaces/default/proxmoxmachines");
        let item = format!("{ns}/m1");
        let g = "infrastructure.cluster.x-k8s.io";
        let resource = |verb: &str,
                        namespace: Option<&str>,
                        name: Option<&str>,
                        sub: Option<&str>| {
            let mut v = json!({"verb": verb, "group": g, "version": "v1alpha2", "resource": "proxmoxmachines"});
            if let Some(n) = namespace {
                v["namespace"] = json!(n);
            }
            if let Some(n) = name {
                v["name"] = json!(n);
            }
            if let Some(s) = sub {
                v["subresource"] = json!(s);
            }
            v
        };
        let cases = [
            (
                Method::GET,
                ns.clone(),
                vec![],
                resource("list", Some("default"), None, None),
            ),
            (
                Method::GET,
                ns.clone(),
                vec![("watch", "true")],
                resource("watch", Some("default"), None, None),
            ),
            (
                Method::GET,
                ns.clone(),
                vec![("watch", "1")],
                resource("watch", Some("default"), None, None),
            ),
            (
                Method::GET,
                ns.clone(),
                vec![("watch", "true"), ("fieldSelector", "metadata.name=m1")],
                resource("watch", Some("default"), Some("m1"), None),
            ),
            (
                Method::GET,
                item.clone(),
                vec![],
                resource("get", Some("default"), Some("m1"), None),
            ),
            (
                Method::HEAD,
                item.clone(),
                vec![],
                resource("get", Some("default"), Some("m1"), None),
            ),
            (
                Method::POST,
                ns.clone(),
                vec![],
                resource("create", Some("default"), None, None),
            ),
            (
                Method::PUT,
                item.clone(),
                vec![],
                resource("update", Some("default"), Some("m1"), None),
            ),
            (
                Method::PATCH,
                item.clone(),
                vec![],
                resource("patch", Some("default"), Some("m1"), None),
            ),
            (
                Method::DELETE,
                item.clone(),
                vec![],
                resource("delete", Some("default"), Some("m1"), None),
            ),
            (
                Method::DELETE,
                ns.clone(),
                vec![],
                resource("deletecollection", Some("default"), None, None),
            ),
            (
                Method::PUT,
                format!("{item}/status"),
                vec![],
                resource("update", Some("default"), Some("m1"), Some("status")),
            ),
            (
                Method::GET,
                format!("{P}/proxmoxmachines"),
                vec![],
                resource("list", None, None, None),
            ),
            (
                Method::POST,
                "/openapi/v3".to_owned(),
                vec![],
                json!({"path": "/openapi/v3", "verb": "post"}),
            ),
        ];
        for (method, path, query, expected) in cases {
            assert_eq!(
                attributes(method.clone(), &path, &query),
                expected,
                "{method} {path} {query:?}"
            );
        }
    }

    #[test]
    fn local_decisions() {
        let anonymous = UserInfo::anonymous();
        for path in ALWAYS_ALLOW_PATHS {
            assert_eq!(
                local_decision(&anonymous, &info(Method::GET, path, &[])),
                Some(Decision::Allow)
            );
        }
        for path in ["/readyz/shutdown", "/metrics", "/version", "/apis"] {
            assert_eq!(
                local_decision(&anonymous, &info(Method::GET, path, &[])),
                None,
                "{path}"
            );
        }
        let master = UserInfo {
            name: "system:kube-aggregator".into(),
            groups: vec![GROUP_MASTERS.into()],
            ..UserInfo::default()
        };
        assert_eq!(
            local_decision(
                &master,
                &info(Method::DELETE, &format!("{P}/proxmoxmachines"), &[])
            ),
            Some(Decision::Allow)
        );
        assert_eq!(
            local_decision(
                &alice(),
                &info(Method::GET, &format!("{P}/proxmoxmachines"), &[])
            ),
            None
        );
    }
}
