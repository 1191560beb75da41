//! `serve` mode: the production server. TLS from files (reloaded on change) or self-signed;
//! authentication and authorization delegated to the management cluster like any extension
//! API server: the `extension-apiserver-authentication` ConfigMap (watched) for the front-proxy
//! and client CAs, TokenReview for bearer tokens, SubjectAccessReview for every decision the
//! server cannot make locally. Storage settings are validated here;
//! the store (etcd or embedded) is opened before the listener starts.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::admission::{Caller, WebhookAdmission, WebhookCredentials};
use super::app::{Server, ServerConfig, StartError, TlsSource};
use super::authn::configmap::{self, InitialLoadError};
use super::authn::request_header::RequestHeaderAuthenticator;
use super::authn::token_review::{self, TokenReviewAuthenticator};
use super::authn::trust::{Trust, TrustStore};
use super::authn::x509::{CaBundle, CaBundleError, ClientCertificateAuthenticator};
use super::authn::{Authentication, Authenticator};
use super::authz::sar::{self, DelegatingAuthorizer, SubjectAccessReviewAuthorizer};
use super::cotenants::{self, CoTenantsCheck};
use super::health::FnCheck;
use super::namespaces::NamespaceLifecycle;
use super::router::{ApiRouter, ServerState};
use super::tls::{self, KeyPairFiles};
use crate::management::client::{self, ClientError};
use crate::registry::catalog::Catalog;
use crate::registry::cotenant::CoTenants;
use capmox_storage::Store;

/// How long `serve` waits for the authentication ConfigMap before giving up.
pub const INITIAL_AUTH_CONFIG_TIMEOUT: Duration = Duration::from_secs(30);

/// TLS material for etcd client connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdTls {
    pub ca_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
}

/// Where objects are stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageConfig {
    /// The embedded single-node store in this directory.
    Embedded { data_dir: PathBuf },
    /// An etcd cluster.
    Etcd {
        servers: Vec<String>,
        prefix: String,
        tls: EtcdTls,
    },
}

/// Invalid `serve` settings, reported before anything starts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("--tls-cert-file and --tls-private-key-file must be given together")]
    HalfKeyPair,
    #[error("--etcd-certfile and --etcd-keyfile must be given together")]
    HalfEtcdKeyPair,
    #[error("--etcd-servers {0:?} is not an http:// or https:// URL")]
    BadEtcdServer(String),
    #[error("--etcd-prefix must start with '/', got {0:?}")]
    BadEtcdPrefix(String),
    #[error("{flag} {path}: file not found")]
    MissingFile { flag: &'static str, path: PathBuf },
    #[error("--etcd-cafile/--etcd-certfile/--etcd-keyfile need --etcd-servers")]
    EtcdTlsWithoutServers,
    #[error("--admission-control-config-file: {0}")]
    AdmissionConfig(String),
}

/// Where authentication and authorization are delegated to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelegationOptions {
    /// Kubeconfig for the ConfigMap and TokenReviews; in-cluster configuration when `None`.
    pub authentication_kubeconfig: Option<PathBuf>,
    /// Kubeconfig for SubjectAccessReviews; in-cluster configuration when `None`.
    pub authorization_kubeconfig: Option<PathBuf>,
    /// How long TokenReview answers are cached.
    pub token_cache_ttl: Duration,
    /// How long allowed SubjectAccessReview answers are cached.
    pub authorized_cache_ttl: Duration,
    /// How long denied SubjectAccessReview answers are cached.
    pub unauthorized_cache_ttl: Duration,
    /// kube-apiserver's `--admission-control-config-file`: the AdmissionConfiguration whose
    /// webhook plugins name the kubeconfig of the credentials webhooks are called with.
    pub admission_control_config_file: Option<PathBuf>,
}

impl Default for DelegationOptions {
    fn default() -> Self {
        Self {
            authentication_kubeconfig: None,
            authorization_kubeconfig: None,
            token_cache_ttl: token_review::DEFAULT_CACHE_TTL,
            authorized_cache_ttl: sar::DEFAULT_ALLOW_TTL,
            unauthorized_cache_ttl: sar::DEFAULT_DENY_TTL,
            admission_control_config_file: None,
        }
    }
}

