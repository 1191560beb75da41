//! Client certificates: CA bundles that verify a presented chain, the identity in a
//! certificate (CN → user, O → groups, like kube-apiserver), and the authenticator for
//! certificates issued by the client CA.

use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use rustls::RootCertStore;
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use rustls_pki_types::{CertificateDer, UnixTime};

use super::trust::TrustStore;
use super::{Authenticator, AuthnError, AuthnRequest, UserInfo};
use crate::server::tls;

/// A CA bundle that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaBundleError {
    #[error("{0}")]
    Pem(String),
    #[error("CA certificate not usable as a trust anchor: {0}")]
    Anchor(String),
}

/// Trust anchors for client certificates and the verifier built from them.
#[derive(Clone)]
pub struct CaBundle {
    certificates: Vec<CertificateDer<'static>>,
    verifier: Arc<dyn ClientCertVerifier>,
}

impl fmt::Debug for CaBundle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaBundle")
            .field("certificates", &self.certificates.len())
            .finish_non_exhaustive()
    }
}

impl PartialEq for CaBundle {
    fn eq(&self, other: &Self) -> bool {
        self.certificates == other.certificates
    }
}

/// A verifier that accepts chains to any of `certificates`, with a client-auth key usage.
pub fn client_verifier(
    certificates: &[CertificateDer<'static>],
) -> Result<Arc<dyn ClientCertVerifier>, CaBundleError> {
    let mut roots = RootCertStore::empty();
    for ca in certificates {
        roots
            .add(ca.clone())
            .map_err(|e| CaBundleError::Anchor(e.to_string()))?;
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), tls::provider())
        .allow_unauthenticated()
        .build()
        .map_err(|e| CaBundleError::Anchor(e.to_string()))
}

impl CaBundle {
    pub fn from_certificates(
        certificates: Vec<CertificateDer<'static>>,
    ) -> Result<Self, CaBundleError> {
        let verifier = client_verifier(&certificates)?;
        Ok(Self {
            certificates,
            verifier,
        })
    }

    /// A PEM bundle (one or more certificates).
    pub fn from_pem(pem: &[u8]) -> Result<Self, CaBundleError> {
        let certificates =
            tls::parse_certificates(pem, None).map_err(|e| CaBundleError::Pem(e.to_string()))?;
        Self::from_certificates(certificates)
    }

    pub fn certificates(&self) -> &[CertificateDer<'static>] {
        &self.certificates
    }

    /// Verifies that `chain` (leaf first, then intermediates) chains to this bundle and that
    /// the leaf may be used for client authentication, now.
    pub fn verify(&self, chain: &[CertificateDer<'static>]) -> Result<(), String> {
        let (leaf, intermediates) = chain
            .split_first()
            .ok_or_else(|| "no certificate".to_owned())?;
        self.verifier
            .verify_client_cert(leaf, intermediates, UnixTime::now())
            .map(|_| ())
            .map_err(|e| e.to_string())
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

/// The common name of a certificate, if it has a non-empty one.
pub fn common_name(der: &[u8]) -> Result<String, CertificateIdentityError> {
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| CertificateIdentityError::Parse(e.to_string()))?;
    cert.subject()
        .iter_common_name()
        .find_map(|a| a.as_str().ok())
        .filter(|cn| !cn.is_empty())
        .map(str::to_owned)
        .ok_or(CertificateIdentityError::NoCommonName)
}

/// The identity of a verified client certificate: CN is the user, each O a group.
pub fn user_from_certificate(der: &[u8]) -> Result<UserInfo, CertificateIdentityError> {
    let name = common_name(der)?;
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| CertificateIdentityError::Parse(e.to_string()))?;
    let groups = cert
        .subject()
        .iter_organization()
        .filter_map(|a| a.as_str().ok())
        .map(str::to_owned)
        .collect();
    Ok(UserInfo {
        name,
        groups,
        ..UserInfo::default()
    })
}

/// Authenticates requests whose client certificate chains to the current client CA.
#[derive(Debug, Clone)]
pub struct ClientCertificateAuthenticator {
    trust: Arc<TrustStore>,
}

impl ClientCertificateAuthenticator {
    pub fn new(trust: Arc<TrustStore>) -> Self {
        Self { trust }
    }
}

impl Authenticator for ClientCertificateAuthenticator {
    fn authenticate<'a>(
        &'a self,
        request: AuthnRequest<'a>,
    ) -> BoxFuture<'a, Result<Option<UserInfo>, AuthnError>> {
        let result = match request.peer_chain() {
            None => Ok(None),
            Some(chain) => match self.trust.current().client_ca() {
                // Without a client CA, certificates are not a way to authenticate here.
                None => Ok(None),
                Some(ca) => ca
                    .verify(chain)
                    .and_then(|()| {
                        let leaf = chain.first().map_or(&[][..], |leaf| leaf.as_ref());
                        user_from_certificate(leaf).map_err(|e| e.to_string())
                    })
                    .map(Some)
                    .map_err(AuthnError::ClientCertificate),
            },
        };
        Box::pin(std::future::ready(result))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::authn::ConnectionInfo;
    use crate::server::authn::test_support::{authority, bundle, client_der, request};
    use crate::server::authn::trust::Trust;

