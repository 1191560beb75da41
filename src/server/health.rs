//! `/healthz`, `/livez`, `/readyz` in kube-apiserver's format: `ok`, or with `?verbose` one
//! line per check (`[+]ping ok` … `readyz check passed`), `?exclude=<check>`, failures as 500
//! with `[-]<check> failed: reason withheld`, and `/<probe>/<check>` for a single check.
//! Other modules register named checks (storage, informers); `readyz` also fails once the
//! server is shutting down.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::future::BoxFuture;

use super::error::ApiError;
use super::request_info::query_pairs;

/// A check may take at most this long before it counts as failed.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// A named health check.
pub trait HealthCheck: Send + Sync {
    fn name(&self) -> &str;
    /// `Err` carries the reason, which is logged but never shown to the caller.
    fn check(&self) -> BoxFuture<'_, Result<(), String>>;
    /// What a passing check adds to its `?verbose` line (`[+]name ok: detail`).
    fn detail(&self) -> Option<String> {
        None
    }
}

/// A check from a name and an async closure.
pub struct FnCheck<F> {
    name: String,
    f: F,
}

impl<F, Fut> FnCheck<F>
where
    F: Fn() -> Fut + Send + Sync,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    pub fn new(name: impl Into<String>, f: F) -> Self {
        Self {
            name: name.into(),
            f,
        }
    }
}

impl<F, Fut> HealthCheck for FnCheck<F>
where
    F: Fn() -> Fut + Send + Sync,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn check(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin((self.f)())
    }
}

/// Which endpoints a check belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// healthz, livez and readyz.
    All,
    /// readyz only (e.g. storage, informers: a dead dependency must not restart the process).
    ReadinessOnly,
}

/// The three probe endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    Healthz,
    Livez,
    Readyz,
}

impl Probe {
    pub fn name(self) -> &'static str {
        match self {
            Self::Healthz => "healthz",
            Self::Livez => "livez",
            Self::Readyz => "readyz",
        }
    }
}

struct Ping;

impl HealthCheck for Ping {
    fn name(&self) -> &str {
        "ping"
    }

    fn check(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(std::future::ready(Ok(())))
    }
}

struct ShutdownCheck(Arc<AtomicBool>);

impl HealthCheck for ShutdownCheck {
    fn name(&self) -> &str {
        "shutdown"
    }

    fn check(&self) -> BoxFuture<'_, Result<(), String>> {
        let result = if self.0.load(Ordering::SeqCst) {
            Err("process is shutting down".to_owned())
        } else {
            Ok(())
        };
        Box::pin(std::future::ready(result))
    }
}

/// The registry of checks behind the probe endpoints.
pub struct HealthChecks {
    checks: RwLock<Vec<(Arc<dyn HealthCheck>, Scope)>>,
    shutting_down: Arc<AtomicBool>,
}

impl Default for HealthChecks {
    fn default() -> Self {
        Self::new()
    }
}

impl HealthChecks {
    /// Starts with `ping` (everywhere) and `shutdown` (readyz).
    pub fn new() -> Self {
        let shutting_down = Arc::new(AtomicBool::new(false));
        Self {
            checks: RwLock::new(vec![(Arc::new(Ping), Scope::All)]),
            shutting_down,
        }
    }

    fn add(&self, check: Arc<dyn HealthCheck>, scope: Scope) {
        if let Ok(mut checks) = self.checks.write() {
            checks.push((check, scope));
        }
    }

    /// Adds a check to healthz, livez and readyz.
    pub fn register(&self, check: Arc<dyn HealthCheck>) {
        self.add(check, Scope::All);
    }

    /// Adds a check to readyz only.
    pub fn register_readiness(&self, check: Arc<dyn HealthCheck>) {
        self.add(check, Scope::ReadinessOnly);
    }

    /// Makes readyz fail from now on (graceful shutdown has begun).
    pub fn mark_shutting_down(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
    }

    fn checks_for(&self, probe: Probe) -> Vec<Arc<dyn HealthCheck>> {
        let mut out: Vec<Arc<dyn HealthCheck>> = self
            .checks
            .read()
            .map(|checks| {
                checks
                    .iter()
                    .filter(|(_, scope)| *scope == Scope::All || probe == Probe::Readyz)
                    .map(|(c, _)| Arc::clone(c))
                    .collect()
            })
            .unwrap_or_default();
        if probe == Probe::Readyz {
            out.push(Arc::new(ShutdownCheck(Arc::clone(&self.shutting_down))));
        }
        out
    }

    async fn run_check(check: &dyn HealthCheck) -> Result<(), String> {
        match tokio::time::timeout(CHECK_TIMEOUT, check.check()).await {
            Ok(result) => result,
            Err(_) => Err(format!("timed out after {CHECK_TIMEOUT:?}")),
        }
    }

