//! One webhook call over HTTPS: the URL from `clientConfig` (a `url`, or a Service resolved
//! as kube-apiserver resolves webhook and APIService services by default: its cluster IP, an
//! ExternalName's host, the port among the Service's ports), TLS verified against the
//! `caBundle` (the system's roots without one) for the server name `<service>.<namespace>.svc`,
//! `?timeout=` as kube adds it to admission calls, the answer read up to a bound; the client
//! certificate or token `credentials` assigns an admission webhook's host, if any. CRD
//! conversion webhooks are called the same way, without credentials or `?timeout=`, as kube
//! calls them ([`ConversionCaller`]).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::WebhookClientConfig;
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use serde_json::Value;

use super::credentials::{Credential, WebhookCredentials};
use super::hooks::Flavor;
use crate::registry::crd::conversion::ConversionCaller;
use crate::server::ttl_cache::TtlCache;

/// The largest answer read from a webhook (a patched object fits in a request body).
const MAX_RESPONSE_BYTES: usize = 3 << 20;

/// How long a resolved Service and a built client are reused.
const SERVICE_TTL: Duration = Duration::from_secs(10);
const CLIENT_TTL: Duration = Duration::from_secs(600);

/// Why a call did not produce an answer (kube: `failed to call webhook: …`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CallError(pub String);

/// Where a webhook is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Endpoint {
    /// The URL as the webhook is addressed (host = the TLS server name).
    url: String,
    /// The address to connect to when the host is a Service's DNS name.
    address: Option<SocketAddr>,
    /// Whom the credentials are looked up for: `host[:port]` as the URL has it, or a
    /// Service's `<name>.<namespace>.svc:<port>`.
    target: String,
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct ClientKey {
    ca_bundle: Vec<u8>,
    host: String,
    address: Option<SocketAddr>,
    identity: Option<Vec<u8>>,
}

/// How long kube waits for a conversion webhook (its webhook clients' default).
const CONVERSION_TIMEOUT: Duration = Duration::from_secs(30);

/// Calls webhooks; resolves Services through the management cluster (in `dev`, without one,
/// only webhooks addressed by `url`).
pub struct Caller {
    client: Option<kube::Client>,
    credentials: WebhookCredentials,
    services: TtlCache<(String, String, i32), Endpoint>,
    clients: TtlCache<ClientKey, reqwest::Client>,
}

/// `Post "<url>": <cause>` as Go's HTTP client words a failed request.
fn post_error(url: &str, error: &reqwest::Error) -> CallError {
    let cause = if error.is_timeout() {
        "context deadline exceeded".to_owned()
    } else {
        let mut cause = error.to_string();
        let mut source = std::error::Error::source(error);
        while let Some(inner) = source {
            cause = inner.to_string();
            source = inner.source();
        }
        cause
    };
    CallError(format!("failed to call webhook: Post {url:?}: {cause}"))
}

impl Caller {
    /// A caller of webhooks addressed by URL only, without credentials (`dev`, imports).
    pub fn without_cluster() -> Self {
        Self::new(None, WebhookCredentials::default())
    }

    pub fn new(client: Option<kube::Client>, credentials: WebhookCredentials) -> Self {
        Self {
            client,
            credentials,
            services: TtlCache::new(256),
            clients: TtlCache::new(64),
        }
    }

    /// POSTs `review` to a webhook of `flavor`; answers the body.
    pub async fn call(
        &self,
        config: &WebhookClientConfig,
        flavor: Flavor,
        timeout: Duration,
        review: &Value,
    ) -> Result<Vec<u8>, CallError> {
        let endpoint = self.endpoint(config).await?;
        let separator = if endpoint.url.contains('?') { '&' } else { '?' };
        let url = format!("{}{separator}timeout={}s", endpoint.url, timeout.as_secs());
        let credential = self.credentials.for_target(flavor, &endpoint.target);
        self.post(config, &endpoint, &url, credential, timeout, review)
            .await
    }