    #[test]
    fn identity_from_certificate() {
        let ca = authority("ca");
        let user = user_from_certificate(&client_der(&ca, "capmox-admin", &["system:masters"]))
            .expect("user");
        assert_eq!(user.name, "capmox-admin");
        assert_eq!(user.groups, ["system:masters"]);
        let no_org = user_from_certificate(&client_der(&ca, "bob", &[])).expect("user");
        assert!(no_org.groups.is_empty());
        assert_eq!(
            user_from_certificate(&client_der(&ca, "", &["x"])),
            Err(CertificateIdentityError::NoCommonName)
        );
        assert!(matches!(
            user_from_certificate(b"junk"),
            Err(CertificateIdentityError::Parse(_))
        ));
    }

    #[test]
    fn bundles_verify_only_their_own_chains() {
        let ca = authority("ca");
        let other = authority("other");
        let bundle = bundle(&ca);
        bundle
            .verify(&[client_der(&ca, "alice", &[])])
            .expect("own");
        assert!(bundle.verify(&[client_der(&other, "alice", &[])]).is_err());
        assert!(bundle.verify(&[]).is_err());
        // A serving certificate lacks the client-auth usage.
        let serving = ca
            .serving(&[])
            .expect("serving")
            .certificates()
            .expect("der");
        assert!(bundle.verify(&serving).is_err());
        assert!(matches!(
            CaBundle::from_pem(b"not pem"),
            Err(CaBundleError::Pem(_))
        ));
    }

    async fn authenticate(
        authn: &ClientCertificateAuthenticator,
        chain: Option<CertificateDer<'static>>,
    ) -> Result<Option<UserInfo>, AuthnError> {
        let connection = ConnectionInfo {
            remote_addr: None,
            peer_certificates: chain.map(|c| Arc::new(vec![c])),
        };
        authn.authenticate(request(&connection)).await
    }

    #[tokio::test]
    async fn authenticator_verifies_against_the_client_ca() {
        let ca = authority("client-ca");
        let proxy_ca = authority("proxy-ca");
        let store = TrustStore::new(Trust::new(Some(bundle(&ca)), None));
        let authn = ClientCertificateAuthenticator::new(Arc::clone(&store));
        assert_eq!(authenticate(&authn, None).await, Ok(None));
        let alice = authenticate(&authn, Some(client_der(&ca, "alice", &["devs"])))
            .await
            .expect("ok")
            .expect("alice");
        assert_eq!(
            (alice.name.as_str(), alice.groups.as_slice()),
            ("alice", &["devs".to_owned()][..])
        );
        // A chain the handshake accepted for another CA is not a client identity.
        assert!(matches!(
            authenticate(
                &authn,
                Some(client_der(&proxy_ca, "front-proxy-client", &[]))
            )
            .await,
            Err(AuthnError::ClientCertificate(_))
        ));
        // Without a client CA the authenticator does not apply.
        store.replace(Trust::new(None, None));
        assert_eq!(
            authenticate(&authn, Some(client_der(&ca, "alice", &[]))).await,
            Ok(None)
        );
    }
}
