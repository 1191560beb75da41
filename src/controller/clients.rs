//! Proxmox clients per ProxmoxCluster and failure domain: from the domain's or the
//! cluster's `credentialsRef` Secret or the controller's global credentials, checked once
//! with `GET /version` and `GET /cluster/status` (which name the Proxmox VE cluster they
//! reach), cached while the credentials stay the same, and sharing one rate limit and one
//! [`Health`] per Proxmox endpoint, so that an endpoint that stops answering is refused at
//! once instead of holding the workers of every other one.
//!
//! Secret keys (upstream's): `url`, `token` (`user@realm!name`), `secret`, optional
//! `insecure` and `root_ca` (PEM). Like upstream, a Secret without `insecure` skips
//! certificate verification — unless it carries `root_ca`, which then is the trust root
//! (asking for a CA and ignoring it would be surprising). `insecure` values 1, on, true,
//! yes, y (any case) skip verification; anything else verifies.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;

use super::seams::Management;
use crate::api::common::SecretReference;
use crate::api::v1alpha2::ProxmoxCluster;
use crate::proxmox::client::{ApiObserver, Health, HealthOptions, RateLimit, RateLimiter};
use crate::proxmox::sha256;
use crate::proxmox::{ApiToken, Client, ClientConfig, TlsMode};

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// No credentials at all, or the referenced Secret does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The Secret lacks a key or holds a bad value.
    #[error("invalid credentials: {0}")]
    Invalid(String),
    /// The management cluster could not be read.
    #[error("reading credentials: {0}")]
    Management(#[from] super::seams::ManagementError),
    /// Proxmox refused the credentials or could not be reached.
    #[error("Proxmox VE unreachable: {0}")]
    Unreachable(#[from] crate::proxmox::Error),
}

/// Where and how to reach Proxmox.
#[derive(Clone, Debug, PartialEq)]
pub struct Credentials {
    /// `https://host:8006`.
    pub url: String,
    /// The API token.
    pub token: ApiToken,
    /// Certificate verification.
    pub tls: TlsMode,
}

fn truthy(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "1" | "on" | "true" | "yes" | "y"
    )
}

