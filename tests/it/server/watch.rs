//! Watch streaming through the server: events arrive as they are produced, the stream ends at
//! its timeout or at shutdown, open watches show in the metrics, and ordinary requests obey
//! the request deadline while watches do not.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, Request};
use axum::routing::get;
use capmox_apiserver::registry::list_options::ListOptions;
use capmox_apiserver::registry::watch_event::{EventType, encode_event};
use capmox_apiserver::server::metrics::RequestLabels;
use capmox_apiserver::server::request_info::RequestInfo;
use capmox_apiserver::server::{ServerState, Status, watch};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::Dev;

const THINGS: &str = "/apis/test.example.io/v1/namespaces/default/things";

/// A watch source as the registry will provide: one event, then a second once `release`
/// fires, then nothing until the watch ends.
fn watch_route(state: ServerState, release: Arc<Notify>) -> axum::Router {
    let handler = move |Query(query): Query<Vec<(String, String)>>, request: Request| {
        let state = state.clone();
        let release = Arc::clone(&release);
        async move {
            let pairs = query.iter().map(|(k, v)| (k.as_str(), v.as_str()));
            let options = ListOptions::from_query(pairs, true, &[], false).expect("options");
            let info = request
                .extensions()
                .get::<RequestInfo>()
                .cloned()
                .expect("request info");
            let guard = state.metrics.long_running(RequestLabels::from_request(
                &info,
                request.method(),
                false,
                None,
            ));
            let object = |name: &str| json!({"kind": "Thing", "metadata": {"name": name}});
            let first = encode_event(EventType::Added, &object("a"));
            let second = encode_event(EventType::Modified, &object("a"));
            let events = futures::stream::once(async move { first })
                .chain(futures::stream::once(async move {
                    release.notified().await;
                    second
                }))
                .chain(futures::stream::pending());
            watch::response(
                events,
                "application/json",
                watch::watch_timeout(options.timeout_seconds),
                state.shutdown.clone(),
                Some(guard),
            )
        }
    };
    axum::Router::new().route(THINGS, get(handler)).route(
        "/apis/test.example.io/v1/slow",
        get(|| async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            "late"
        }),
    )
}

async fn start(release: Arc<Notify>) -> Dev {
    Dev::start(move |router| {
        let routes = watch_route(router.state().clone(), release);
        router.merge(routes)
    })
    .await
}

async fn next_event(response: &mut reqwest::Response) -> Option<Value> {
    loop {
        let chunk = tokio::time::timeout(Duration::from_secs(10), response.chunk())
            .await
            .expect("no hang")
            .expect("chunk")?;
        // HTTP/2 may end the stream with an empty DATA frame.
        if chunk.is_empty() {
            continue;
        }
        assert!(
            chunk.ends_with(b"\n"),
            "one newline-terminated event per chunk: {chunk:?}"
        );
        return Some(serde_json::from_slice(&chunk).expect("event json"));
    }
}

fn open_watches(metrics: &str) -> Vec<&str> {
    metrics
        .lines()
        .filter(|l| l.starts_with("apiserver_longrunning_requests{verb=\"WATCH\""))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn events_stream_until_timeout() {
    let release = Arc::new(Notify::new());
    let dev = start(Arc::clone(&release)).await;
    let client = dev.client(true, false);
    let mut response = client
        .get(dev.url(&format!("{THINGS}?watch=true&timeoutSeconds=1&timeout=1ms")))
        .send()
        .await
        .expect("watch");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");

    // The first event arrives while the source still waits: it was flushed on its own.
    let first = next_event(&mut response).await.expect("first event");
    assert_eq!(first["type"], "ADDED");
    let metrics = client
        .get(dev.url("/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        open_watches(&metrics).iter().any(|l| l.ends_with(" 1")),
        "{metrics}"
    );

    release.notify_one();
    let second = next_event(&mut response).await.expect("second event");
    assert_eq!(second["type"], "MODIFIED");
    assert_eq!(second["object"]["metadata"]["name"], "a");
    assert!(
        next_event(&mut response).await.is_none(),
        "stream ends at timeoutSeconds"
    );

    let metrics = client
        .get(dev.url("/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        open_watches(&metrics).iter().all(|l| l.ends_with(" 0")),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_ends_open_watches() {
    let dev = start(Arc::new(Notify::new())).await;
    let mut response = dev
        .client(true, true)
        .get(dev.url(&format!("{THINGS}?watch=1")))
        .send()
        .await
        .expect("watch");
    assert!(next_event(&mut response).await.is_some());
    let Dev { dir: _dir, server } = dev;
    tokio::time::timeout(Duration::from_secs(10), server.server.shutdown())
        .await
        .expect("shutdown does not wait for the watch's 30-60 minute timeout");
    assert!(
        next_event(&mut response).await.is_none(),
        "watch stream closed cleanly"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn ordinary_requests_have_a_deadline() {
    let dev = start(Arc::new(Notify::new())).await;
    let client = dev.client(true, false);
    let response = client
        .get(dev.url("/apis/test.example.io/v1/slow?timeout=200ms"))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 504);
    let status: Status = response.json().await.expect("status");
    assert_eq!(
        (status.reason.as_str(), status.message.as_str()),
        (
            "Timeout",
            "Timeout: request did not complete within the allotted timeout"
        )
    );
    let bad = client
        .get(dev.url("/version?timeout=soon"))
        .send()
        .await
        .expect("request");
    assert_eq!(bad.status(), 400);
}
