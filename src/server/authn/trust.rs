//! What the server trusts for client certificates, replaceable while it runs: the client CA
//! (ordinary users) and the front-proxy configuration (the aggregator). The TLS handshake
//! accepts a certificate from either CA and never requires one; the authenticators then decide
//! per request which CA the chain belongs to.

use std::fmt;
use std::sync::{Arc, RwLock};

use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, SignatureScheme};
use rustls_pki_types::{CertificateDer, UnixTime};

use super::request_header::RequestHeaderConfig;
use super::x509::{CaBundle, client_verifier};
use crate::server::tls;

/// One consistent set of trusted CAs.
#[derive(Clone, Default)]
pub struct Trust {
    client_ca: Option<CaBundle>,
    request_header: Option<RequestHeaderConfig>,
    /// Accepts chains to either CA; `None` when no CA is configured.
    handshake: Option<Arc<dyn ClientCertVerifier>>,
}

impl fmt::Debug for Trust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Trust")
            .field("client_ca", &self.client_ca)
            .field("request_header", &self.request_header)
            .finish_non_exhaustive()
    }
}

impl PartialEq for Trust {
    fn eq(&self, other: &Self) -> bool {
        self.client_ca == other.client_ca && self.request_header == other.request_header
    }
}

impl Trust {
    pub fn new(client_ca: Option<CaBundle>, request_header: Option<RequestHeaderConfig>) -> Self {
        let anchors: Vec<CertificateDer<'static>> = client_ca
            .iter()
            .chain(request_header.as_ref().map(|rh| &rh.ca))
            .flat_map(|bundle| bundle.certificates().iter().cloned())
            .collect();
        let handshake = if anchors.is_empty() {
            None
        } else {
            // Each bundle was already accepted on its own, so their union builds too.
            client_verifier(&anchors)
                .inspect_err(
                    |e| tracing::error!(error = %e, "cannot build the client certificate verifier"),
                )
                .ok()
        };
        Self {
            client_ca,
            request_header,
            handshake,
        }
    }

    pub fn client_ca(&self) -> Option<&CaBundle> {
        self.client_ca.as_ref()
    }

    pub fn request_header(&self) -> Option<&RequestHeaderConfig> {
        self.request_header.as_ref()
    }
}

/// The current `Trust`, swapped atomically when the configuration changes.
#[derive(Debug, Default)]
pub struct TrustStore {
    current: RwLock<Arc<Trust>>,
}

impl TrustStore {
    pub fn new(trust: Trust) -> Arc<Self> {
        Arc::new(Self {
            current: RwLock::new(Arc::new(trust)),
        })
    }

    pub fn current(&self) -> Arc<Trust> {
        match self.current.read() {
            Ok(trust) => Arc::clone(&trust),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// Installs `trust`; returns whether it differs from the previous one.
    pub fn replace(&self, trust: Trust) -> bool {
        let mut current = match self.current.write() {
            Ok(current) => current,
            Err(poisoned) => poisoned.into_inner(),
        };
        let changed = **current != trust;
        *current = Arc::new(trust);
        changed
    }

    /// The verifier for the TLS layer, reading this store on every handshake.
    pub fn handshake_verifier(self: &Arc<Self>) -> Arc<dyn ClientCertVerifier> {
        Arc::new(HandshakeVerifier {
            store: Arc::clone(self),
            provider: tls::provider(),
        })
    }
}

/// Always asks for a client certificate, never requires one, and accepts a chain to any
/// currently trusted CA (none while no CA is trusted). Asking even without a CA matters: a
/// connection made without a certificate would stay anonymous after the CAs arrive, whereas a
/// refused handshake is retried. It sends no CA names: Go clients then present their
/// certificate whatever its issuer, and the list would go stale when the CAs change anyway.
struct HandshakeVerifier {
    store: Arc<TrustStore>,
    provider: Arc<CryptoProvider>,
}

impl fmt::Debug for HandshakeVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandshakeVerifier").finish_non_exhaustive()
    }
}

impl ClientCertVerifier for HandshakeVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        match &self.store.current().handshake {
            Some(verifier) => verifier.verify_client_cert(end_entity, intermediates, now),
            None => Err(rustls::Error::InvalidCertificate(
                CertificateError::UnknownIssuer,
            )),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::authn::test_support::{authority, bundle, client_der};

    fn handshake_accepts(store: &Arc<TrustStore>, cert: &CertificateDer<'static>) -> bool {
        store
            .handshake_verifier()
            .verify_client_cert(cert, &[], UnixTime::now())
            .is_ok()
    }

    #[test]
    fn handshake_accepts_either_ca_and_follows_replacements() {
        let client_ca = authority("client-ca");
        let proxy_ca = authority("front-proxy-ca");
        let stranger = authority("stranger");
        let user = client_der(&client_ca, "alice", &[]);
        let proxy = client_der(&proxy_ca, "front-proxy-client", &[]);

        let store = TrustStore::new(Trust::default());
        let verifier = store.handshake_verifier();
        assert!(verifier.offer_client_auth());
        assert!(
            !handshake_accepts(&store, &user),
            "nothing to verify against"
        );

        let both = Trust::new(
            Some(bundle(&client_ca)),
            Some(RequestHeaderConfig::for_tests(bundle(&proxy_ca))),
        );
        assert!(store.replace(both.clone()));
        assert!(!store.replace(both), "same trust is no change");
        assert!(!verifier.client_auth_mandatory());
        assert!(verifier.root_hint_subjects().is_empty());
        assert!(handshake_accepts(&store, &user));
        assert!(handshake_accepts(&store, &proxy));
        assert!(!handshake_accepts(
            &store,
            &client_der(&stranger, "eve", &[])
        ));

        // Only the front-proxy CA left: ordinary client certificates fail the handshake.
        store.replace(Trust::new(
            None,
            Some(RequestHeaderConfig::for_tests(bundle(&proxy_ca))),
        ));
        assert!(!handshake_accepts(&store, &user));
        assert!(handshake_accepts(&store, &proxy));
    }
}
