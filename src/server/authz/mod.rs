//! Authorization: may this user do this. An `Authorizer` decides per request; `serve` uses
//! [`sar::DelegatingAuthorizer`] (health paths and `system:masters` locally, everything else by
//! SubjectAccessReview to the management cluster), `dev` and tests `AlwaysAllow`.

pub mod sar;

use futures::future::BoxFuture;

use super::authn::UserInfo;
use super::error::{ApiError, GroupResource};
use super::request_info::RequestInfo;

/// An authorization decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Denied, with an optional reason appended to the 403 message.
    Deny(String),
    /// No decision could be made (the authorizer failed); the request fails with 500.
    Error(String),
}

/// Decides whether `user` may perform the request described by `info`.
pub trait Authorizer: Send + Sync {
    fn authorize<'a>(
        &'a self,
        user: &'a UserInfo,
        info: &'a RequestInfo,
    ) -> BoxFuture<'a, Decision>;
}

/// Allows everything. Only for `dev` and tests.
#[derive(Debug, Clone, Copy, Default)]
pub struct AlwaysAllow;

impl Authorizer for AlwaysAllow {
    fn authorize<'a>(&'a self, _: &'a UserInfo, _: &'a RequestInfo) -> BoxFuture<'a, Decision> {
        Box::pin(std::future::ready(Decision::Allow))
    }
}

/// kube's `ForbiddenStatusError`: the 403 for a denied request, e.g.
/// `proxmoxmachines.infrastructure.cluster.x-k8s.io "m1" is forbidden: User "alice" cannot get
/// resource "proxmoxmachines" in API group "infrastructure.cluster.x-k8s.io" in the namespace
/// "default"`.
pub fn forbidden(user: &UserInfo, info: &RequestInfo, reason: &str) -> ApiError {
    let message = if info.is_resource_request {
        let mut resource = info.resource.clone();
        if !info.subresource.is_empty() {
            resource = format!("{resource}/{}", info.subresource);
        }
        let scope = if info.namespace.is_empty() {
            "at the cluster scope".to_owned()
        } else {
            format!(
                "in the namespace {}",
                crate::registry::gofmt::quote(&info.namespace)
            )
        };
        format!(
            "User {} cannot {} resource {} in API group {} {scope}",
            crate::registry::gofmt::quote(&user.name),
            info.verb,
            crate::registry::gofmt::quote(&resource),
            crate::registry::gofmt::quote(&info.api_group),
        )
    } else {
        format!(
            "User {} cannot {} path {}",
            crate::registry::gofmt::quote(&user.name),
            info.verb,
            crate::registry::gofmt::quote(&info.path),
        )
    };
    let message = message
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let message = if reason.is_empty() {
        message
    } else {
        format!("{message}: {reason}")
    };
    let gr = GroupResource::new(&info.api_group, &info.resource);
    ApiError::forbidden(&gr, &info.name, &message)
}

/// Whether `user` may make the request `info` describes: `Err` is the answer when not (403,
/// or 500 when no decision could be made).
pub async fn check(
    authz: &dyn Authorizer,
    user: &UserInfo,
    info: &RequestInfo,
) -> Result<(), ApiError> {
    match authz.authorize(user, info).await {
        Decision::Allow => Ok(()),
        Decision::Deny(reason) => Err(forbidden(user, info, &reason)),
        Decision::Error(error) => {
            tracing::warn!(%error, user = %user.name, path = %info.path, "authorization failed");
            Err(ApiError::internal(error))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Method;

    fn info(method: Method, path: &str) -> RequestInfo {
        RequestInfo::new(&method, path, &[]).expect("info")
    }

    fn alice() -> UserInfo {
        UserInfo {
            name: "alice".into(),
            groups: vec!["system:authenticated".into()],
            ..UserInfo::default()
        }
    }

    #[tokio::test]
    async fn always_allow_allows() {
        assert_eq!(
            AlwaysAllow
                .authorize(&UserInfo::anonymous(), &info(Method::DELETE, "/apis/g/v/x"))
                .await,
            Decision::Allow
        );
    }

    #[test]
    fn forbidden_messages_match_kube() {
        let resource = info(
            Method::GET,
            "/apis/infrastructure.cluster.x-k8s.io/v1alpha2/namespaces/default/proxmoxmachines/m1",
        );
        let err = forbidden(&alice(), &resource, "");
        assert_eq!(
            err.to_string(),
            "proxmoxmachines.infrastructure.cluster.x-k8s.io \"m1\" is forbidden: User \"alice\" cannot get \
             resource \"proxmoxmachines\" in API group \"infrastructure.cluster.x-k8s.io\" in the namespace \"default\""
        );
        let status = err.status().details.clone().expect("details");
        assert_eq!(
            (status.kind.as_str(), status.name.as_str()),
            ("proxmoxmachines", "m1")
        );
        let cluster = info(
            Method::GET,
            "/apis/infrastructure.cluster.x-k8s.io/v1alpha2/proxmoxmachines",
        );
        assert_eq!(
            forbidden(&alice(), &cluster, "no RBAC policy matched").to_string(),
            "proxmoxmachines.infrastructure.cluster.x-k8s.io is forbidden: User \"alice\" cannot list \
             resource \"proxmoxmachines\" in API group \"infrastructure.cluster.x-k8s.io\" at the cluster scope: no RBAC policy matched"
        );
        let status_sub = info(Method::PUT, "/apis/g/v/namespaces/n/things/t/status");
        assert!(
            forbidden(&alice(), &status_sub, "")
                .to_string()
                .contains("cannot update resource \"things/status\"")
        );
        assert_eq!(
            forbidden(&UserInfo::anonymous(), &info(Method::GET, "/metrics"), "").to_string(),
            "forbidden: User \"system:anonymous\" cannot get path \"/metrics\""
        );
    }
}
