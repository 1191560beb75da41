//! A typed async client for the Proxmox VE API (`/api2/json`).
//!
//! ```no_run
//! # async fn demo() -> Result<(), capmox_apiserver::proxmox::Error> {
//! use capmox_apiserver::proxmox::{ApiToken, Client, ClientConfig, TlsMode};
//! let token = ApiToken::parse("capmox@pve!capi=1b7f0c2e-0000-4000-8000-000000000000")?;
//! let client = Client::new(ClientConfig::new("https://pve1:8006", token, TlsMode::System))?;
//! let version = client.version().await?;
//! # Ok(()) }
//! ```
//!
//! Every call goes through [`Client::call`]: one permit of the client-wide concurrency
//! limit, the API-token header, the request timeout, and one decoding path that turns
//! PVE's `{"data": ...}` envelope or error answer into a typed result or [`Error`].

mod agent;
mod cluster;
mod error;
mod fence;
mod ha;
mod health;
mod observe;
mod qemu;
mod rate_limit;
mod storage;
mod tasks;
mod tls;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::Semaphore;

pub use error::{ApiError, Error, ErrorKind, classify};
pub use fence::WriteFence;
pub use health::{Failing, Health, HealthOptions};
pub use observe::{ApiObserver, CallObserver};
pub use rate_limit::{RateLimit, RateLimiter};
pub use tasks::WaitOptions;
pub use tls::{TlsMode, install_crypto_provider, parse_fingerprint};

use super::form;
use super::lenient::as_string;

/// A PVE API token: `user@realm!tokenid` and its secret.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiToken {
    /// `user@realm!tokenid`.
    pub id: String,
    /// The secret (a UUID on real PVE).
    pub secret: String,
}

impl ApiToken {
    /// A token from its id and secret.
    pub fn new(id: impl Into<String>, secret: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            secret: secret.into(),
        }
    }

    /// Parses `user@realm!tokenid=secret` (the form PVE prints and CAPMOX's
    /// `PROXMOX_TOKEN`/`PROXMOX_SECRET` join to).
    pub fn parse(s: &str) -> Result<Self, Error> {
        let (id, secret) = s.split_once('=').ok_or_else(|| {
            Error::Config("API token must look like user@realm!name=secret".into())
        })?;
        let valid_id = id
            .split_once('@')
            .and_then(|(user, rest)| Some((user, rest.split_once('!')?)))
            .is_some_and(|(user, (realm, name))| {
                !user.is_empty() && !realm.is_empty() && !name.is_empty()
            });
        if !valid_id || secret.is_empty() {
            return Err(Error::Config(
                "API token must look like user@realm!name=secret".into(),
            ));
        }
        Ok(Self::new(id, secret))
    }

    /// The `Authorization` header value.
    pub fn header_value(&self) -> String {
        format!("PVEAPIToken={}={}", self.id, self.secret)
    }
}

impl fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ApiToken({}=<redacted>)", self.id)
    }
}

/// Everything needed to build a [`Client`].
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// `https://host:8006` (a trailing `/api2/json` is accepted and ignored).
    pub base_url: String,
    /// API token credentials.
    pub token: ApiToken,
    /// Certificate verification.
    pub tls: TlsMode,
    /// TCP + TLS connect limit.
    pub connect_timeout: Duration,
    /// Limit for one ordinary request, response body included.
    pub request_timeout: Duration,
    /// Limit for an upload request (ISO images can be large).
    pub upload_timeout: Duration,
    /// Requests in flight at once, client-wide.
    pub max_in_flight: usize,
    /// A request rate limit shared with other clients of the same endpoint (and the
    /// counter of requests sent); a private unlimited one when absent.
    pub rate_limiter: Option<Arc<RateLimiter>>,
    /// Where each request's operation, result and latency go (the server's metrics).
    pub observer: Option<ApiObserver>,
    /// Whether the endpoint answers, shared with the other clients of the endpoint; a
    /// private one with the default options when absent.
    pub health: Option<Arc<Health>>,
}

