//! How the client trusts the PVE server's certificate.
//!
//! PVE nodes ship a self-signed certificate issued by the cluster's own CA, so the
//! useful choices are: the cluster CA (`/etc/pve/pve-root-ca.pem`), the node's pinned
//! fingerprint (as `GET /nodes` reports it), system roots (ACME certificates), or — only
//! when asked for explicitly — no verification.

use std::fmt;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use super::error::Error;
use crate::proxmox::sha256;

/// Server certificate verification mode.
#[derive(Clone, PartialEq, Eq)]
pub enum TlsMode {
    /// Verify against the operating system's trust store.
    System,
    /// Verify against exactly these PEM certificates (e.g. the cluster CA).
    CustomCa(String),
    /// Accept exactly the leaf certificate with this SHA-256 fingerprint
    /// (`AA:BB:...` or plain hex); the host name is not checked.
    Fingerprint(String),
    /// Do not verify the server at all. Explicit opt-in only.
    Insecure,
}

impl fmt::Debug for TlsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::System => f.write_str("System"),
            Self::CustomCa(_) => f.write_str("CustomCa(..)"),
            Self::Fingerprint(fp) => write!(f, "Fingerprint({fp})"),
            Self::Insecure => f.write_str("Insecure"),
        }
    }
}

/// Installs rustls' ring provider as the process default. reqwest is built with
/// `rustls-no-provider`, so this must happen before the first client is built; calling
/// it again is harmless.
pub fn install_crypto_provider() {
    // Err only means a provider is already installed, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Parses `AA:BB:..`, `aa bb ..` or plain hex into the 32 bytes of a SHA-256.
pub fn parse_fingerprint(s: &str) -> Option<[u8; 32]> {
    let hex: Vec<u8> = s
        .bytes()
        .filter(|b| !matches!(b, b':' | b' ' | b'-'))
        .collect();
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in hex.chunks(2).enumerate() {
        let text = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(text, 16).ok()?;
    }
    Some(out)
}

/// Applies `mode` to a reqwest builder.
pub(super) fn configure(
    builder: reqwest::ClientBuilder,
    mode: &TlsMode,
) -> Result<reqwest::ClientBuilder, Error> {
    install_crypto_provider();
    Ok(match mode {
        TlsMode::System => builder,
        TlsMode::CustomCa(pem) => {
            let certs = reqwest::Certificate::from_pem_bundle(pem.as_bytes())
                .map_err(|e| Error::Config(format!("custom CA: {e}")))?;
            if certs.is_empty() {
                return Err(Error::Config("custom CA: no certificate in PEM".into()));
            }
            builder.tls_certs_only(certs)
        }
        TlsMode::Fingerprint(fp) => {
            let pin = parse_fingerprint(fp).ok_or_else(|| {
                Error::Config(format!("fingerprint {fp:?} is not a SHA-256 in hex"))
            })?;
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ClientConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .map_err(|e| Error::Config(format!("TLS versions: {e}")))?
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(PinnedVerifier { pin, provider }))
                .with_no_client_auth();
            builder.tls_backend_preconfigured(config)
        }
        TlsMode::Insecure => builder.tls_danger_accept_invalid_certs(true),
    })
}

/// Accepts the one leaf certificate whose SHA-256 matches; handshake signatures are still
/// verified so the peer must hold that certificate's key.
#[derive(Debug)]
struct PinnedVerifier {
    pin: [u8; 32],
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for PinnedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if sha256::digest(end_entity.as_ref()) == self.pin {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(
                "server certificate does not match the pinned fingerprint".into(),
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
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
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
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

    #[test]
    fn fingerprints_parse_in_every_spelling() {
        let colon = (0..32)
            .map(|i| format!("{i:02X}"))
            .collect::<Vec<_>>()
            .join(":");
        let plain = colon.replace(':', "").to_lowercase();
        let expect: Vec<u8> = (0..32).collect();
        assert_eq!(
            parse_fingerprint(&colon).map(|a| a.to_vec()),
            Some(expect.clone())
        );
        assert_eq!(parse_fingerprint(&plain).map(|a| a.to_vec()), Some(expect));
        assert_eq!(parse_fingerprint("AB:CD"), None);
        assert_eq!(parse_fingerprint(&"zz".repeat(32)), None);
    }
}
