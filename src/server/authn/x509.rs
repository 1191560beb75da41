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
use x509_parser::certificate::X509Certificate;

use super::trust::TrustStore;
use super::verified_chains::VerifiedChains;
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

/// Trust anchors for client certificates, the verifier built from them and the chains it
/// verified (clones share them; a bundle built anew, e.g. after a CA rotation, starts empty).
#[derive(Clone)]
pub struct CaBundle {
    certificates: Vec<CertificateDer<'static>>,
    verifier: Arc<dyn ClientCertVerifier>,
    verified: Arc<VerifiedChains>,
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
fn client_verifier(
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
            verified: Arc::default(),
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
    /// the leaf may be used for client authentication, now; the leaf's subject. A chain
    /// verified before is believed without checking its signatures again (or reading its
    /// subject again) while its certificates are valid.
    pub fn verify(&self, chain: &[CertificateDer<'static>]) -> Result<Arc<Subject>, String> {
        self.verify_at(chain, UnixTime::now())
    }

    fn verify_at(
        &self,
        chain: &[CertificateDer<'static>],
        now: UnixTime,
    ) -> Result<Arc<Subject>, String> {
        let (leaf, intermediates) = chain
            .split_first()
            .ok_or_else(|| "no certificate".to_owned())?;
        let fingerprint = VerifiedChains::fingerprint(chain);
        if let Some(subject) = self.verified.get(&fingerprint, now) {
            return Ok(subject);
        }
        self.verifier
            .verify_client_cert(leaf, intermediates, now)
            .map_err(|e| e.to_string())?;
        match self.verified.insert(fingerprint, chain, now) {
            Some(subject) => Ok(subject),
            None => Subject::parse(leaf)
                .map(Arc::new)
                .map_err(|e| e.to_string()),
        }
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

/// What identifies a certificate's holder: its subject's common name (empty when it has
/// none) and organizations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    pub common_name: String,
    pub organizations: Vec<String>,
}

impl Subject {
    pub fn of(cert: &X509Certificate<'_>) -> Self {
        let subject = cert.subject();
        Self {
            common_name: subject
                .iter_common_name()
                .find_map(|a| a.as_str().ok())
                .unwrap_or_default()
                .to_owned(),
            organizations: subject
                .iter_organization()
                .filter_map(|a| a.as_str().ok())
                .map(str::to_owned)
                .collect(),
        }
    }

    pub fn parse(der: &[u8]) -> Result<Self, CertificateIdentityError> {
        x509_parser::parse_x509_certificate(der)
            .map(|(_, cert)| Self::of(&cert))
            .map_err(|e| CertificateIdentityError::Parse(e.to_string()))
    }

    /// The identity of a verified client certificate: CN is the user, each O a group.
    pub fn user(&self) -> Result<UserInfo, CertificateIdentityError> {
        if self.common_name.is_empty() {
            return Err(CertificateIdentityError::NoCommonName);
        }
        Ok(UserInfo {
            name: self.common_name.clone(),
            groups: self.organizations.clone(),
            ..UserInfo::default()
        })
    }
}

/// The identity of a client certificate (see [`Subject::user`]).
pub fn user_from_certificate(der: &[u8]) -> Result<UserInfo, CertificateIdentityError> {
    Subject::parse(der)?.user()
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
                    .and_then(|subject| subject.user().map_err(|e| e.to_string()))
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

    #[test]
    fn verified_chains_are_remembered_until_they_expire() {
        let ca = authority("ca");
        let trusted = bundle(&ca);
        let alice = [client_der(&ca, "alice", &["devs"])];
        let first = trusted.verify(&alice).expect("first");
        let remembered = trusted.verify(&alice).expect("remembered");
        assert_eq!(trusted.verified.len(), 1);
        assert_eq!(first, remembered);
        assert_eq!(
            (first.common_name.as_str(), first.organizations.as_slice()),
            ("alice", &["devs".to_owned()][..])
        );
        // Refusals are not remembered.
        let eve = [client_der(&authority("other"), "eve", &[])];
        assert!(trusted.verify(&eve).is_err());
        assert_eq!(trusted.verified.len(), 1);
        // Past the leaf's end of validity the remembered chain is verified again: refused.
        let not_after = x509_parser::parse_x509_certificate(&alice[0])
            .expect("parse")
            .1
            .validity()
            .not_after
            .timestamp();
        let expired = UnixTime::since_unix_epoch(std::time::Duration::from_secs(
            u64::try_from(not_after).expect("after 1970") + 1,
        ));
        assert!(trusted.verify_at(&alice, expired).is_err());
        // Clones share what was verified; a bundle of the same CA built anew starts empty.
        assert_eq!(trusted.clone().verified.len(), 1);
        assert!(bundle(&ca).verified.is_empty());
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
        let alice_der = client_der(&ca, "alice", &["devs"]);
        for _ in 0..2 {
            let alice = authenticate(&authn, Some(alice_der.clone()))
                .await
                .expect("ok")
                .expect("alice");
            assert_eq!(
                (alice.name.as_str(), alice.groups.as_slice()),
                ("alice", &["devs".to_owned()][..])
            );
        }
        // A rotated client CA refuses alice, although her chain was verified (and remembered)
        // under the previous one; trusting her CA again accepts her again.
        store.replace(Trust::new(Some(bundle(&proxy_ca)), None));
        assert!(matches!(
            authenticate(&authn, Some(alice_der.clone())).await,
            Err(AuthnError::ClientCertificate(_))
        ));
        store.replace(Trust::new(Some(bundle(&ca)), None));
        assert!(matches!(
            authenticate(&authn, Some(alice_der)).await,
            Ok(Some(_))
        ));
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