/// `serve` settings after flag parsing.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub bind_address: IpAddr,
    pub secure_port: u16,
    pub tls_cert_file: Option<PathBuf>,
    pub tls_private_key_file: Option<PathBuf>,
    /// Extra DNS names for the self-signed certificate (without cert files).
    pub tls_dns_names: Vec<String>,
    /// Client CA used instead of the ConfigMap's `client-ca-file`.
    pub client_ca_file: Option<PathBuf>,
    pub delegation: DelegationOptions,
    pub storage: StorageOptions,
    /// Tunables of the REST layer.
    pub rest: crate::registry::rest::RestConfig,
}

/// Where objects are stored, as `serve` and `migrate import` take it from their flags.
#[derive(Debug, Clone)]
pub struct StorageOptions {
    pub data_dir: PathBuf,
    pub etcd_servers: Vec<String>,
    pub etcd_prefix: String,
    pub etcd_cafile: Option<PathBuf>,
    pub etcd_certfile: Option<PathBuf>,
    pub etcd_keyfile: Option<PathBuf>,
    /// How long to wait for the store to become reachable at start.
    pub initialization_timeout: Duration,
}

impl StorageOptions {
    /// The embedded store in `data_dir`.
    pub fn embedded(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            etcd_servers: Vec::new(),
            etcd_prefix: "/registry".to_owned(),
            etcd_cafile: None,
            etcd_certfile: None,
            etcd_keyfile: None,
            initialization_timeout: super::assembly::STORE_PATIENCE,
        }
    }

    /// The storage backend: etcd when servers are given, else the embedded store.
    pub fn config(&self) -> Result<StorageConfig, ConfigError> {
        existing("--etcd-cafile", &self.etcd_cafile)?;
        existing("--etcd-certfile", &self.etcd_certfile)?;
        existing("--etcd-keyfile", &self.etcd_keyfile)?;
        if self.etcd_certfile.is_some() != self.etcd_keyfile.is_some() {
            return Err(ConfigError::HalfEtcdKeyPair);
        }
        if self.etcd_servers.is_empty() {
            if self.etcd_cafile.is_some() || self.etcd_certfile.is_some() {
                return Err(ConfigError::EtcdTlsWithoutServers);
            }
            return Ok(StorageConfig::Embedded {
                data_dir: self.data_dir.clone(),
            });
        }
        if let Some(bad) = self
            .etcd_servers
            .iter()
            .find(|s| !(s.starts_with("http://") || s.starts_with("https://")))
        {
            return Err(ConfigError::BadEtcdServer(bad.clone()));
        }
        if !self.etcd_prefix.starts_with('/') {
            return Err(ConfigError::BadEtcdPrefix(self.etcd_prefix.clone()));
        }
        Ok(StorageConfig::Etcd {
            servers: self.etcd_servers.clone(),
            prefix: self.etcd_prefix.clone(),
            tls: EtcdTls {
                ca_file: self.etcd_cafile.clone(),
                cert_file: self.etcd_certfile.clone(),
                key_file: self.etcd_keyfile.clone(),
            },
        })
    }
}

fn existing(flag: &'static str, path: &Option<PathBuf>) -> Result<(), ConfigError> {
    match path {
        Some(p) if !Path::new(p).is_file() => Err(ConfigError::MissingFile {
            flag,
            path: p.clone(),
        }),
        _ => Ok(()),
    }
}

impl ServeOptions {
    /// The TLS source: both files, or a self-signed certificate.
    pub fn tls_source(&self) -> Result<TlsSource, ConfigError> {
        match (&self.tls_cert_file, &self.tls_private_key_file) {
            (Some(cert), Some(key)) => {
                existing("--tls-cert-file", &self.tls_cert_file)?;
                existing("--tls-private-key-file", &self.tls_private_key_file)?;
                Ok(TlsSource::Files(KeyPairFiles {
                    cert: cert.clone(),
                    key: key.clone(),
                }))
            }
            (None, None) => Ok(TlsSource::SelfSigned {
                dns_names: self.tls_dns_names.clone(),
            }),
            _ => Err(ConfigError::HalfKeyPair),
        }
    }