    /// POSTs `review` to `url` (the endpoint's, with what the caller adds).
    async fn post(
        &self,
        config: &WebhookClientConfig,
        endpoint: &Endpoint,
        url: &str,
        credential: Option<&Credential>,
        timeout: Duration,
        review: &Value,
    ) -> Result<Vec<u8>, CallError> {
        let ca_bundle = config
            .ca_bundle
            .as_ref()
            .map(|b| b.0.clone())
            .unwrap_or_default();
        let client = self.client_for(endpoint, ca_bundle, credential)?;
        let mut request = client.post(url).timeout(timeout).json(review);
        if let Some(authorization) = credential.and_then(|c| c.authorization.as_deref()) {
            request = request.header(reqwest::header::AUTHORIZATION, authorization);
        }
        let response = request.send().await.map_err(|e| post_error(url, &e))?;
        let status = response.status();
        let body = read_bounded(response)
            .await
            .map_err(|e| post_error(url, &e))?;
        if !status.is_success() {
            return Err(CallError(format!(
                "failed to call webhook: the server responded with the status code {} but did not return more information",
                status.as_u16()
            )));
        }
        body.ok_or_else(|| {
            CallError(format!(
                "failed to call webhook: the response is larger than {MAX_RESPONSE_BYTES} bytes"
            ))
        })
    }

    async fn endpoint(&self, config: &WebhookClientConfig) -> Result<Endpoint, CallError> {
        if let Some(url) = &config.url {
            if !url.starts_with("https://") {
                return Err(CallError(format!(
                    "failed to call webhook: the URL {url:?} is not https"
                )));
            }
            let target = reqwest::Url::parse(url)
                .ok()
                .map(|u| match (u.host_str(), u.port()) {
                    (Some(host), Some(port)) => format!("{host}:{port}"),
                    (host, None) => host.unwrap_or_default().to_owned(),
                    (None, Some(_)) => String::new(),
                })
                .unwrap_or_default();
            return Ok(Endpoint {
                url: url.clone(),
                address: None,
                target,
            });
        }
        let Some(service) = &config.service else {
            return Err(CallError(
                "failed to call webhook: clientConfig has neither url nor service".to_owned(),
            ));
        };
        let port = service.port.unwrap_or(443);
        let key = (service.namespace.clone(), service.name.clone(), port);
        if let Some(endpoint) = self.services.get(&key) {
            return Ok(endpoint);
        }
        let endpoint = self
            .resolve(&service.namespace, &service.name, port)
            .await?;
        let path = service.path.as_deref().unwrap_or("");
        let endpoint = Endpoint {
            url: format!("{}{path}", endpoint.url),
            ..endpoint
        };
        self.services.insert(key, endpoint.clone(), SERVICE_TTL);
        Ok(endpoint)
    }

    /// kube's ClusterIP service resolver.
    async fn resolve(&self, namespace: &str, name: &str, port: i32) -> Result<Endpoint, CallError> {
        let failed = |why: String| CallError(format!("failed to call webhook: {why}"));
        let client = self.client.clone().ok_or_else(|| {
            failed(format!(
                "service {namespace}/{name} cannot be resolved without a management cluster"
            ))
        })?;
        let api: Api<Service> = Api::namespaced(client, namespace);
        let service = api
            .get_opt(name)
            .await
            .map_err(|e| failed(format!("looking up service {namespace}/{name}: {e}")))?
            .ok_or_else(|| failed(format!("service \"{name}\" not found")))?;
        let spec = service.spec.unwrap_or_default();
        let server_name = format!("{name}.{namespace}.svc");
        let url = format!("https://{server_name}:{port}");
        let host = match spec.type_.as_deref() {
            Some("ExternalName") => spec.external_name.unwrap_or_default(),
            _ => {
                let ip = spec.cluster_ip.unwrap_or_default();
                if ip.is_empty() || ip == "None" {
                    return Err(failed(format!(
                        "service {namespace}/{name} has no cluster IP"
                    )));
                }
                if !spec.ports.iter().flatten().any(|p| p.port == port) {
                    return Err(failed(format!(
                        "no service port {port} found for service {name:?}"
                    )));
                }
                ip
            }
        };
        let address = match host.parse::<IpAddr>() {
            Ok(ip) => SocketAddr::new(ip, port as u16),
            Err(_) => tokio::net::lookup_host((host.as_str(), port as u16))
                .await
                .ok()
                .and_then(|mut addresses| addresses.next())
                .ok_or_else(|| failed(format!("cannot resolve {host:?}")))?,
        };
        Ok(Endpoint {
            url,
            address: Some(address),
            target: format!("{server_name}:{port}"),
        })
    }

