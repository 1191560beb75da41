//! The simulator's HTTP(S) front: pveproxy's request pipeline (reference §11.2).
//!
//! body limits → authentication → parameters → injected faults → node reachability →
//! permissions → handler → reply with reason phrase. The world lock is never held
//! across an `await`: delays are slept after the state change is done.

pub mod admin;
pub mod auth;
pub mod multipart;
pub mod params;
pub mod reply;
pub mod request_log;
pub mod tls;

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, Response, header};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use super::SimControl;
use super::api::{self, ApiRequest, Upload};
use super::clock::SimClock;
use super::error::{HandlerError, PveError};
use super::faults::OfflineMode;
use super::profile::Work;
use super::world::World;
use crate::proxmox::form;
use crate::proxmox::upid::is_valid_node_name;
use params::Params;
use request_log::RequestLog;

/// Non-upload bodies above this are refused (pveproxy's limit).
const MAX_BODY: usize = 512 * 1024;
/// Sync handlers wait at most this long (real time) for a busy VM lock.
const BUSY_WAIT_REAL: Duration = Duration::from_secs(10);
/// ... and PVE's lock timeout in simulated time.
const BUSY_WAIT_SIM: Duration = Duration::from_secs(10);

/// State shared by all connections.
pub struct Shared {
    world: Mutex<World>,
    /// Simulated time.
    pub clock: SimClock,
    /// Largest accepted upload.
    pub max_upload: usize,
    /// Where answered API requests are logged, if anywhere.
    request_log: Option<RequestLog>,
}

impl Shared {
    /// Wraps a world.
    pub fn new(
        world: World,
        clock: SimClock,
        max_upload: usize,
        request_log: Option<RequestLog>,
    ) -> Self {
        Self {
            world: Mutex::new(world),
            clock,
            max_upload,
            request_log,
        }
    }

    /// The world, advanced to "now" (every due task step has run).
    pub fn world(&self) -> MutexGuard<'_, World> {
        let mut world = self.world.lock().unwrap_or_else(|e| e.into_inner());
        world.run_until(self.clock.now());
        world
    }
}

/// The router: admin endpoints and the PVE API.
pub fn router(control: SimControl) -> Router {
    Router::new().fallback(entry).with_state(control)
}

fn error(with_message: bool, e: &PveError) -> Response<Body> {
    reply::error(e, with_message)
}

async fn entry(State(control): State<SimControl>, request: Request) -> Response<Body> {
    let shared = control.shared().clone();
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_string();
    let limit = if path.ends_with("/upload") {
        shared.max_upload
    } else {
        MAX_BODY
    };
    let bytes = axum::body::to_bytes(body, limit).await;
    let too_large = || error(true, &PveError::not_implemented("for data too large"));
    if let Some(rest) = path.strip_prefix("/_sim") {
        return match bytes {
            Ok(bytes) => admin::handle(&control, &parts.method, rest, &bytes),
            Err(_) => too_large(),
        };
    }
    let Some(api_path) = path.strip_prefix("/api2/json") else {
        return error(true, &PveError::not_implemented("no such uri"));
    };
    let segments: Vec<String> = api_path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(form::decode_path)
        .collect();
    let response = match &bytes {
        Ok(bytes) => api_request(&shared, &parts, segments.clone(), bytes).await,
        Err(_) => too_large(),
    };
    let bytes = bytes.unwrap_or_default();
    let Some(log) = &shared.request_log else {
        return response;
    };
    let header_str = |name| parts.headers.get(name).and_then(|v| v.to_str().ok());
    let logged = request_log::Request {
        t: shared.clock.now().as_secs_f64(),
        method: &parts.method,
        segments: &segments,
        query: parts.uri.query(),
        content_type: header_str(header::CONTENT_TYPE).unwrap_or(""),
        body: &bytes,
    };
    log.record(&logged, response).await
}

