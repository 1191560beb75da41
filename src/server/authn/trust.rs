//! What the server trusts for client certificates, replaceable while it runs: the client CA
//! (ordinary users) and the front-proxy configuration (the aggregator). The TLS handshake asks
//! for a certificate, never requires one and accepts any (the client still proves it holds
//! the key); the authenticators then decide per request which CA, if any, the chain belongs
//! to, so a certificate nobody trusts is a 401 Status, as kube-apiserver answers, instead of
//! a failed handshake the client can only report as a TLS error.

use std::fmt;
use std::sync::{Arc, RwLock};

use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use rustls_pki_types::{CertificateDer, UnixTime};

use super::request_header::RequestHeaderConfig;
use super::x509::CaBundle;
use crate::server::tls;

/// One consistent set of trusted CAs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trust {
    client_ca: Option<CaBundle>,
    request_header: Option<RequestHeaderConfig>,
}

impl Trust {
    pub fn new(client_ca: Option<CaBundle>, request_header: Option<RequestHeaderConfig>) -> Self {
        Self {
            client_ca,
            request_header,
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

    /// The verifier for the TLS layer.
    pub fn handshake_verifier(self: &Arc<Self>) -> Arc<dyn ClientCertVerifier> {
        Arc::new(HandshakeVerifier {
            provider: tls::provider(),
        })
    }
}

/// Always asks for a client certificate, never requires one, and takes whatever chain is
/// presented: which CA it belongs to is decided per request, because trust can change while
/// a connection lives. Asking even without a CA matters: a connection made without a
/// certificate would stay anonymous after the CAs arrive. It sends no CA names: Go clients
/// then present their certificate whatever its issuer, and the list would go stale when the
/// CAs change anyway. The handshake signature is still verified, so the client holds the key.
struct HandshakeVerifier {
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
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
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

    #[test]
    fn the_handshake_takes_any_certificate_and_trust_follows_replacements() {
        let client_ca = authority("client-ca");
        let stranger = authority("stranger");
        let store = TrustStore::new(Trust::default());
        let verifier = store.handshake_verifier();
        assert!(verifier.offer_client_auth());
        assert!(!verifier.client_auth_mandatory());
        assert!(verifier.root_hint_subjects().is_empty());
        let eve = client_der(&stranger, "eve", &[]);
        assert!(
            verifier
                .verify_client_cert(&eve, &[], UnixTime::now())
                .is_ok(),
            "refused per request (401), not in the handshake"
        );

        let trust = Trust::new(Some(bundle(&client_ca)), None);
        assert!(store.replace(trust.clone()));
        assert!(!store.replace(trust), "same trust is no change");
        assert!(store.current().client_ca().is_some());
    }
}