impl ClientConfig {
    /// Defaults: 10 s connect, 60 s request, 5 min upload, 8 requests in flight.
    pub fn new(base_url: impl Into<String>, token: ApiToken, tls: TlsMode) -> Self {
        Self {
            base_url: base_url.into(),
            token,
            tls,
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            upload_timeout: Duration::from_secs(300),
            max_in_flight: 8,
            rate_limiter: None,
            observer: None,
            health: None,
        }
    }
}

/// The body of a request.
enum Body {
    None,
    Form(Vec<(String, String)>),
    Json(Value),
    Multipart(reqwest::multipart::Form),
}

/// A Proxmox VE API client. Cheap to clone; clones share connections and the
/// concurrency limit.
#[derive(Clone, Debug)]
pub struct Client {
    http: reqwest::Client,
    api_root: String,
    auth: HeaderValue,
    limit: Arc<Semaphore>,
    rate: Arc<RateLimiter>,
    request_timeout: Duration,
    upload_timeout: Duration,
    observer: Option<ApiObserver>,
    write_fence: Option<WriteFence>,
    health: Arc<Health>,
    endpoint: Arc<str>,
}

impl Client {
    /// Builds a client; does not contact the server (call [`Client::version`] to check).
    pub fn new(config: ClientConfig) -> Result<Self, Error> {
        let base = config.base_url.trim_end_matches('/');
        let base = base.strip_suffix("/api2/json").unwrap_or(base);
        let parsed = reqwest::Url::parse(base)
            .map_err(|e| Error::Config(format!("base URL {base:?}: {e}")))?;
        if !matches!(parsed.scheme(), "https" | "http") || parsed.host().is_none() {
            return Err(Error::Config(format!(
                "base URL {base:?} must be http(s)://host[:port]"
            )));
        }
        if config.max_in_flight == 0 {
            return Err(Error::Config("max_in_flight must be at least 1".into()));
        }
        let mut auth = HeaderValue::from_str(&config.token.header_value())
            .map_err(|_| Error::Config("API token contains invalid header characters".into()))?;
        auth.set_sensitive(true);
        let builder = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .user_agent(concat!("capmox-apiserver/", env!("CARGO_PKG_VERSION")));
        let http = tls::configure(builder, &config.tls)?
            .build()
            .map_err(|e| Error::Config(format!("HTTP client: {e}")))?;
        Ok(Self {
            http,
            api_root: format!("{base}/api2/json"),
            auth,
            limit: Arc::new(Semaphore::new(config.max_in_flight)),
            rate: config
                .rate_limiter
                .unwrap_or_else(|| Arc::new(RateLimiter::new(None))),
            request_timeout: config.request_timeout,
            upload_timeout: config.upload_timeout,
            observer: config.observer,
            write_fence: None,
            health: config.health.unwrap_or_default(),
            endpoint: base.into(),
        })
    }

    /// This client (sharing its connections and limits) with every write checked by
    /// `fence` right before it is sent; a refused write is [`Error::Fenced`].
    pub fn fenced(&self, fence: WriteFence) -> Self {
        Self {
            write_fence: Some(fence),
            ..self.clone()
        }
    }

    /// Requests sent through this client's rate limiter (shared with the other clients
    /// of that limiter).
    pub fn requests_sent(&self) -> u64 {
        self.rate.admitted()
    }

