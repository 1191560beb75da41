//! The `dev` mode's PKI: a local CA, a serving certificate it signs, an admin client
//! certificate (`CN=capmox-admin, O=system:masters`) and a kubeconfig that kubectl and client
//! libraries use as is. The CA and admin certificate persist in the directory so an existing
//! kubeconfig keeps working across restarts; the serving certificate is re-issued each start.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::sign::CertifiedKey;
use rustls_pki_types::CertificateDer;
use serde::Serialize;

use super::tls::{self, PemPair, TlsError};

pub const ADMIN_USER: &str = "capmox-admin";
pub const ADMIN_GROUP: &str = "system:masters";
const CLUSTER_NAME: &str = "capmox-dev";
const CA_NAME: &str = "capmox-dev-ca";

const CA_CERT: &str = "ca.crt";
const CA_KEY: &str = "ca.key";
const SERVING_CERT: &str = "serving.crt";
const SERVING_KEY: &str = "serving.key";
const ADMIN_CERT: &str = "admin.crt";
const ADMIN_KEY: &str = "admin.key";
pub const KUBECONFIG: &str = "kubeconfig";

/// The dev directory's certificates.
#[derive(Debug, Clone)]
pub struct DevPki {
    pub dir: PathBuf,
    pub ca: PemPair,
    pub serving: PemPair,
    pub admin: PemPair,
}

fn write_file(path: &Path, contents: &str, private: bool) -> Result<(), TlsError> {
    let io = |source| TlsError::Write {
        path: path.to_owned(),
        source,
    };
    std::fs::write(path, contents).map_err(io)?;
    if private {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
        }
    }
    Ok(())
}

fn read_pair(dir: &Path, cert: &str, key: &str) -> Option<PemPair> {
    let cert_pem = std::fs::read_to_string(dir.join(cert)).ok()?;
    let key_pem = std::fs::read_to_string(dir.join(key)).ok()?;
    Some(PemPair { cert_pem, key_pem })
}

/// A certificate authority that issues leaf certificates: `dev`'s CA, and CAs for tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateAuthority {
    common_name: String,
    pub pair: PemPair,
}

impl CertificateAuthority {
    /// A new self-signed CA, valid for ten years.
    pub fn generate(common_name: &str) -> Result<Self, TlsError> {
        let key = KeyPair::generate()?;
        let mut params = ca_params(common_name)?;
        tls::validity(&mut params, 10);
        let cert = params.self_signed(&key)?;
        Ok(Self {
            common_name: common_name.to_owned(),
            pair: PemPair {
                cert_pem: cert.pem(),
                key_pem: key.serialize_pem(),
            },
        })
    }

    /// A CA generated earlier by [`CertificateAuthority::generate`] with this common name.
    pub fn from_pair(common_name: &str, pair: PemPair) -> Self {
        Self {
            common_name: common_name.to_owned(),
            pair,
        }
    }

    /// Issues a certificate with a fresh key.
    pub fn issue(&self, params: &CertificateParams) -> Result<PemPair, TlsError> {
        let issuer = Issuer::new(
            ca_params(&self.common_name)?,
            KeyPair::from_pem(&self.pair.key_pem)?,
        );
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &issuer)?;
        Ok(PemPair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// A client certificate for user `common_name` in groups `organizations`.
    pub fn client(&self, common_name: &str, organizations: &[&str]) -> Result<PemPair, TlsError> {
        self.issue(&tls::leaf_params(
            common_name,
            organizations,
            &[],
            ExtendedKeyUsagePurpose::ClientAuth,
        )?)
    }

    /// A serving certificate for loopback plus `names`.
    pub fn serving(&self, names: &[String]) -> Result<PemPair, TlsError> {
        self.issue(&tls::serving_params(
            "capmox-apiserver",
            &tls::serving_names(names),
        )?)
    }
}

/// A CA's parameters. Deterministic, so an issuer can be rebuilt from the stored key alone:
/// issued certificates name this subject and the key identifier derived from the key.
fn ca_params(common_name: &str) -> Result<CertificateParams, TlsError> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(params)
}

