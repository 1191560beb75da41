//! Refusals through kube-apiserver's aggregator. kube-apiserver proxies every request to us over
//! one HTTP/2 connection; a write we refuse before reading its body (here a 415: a content type
//! we do not decode) must not cost that connection, or every request in flight on it fails with
//! a 503 (`http2: client connection force closed`, `write: broken pipe`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use capmox_apiserver::api::{Kind, Version};
use reqwest::Method;

use super::env_number;
use super::side::{self, Pair, Side};

/// Answers counted by what was sent and what came back (a status, or the client's error).
type Tally = Arc<Mutex<BTreeMap<(&'static str, String), u64>>>;

/// Sends `request` until `deadline`, counting the answers under `label`.
async fn repeat(
    side: Arc<Side>,
    tally: Tally,
    label: &'static str,
    deadline: Instant,
    request: impl Fn(&Side) -> reqwest::RequestBuilder,
) {
    while Instant::now() < deadline {
        let answer = match request(&side).send().await {
            Ok(response) => {
                let status = response.status().as_u16().to_string();
                // Read to the end, so that the connection to kube-apiserver is reused.
                let _ = response.bytes().await;
                status
            }
            Err(e) => format!("error: {e}"),
        };
        *tally.lock().unwrap().entry((label, answer)).or_default() += 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the pair: run `tests/e2e/run differential`"]
async fn refused_writes_cost_requests_beside_them_nothing() {
    let ours = Arc::new(Pair::from_env().ours);
    let seconds = env_number("REFUSALS_SECONDS", 10);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let collection = side::path(Kind::ProxmoxMachine, Version::V1alpha2, "default", None);
    // Under kube-apiserver's own 3 MiB limit, so that the body reaches us.
    let body = Bytes::from(vec![b'x'; 2 << 20]);
    let tally = Tally::default();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..3 {
        let (path, body) = (collection.clone(), body.clone());
        tasks.spawn(repeat(
            ours.clone(),
            tally.clone(),
            "refused POST",
            deadline,
            move |side| {
                side.request(Method::POST, &path)
                    .header("content-type", "text/plain")
                    .body(body.clone())
            },
        ));
        let path = format!("{collection}?limit=1");
        tasks.spawn(repeat(
            ours.clone(),
            tally.clone(),
            "GET",
            deadline,
            move |side| side.request(Method::GET, &path),
        ));
    }
    tasks.join_all().await;

    let tally = tally.lock().unwrap().clone();
    println!("answers in {seconds} s through kube-apiserver: {tally:?}");
    let count = |label, status: &str| tally.get(&(label, status.to_owned())).copied();
    let unexpected: Vec<_> = tally
        .iter()
        .filter(|((label, status), _)| {
            !matches!(
                (*label, status.as_str()),
                ("refused POST", "415") | ("GET", "200")
            )
        })
        .collect();
    assert!(
        unexpected.is_empty(),
        "answers other than 415 to the refused writes and 200 to the reads beside them: \
         {unexpected:?}"
    );
    // Enough of each to have overlapped many times (a few hundred of each on a slow machine).
    assert!(count("refused POST", "415").unwrap_or(0) >= 20, "{tally:?}");
    assert!(count("GET", "200").unwrap_or(0) >= 100, "{tally:?}");
}