    /// Sends one request and returns the whole decoded JSON envelope.
    async fn call_envelope(
        &self,
        method: Method,
        path: &str,
        query: &[(String, String)],
        body: Body,
    ) -> Result<Value, Error> {
        self.rate.acquire().await;
        let _permit = self
            .limit
            .acquire()
            .await
            .map_err(|_| Error::Config("client is shut down".into()))?;
        let admission = self
            .health
            .admit()
            .map_err(|failing| self.unanswered(&method, path, failing))?;
        if method != Method::GET
            && let Some(fence) = &self.write_fence
        {
            fence.check().map_err(|reason| Error::Fenced {
                method: method.to_string(),
                path: path.to_string(),
                reason,
            })?;
        }
        let mut url = format!("{}{path}", self.api_root);
        if !query.is_empty() {
            url.push('?');
            url.push_str(&form::encode_pairs(query));
        }
        // An upload may legitimately go unanswered for long; it keeps its own timeout.
        let (timeout, watched) = match body {
            Body::Multipart(_) => (self.upload_timeout, false),
            _ => (self.request_timeout, true),
        };
        let mut request = self
            .http
            .request(method.clone(), &url)
            .header(AUTHORIZATION, self.auth.clone())
            .timeout(timeout);
        request = match body {
            Body::None => request,
            Body::Form(pairs) => request
                .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(form::encode_pairs(&pairs)),
            Body::Json(value) => request.json(&value),
            Body::Multipart(form) => request.multipart(form),
        };
        let transport = |source| Error::Transport {
            method: method.to_string(),
            path: path.to_string(),
            source,
        };
        let sent = std::time::Instant::now();
        let ticket = self.health.sent(admission);
        let answer = tokio::select! {
            answer = receive(request) => answer.map(Some),
            () = self.health.stalled(&ticket), if watched => Ok(None),
        };
        if let Some(observer) = &self.observer {
            let result = match &answer {
                Ok(Some((status, ..))) => status.as_str().to_owned(),
                Ok(None) => "stalled".to_owned(),
                Err(e) if e.is_timeout() => "timeout".to_owned(),
                Err(_) => "transport".to_owned(),
            };
            observer.call(&self.endpoint, &method, path, &result, sent.elapsed());
        }
        let (status, reason, bytes) = match answer {
            Ok(Some(answer)) => answer,
            Ok(None) => {
                let silence = ticket.patience().as_secs();
                let failing = self
                    .health
                    .lost(ticket, format!("no answer for {silence}s"), false);
                return Err(self.unanswered(&method, path, failing));
            }
            Err(e) => {
                self.health.lost(ticket, e.to_string(), e.is_connect());
                return Err(transport(e));
            }
        };
        let failure = (status.as_u16() == 401
            || (status.is_server_error() && !matches!(status.as_u16(), 595 | 596)))
        .then(|| format!("HTTP {} {reason}", status.as_u16()));
        self.health.answered(ticket, failure);
        let envelope: Option<Value> = serde_json::from_slice(&bytes).ok();
        if status.is_success() {
            return envelope.ok_or_else(|| Error::Decode {
                method: method.to_string(),
                path: path.to_string(),
                message: format!("body is not JSON ({} bytes)", bytes.len()),
            });
        }
        Err(api_error(
            method.as_str(),
            path,
            status.as_u16(),
            reason,
            envelope,
        ))
    }

    /// The error of a request refused or given up because the endpoint does not answer.
    fn unanswered(&self, method: &Method, path: &str, failing: Failing) -> Error {
        Error::Unanswered {
            method: method.to_string(),
            path: path.to_string(),
            endpoint: self.endpoint.to_string(),
            since: failing.since,
            cause: failing.error,
        }
    }

    /// The endpoint's current run of failures (no answer, 401, 5xx), if any.
    pub fn failing(&self) -> Option<Failing> {
        self.health.failing()
    }

    /// The API's base URL (`https://host:8006`).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Sends one request and decodes the envelope's `data` as `T`.
    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        query: &[(String, String)],
        body: Body,
    ) -> Result<T, Error> {
        let envelope = self
            .call_envelope(method.clone(), path, query, body)
            .await?;
        decode_data(&method, path, envelope)
    }

    async fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(String, String)],
    ) -> Result<T, Error> {
        self.call(Method::GET, path, query, Body::None).await
    }

    async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        form: Vec<(String, String)>,
    ) -> Result<T, Error> {
        self.call(Method::POST, path, &[], Body::Form(form)).await
    }

    async fn put<T: DeserializeOwned>(
        &self,
        path: &str,
        form: Vec<(String, String)>,
    ) -> Result<T, Error> {
        self.call(Method::PUT, path, &[], Body::Form(form)).await
    }

    async fn delete<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(String, String)],
    ) -> Result<T, Error> {
        self.call(Method::DELETE, path, query, Body::None).await
    }
}