/// Whether a stored pair still loads and its certificate is currently valid.
fn usable(pair: &PemPair) -> bool {
    let Ok(key) = pair.certified_key() else {
        return false;
    };
    key.end_entity_cert()
        .ok()
        .and_then(|der| x509_parser::parse_x509_certificate(der).ok())
        .is_some_and(|(_, cert)| cert.validity().is_valid())
}

impl DevPki {
    /// Loads or creates the CA and admin certificate in `dir`, and issues a serving certificate
    /// for loopback plus `serving_names`.
    pub fn ensure(dir: &Path, serving_names: &[String]) -> Result<Self, TlsError> {
        std::fs::create_dir_all(dir).map_err(|source| TlsError::Write {
            path: dir.to_owned(),
            source,
        })?;
        let existing_ca = read_pair(dir, CA_CERT, CA_KEY).filter(usable);
        let ca_is_new = existing_ca.is_none();
        let authority = match existing_ca {
            Some(ca) => CertificateAuthority::from_pair(CA_NAME, ca),
            None => {
                let authority = CertificateAuthority::generate(CA_NAME)?;
                write_file(&dir.join(CA_CERT), &authority.pair.cert_pem, false)?;
                write_file(&dir.join(CA_KEY), &authority.pair.key_pem, true)?;
                authority
            }
        };
        let admin = match read_pair(dir, ADMIN_CERT, ADMIN_KEY).filter(|p| !ca_is_new && usable(p))
        {
            Some(admin) => admin,
            None => {
                let admin = authority.client(ADMIN_USER, &[ADMIN_GROUP])?;
                write_file(&dir.join(ADMIN_CERT), &admin.cert_pem, false)?;
                write_file(&dir.join(ADMIN_KEY), &admin.key_pem, true)?;
                admin
            }
        };
        let serving = authority.serving(serving_names)?;
        let ca = authority.pair;
        write_file(&dir.join(SERVING_CERT), &serving.cert_pem, false)?;
        write_file(&dir.join(SERVING_KEY), &serving.key_pem, true)?;
        Ok(Self {
            dir: dir.to_owned(),
            ca,
            serving,
            admin,
        })
    }

    pub fn serving_key(&self) -> Result<Arc<CertifiedKey>, TlsError> {
        self.serving.certified_key()
    }

    /// The CA as trust anchor for client certificates.
    pub fn client_ca(&self) -> Result<Vec<CertificateDer<'static>>, TlsError> {
        self.ca.certificates()
    }

    pub fn kubeconfig_path(&self) -> PathBuf {
        self.dir.join(KUBECONFIG)
    }

    /// Writes `DIR/kubeconfig` pointing at `server_url` with embedded CA and admin credentials.
    pub fn write_kubeconfig(&self, server_url: &str) -> Result<PathBuf, TlsError> {
        let config = Kubeconfig {
            api_version: "v1",
            kind: "Config",
            clusters: vec![NamedCluster {
                name: CLUSTER_NAME,
                cluster: Cluster {
                    server: server_url.to_owned(),
                    certificate_authority_data: STANDARD.encode(&self.ca.cert_pem),
                },
            }],
            users: vec![NamedUser {
                name: ADMIN_USER,
                user: User {
                    client_certificate_data: STANDARD.encode(&self.admin.cert_pem),
                    client_key_data: STANDARD.encode(&self.admin.key_pem),
                },
            }],
            contexts: vec![NamedContext {
                name: CLUSTER_NAME,
                context: Context {
                    cluster: CLUSTER_NAME,
                    user: ADMIN_USER,
                    namespace: "default",
                },
            }],
            current_context: CLUSTER_NAME,
        };
        let yaml = serde_saphyr::to_string(&config)
            .map_err(|e| TlsError::Config(format!("kubeconfig: {e}")))?;
        let path = self.kubeconfig_path();
        write_file(&path, &yaml, true)?;
        Ok(path)
    }
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct Kubeconfig {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    clusters: Vec<NamedCluster>,
    users: Vec<NamedUser>,
    contexts: Vec<NamedContext>,
    current_context: &'static str,
}

