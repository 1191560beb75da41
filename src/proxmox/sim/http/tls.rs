//! A self-signed CA and a serving certificate for 127.0.0.1/localhost (and the address the
//! simulator listens on, when another), generated at
//! start (rcgen), so clients can exercise every TLS mode: custom CA, pinned fingerprint,
//! insecure — and see system-root verification fail.

use std::net::IpAddr;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::ServerConfig;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::proxmox::sha256;
use crate::proxmox::sim::error::SimError;

/// The generated material.
pub struct ServingCert {
    /// rustls config for the listener (HTTP/1.1 only, like pveproxy).
    pub config: Arc<ServerConfig>,
    /// The CA certificate (PEM): trust this as a custom CA.
    pub ca_pem: String,
    /// SHA-256 fingerprint of the serving certificate (`AA:BB:...`).
    pub fingerprint: String,
}

fn tls_err(e: impl std::fmt::Display) -> SimError {
    SimError::Tls(e.to_string())
}

/// Generates a CA ("Proxmox Virtual Environment" style) and a leaf for loopback and `address`.
pub fn generate(address: IpAddr) -> Result<ServingCert, SimError> {
    crate::proxmox::client::install_crypto_provider();
    let ca_key = KeyPair::generate().map_err(tls_err)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(tls_err)?;
    ca_params.distinguished_name.push(
        DnType::CommonName,
        "Proxmox Virtual Environment (simulator)",
    );
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    let ca_cert = ca_params.self_signed(&ca_key).map_err(tls_err)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let leaf_key = KeyPair::generate().map_err(tls_err)?;
    let mut names = vec![
        "127.0.0.1".to_string(),
        "localhost".to_string(),
        "::1".to_string(),
    ];
    if !address.is_unspecified() && !names.contains(&address.to_string()) {
        names.push(address.to_string());
    }
    let mut leaf_params = CertificateParams::new(names).map_err(tls_err)?;
    leaf_params
        .distinguished_name
        .push(DnType::CommonName, "pve-sim.localdomain");
    let leaf = leaf_params.signed_by(&leaf_key, &issuer).map_err(tls_err)?;

    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let mut config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(tls_err)?
            .with_no_client_auth()
            .with_single_cert(vec![leaf.der().clone(), ca_cert.der().clone()], key)
            .map_err(tls_err)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(ServingCert {
        config: Arc::new(config),
        ca_pem: ca_cert.pem(),
        fingerprint: sha256::fingerprint(leaf.der()),
    })
}
