//! TLS material for the HTTPS server: PEM loading, self-signed generation, a certificate
//! resolver that reloads its files when they change, and the rustls `ServerConfig` (ring,
//! ALPN `h2` + `http/1.1`, client certificates through a pluggable verifier).

use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, KeyPair, KeyUsagePurpose,
};
use rustls::crypto::CryptoProvider;
use rustls::server::danger::ClientCertVerifier;
use rustls::server::{ClientHello, ResolvesServerCert, ServerConfig};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no PEM certificate found{0}")]
    NoCertificate(String),
    #[error("invalid PEM certificate{context}: {message}")]
    BadCertificate { context: String, message: String },
    #[error("no PEM private key found{context}: {message}")]
    BadKey { context: String, message: String },
    #[error("certificate and private key do not match or cannot be used: {0}")]
    KeyPair(rustls::Error),
    #[error("generating certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("building TLS configuration: {0}")]
    Config(String),
}

/// The one crypto provider of the process (ring).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Installs ring as the process default (needed by reqwest with `rustls-no-provider`).
/// Calling it again is harmless.
pub fn install_default_provider() {
    let _already_installed = rustls::crypto::ring::default_provider().install_default();
}

fn context(path: Option<&Path>) -> String {
    path.map(|p| format!(" in {}", p.display()))
        .unwrap_or_default()
}

/// Parses all certificates of a PEM bundle.
pub fn parse_certificates(
    pem: &[u8],
    path: Option<&Path>,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::BadCertificate {
            context: context(path),
            message: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate(context(path)));
    }
    Ok(certs)
}

/// Reads a PEM file.
pub fn read_file(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

/// A certificate chain and its key from PEM, checked to belong together.
pub fn certified_key_from_pem(
    cert_pem: &[u8],
    key_pem: &[u8],
) -> Result<Arc<CertifiedKey>, TlsError> {
    certified_key(cert_pem, key_pem, None)
}

fn certified_key(
    cert_pem: &[u8],
    key_pem: &[u8],
    files: Option<&KeyPairFiles>,
) -> Result<Arc<CertifiedKey>, TlsError> {
    let chain = parse_certificates(cert_pem, files.map(|f| f.cert.as_path()))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| TlsError::BadKey {
        context: context(files.map(|f| f.key.as_path())),
        message: e.to_string(),
    })?;
    CertifiedKey::from_der(chain, key, &provider())
        .map(Arc::new)
        .map_err(TlsError::KeyPair)
}

/// `--tls-cert-file` / `--tls-private-key-file`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPairFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl KeyPairFiles {
    fn read(&self) -> Result<(Vec<u8>, Vec<u8>), TlsError> {
        Ok((read_file(&self.cert)?, read_file(&self.key)?))
    }

    /// Loads and checks the pair.
    pub fn load(&self) -> Result<Arc<CertifiedKey>, TlsError> {
        let (cert, key) = self.read()?;
        certified_key(&cert, &key, Some(self))
    }
}

/// PEM text of a certificate and its key.
#[derive(Clone, PartialEq, Eq)]
pub struct PemPair {
    pub cert_pem: String,
    pub key_pem: String,
}

impl fmt::Debug for PemPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PemPair")
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

impl PemPair {
    pub fn certified_key(&self) -> Result<Arc<CertifiedKey>, TlsError> {
        certified_key_from_pem(self.cert_pem.as_bytes(), self.key_pem.as_bytes())
    }

    /// The certificate chain in DER, leaf first.
    pub fn certificates(&self) -> Result<Vec<CertificateDer<'static>>, TlsError> {
        parse_certificates(self.cert_pem.as_bytes(), None)
    }
}

/// The names every serving certificate covers: loopback by name and address.
pub const LOOPBACK_NAMES: &[&str] = &["localhost", "127.0.0.1", "::1"];