#[derive(Serialize)]
struct NamedCluster {
    name: &'static str,
    cluster: Cluster,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct Cluster {
    server: String,
    certificate_authority_data: String,
}

#[derive(Serialize)]
struct NamedUser {
    name: &'static str,
    user: User,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct User {
    client_certificate_data: String,
    client_key_data: String,
}

#[derive(Serialize)]
struct NamedContext {
    name: &'static str,
    context: Context,
}

#[derive(Serialize)]
struct Context {
    cluster: &'static str,
    user: &'static str,
    namespace: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::authn::x509::user_from_certificate;
    use rustls::client::danger::ServerCertVerifier as _;

    #[test]
    fn creates_then_reuses_ca_and_admin() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = DevPki::ensure(dir.path(), &[]).expect("first");
        let second = DevPki::ensure(dir.path(), &["example.test".into()]).expect("second");
        assert_eq!(first.ca, second.ca, "CA persists");
        assert_eq!(first.admin, second.admin, "admin certificate persists");
        assert_ne!(
            first.serving, second.serving,
            "serving certificate is re-issued"
        );

        let admin_der =
            tls::parse_certificates(second.admin.cert_pem.as_bytes(), None).expect("admin");
        let user = user_from_certificate(&admin_der[0]).expect("identity");
        assert_eq!(
            (user.name.as_str(), user.groups.as_slice()),
            (ADMIN_USER, &[ADMIN_GROUP.to_owned()][..])
        );

        // The serving and admin certificates chain to the CA.
        let ca = second.client_ca().expect("ca");
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca[0].clone()).expect("root");
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            tls::provider(),
        )
        .build()
        .expect("verifier");
        let now = rustls_pki_types::UnixTime::now();
        verifier
            .verify_client_cert(&admin_der[0], &[], now)
            .expect("admin chains to CA");
        // The serving certificate issued after the restart (from the stored CA key) verifies too.
        let mut server_roots = rustls::RootCertStore::empty();
        server_roots.add(ca[0].clone()).expect("root");
        let server_verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(server_roots),
            tls::provider(),
        )
        .build()
        .expect("server verifier");
        let serving =
            tls::parse_certificates(second.serving.cert_pem.as_bytes(), None).expect("serving");
        for name in ["localhost", "127.0.0.1", "example.test"] {
            let server_name = rustls_pki_types::ServerName::try_from(name).expect("name");
            server_verifier
                .verify_server_cert(&serving[0], &[], &server_name, &[], now)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    #[test]
    fn kubeconfig_is_complete() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pki = DevPki::ensure(dir.path(), &[]).expect("pki");
        let path = pki
            .write_kubeconfig("https://127.0.0.1:6443")
            .expect("write");
        let text = std::fs::read_to_string(&path).expect("read");
        let parsed: serde_json::Value = serde_saphyr::from_str(&text).expect("yaml");
        assert_eq!(parsed["current-context"], "capmox-dev");
        assert_eq!(
            parsed["clusters"][0]["cluster"]["server"],
            "https://127.0.0.1:6443"
        );
        let ca = STANDARD
            .decode(
                parsed["clusters"][0]["cluster"]["certificate-authority-data"]
                    .as_str()
                    .expect("ca"),
            )
            .expect("b64");
        assert_eq!(ca, pki.ca.cert_pem.as_bytes());
        for key in ["client-certificate-data", "client-key-data"] {
            assert!(
                parsed["users"][0]["user"][key]
                    .as_str()
                    .is_some_and(|v| !v.is_empty()),
                "{key}"
            );
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