    /// The storage backend of these settings.
    pub fn storage(&self) -> Result<StorageConfig, ConfigError> {
        self.storage.config()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Tls(#[from] super::tls::TlsError),
    #[error(transparent)]
    Start(#[from] StartError),
    #[error("--client-ca-file: {0}")]
    ClientCa(#[from] CaBundleError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    AuthenticationConfig(#[from] InitialLoadError),
    #[error(transparent)]
    Assembly(#[from] super::assembly::AssemblyError),
}

/// A started `serve` server and what the built-in controller runs on.
pub struct Started {
    pub server: Server,
    pub store: Store,
    pub catalog: Arc<Catalog>,
}

/// Starts the production server. `routes` adds the API endpoints (at assembly).
pub async fn start(
    options: &ServeOptions,
    routes: impl FnOnce(ApiRouter) -> ApiRouter,
) -> Result<Server, ServeError> {
    start_parts(options, routes)
        .await
        .map(|started| started.server)
}

/// [`start`], also answering the store and the catalog.
pub async fn start_parts(
    options: &ServeOptions,
    routes: impl FnOnce(ApiRouter) -> ApiRouter,
) -> Result<Started, ServeError> {
    let tls_source = options.tls_source()?;
    let storage = options.storage()?;
    existing("--client-ca-file", &options.client_ca_file)?;
    let client_ca_override = match &options.client_ca_file {
        Some(path) => Some(CaBundle::from_pem(&tls::read_file(path)?)?),
        None => None,
    };
    tracing::info!(?storage, "storage configuration");
    let store =
        super::assembly::open_store_waiting(&storage, options.storage.initialization_timeout)
            .await?;
    let delegation = &options.delegation;
    let authn_client = client::client(delegation.authentication_kubeconfig.as_deref()).await?;
    let authz_client = client::client(delegation.authorization_kubeconfig.as_deref()).await?;

    let trust = TrustStore::new(Trust::default());
    let watch = configmap::watch(
        authn_client.clone(),
        Arc::clone(&trust),
        client_ca_override,
        INITIAL_AUTH_CONFIG_TIMEOUT,
    )
    .await?;
    let (namespaces, informer) = NamespaceLifecycle::start(authn_client.clone());
    let authenticators: Vec<Arc<dyn Authenticator>> = vec![
        Arc::new(RequestHeaderAuthenticator::new(Arc::clone(&trust))),
        Arc::new(ClientCertificateAuthenticator::new(Arc::clone(&trust))),
        TokenReviewAuthenticator::new(authn_client.clone(), delegation.token_cache_ttl),
    ];
    let authorizer = DelegatingAuthorizer::new(SubjectAccessReviewAuthorizer::new(
        authz_client,
        delegation.authorized_cache_ttl,
        delegation.unauthorized_cache_ttl,
    ));
    let state = ServerState::new(
        Authentication::new(authenticators, true),
        Arc::clone(&authorizer) as _,
    )
    .with_namespace_lifecycle(Arc::clone(&namespaces));
    let credentials = match &delegation.admission_control_config_file {
        Some(path) => WebhookCredentials::load(path).map_err(ConfigError::AdmissionConfig)?,
        None => WebhookCredentials::default(),
    };
    let (admission, webhook_informers) = WebhookAdmission::start(
        authn_client.clone(),
        Arc::clone(&namespaces),
        Arc::clone(&state.metrics),
        credentials,
        Arc::clone(&authorizer) as _,
    );
    let state = state
        .with_admission(Arc::clone(&admission) as _)
        .with_conversion_caller(Arc::new(Caller::new(
            Some(authn_client.clone()),
            WebhookCredentials::default(),
        )));
    // Other providers' kinds in our group-versions, from the cluster's CRDs.
    let strategies = crate::registry::catalog::strategies();
    let cotenants = Arc::new(CoTenants::for_group(
        crate::api::GROUP,
        strategies.iter().map(|s| s.descriptor()),
    ));
    let crd_informer = cotenants::start(authn_client.clone(), Arc::clone(&cotenants));
    state
        .health
        .register_readiness(Arc::new(CoTenantsCheck(Arc::clone(&cotenants))));
    let forwarding =
        client::forwarding_client(delegation.authentication_kubeconfig.as_deref()).await?;
    let state = state
        .with_cotenants(Arc::clone(&cotenants))
        .with_kube(forwarding);
    state.health.register_readiness(Arc::new(FnCheck::new(
        "informer-sync-webhooks",
        move || {
            let synced = admission.is_synced();
            async move {
                synced.then_some(()).ok_or_else(|| {
                    "webhook configurations and admission policies not listed yet".to_owned()
                })
            }
        },
    )));
    state.health.register_readiness(Arc::new(FnCheck::new(
        "informer-sync-namespaces",
        move || {
            let synced = namespaces.is_synced();
            async move {
                synced
                    .then_some(())
                    .ok_or_else(|| "namespaces not listed yet".to_owned())
            }
        },
    )));
    let (api, catalog) = super::assembly::install_with_catalog(
        ApiRouter::new(state.clone()),
        &store,
        &options.rest,
    )?;
    let router = routes(api).build();
    let mut config = ServerConfig::new(
        SocketAddr::new(options.bind_address, options.secure_port),
        tls_source,
    );
    config.client_verifier = Some(trust.handshake_verifier());
    let reload_interval = config.reload_interval;
    let mut server = Server::start(config, state, router).await?;
    if let Some(renewal) = etcd_client_renewal(&storage, &store, reload_interval) {
        server.keep_alive(renewal);
    }
    server.keep_alive(watch);
    server.keep_alive(informer);
    server.keep_alive(webhook_informers);
    server.keep_alive(crd_informer);
    server.keep_alive(cotenants::start_cleanup(cotenants, &catalog));
    // Pending writes are finished and the store released once requests have drained.
    let closing = store.clone();
    server.on_shutdown(move || closing.close());
    Ok(Started {
        server,
        store,
        catalog,
    })
}

/// Reconnects to etcd with the client certificate in `--etcd-certfile`/`--etcd-keyfile` each
/// time it is renewed (checked every `interval`), so that connections made after the old one
/// expired still authenticate.
fn etcd_client_renewal(
    storage: &StorageConfig,
    store: &Store,
    interval: Duration,
) -> Option<tls::ReloadTask> {
    let StorageConfig::Etcd { tls: etcd_tls, .. } = storage else {
        return None;
    };
    let files = KeyPairFiles {
        cert: etcd_tls.cert_file.clone()?,
        key: etcd_tls.key_file.clone()?,
    };
    let store = store.clone();
    Some(tls::watch_key_pair(
        files,
        interval,
        "etcd client certificate",
        move |_, (cert, key)| {
            let (store, cert, key) = (store.clone(), cert.clone(), key.clone());
            async move {
                store
                    .use_etcd_client_identity(&cert, &key)
                    .await
                    .map_err(|e| e.to_string())
            }
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> ServeOptions {
        ServeOptions {
            bind_address: IpAddr::from([127, 0, 0, 1]),
            secure_port: 0,
            tls_cert_file: None,
            tls_private_key_file: None,
            tls_dns_names: vec![],
            client_ca_file: None,
            delegation: DelegationOptions::default(),
            storage: StorageOptions::embedded("data"),
            rest: Default::default(),
        }
    }

    #[test]
    fn storage_selection_and_validation() {
        assert_eq!(
            options().storage(),
            Ok(StorageConfig::Embedded {
                data_dir: "data".into()
            })
        );
        let etcd = StorageOptions {
            etcd_servers: vec!["https://127.0.0.1:2379".into()],
            ..StorageOptions::embedded("data")
        };
        assert!(matches!(etcd.config(), Ok(StorageConfig::Etcd { .. })));
        let bad = StorageOptions {
            etcd_servers: vec!["127.0.0.1:2379".into()],
            ..StorageOptions::embedded("data")
        };
        assert_eq!(
            bad.config(),
            Err(ConfigError::BadEtcdServer("127.0.0.1:2379".into()))
        );
        let prefix = StorageOptions {
            etcd_prefix: "registry".into(),
            ..etcd.clone()
        };
        assert_eq!(
            prefix.config(),
            Err(ConfigError::BadEtcdPrefix("registry".into()))
        );
        let missing = StorageOptions {
            etcd_cafile: Some("/nonexistent/ca.crt".into()),
            ..etcd
        };
        assert!(matches!(
            missing.config(),
            Err(ConfigError::MissingFile {
                flag: "--etcd-cafile",
                ..
            })
        ));
    }

    #[test]
    fn tls_source_selection() {
        assert!(matches!(
            options().tls_source(),
            Ok(TlsSource::SelfSigned { .. })
        ));
        let half = ServeOptions {
            tls_cert_file: Some("x".into()),
            ..options()
        };
        assert_eq!(
            half.tls_source().expect_err("half").to_string(),
            "--tls-cert-file and --tls-private-key-file must be given together"
        );
        let missing = ServeOptions {
            tls_cert_file: Some("/nonexistent/tls.crt".into()),
            tls_private_key_file: Some("/nonexistent/tls.key".into()),
            ..options()
        };
        assert!(matches!(
            missing.tls_source(),
            Err(ConfigError::MissingFile { .. })
        ));
    }
}