/// Sends `request` and reads the whole answer: its status, reason phrase and body.
async fn receive(
    request: reqwest::RequestBuilder,
) -> Result<(reqwest::StatusCode, String, bytes::Bytes), reqwest::Error> {
    let response = request.send().await?;
    let status = response.status();
    let reason = response
        .extensions()
        .get::<hyper::ext::ReasonPhrase>()
        .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned())
        .or_else(|| status.canonical_reason().map(str::to_string))
        .unwrap_or_default();
    Ok((status, reason, response.bytes().await?))
}

fn decode_data<T: DeserializeOwned>(
    method: &Method,
    path: &str,
    mut envelope: Value,
) -> Result<T, Error> {
    let data = envelope
        .get_mut("data")
        .map(Value::take)
        .unwrap_or(Value::Null);
    serde_json::from_value(data).map_err(|e| Error::Decode {
        method: method.to_string(),
        path: path.to_string(),
        message: e.to_string(),
    })
}

/// Builds the typed error from an error answer.
fn api_error(method: &str, path: &str, status: u16, reason: String, body: Option<Value>) -> Error {
    let message = body
        .as_ref()
        .and_then(|b| b.get("message"))
        .and_then(as_string)
        .map(|m| m.trim_end().to_string());
    let errors: BTreeMap<String, String> = body
        .as_ref()
        .and_then(|b| b.get("errors"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), as_string(v)?.trim_end().to_string())))
                .collect()
        })
        .unwrap_or_default();
    let mut texts: Vec<&str> = vec![reason.as_str()];
    texts.extend(message.as_deref());
    texts.extend(errors.values().map(String::as_str));
    let kind = classify(status, &texts);
    Error::Api(Box::new(ApiError {
        method: method.to_string(),
        path: path.to_string(),
        status,
        reason,
        message,
        errors,
        kind,
    }))
}

/// Joins already-validated path segments, percent-encoding each.
fn path(segments: &[&str]) -> String {
    segments
        .iter()
        .map(|s| format!("/{}", form::encode_path(s, false)))
        .collect()
}

/// The path of a VM: `/nodes/{node}/qemu/{vmid}` plus `rest`.
fn vm_path(node: &str, vmid: u32, rest: &[&str]) -> String {
    let id = vmid.to_string();
    let mut segments = vec!["nodes", node, "qemu", id.as_str()];
    segments.extend_from_slice(rest);
    path(&segments)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_parsing() {
        let t = ApiToken::parse("capmox@pve!capi=abc-123").expect("valid");
        assert_eq!(t.id, "capmox@pve!capi");
        assert_eq!(t.header_value(), "PVEAPIToken=capmox@pve!capi=abc-123");
        assert!(!format!("{t:?}").contains("abc-123"));
        for bad in [
            "capmox@pve!capi",
            "capmox!capi=x",
            "capmox@pve=x",
            "@pve!x=y",
            "a@b!c=",
        ] {
            assert!(ApiToken::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rejects_bad_base_urls() {
        install_crypto_provider();
        let token = ApiToken::new("a@b!c", "s");
        for bad in ["not a url", "ftp://x", "https://"] {
            assert!(
                Client::new(ClientConfig::new(bad, token.clone(), TlsMode::Insecure)).is_err(),
                "{bad}"
            );
        }
        let ok = Client::new(ClientConfig::new(
            "https://pve:8006/api2/json/",
            token,
            TlsMode::Insecure,
        ))
        .expect("valid");
        assert_eq!(ok.api_root, "https://pve:8006/api2/json");
    }

    #[test]
    fn paths_encode_segments() {
        assert_eq!(
            vm_path("pve1", 101, &["status", "current"]),
            "/nodes/pve1/qemu/101/status/current"
        );
        assert_eq!(path(&["nodes", "a/b"]), "/nodes/a%2Fb");
    }
}
