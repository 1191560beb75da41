//! Authentication: who is calling. One seam (`Authenticator`) that later delegated
//! authenticators (front-proxy headers, TokenReview) plug into; for now a verified TLS client
//! certificate (CN → user, O → groups, like kube-apiserver) and, where allowed, anonymous.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
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
    /// The client certificate chain, present only if the TLS handshake verified it.
    pub peer_certificates: Option<Arc<Vec<CertificateDer<'static>>>>,
    /// The leaf certificate's identity, parsed once per connection rather than per request.
    leaf_identity: Arc<std::sync::OnceLock<Result<UserInfo, CertificateIdentityError>>>,
}

impl ConnectionInfo {
    pub fn new(
        remote_addr: Option<SocketAddr>,
        peer_certificates: Option<Arc<Vec<CertificateDer<'static>>>>,
    ) -> Self {
        Self {
            remote_addr,
            peer_certificates,
            leaf_identity: Arc::default(),
        }
    }

    /// The identity of the verified leaf certificate, if the peer presented one.
    pub fn certificate_identity(&self) -> Option<&Result<UserInfo, CertificateIdentityError>> {
        let leaf = self.peer_certificates.as_ref()?.first()?;
        Some(
            self.leaf_identity
                .get_or_init(|| user_from_certificate(leaf)),
        )
    }
}

/// A client certificate that cannot be read as an identity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CertificateIdentityError {
    #[error("unable to parse client certificate: {0}")]
    Parse(String),
    #[error("client certificate has no common name")]
    NoCommonName,
}

/// The identity of a verified client certificate: CN is the user, each O a group.
pub fn user_from_certificate(der: &[u8]) -> Result<UserInfo, CertificateIdentityError> {
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| CertificateIdentityError::Parse(e.to_string()))?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .find_map(|a| a.as_str().ok())
        .filter(|cn| !cn.is_empty())
        .ok_or(CertificateIdentityError::NoCommonName)?;
    let groups = subject
        .iter_organization()
        .filter_map(|a| a.as_str().ok())
        .map(str::to_owned)
        .collect();
    Ok(UserInfo {
        name: name.to_owned(),
        groups,
        ..UserInfo::default()
    })
}

/// The parts of a request authenticators look at.
#[derive(Debug, Clone, Copy)]
pub struct AuthnRequest<'a> {
    pub headers: &'a HeaderMap,
    pub connection: Option<&'a ConnectionInfo>,
}

/// One way of authenticating. `Ok(None)` means "not applicable, try the next one"; an error
/// ends authentication with that error.
pub trait Authenticator: Send + Sync {
    fn authenticate<'a>(
        &'a self,
        request: AuthnRequest<'a>,
    ) -> BoxFuture<'a, Result<Option<UserInfo>, ApiError>>;
}

/// Trusts the TLS layer's verification (against the configured client CA) and reads the
/// identity from the leaf certificate.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientCertificateAuthenticator;

impl Authenticator for ClientCertificateAuthenticator {
    fn authenticate<'a>(
        &'a self,
        request: AuthnRequest<'a>,
    ) -> BoxFuture<'a, Result<Option<UserInfo>, ApiError>> {
        let result = match request
            .connection
            .and_then(ConnectionInfo::certificate_identity)
        {
            None => Ok(None),
            Some(Ok(user)) => Ok(Some(user.clone())),
            Some(Err(e)) => {
                tracing::info!(error = %e, "rejecting client certificate");
                Err(ApiError::unauthorized("Unauthorized"))
            }
        };
        Box::pin(std::future::ready(result))
    }
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

    /// Client certificates, falling back to anonymous.
    pub fn client_certificates_or_anonymous() -> Self {
        Self::new(vec![Arc::new(ClientCertificateAuthenticator)], true)
    }

    pub async fn authenticate(&self, request: AuthnRequest<'_>) -> Result<UserInfo, ApiError> {
        for authenticator in &self.authenticators {
            if let Some(user) = authenticator.authenticate(request).await? {
                return Ok(user.with_authenticated_group());
            }
        }
        if self.allow_anonymous {
            Ok(UserInfo::anonymous())
        } else {
            Err(ApiError::unauthorized("Unauthorized"))
        }
    }
}

/// Middleware: authenticates the request and stores its `UserInfo` as an extension of the
/// request (for handlers) and of the response (for the request log).
pub async fn authenticate(
    State(authn): State<Arc<Authentication>>,
    mut request: Request,
    next: Next,
) -> Response {
    let user = {
        let authn_request = AuthnRequest {
            headers: request.headers(),
            connection: request.extensions().get::<ConnectionInfo>(),
        };
        authn.authenticate(authn_request).await
    };
    match user {
        Ok(user) => {
            request.extensions_mut().insert(user.clone());
            let mut response = next.run(request).await;
            response.extensions_mut().insert(user);
            response
        }
        Err(err) => err.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType, KeyPair};

    fn cert(cn: Option<&str>, orgs: &[&str]) -> CertificateDer<'static> {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(cn) = cn {
            params.distinguished_name.push(DnType::CommonName, cn);
        }
        for org in orgs {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *org);
        }
        let key = KeyPair::generate().expect("key");
        params.self_signed(&key).expect("cert").der().clone()
    }

    #[test]
    fn identity_from_certificate() {
        let user =
            user_from_certificate(&cert(Some("capmox-admin"), &["system:masters"])).expect("user");
        assert_eq!(user.name, "capmox-admin");
        assert_eq!(user.groups, ["system:masters"]);
        let no_org = user_from_certificate(&cert(Some("bob"), &[])).expect("user");
        assert!(no_org.groups.is_empty());
        assert_eq!(
            user_from_certificate(&cert(None, &["x"])),
            Err(CertificateIdentityError::NoCommonName)
        );
        assert!(matches!(
            user_from_certificate(b"junk"),
            Err(CertificateIdentityError::Parse(_))
        ));
    }

    #[tokio::test]
    async fn chain_prefers_certificates_then_anonymous() {
        let authn = Authentication::client_certificates_or_anonymous();
        let headers = HeaderMap::new();
        let anonymous = authn
            .authenticate(AuthnRequest {
                headers: &headers,
                connection: None,
            })
            .await
            .expect("anonymous");
        assert_eq!(anonymous, UserInfo::anonymous());

        let connection =
            ConnectionInfo::new(None, Some(Arc::new(vec![cert(Some("alice"), &["devs"])])));
        let alice = authn
            .authenticate(AuthnRequest {
                headers: &headers,
                connection: Some(&connection),
            })
            .await
            .expect("alice");
        assert_eq!(alice.name, "alice");
        assert_eq!(alice.groups, ["devs", "system:authenticated"]);

        let strict = Authentication::new(vec![Arc::new(ClientCertificateAuthenticator)], false);
        let err = strict
            .authenticate(AuthnRequest {
                headers: &headers,
                connection: None,
            })
            .await
            .expect_err("no anonymous");
        assert_eq!(
            (err.code().as_u16(), err.to_string().as_str()),
            (401, "Unauthorized")
        );

        let broken = ConnectionInfo::new(None, Some(Arc::new(vec![cert(None, &[])])));
        let err = authn
            .authenticate(AuthnRequest {
                headers: &headers,
                connection: Some(&broken),
            })
            .await
            .expect_err("no CN");
        assert_eq!(err.code().as_u16(), 401);
    }
}