    /// Runs a probe with the request's query pairs: the status code and the text/plain body
    /// kube would answer.
    pub async fn run(&self, probe: Probe, pairs: &[(String, String)]) -> (StatusCode, String) {
        let verbose = pairs.iter().any(|(k, _)| k == "verbose");
        let mut excluded: Vec<String> = pairs
            .iter()
            .filter(|(k, _)| k == "exclude")
            .flat_map(|(_, v)| {
                v.split(',')
                    .map(str::trim)
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .filter(|v| !v.is_empty())
            .collect();
        let mut output = String::new();
        let mut failed = Vec::new();
        for check in self.checks_for(probe) {
            let name = check.name().to_owned();
            if let Some(i) = excluded.iter().position(|e| *e == name) {
                excluded.remove(i);
                output.push_str(&format!("[+]{name} excluded: ok\n"));
                continue;
            }
            match Self::run_check(check.as_ref()).await {
                Ok(()) => match check.detail() {
                    Some(detail) => output.push_str(&format!("[+]{name} ok: {detail}\n")),
                    None => output.push_str(&format!("[+]{name} ok\n")),
                },
                Err(reason) => {
                    tracing::warn!(probe = probe.name(), check = %name, %reason, "health check failed");
                    output.push_str(&format!("[-]{name} failed: reason withheld\n"));
                    failed.push(name);
                }
            }
        }
        if !excluded.is_empty() {
            excluded.sort();
            let quoted: Vec<String> = excluded.iter().map(|e| format!("{e:?}")).collect();
            output.push_str(&format!(
                "warn: some health checks cannot be excluded: no matches for {}\n",
                quoted.join(",")
            ));
        }
        if !failed.is_empty() {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("{output}{} check failed\n", probe.name()),
            );
        }
        if !verbose {
            return (StatusCode::OK, "ok".to_owned());
        }
        (
            StatusCode::OK,
            format!("{output}{} check passed\n", probe.name()),
        )
    }

    /// Runs one named check of a probe; `None` if the probe has no such check.
    pub async fn run_one(&self, probe: Probe, name: &str) -> Option<(StatusCode, String)> {
        let check = self
            .checks_for(probe)
            .into_iter()
            .find(|c| c.name() == name)?;
        Some(match Self::run_check(check.as_ref()).await {
            Ok(()) => (StatusCode::OK, "ok".to_owned()),
            Err(reason) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("internal server error: {reason}\n"),
            ),
        })
    }
}

fn text(code: StatusCode, body: String) -> Response {
    let mut response = (code, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

async fn probe_handler(probe: Probe, checks: Arc<HealthChecks>, uri: Uri) -> Response {
    let (code, body) = checks.run(probe, &query_pairs(&uri)).await;
    text(code, body)
}

async fn single_check_handler(probe: Probe, checks: Arc<HealthChecks>, name: String) -> Response {
    match checks.run_one(probe, &name).await {
        Some((code, body)) => text(code, body),
        None => ApiError::route_not_found().into_response(),
    }
}

/// The routes `/healthz`, `/livez`, `/readyz` and their `/<check>` sub-paths.
pub fn routes(checks: Arc<HealthChecks>) -> Router {
    let mut router = Router::new();
    for probe in [Probe::Healthz, Probe::Livez, Probe::Readyz] {
        let all = Arc::clone(&checks);
        let one = Arc::clone(&checks);
        router = router
            .route(
                &format!("/{}", probe.name()),
                get(move |uri: Uri| probe_handler(probe, Arc::clone(&all), uri)),
            )
            .route(
                &format!("/{}/{{check}}", probe.name()),
                get(move |Path(name): Path<String>| {
                    single_check_handler(probe, Arc::clone(&one), name)
                }),
            );
    }
    router
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failing(name: &str) -> Arc<dyn HealthCheck> {
        Arc::new(FnCheck::new(name, || async {
            Err("etcd unreachable".to_owned())
        }))
    }

    fn passing(name: &str) -> Arc<dyn HealthCheck> {
        Arc::new(FnCheck::new(name, || async { Ok(()) }))
    }

    fn q(query: &str) -> Vec<(String, String)> {
        query_pairs(&format!("/x?{query}").parse::<Uri>().expect("uri"))
    }

    #[tokio::test]
    async fn verbose_output_matches_kube() {
        let checks = HealthChecks::new();
        checks.register_readiness(passing("informer-sync"));
        assert_eq!(
            checks.run(Probe::Readyz, &[]).await,
            (StatusCode::OK, "ok".into())
        );
        assert_eq!(
            checks.run(Probe::Readyz, &q("verbose")).await,
            (
                StatusCode::OK,
                "[+]ping ok\n[+]informer-sync ok\n[+]shutdown ok\nreadyz check passed\n".into()
            )
        );
        assert_eq!(
            checks.run(Probe::Livez, &q("verbose=1")).await,
            (StatusCode::OK, "[+]ping ok\nlivez check passed\n".into())
        );
        assert_eq!(
            checks.run(Probe::Healthz, &q("verbose&exclude=ping&exclude=nope")).await,
            (
                StatusCode::OK,
                "[+]ping excluded: ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nhealthz check passed\n".into()
            )
        );
    }

    #[tokio::test]
    async fn failures_withhold_reasons_and_fail_readiness_only() {
        let checks = HealthChecks::new();
        checks.register_readiness(failing("etcd"));
        assert_eq!(
            checks.run(Probe::Readyz, &[]).await,
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "[+]ping ok\n[-]etcd failed: reason withheld\n[+]shutdown ok\nreadyz check failed\n".into()
            )
        );
        assert_eq!(checks.run(Probe::Livez, &[]).await.0, StatusCode::OK);
        assert_eq!(
            checks.run(Probe::Readyz, &q("exclude=etcd")).await.0,
            StatusCode::OK
        );
        assert_eq!(
            checks.run_one(Probe::Readyz, "etcd").await,
            Some((
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal server error: etcd unreachable\n".into()
            ))
        );
        assert_eq!(checks.run_one(Probe::Livez, "etcd").await, None);
        assert_eq!(
            checks.run_one(Probe::Livez, "ping").await,
            Some((StatusCode::OK, "ok".into()))
        );
    }

    #[tokio::test]
    async fn shutdown_fails_readyz() {
        let checks = HealthChecks::new();
        checks.register(passing("log"));
        checks.mark_shutting_down();
        let (code, body) = checks.run(Probe::Readyz, &[]).await;
        assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(body.contains("[-]shutdown failed: reason withheld"));
        assert_eq!(checks.run(Probe::Healthz, &[]).await.0, StatusCode::OK);
    }
}
