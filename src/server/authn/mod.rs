//! Authentication: who is calling. A chain of `Authenticator`s tried in order, like
//! kube-apiserver's delegating authenticator: the front-proxy (aggregator) request headers,
//! client certificates, bearer tokens through TokenReview, and finally anonymous.
//!
//! The trusted CAs live in a [`trust::TrustStore`] that can change while the server runs (the
//! `extension-apiserver-authentication` ConfigMap is watched); every request reads the current
//! one. The TLS handshake takes any client certificate (the client still proves it holds the
//! key), so one nobody trusts is a 401 Status, as from kube-apiserver, not a TLS failure.
//!
//! The chain, first success wins: [`request_header`] → [`x509`] → [`token_review`] →
//! anonymous. Credentials that are presented but rejected are a 401, never anonymous (kube's
//! `unionauth.NewFailOnError`); an authenticated user also gets `system:authenticated`. Each
//! CA bundle remembers the chains it verified (`verified_chains`), so a client certificate's
//! signatures are checked once, not on every request. Tests: `tests/it/auth/`, against a fake
//! kube-apiserver and a front proxy standing in for the aggregator.

pub mod configmap;
pub mod request_header;
pub mod token_review;
pub mod trust;
mod verified_chains;
pub mod x509;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::HeaderMap;
use futures::future::BoxFuture;
use rustls_pki_types::CertificateDer;

use super::error::ApiError;

pub const ANONYMOUS_USER: &str = "system:anonymous";
pub const GROUP_UNAUTHENTICATED: &str = "system:unauthenticated";
pub const GROUP_AUTHENTICATED: &str = "system:authenticated";
pub const GROUP_MASTERS: &str = "system:masters";

/// The authenticated identity of a request (kube's `user.Info`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// `system:anonymous` in `system:unauthenticated`.
    pub fn anonymous() -> Self {
        Self {
            name: ANONYMOUS_USER.to_owned(),
            groups: vec![GROUP_UNAUTHENTICATED.to_owned()],
            ..Self::default()
        }
    }

    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// kube's `AuthenticatedGroupAdder`: every authenticated user is in `system:authenticated`.
    fn with_authenticated_group(mut self) -> Self {
        if !self.in_group(GROUP_AUTHENTICATED) && !self.in_group(GROUP_UNAUTHENTICATED) {
            self.groups.push(GROUP_AUTHENTICATED.to_owned());
        }
        self
    }
}

/// What the connection layer knows about the peer, attached to every request.
#[derive(Debug, Clone, Default)]
pub struct ConnectionInfo {
    pub remote_addr: Option<SocketAddr>,
    /// The client certificate chain (leaf first), as presented: the handshake checked only
    /// that the client holds its key. Authenticators verify it against the CA that matters to
    /// them, per request, since trust can change while a connection lives.
    pub peer_certificates: Option<Arc<Vec<CertificateDer<'static>>>>,
}

/// The parts of a request authenticators look at.
#[derive(Debug, Clone, Copy)]
pub struct AuthnRequest<'a> {
    pub headers: &'a HeaderMap,
    pub connection: Option<&'a ConnectionInfo>,
}

impl<'a> AuthnRequest<'a> {
    /// The client certificate chain of the connection, if one was presented.
    pub fn peer_chain(&self) -> Option<&'a [CertificateDer<'static>]> {
        self.connection
            .and_then(|c| c.peer_certificates.as_deref())
            .map(Vec::as_slice)
            .filter(|chain| !chain.is_empty())
    }
}

/// Why an authenticator refused credentials it recognised.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthnError {
    #[error("client certificate rejected: {0}")]
    ClientCertificate(String),
    #[error("front-proxy certificate rejected: {0}")]
    FrontProxy(String),
    #[error("invalid bearer token")]
    InvalidToken,
    #[error("token review failed: {0}")]
    TokenReview(String),
}

/// One way of authenticating. `Ok(None)`: the request carries no credentials of this kind.
/// `Err`: it does, and they are not valid (the next authenticator is still tried, as in kube's
/// union authenticator, but the request cannot fall back to anonymous).
pub trait Authenticator: Send + Sync {
    fn authenticate<'a>(
        &'a self,
        request: AuthnRequest<'a>,
    ) -> BoxFuture<'a, Result<Option<UserInfo>, AuthnError>>;

    /// Whether the users it recognises are named by kube-apiserver's front proxy (the
    /// aggregator), which then also writes the answer to the client.
    fn is_front_proxy(&self) -> bool {
        false
    }
}

/// Who is calling, and whether kube-apiserver's front proxy brought the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    pub user: UserInfo,
    pub through_front_proxy: bool,
}

/// The authenticator chain of a server: the first authenticator that recognises the request
/// wins; otherwise anonymous (if allowed) or 401.
#[derive(Clone)]
pub struct Authentication {
    authenticators: Vec<Arc<dyn Authenticator>>,
    allow_anonymous: bool,
}