/// Subject alternative names for a serving certificate: loopback plus `extra`.
pub fn serving_names(extra: &[String]) -> Vec<String> {
    let mut names: Vec<String> = LOOPBACK_NAMES.iter().map(|n| (*n).to_owned()).collect();
    for name in extra {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    names
}

/// Validity window from yesterday to `years` from now (rcgen takes calendar dates).
pub fn validity(params: &mut CertificateParams, years: i16) {
    let today = jiff::Zoned::now()
        .with_time_zone(jiff::tz::TimeZone::UTC)
        .date();
    let yesterday = today.yesterday().unwrap_or(today);
    let ymd = |d: jiff::civil::Date, add_years: i16| {
        rcgen::date_time_ymd(
            i32::from(d.year().saturating_add(add_years)),
            d.month().unsigned_abs(),
            // Every month has a 28th, so the end date exists in any year.
            d.day().unsigned_abs().min(28),
        )
    };
    params.not_before = ymd(yesterday, 0);
    params.not_after = ymd(today, years);
}

/// Parameters of an end-entity certificate: subject `CN=<common_name>, O=<organization>…`,
/// subject alternative `names` (DNS names or IP addresses), one extended key usage, valid
/// for a year and naming its issuer's key.
pub fn leaf_params(
    common_name: &str,
    organizations: &[&str],
    names: &[String],
    usage: ExtendedKeyUsagePurpose,
) -> Result<CertificateParams, TlsError> {
    let mut params = CertificateParams::new(names.to_vec())?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    for org in organizations {
        dn.push(DnType::OrganizationName, *org);
    }
    params.distinguished_name = dn;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![usage];
    params.use_authority_key_identifier_extension = true;
    validity(&mut params, 1);
    Ok(params)
}

/// Parameters of a serving certificate for `names` (DNS names or IP addresses).
pub fn serving_params(common_name: &str, names: &[String]) -> Result<CertificateParams, TlsError> {
    leaf_params(common_name, &[], names, ExtendedKeyUsagePurpose::ServerAuth)
}

/// A self-signed serving certificate for loopback and `dns_names` (when no files are given).
pub fn self_signed(dns_names: &[String]) -> Result<PemPair, TlsError> {
    let key = KeyPair::generate()?;
    let params = serving_params("capmox-apiserver", &serving_names(dns_names))?;
    let cert = params.self_signed(&key)?;
    Ok(PemPair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// A certificate resolver whose certificate can be swapped while the server runs.
pub struct ReloadingCertResolver {
    current: RwLock<Arc<CertifiedKey>>,
}

impl fmt::Debug for ReloadingCertResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReloadingCertResolver")
            .finish_non_exhaustive()
    }
}

impl ReloadingCertResolver {
    pub fn new(key: Arc<CertifiedKey>) -> Self {
        Self {
            current: RwLock::new(key),
        }
    }

    pub fn current(&self) -> Option<Arc<CertifiedKey>> {
        self.current.read().ok().map(|k| Arc::clone(&k))
    }

    pub fn replace(&self, key: Arc<CertifiedKey>) {
        if let Ok(mut current) = self.current.write() {
            *current = key;
        }
    }

    /// Polls `files` every `interval` and swaps in the new pair when their content changes and
    /// loads cleanly ([`watch_key_pair`]). The task stops when the returned handle is dropped.
    pub fn watch(self: &Arc<Self>, files: KeyPairFiles, interval: Duration) -> ReloadTask {
        let resolver = Arc::clone(self);
        watch_key_pair(files, interval, "serving certificate", move |key, _| {
            resolver.replace(key);
            std::future::ready(Ok(()))
        })
    }
}

/// A certificate and key as the files hold them (PEM).
pub type PemFiles = (Vec<u8>, Vec<u8>);

/// Polls `files` every `interval` and, when their content changes and loads cleanly, hands the
/// loaded pair and its PEM to `apply`. A pair that does not load (half written, mismatched) or
/// that `apply` refuses is logged and tried again at the next change or tick; the previous one
/// stays in force. `what` names the pair in the log. The task stops when the returned handle is
/// dropped.
pub fn watch_key_pair<F, Fut>(
    files: KeyPairFiles,
    interval: Duration,
    what: &'static str,
    apply: F,
) -> ReloadTask
where
    F: Fn(Arc<CertifiedKey>, &PemFiles) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), String>> + Send,
{
    let handle = tokio::spawn(async move {
        let mut last = files.read().ok();
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            ticker.tick().await;
            let Ok(now) = files.read() else {
                continue;
            };
            if last.as_ref() == Some(&now) {
                continue;
            }
            let applied = match certified_key(&now.0, &now.1, Some(&files)) {
                Ok(key) => apply(key, &now).await,
                Err(e) => Err(e.to_string()),
            };
            match applied {
                Ok(()) => {
                    tracing::info!(cert = %files.cert.display(), "reloaded {what}");
                    last = Some(now);
                }
                Err(error) => {
                    tracing::warn!(%error, "{what} changed but cannot be used; keeping the previous one");
                }
            }
        }
    });
    ReloadTask::new(handle)
}

