//! Streaming watch responses: framed events are written as they come (one JSON document and a
//! newline each), the stream ends at the watch timeout or when the server shuts down, and it
//! counts as an open watch in the metrics while it runs.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::{Stream, StreamExt};

use super::listener::Shutdown;
use super::metrics::LongRunningGuard;

/// kube-apiserver's `--min-request-timeout`: watches without `timeoutSeconds` last between
/// this and twice this, so clients reconnect at spread-out times.
pub const MIN_REQUEST_TIMEOUT: Duration = Duration::from_secs(1800);

/// The lifetime of a watch: `timeoutSeconds` when positive, else a random duration in
/// [30 min, 60 min).
pub fn watch_timeout(timeout_seconds: Option<i64>) -> Duration {
    match timeout_seconds
        .and_then(|t| u64::try_from(t).ok())
        .filter(|t| *t > 0)
    {
        Some(t) => Duration::from_secs(t),
        None => {
            use ring::rand::{SecureRandom, SystemRandom};
            let mut buf = [0u8; 8];
            let jitter = match SystemRandom::new().fill(&mut buf) {
                Ok(()) => u64::from_le_bytes(buf) % MIN_REQUEST_TIMEOUT.as_secs(),
                Err(_) => 0,
            };
            MIN_REQUEST_TIMEOUT + Duration::from_secs(jitter)
        }
    }
}

/// A 200 response streaming `events` (already framed, see `registry::watch_event`) until the
/// source ends, `timeout` passes, or `shutdown` fires. `guard` (from
/// `Metrics::long_running`) is released when the stream ends.
pub fn response(
    events: impl Stream<Item = Bytes> + Send + 'static,
    content_type: &str,
    timeout: Duration,
    shutdown: Shutdown,
    guard: Option<LongRunningGuard>,
) -> Response {
    let stop = async move {
        tokio::select! {
            () = tokio::time::sleep(timeout) => {}
            () = shutdown.wait() => {}
        }
    };
    let stream = events.take_until(Box::pin(stop)).map(move |chunk| {
        // The guard lives as long as the stream.
        let _held = &guard;
        Ok::<_, Infallible>(chunk)
    });
    let mut response = (StatusCode::OK, Body::from_stream(stream)).into_response();
    let headers = response.headers_mut();
    if let Ok(ct) = HeaderValue::from_str(content_type) {
        headers.insert(header::CONTENT_TYPE, ct);
    }
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts() {
        assert_eq!(watch_timeout(Some(290)), Duration::from_secs(290));
        for t in [None, Some(0), Some(-5)] {
            let d = watch_timeout(t);
            assert!(
                d >= MIN_REQUEST_TIMEOUT && d < 2 * MIN_REQUEST_TIMEOUT,
                "{d:?}"
            );
        }
    }
}