impl Authentication {
    pub fn new(authenticators: Vec<Arc<dyn Authenticator>>, allow_anonymous: bool) -> Self {
        Self {
            authenticators,
            allow_anonymous,
        }
    }

    /// The first authenticator that recognises the request wins. If none does and one of them
    /// rejected credentials, 401 (kube's `unionauth.NewFailOnError`: presenting bad credentials
    /// never degrades to anonymous); with no credentials at all, anonymous if allowed.
    pub async fn authenticate(&self, request: AuthnRequest<'_>) -> Result<Authenticated, ApiError> {
        let mut rejected = Vec::new();
        for authenticator in &self.authenticators {
            match authenticator.authenticate(request).await {
                Ok(Some(user)) => {
                    return Ok(Authenticated {
                        user: user.with_authenticated_group(),
                        through_front_proxy: authenticator.is_front_proxy(),
                    });
                }
                Ok(None) => {}
                Err(e) => rejected.push(e),
            }
        }
        if !rejected.is_empty() {
            let reasons: Vec<String> = rejected.iter().map(ToString::to_string).collect();
            tracing::info!(reasons = ?reasons, "unable to authenticate the request");
            return Err(ApiError::unauthorized("Unauthorized"));
        }
        if self.allow_anonymous {
            Ok(Authenticated {
                user: UserInfo::anonymous(),
                through_front_proxy: false,
            })
        } else {
            Err(ApiError::unauthorized("Unauthorized"))
        }
    }
}

/// Certificates and requests for the authenticators' unit tests.
#[cfg(test)]
pub(crate) mod test_support {
    use super::{AuthnRequest, ConnectionInfo, x509::CaBundle};
    use crate::server::pki::CertificateAuthority;
    use axum::http::HeaderMap;
    use rustls_pki_types::CertificateDer;

    pub fn authority(name: &str) -> CertificateAuthority {
        CertificateAuthority::generate(name).expect("CA")
    }

    pub fn bundle(ca: &CertificateAuthority) -> CaBundle {
        CaBundle::from_pem(ca.pair.cert_pem.as_bytes()).expect("bundle")
    }

    pub fn client_der(
        ca: &CertificateAuthority,
        cn: &str,
        orgs: &[&str],
    ) -> CertificateDer<'static> {
        ca.client(cn, orgs)
            .and_then(|pair| pair.certificates())
            .expect("client certificate")
            .remove(0)
    }

    static NO_HEADERS: std::sync::LazyLock<HeaderMap> = std::sync::LazyLock::new(HeaderMap::new);

    pub fn request(connection: &ConnectionInfo) -> AuthnRequest<'_> {
        AuthnRequest {
            headers: &NO_HEADERS,
            connection: Some(connection),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers with a fixed outcome.
    struct Fixed(Result<Option<UserInfo>, AuthnError>);

    impl Authenticator for Fixed {
        fn authenticate<'a>(
            &'a self,
            _: AuthnRequest<'a>,
        ) -> BoxFuture<'a, Result<Option<UserInfo>, AuthnError>> {
            Box::pin(std::future::ready(self.0.clone()))
        }
    }

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            ..UserInfo::default()
        }
    }

    async fn run(chain: Vec<Fixed>, anonymous: bool) -> Result<UserInfo, u16> {
        let authenticators = chain
            .into_iter()
            .map(|f| Arc::new(f) as Arc<dyn Authenticator>)
            .collect();
        let headers = HeaderMap::new();
        Authentication::new(authenticators, anonymous)
            .authenticate(AuthnRequest {
                headers: &headers,
                connection: None,
            })
            .await
            .map(|authenticated| authenticated.user)
            .map_err(|e| e.code().as_u16())
    }

    #[tokio::test]
    async fn chain_order_errors_and_anonymous() {
        let alice = || Fixed(Ok(Some(user("alice", &["devs"]))));
        let nothing = || Fixed(Ok(None));
        let bad = || Fixed(Err(AuthnError::InvalidToken));

        let found = run(vec![nothing(), alice()], false).await.expect("alice");
        assert_eq!(found.groups, ["devs", GROUP_AUTHENTICATED]);
        // A rejection does not stop the chain: a later authenticator may still succeed.
        assert_eq!(
            run(vec![bad(), alice()], false).await.expect("ok").name,
            "alice"
        );
        // Rejected credentials never fall back to anonymous.
        assert_eq!(run(vec![bad(), nothing()], true).await, Err(401));
        assert_eq!(run(vec![nothing()], true).await, Ok(UserInfo::anonymous()));
        assert_eq!(run(vec![nothing()], false).await, Err(401));
        // Users already in system:authenticated are not given it twice.
        let proxied = Fixed(Ok(Some(user("bob", &[GROUP_AUTHENTICATED]))));
        assert_eq!(
            run(vec![proxied], false).await.expect("bob").groups,
            [GROUP_AUTHENTICATED]
        );
    }
}