impl ResolvesServerCert for ReloadingCertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current()
    }
}

/// Stops the certificate reload loop when dropped.
pub type ReloadTask = crate::task::TaskGuard;

/// The server configuration: the resolver's certificate, ALPN h2 and http/1.1, and client
/// certificates checked by `client_verifier` when given (it decides whether they are asked
/// for and whether they are required).
pub fn server_config(
    resolver: Arc<dyn ResolvesServerCert>,
    client_verifier: Option<Arc<dyn ClientCertVerifier>>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let mut config = match client_verifier {
        Some(verifier) => builder
            .with_client_cert_verifier(verifier)
            .with_cert_resolver(resolver),
        None => builder.with_no_client_auth().with_cert_resolver(resolver),
    };
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_covers_loopback_and_names() {
        let pair =
            self_signed(&["capmox-apiserver.capmox-system.svc".to_owned()]).expect("generate");
        let key = pair.certified_key().expect("usable");
        let der = key.end_entity_cert().expect("leaf");
        let (_, cert) = x509_parser::parse_x509_certificate(der).expect("x509");
        let san = cert.subject_alternative_name().expect("ext").expect("san");
        let mut dns = Vec::new();
        let mut ips = Vec::new();
        for name in &san.value.general_names {
            match name {
                x509_parser::extensions::GeneralName::DNSName(d) => dns.push((*d).to_owned()),
                x509_parser::extensions::GeneralName::IPAddress(ip) => ips.push(ip.to_vec()),
                _ => {}
            }
        }
        assert_eq!(dns, ["localhost", "capmox-apiserver.capmox-system.svc"]);
        assert!(ips.contains(&vec![127, 0, 0, 1]), "{ips:?}");
        assert!(cert.validity().is_valid());
    }

    #[test]
    fn mismatched_or_garbage_pem_is_rejected() {
        let a = self_signed(&[]).expect("a");
        let b = self_signed(&[]).expect("b");
        assert!(matches!(
            certified_key_from_pem(a.cert_pem.as_bytes(), b.key_pem.as_bytes()),
            Err(TlsError::KeyPair(_))
        ));
        assert!(matches!(
            certified_key_from_pem(b"nothing", a.key_pem.as_bytes()),
            Err(TlsError::NoCertificate(_))
        ));
        assert!(matches!(
            certified_key_from_pem(a.cert_pem.as_bytes(), b"nothing"),
            Err(TlsError::BadKey { .. })
        ));
        let missing = KeyPairFiles {
            cert: "/nonexistent/c".into(),
            key: "/nonexistent/k".into(),
        };
        assert!(matches!(missing.load(), Err(TlsError::Read { .. })));
    }

    #[tokio::test]
    async fn reloads_when_files_change() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = KeyPairFiles {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
        };
        let write = |pair: &PemPair| {
            std::fs::write(&files.cert, &pair.cert_pem).expect("cert");
            std::fs::write(&files.key, &pair.key_pem).expect("key");
        };
        let first = self_signed(&[]).expect("first");
        write(&first);
        let resolver = Arc::new(ReloadingCertResolver::new(files.load().expect("load")));
        let _task = resolver.watch(files.clone(), Duration::from_millis(20));
        let leaf = |r: &ReloadingCertResolver| r.current().expect("key").cert[0].clone();
        let before = leaf(&resolver);

        // A half-written update (garbage key) keeps the old certificate.
        std::fs::write(&files.key, "garbage").expect("garbage");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(leaf(&resolver), before);

        let second = self_signed(&[]).expect("second");
        write(&second);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while leaf(&resolver) == before {
            assert!(
                tokio::time::Instant::now() < deadline,
                "certificate was not reloaded"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            leaf(&resolver),
            second.certified_key().expect("second").cert[0]
        );
    }
}