    fn client_for(
        &self,
        endpoint: &Endpoint,
        ca_bundle: Vec<u8>,
        credential: Option<&Credential>,
    ) -> Result<reqwest::Client, CallError> {
        let host = reqwest::Url::parse(&endpoint.url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_default();
        let key = ClientKey {
            ca_bundle,
            host: host.clone(),
            address: endpoint.address,
            identity: credential.and_then(|c| c.identity.clone()),
        };
        if let Some(client) = self.clients.get(&key) {
            return Ok(client);
        }
        crate::server::tls::install_default_provider();
        let mut builder = reqwest::Client::builder()
            .https_only(true)
            .redirect(reqwest::redirect::Policy::none());
        if !key.ca_bundle.is_empty() {
            let certs = reqwest::Certificate::from_pem_bundle(&key.ca_bundle)
                .map_err(|e| CallError(format!("failed to call webhook: caBundle: {e}")))?;
            builder = builder.tls_certs_only(certs);
        }
        if let Some(address) = endpoint.address {
            builder = builder.resolve(&host, address);
        }
        if let Some(identity) = &key.identity {
            let identity = reqwest::Identity::from_pem(identity).map_err(|e| {
                CallError(format!("failed to call webhook: client certificate: {e}"))
            })?;
            builder = builder.identity(identity);
        }
        let client = builder
            .build()
            .map_err(|e| CallError(format!("failed to call webhook: {e}")))?;
        self.clients.insert(key, client.clone(), CLIENT_TTL);
        Ok(client)
    }
}

impl Caller {
    /// A conversion webhook's answer to `review`.
    async fn call_conversion(
        &self,
        config: &WebhookClientConfig,
        review: &Value,
    ) -> Result<Vec<u8>, CallError> {
        let endpoint = self.endpoint(config).await?;
        self.post(
            config,
            &endpoint,
            &endpoint.url,
            None,
            CONVERSION_TIMEOUT,
            review,
        )
        .await
    }
}

impl ConversionCaller for Caller {
    /// Blocks the calling worker thread (the registry converts inside synchronous reads);
    /// tokio moves that worker's other tasks away meanwhile.
    fn call(&self, client_config: &Value, review: &Value) -> Result<Vec<u8>, String> {
        let config: WebhookClientConfig = serde_json::from_value(client_config.clone())
            .map_err(|e| format!("its clientConfig cannot be read: {e}"))?;
        let runtime = tokio::runtime::Handle::try_current()
            .ok()
            .filter(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
            .ok_or(
                "a conversion webhook is called only from the server's multi-threaded runtime",
            )?;
        tokio::task::block_in_place(|| runtime.block_on(self.call_conversion(&config, review)))
            // kube names the failed request, not the webhook call: `Post "<url>": …`.
            .map_err(|CallError(e)| {
                e.strip_prefix("failed to call webhook: ")
                    .map(str::to_owned)
                    .unwrap_or(e)
            })
    }
}

/// The body, or `None` past the bound.
async fn read_bounded(response: reqwest::Response) -> Result<Option<Vec<u8>>, reqwest::Error> {
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk?;
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}