fn secret_value(secret: &Secret, key: &str) -> Option<String> {
    crate::management::types::secret_value(secret, key)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

impl Credentials {
    /// From a credentials Secret (keys `url`, `token`, `secret`, `insecure`, `root_ca`).
    pub fn from_secret(secret: &Secret) -> Result<Self, CredentialsError> {
        let required = |key: &str| {
            secret_value(secret, key)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .ok_or_else(|| CredentialsError::Invalid(format!("secret key {key:?} is missing")))
        };
        let url = required("url")?;
        let token = ApiToken::parse(&format!("{}={}", required("token")?, required("secret")?))
            .map_err(|e| CredentialsError::Invalid(e.to_string()))?;
        let root_ca = secret_value(secret, "root_ca").filter(|v| !v.trim().is_empty());
        let insecure = match secret_value(secret, "insecure") {
            Some(v) => truthy(&v),
            None => root_ca.is_none(),
        };
        Ok(Self {
            url,
            token,
            tls: tls_mode(insecure, root_ca),
        })
    }

    /// Global credentials from the environment (`PROXMOX_URL`, `PROXMOX_TOKEN`,
    /// `PROXMOX_SECRET`, `PROXMOX_INSECURE` defaulting to true as upstream's flag does);
    /// `None` unless all three of URL, token and secret are set.
    pub fn from_env(root_ca: Option<String>) -> Option<Result<Self, CredentialsError>> {
        Self::from_vars(|k| std::env::var(k).ok(), root_ca)
    }

    /// [`Self::from_env`] over any variable lookup.
    pub fn from_vars(
        lookup: impl Fn(&str) -> Option<String>,
        root_ca: Option<String>,
    ) -> Option<Result<Self, CredentialsError>> {
        let var = |k: &str| lookup(k).filter(|v| !v.is_empty());
        let (url, token, secret) = (
            var("PROXMOX_URL")?,
            var("PROXMOX_TOKEN")?,
            var("PROXMOX_SECRET")?,
        );
        let insecure = var("PROXMOX_INSECURE").is_none_or(|v| truthy(&v));
        Some(
            ApiToken::parse(&format!("{token}={secret}"))
                .map_err(|e| CredentialsError::Invalid(e.to_string()))
                .map(|token| Self {
                    url,
                    token,
                    tls: tls_mode(insecure, root_ca),
                }),
        )
    }

    /// The credentials of a simulated Proxmox VE cluster (its token, its CA trusted).
    pub fn of_simulator(sim: &crate::proxmox::sim::RunningSim) -> Self {
        Self {
            url: sim.url().to_owned(),
            token: sim.token().clone(),
            tls: TlsMode::CustomCa(sim.ca_pem().to_owned()),
        }
    }

    /// The keys of a credentials Secret that give these credentials back
    /// ([`Self::from_secret`]'s inverse); `None` for a pinned fingerprint, which a Secret
    /// cannot express.
    pub fn secret_data(
        &self,
    ) -> Option<std::collections::BTreeMap<String, k8s_openapi::ByteString>> {
        let (insecure, root_ca) = match &self.tls {
            TlsMode::Insecure => ("true", None),
            TlsMode::CustomCa(pem) => ("false", Some(pem.clone())),
            TlsMode::System => ("false", None),
            TlsMode::Fingerprint(_) => return None,
        };
        [
            ("url", Some(self.url.clone())),
            ("token", Some(self.token.id.clone())),
            ("secret", Some(self.token.secret.clone())),
            ("insecure", Some(insecure.to_string())),
            ("root_ca", root_ca),
        ]
        .into_iter()
        .filter_map(|(k, v)| Some((k.to_string(), k8s_openapi::ByteString(v?.into_bytes()))))
        .collect::<std::collections::BTreeMap<_, _>>()
        .into()
    }

    fn fingerprint(&self) -> String {
        let text = format!(
            "{}\0{}\0{}\0{:?}",
            self.url, self.token.id, self.token.secret, self.tls
        );
        sha256::hex(&sha256::digest(text.as_bytes()))
    }
}

fn tls_mode(insecure: bool, root_ca: Option<String>) -> TlsMode {
    match (insecure, root_ca) {
        (true, _) => TlsMode::Insecure,
        (false, Some(pem)) => TlsMode::CustomCa(pem),
        (false, None) => TlsMode::System,
    }
}

/// How the factory builds clients.
#[derive(Clone, Debug)]
pub struct FactoryOptions {
    /// Requests in flight per client.
    pub max_in_flight: usize,
    /// Request rate per Proxmox endpoint (all clusters using it together).
    pub rate_limit: Option<RateLimit>,
    /// Per-request timeout.
    pub request_timeout: Duration,
    /// When an endpoint counts as not answering, and how often it is probed then.
    pub health: HealthOptions,
}

impl Default for FactoryOptions {
    /// 8 in flight, 20 requests/s with a burst of 40, 60 s per request.
    fn default() -> Self {
        Self {
            max_in_flight: 8,
            rate_limit: Some(RateLimit {
                per_second: 20.0,
                burst: 40,
            }),
            request_timeout: Duration::from_secs(60),
            health: HealthOptions::default(),
        }
    }
}

/// A verified client and the Proxmox VE cluster it reaches.
#[derive(Clone, Debug)]
pub struct Connection {
    /// The client.
    pub client: Client,
    /// The Proxmox VE cluster's name (`/cluster/status`; a standalone node's own name).
    pub cluster: String,
    /// The pve-manager version.
    pub version: String,
}

/// One source of credentials of a ProxmoxCluster and the failure domains that use it.
#[derive(Clone, Debug, PartialEq)]
pub struct Source {
    /// The Secret (`None`: the cluster's own credentials, global or `credentialsRef`).
    pub secret: Option<SecretReference>,
    /// The failure domains whose machines live there.
    pub domains: Vec<String>,
}

/// The sources of a cluster's credentials: its own first (always, even when every
/// domain has its own, as machines without a domain use it), then one per distinct
/// domain `credentialsRef`.
pub fn sources(cluster: &ProxmoxCluster) -> Vec<Source> {
    let mut sources = vec![Source {
        secret: None,
        domains: Vec::new(),
    }];
    for domain in &cluster.spec.failure_domains {
        let secret = domain.credentials_ref.clone();
        match sources.iter_mut().find(|s| s.secret == secret) {
            Some(source) => source.domains.push(domain.name.clone()),
            None => sources.push(Source {
                secret,
                domains: vec![domain.name.clone()],
            }),
        }
    }
    sources
}

/// The namespace of a credentials Secret: the reference's, else the ProxmoxCluster's.
pub fn secret_namespace(reference: &SecretReference, cluster: &ProxmoxCluster) -> String {
    Some(reference.namespace.as_str())
        .filter(|n| !n.is_empty())
        .or(cluster.metadata.namespace.as_deref())
        .unwrap_or_default()
        .to_string()
}

/// The endpoint of an API URL: without a trailing `/` or `/api2/json`.
fn endpoint_of(url: &str) -> String {
    url.trim_end_matches('/')
        .trim_end_matches("/api2/json")
        .to_string()
}

/// What the factory keeps per endpoint.
struct Endpoint {
    limiter: Arc<RateLimiter>,
    health: Arc<Health>,
}

/// Builds, verifies and caches Proxmox clients.
pub struct ClientFactory {
    global: Option<Credentials>,
    options: FactoryOptions,
    connections: Mutex<HashMap<String, Connection>>,
    endpoints: Mutex<HashMap<String, Endpoint>>,
    observer: Option<ApiObserver>,
}

impl ClientFactory {
    /// A factory with optional global credentials.
    pub fn new(global: Option<Credentials>, options: FactoryOptions) -> Self {
        Self {
            global,
            options,
            connections: Mutex::new(HashMap::new()),
            endpoints: Mutex::new(HashMap::new()),
            observer: None,
        }
    }

    /// The factory whose clients report every request to `observer` (the server's metrics).
    pub fn observed_by(mut self, observer: ApiObserver) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The credentials a ProxmoxCluster uses: its `credentialsRef` Secret (namespace
    /// defaulting to the cluster's), else the global ones.
    pub async fn credentials<M: Management>(
        &self,
        cluster: &ProxmoxCluster,
        mgmt: &M,
    ) -> Result<Credentials, CredentialsError> {
        self.source_credentials(cluster, None, mgmt).await
    }

    /// The credentials of one source of a cluster (see [`sources`]): the Secret it names
    /// (namespace defaulting to the cluster's), else the cluster's own.
    pub async fn source_credentials<M: Management>(
        &self,
        cluster: &ProxmoxCluster,
        secret: Option<&SecretReference>,
        mgmt: &M,
    ) -> Result<Credentials, CredentialsError> {
        let Some(reference) = secret.or(cluster.spec.credentials_ref.as_ref()) else {
            return self.global.clone().ok_or_else(|| {
                CredentialsError::NotFound(
                    "No credentials found, ProxmoxCluster missing credentialsRef".into(),
                )
            });
        };
        let namespace = secret_namespace(reference, cluster);
        let secret = mgmt
            .secret(&namespace, &reference.name)
            .await?
            .ok_or_else(|| {
                CredentialsError::NotFound(if secret.is_some() {
                    format!(
                        "credentials secret {namespace}/{} not found",
                        reference.name
                    )
                } else {
                    "credentials secret not found".into()
                })
            })?;
        Credentials::from_secret(&secret)
    }

    /// The credentials of the Proxmox VE cluster that holds failure domain `domain` (its
    /// own `credentialsRef`, else the cluster's).
    pub async fn domain_credentials<M: Management>(
        &self,
        cluster: &ProxmoxCluster,
        domain: Option<&str>,
        mgmt: &M,
    ) -> Result<Credentials, CredentialsError> {
        let secret = domain.and_then(|name| {
            cluster
                .spec
                .failure_domains
                .iter()
                .find(|d| d.name == name)
                .and_then(|d| d.credentials_ref.as_ref())
        });
        self.source_credentials(cluster, secret, mgmt).await
    }

    /// A verified client for the cluster's own credentials.
    pub async fn client<M: Management>(
        &self,
        cluster: &ProxmoxCluster,
        mgmt: &M,
    ) -> Result<Client, CredentialsError> {
        let credentials = self.credentials(cluster, mgmt).await?;
        self.client_for(&credentials).await
    }

    /// A verified client for the credentials (built and checked once, then cached).
    pub async fn client_for(&self, credentials: &Credentials) -> Result<Client, CredentialsError> {
        Ok(self.connect(credentials).await?.client)
    }

    /// [`Self::connect`], asking a cached connection's cluster again (`GET /version`), so
    /// that the answer says whether it answers now (a new connection was just checked).
    pub async fn connect_now(
        &self,
        credentials: &Credentials,
    ) -> Result<Connection, CredentialsError> {
        let cached = self
            .lock_connections()
            .contains_key(&credentials.fingerprint());
        let mut connection = self.connect(credentials).await?;
        if cached {
            connection.version = connection.client.version().await?.version;
        }
        Ok(connection)
    }

    /// A verified client for the credentials and the Proxmox VE cluster it reaches
    /// (checked once, then cached).
    pub async fn connect(&self, credentials: &Credentials) -> Result<Connection, CredentialsError> {
        let key = credentials.fingerprint();
        if let Some(connection) = self.lock_connections().get(&key) {
            return Ok(connection.clone());
        }
        let (limiter, health) = self.endpoint(&credentials.url);
        let mut config = ClientConfig::new(
            credentials.url.clone(),
            credentials.token.clone(),
            credentials.tls.clone(),
        );
        config.max_in_flight = self.options.max_in_flight;
        config.request_timeout = self.options.request_timeout;
        config.rate_limiter = Some(limiter);
        config.health = Some(health);
        config.observer = self.observer.clone();
        let client = Client::new(config)?;
        let version = client.version().await?.version;
        let status = client.cluster_status().await?;
        let cluster = status
            .iter()
            .find(|e| e.kind == "cluster")
            .or_else(|| status.iter().find(|e| e.local == Some(true)))
            .or_else(|| status.first())
            .and_then(|e| e.name.clone())
            .unwrap_or_else(|| endpoint_of(&credentials.url));
        let connection = Connection {
            client,
            cluster,
            version,
        };
        self.lock_connections().insert(key, connection.clone());
        Ok(connection)
    }

    /// Requests sent to every endpoint so far.
    pub fn requests_sent(&self) -> u64 {
        self.lock_endpoints()
            .values()
            .map(|e| e.limiter.admitted())
            .sum()
    }

    fn lock_connections(&self) -> std::sync::MutexGuard<'_, HashMap<String, Connection>> {
        self.connections.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_endpoints(&self) -> std::sync::MutexGuard<'_, HashMap<String, Endpoint>> {
        self.endpoints.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The rate limiter and health shared by every client of `url`'s endpoint.
    fn endpoint(&self, url: &str) -> (Arc<RateLimiter>, Arc<Health>) {
        let mut endpoints = self.lock_endpoints();
        let endpoint = endpoints
            .entry(endpoint_of(url))
            .or_insert_with(|| Endpoint {
                limiter: Arc::new(RateLimiter::new(self.options.rate_limit)),
                health: Arc::new(Health::new(self.options.health)),
            });
        (endpoint.limiter.clone(), endpoint.health.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use std::collections::BTreeMap;

    fn secret(pairs: &[(&str, &str)]) -> Secret {
        Secret {
            data: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Secret::default()
        }
    }

    const BASE: [(&str, &str); 3] = [
        ("url", "https://pve:8006"),
        ("token", "capmox@pve!capi"),
        ("secret", "s3cr3t"),
    ];

    #[test]
    fn tls_follows_upstreams_keys() {
        let c = Credentials::from_secret(&secret(&BASE)).expect("valid");
        assert_eq!(
            c.tls,
            TlsMode::Insecure,
            "absent insecure key skips verification like upstream"
        );
        assert_eq!(c.token.header_value(), "PVEAPIToken=capmox@pve!capi=s3cr3t");
        let mut with_ca = BASE.to_vec();
        with_ca.push(("root_ca", "PEM"));
        assert_eq!(
            Credentials::from_secret(&secret(&with_ca))
                .map(|c| c.tls)
                .ok(),
            Some(TlsMode::CustomCa("PEM".into()))
        );
        for (value, expected) in [
            ("Yes", TlsMode::Insecure),
            ("false", TlsMode::System),
            ("0", TlsMode::System),
        ] {
            let mut s = BASE.to_vec();
            s.push(("insecure", value));
            assert_eq!(
                Credentials::from_secret(&secret(&s)).map(|c| c.tls).ok(),
                Some(expected),
                "{value}"
            );
        }
    }

    #[test]
    fn environment_credentials_follow_upstreams_variables() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        const BASE: [(&str, &str); 3] = [
            ("PROXMOX_URL", "https://pve:8006"),
            ("PROXMOX_TOKEN", "capmox@pve!capi"),
            ("PROXMOX_SECRET", "s"),
        ];
        let c = Credentials::from_vars(vars(&BASE), None)
            .expect("set")
            .expect("valid");
        assert_eq!(
            c.tls,
            TlsMode::Insecure,
            "PROXMOX_INSECURE defaults to true"
        );
        const VERIFY: [(&str, &str); 4] = [
            ("PROXMOX_URL", "https://pve:8006"),
            ("PROXMOX_TOKEN", "capmox@pve!capi"),
            ("PROXMOX_SECRET", "s"),
            ("PROXMOX_INSECURE", "false"),
        ];
        let c = Credentials::from_vars(vars(&VERIFY), Some("PEM".into()))
            .expect("set")
            .expect("valid");
        assert_eq!(c.tls, TlsMode::CustomCa("PEM".into()));
        assert!(
            Credentials::from_vars(vars(&BASE[..2]), None).is_none(),
            "all three are needed"
        );
    }

    #[test]
    fn secret_data_gives_the_credentials_back() {
        for tls in [
            TlsMode::Insecure,
            TlsMode::CustomCa("PEM".into()),
            TlsMode::System,
        ] {
            let credentials = Credentials {
                url: "https://pve:8006".into(),
                token: ApiToken::parse("capmox@pve!capi=s3cr3t").expect("token"),
                tls,
            };
            let secret = Secret {
                data: credentials.secret_data(),
                ..Secret::default()
            };
            assert_eq!(Credentials::from_secret(&secret).ok(), Some(credentials));
        }
    }

    #[test]
    fn missing_or_bad_keys_are_reported() {
        let err = Credentials::from_secret(&secret(&BASE[..2])).expect_err("no secret key");
        assert_eq!(
            err.to_string(),
            "invalid credentials: secret key \"secret\" is missing"
        );
        let bad = [("url", "u"), ("token", "no-realm"), ("secret", "s")];
        assert!(Credentials::from_secret(&secret(&bad)).is_err());
    }
}