/// One PVE API request with its body read: authentication, parameters, handler, reply.
async fn api_request(
    shared: &Shared,
    parts: &axum::http::request::Parts,
    segments: Vec<String>,
    bytes: &[u8],
) -> Response<Body> {
    let method = parts.method.clone();
    let header_str = |name| parts.headers.get(name).and_then(|v| v.to_str().ok());
    let content_type = header_str(header::CONTENT_TYPE).unwrap_or("").to_string();

    let (caller, with_message, auth_delay) = {
        let w = shared.world();
        (
            auth::authenticate(&w, header_str(header::AUTHORIZATION)),
            !w.faults.drop_message_field,
            w.profile.nominal(Work::AuthFailure),
        )
    };
    let caller = match caller {
        Ok(c) => c,
        Err(e) => {
            // pveproxy delays failed logins to slow down guessing.
            tokio::time::sleep(auth_delay).await;
            return error(with_message, &e);
        }
    };
    if matches!(method, Method::GET | Method::DELETE) && !bytes.is_empty() {
        return error(
            with_message,
            &PveError::not_implemented(format!("Unexpected content for method '{method}'")),
        );
    }
    let parsed = if content_type.starts_with("multipart/form-data") {
        parse_upload(
            parts.uri.query(),
            &content_type,
            bytes,
            header_str(header::CONTENT_LENGTH).is_some(),
        )
    } else {
        Params::parse(parts.uri.query(), &content_type, bytes).map(|p| (p, None))
    };
    let (params, upload) = match parsed {
        Ok(p) => p,
        Err(e) => return error(with_message, &e),
    };
    let request = ApiRequest {
        method,
        segments,
        params,
        upload,
    };
    let started = shared.clock.now();
    let real_deadline = tokio::time::Instant::now() + BUSY_WAIT_REAL;
    loop {
        let (outcome, delay, with_message) = {
            let mut w = shared.world();
            w.current_user = caller.token_id.clone();
            let outcome = handle(&mut w, &request, &caller);
            let mut delay = Duration::from_millis(w.faults.response_delay(
                request.method.as_str(),
                &format!("/{}", request.segments.join("/")),
            ));
            if request.method == Method::GET {
                delay += w.duration(Work::Read);
            }
            (outcome, delay, !w.faults.drop_message_field)
        };
        let response = match outcome {
            Outcome::Done(reply) => reply::ok(reply.data, reply.extra),
            Outcome::Failed(e, extra_delay) => {
                tokio::time::sleep(extra_delay).await;
                error(with_message, &e)
            }
            Outcome::Busy(message) => {
                let waited = shared.clock.now().saturating_sub(started);
                if waited >= BUSY_WAIT_SIM || tokio::time::Instant::now() >= real_deadline {
                    error(with_message, &PveError::internal(message))
                } else {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            }
        };
        tokio::time::sleep(delay).await;
        return response;
    }
}

/// Splits a multipart upload: form fields before the file part become parameters, the
/// part named `filename` is the file (later fields are ignored, as pveproxy streams).
fn parse_upload(
    query: Option<&str>,
    content_type: &str,
    body: &[u8],
    has_length: bool,
) -> Result<(Params, Option<Upload>), PveError> {
    if !has_length {
        return Err(PveError::new(411, "upload requires a Content-Length"));
    }
    let boundary = multipart::boundary(content_type)
        .ok_or_else(|| PveError::new(400, "multipart upload without boundary"))?;
    let parts = multipart::parse(body, &boundary).map_err(|e| PveError::new(400, e))?;
    let mut params = Params::parse(query, "", b"")?;
    for part in parts {
        if part.name == "filename" {
            let filename = part.filename.unwrap_or_default();
            return Ok((
                params,
                Some(Upload {
                    filename,
                    data: part.data,
                }),
            ));
        }
        params.insert(&part.name, &String::from_utf8_lossy(&part.data));
    }
    Ok((params, None))
}

enum Outcome {
    Done(api::Reply),
    /// The error, and how long to wait before answering (proxy timeouts).
    Failed(PveError, Duration),
    Busy(String),
}

/// Everything after authentication, under the world lock.
fn handle(w: &mut World, r: &ApiRequest, caller: &auth::Caller) -> Outcome {
    let path = format!("/{}", r.segments.join("/"));
    let fault = {
        let World { faults, rng, .. } = &mut *w;
        faults.take_http_error(r.method.as_str(), &path, &mut |p| rng.chance(p))
    };
    if let Some(fault) = fault {
        return Outcome::Failed(PveError::new(fault.status, fault.message), Duration::ZERO);
    }
    if let (Some(first), Some(node)) = (r.segments.first(), r.segments.get(1))
        && first == "nodes"
    {
        if !is_valid_node_name(node) {
            return Outcome::Failed(
                PveError::param(
                    "node",
                    "invalid format - value does not look like a valid node name",
                ),
                Duration::ZERO,
            );
        }
        if !w.nodes.contains_key(node) {
            return Outcome::Failed(
                PveError::internal(format!(
                    "hostname lookup '{node}' failed - failed to get address info for: {node}: Name or service not known"
                )),
                Duration::ZERO,
            );
        }
        if let Some(mode) = w.faults.offline_nodes.get(node.as_str()) {
            let (status, text, delay) = match mode {
                OfflineMode::Unreachable => (595, "No route to host", Duration::ZERO),
                OfflineMode::Refused => (595, "Connection refused", Duration::ZERO),
                OfflineMode::Timeout => (
                    596,
                    "Connection timed out",
                    w.profile.nominal(Work::ProxyTimeout),
                ),
            };
            return Outcome::Failed(PveError::new(status, text), delay);
        }
    }
    if let Err(e) = auth::authorize(caller, &r.method, &r.segments) {
        return Outcome::Failed(e, Duration::ZERO);
    }
    match api::route(w, r) {
        Ok(reply) => Outcome::Done(reply),
        Err(HandlerError::Pve(e)) => Outcome::Failed(e, Duration::ZERO),
        Err(HandlerError::Busy { message, .. }) => Outcome::Busy(message),
    }
}

/// Accepts connections until `shutdown` flips; open connections are dropped with it.
pub async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    app: Router,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let accepted = tokio::select! {
            _ = shutdown.changed() => break,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, _)) = accepted else {
            continue;
        };
        let service = TowerToHyperService::new(app.clone());
        let tls = tls.clone();
        connections.spawn(async move {
            let http = hyper::server::conn::http1::Builder::new();
            match tls {
                Some(acceptor) => {
                    if let Ok(stream) = acceptor.accept(stream).await {
                        let _ = http.serve_connection(TokioIo::new(stream), service).await;
                    }
                }
                None => {
                    let _ = http.serve_connection(TokioIo::new(stream), service).await;
                }
            }
        });
    }
}
