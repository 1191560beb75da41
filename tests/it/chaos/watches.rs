//! Watchers as a reflector runs them: list, then watch from the list's resourceVersion; when
//! a stream breaks (a replica killed, paused, or its etcd member cut off), resume from the last
//! revision seen on another replica; on 410 Gone, list again. Each watcher records what it
//! saw, and [`check`] holds it to the promise of a watch: every change after the revision it
//! started from, once, in revision order — up to each relist, which may skip what it replaces.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use tokio::sync::watch;

use super::system::{GROUP_VERSION, NAMESPACE};
use super::workload::{REGISTER_SELECTOR, register, resource_version};

/// A stream quiet this long is taken as broken (a paused replica sends nothing, not even
/// the end of the stream); bookmarks come every few seconds on a live one.
const QUIET_LIMIT: Duration = Duration::from_secs(8);

/// One change as a watcher saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub kind: String,
    pub key: String,
    pub value: String,
}

#[derive(Default, Debug)]
pub struct Seen {
    /// Revision → change, in the order received.
    pub changes: Vec<(u64, Change)>,
    /// Revision ranges `(from, to]` the watcher vouches for: from its list (or relist) to the
    /// last revision it saw or was told of by a bookmark.
    pub covered: Vec<(u64, u64)>,
    pub resumes: usize,
    pub relists: usize,
    /// Breaks of the promise noticed while streaming (revision going backwards).
    pub disorder: Vec<String>,
}

/// Runs a watcher until `stop`, starting on replica `first`.
pub async fn run_watcher(
    seen: Arc<Mutex<Seen>>,
    client: reqwest::Client,
    replicas: Vec<String>,
    first: usize,
    mut stop: watch::Receiver<bool>,
) {
    let mut replica = first;
    let mut from: Option<u64> = None;
    while !*stop.borrow() {
        let base = format!(
            "{}/apis/{GROUP_VERSION}/namespaces/{NAMESPACE}/proxmoxmachines",
            replicas[replica % replicas.len()]
        );
        replica += 1;
        let start = match from {
            Some(rv) => rv,
            None => match list(&client, &base).await {
                Some(rv) => {
                    seen.lock().expect("seen").covered.push((rv, rv));
                    rv
                }
                None => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            },
        };
        let outcome = tokio::select! {
            outcome = stream(&client, &base, start, &seen) => outcome,
            _ = stop.changed() => break,
        };
        let mut s = seen.lock().expect("seen");
        match outcome {
            Ended::Gone => {
                s.relists += 1;
                from = None;
            }
            Ended::Broken(last) => {
                s.resumes += 1;
                from = Some(last);
            }
        }
    }
}

enum Ended {
    /// 410: the revision was compacted; list again.
    Gone,
    /// The stream ended or stalled after this revision.
    Broken(u64),
}

async fn list(client: &reqwest::Client, base: &str) -> Option<u64> {
    let response = client
        .get(format!("{base}?{REGISTER_SELECTOR}"))
        .send()
        .await
        .ok()?;
    if !response.status().is_success() {
        return None;
    }
    let list: Value = response.json().await.ok()?;
    list["metadata"]["resourceVersion"].as_str()?.parse().ok()
}

async fn stream(client: &reqwest::Client, base: &str, from: u64, seen: &Mutex<Seen>) -> Ended {
    let request = client
        .get(format!(
            "{base}?{REGISTER_SELECTOR}&watch=true&allowWatchBookmarks=true&resourceVersion={from}"
        ))
        // The client's own timeout would end healthy streams; quiet streams are cut below.
        .timeout(Duration::from_secs(3600));
    let response = match tokio::time::timeout(QUIET_LIMIT, request.send()).await {
        Ok(Ok(r)) => r,
        _ => return Ended::Broken(from),
    };
    if response.status() == reqwest::StatusCode::GONE {
        return Ended::Gone;
    }
    if !response.status().is_success() {
        tokio::time::sleep(Duration::from_millis(200)).await;
        return Ended::Broken(from);
    }
    let mut last = from;
    let mut body = response.bytes_stream();
    let mut buffer: Vec<u8> = Vec::new();
    loop {
        let chunk = match tokio::time::timeout(QUIET_LIMIT, body.next()).await {
            Ok(Some(Ok(chunk))) => chunk,
            _ => return Ended::Broken(last),
        };
        buffer.extend_from_slice(&chunk);
        while let Some(end) = buffer.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            let Ok(event) = serde_json::from_slice::<Value>(&line) else {
                continue;
            };
            let kind = event["type"].as_str().unwrap_or_default().to_owned();
            let object = &event["object"];
            if kind == "ERROR" {
                return if object["code"] == 410 {
                    Ended::Gone
                } else {
                    Ended::Broken(last)
                };
            }
            let rv = resource_version(object);
            let mut s = seen.lock().expect("seen");
            if kind != "BOOKMARK" {
                if rv <= last {
                    s.disorder
                        .push(format!("{kind} at revision {rv} after {last}"));
                }
                let (_, value) = register(object);
                let key = object["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                s.changes.push((rv, Change { kind, key, value }));
            }
            last = last.max(rv);
            if let Some(range) = s.covered.last_mut() {
                range.1 = range.1.max(last);
            }
        }
    }
}

/// Holds every watcher to the union of what all saw and the acknowledged writes: each
/// revision in a watcher's covered ranges it must have seen, with the same change as the
/// others. Returns the failures, and the number of distinct changes.
pub fn check(watchers: &[Seen], acknowledged: &BTreeMap<u64, String>) -> (Vec<String>, usize) {
    let mut failures = Vec::new();
    let mut truth: BTreeMap<u64, Change> = BTreeMap::new();
    for (w, seen) in watchers.iter().enumerate() {
        for f in &seen.disorder {
            failures.push(format!("watcher {w}: {f}"));
        }
        for (rv, change) in &seen.changes {
            match truth.get(rv) {
                Some(known) if known != change => failures.push(format!(
                    "revision {rv}: watcher {w} saw {change:?}, another {known:?}"
                )),
                _ => {
                    truth.insert(*rv, change.clone());
                }
            }
        }
    }
    for (rv, key) in acknowledged {
        match truth.get(rv) {
            Some(change) if &change.key != key => failures.push(format!(
                "revision {rv} was acknowledged for {key}, watched as {change:?}"
            )),
            _ => {}
        }
    }
    let revisions: Vec<u64> = truth
        .keys()
        .copied()
        .chain(acknowledged.keys().copied())
        .collect();
    for (w, seen) in watchers.iter().enumerate() {
        let mine: BTreeMap<u64, usize> =
            seen.changes.iter().fold(BTreeMap::new(), |mut m, (rv, _)| {
                *m.entry(*rv).or_default() += 1;
                m
            });
        for (rv, n) in &mine {
            if *n > 1 {
                failures.push(format!("watcher {w} saw revision {rv} {n} times"));
            }
        }
        for &(from, to) in &seen.covered {
            let missed: Vec<u64> = revisions
                .iter()
                .copied()
                .filter(|rv| *rv > from && *rv <= to && !mine.contains_key(rv))
                .collect();
            if !missed.is_empty() {
                failures.push(format!(
                    "watcher {w} missed revisions {missed:?} within ({from}, {to}]"
                ));
            }
        }
    }
    (failures, truth.len())
}
