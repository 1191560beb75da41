//! Watches: initial state, live changes in the watcher's version, selector transitions,
//! resuming, 410 for a compacted start, bookmarks, WatchList's initial-events-end bookmark,
//! timeouts, and Table events.

use std::time::Duration;

use serde_json::{Value, json};

use super::{Api, GROUP, collection, item, labelled, machine};

const MACHINES: &str = "proxmoxmachines";

fn machines() -> String {
    collection("v1alpha2", "default", MACHINES)
}

fn summary(event: &Value) -> (String, String) {
    (
        event["type"].as_str().unwrap_or_default().to_owned(),
        event["object"]["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

fn pair(kind: &str, name: &str) -> (String, String) {
    (kind.to_owned(), name.to_owned())
}

#[tokio::test(flavor = "multi_thread")]
async fn initial_state_then_changes_in_each_version() {
    let api = Api::start().await;
    api.create(&machine("old")).await;
    let mut v2 = api.get(&format!("{}?watch=true", machines())).watch().await;
    let mut v1 = api
        .get(&format!(
            "{}?watch=1",
            collection("v1alpha1", "default", MACHINES)
        ))
        .watch()
        .await;
    assert_eq!((v2.status, v1.status), (200, 200));
    assert_eq!(
        summary(&v2.next_change().await.expect("initial")),
        pair("ADDED", "old")
    );
    let first_v1 = v1.next_change().await.expect("initial");
    assert_eq!(
        first_v1["object"]["apiVersion"],
        format!("{GROUP}/v1alpha1")
    );

    let created = api.create(&machine("new")).await;
    let added = v2.next_change().await.expect("added");
    assert_eq!(summary(&added), pair("ADDED", "new"));
    assert_eq!(
        added["object"]["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    let added_v1 = v1.next_change().await.expect("added v1");
    assert_eq!(summary(&added_v1), pair("ADDED", "new"));
    assert_eq!(
        added_v1["object"]["apiVersion"],
        format!("{GROUP}/v1alpha1")
    );

    let path = item("v1alpha2", "default", MACHINES, "new");
    api.patch(&path)
        .merge_patch(&json!({"spec": {"numCores": 7}}))
        .send()
        .await;
    let modified = v2.next_change().await.expect("modified");
    assert_eq!(summary(&modified), pair("MODIFIED", "new"));
    assert_eq!(modified["object"]["spec"]["numCores"], 7);
    let deleted = api.delete(&path).send().await;
    assert_eq!(deleted.status, 200);
    let gone = v2.next_change().await.expect("deleted");
    assert_eq!(summary(&gone), pair("DELETED", "new"));
    assert_eq!(gone["object"]["spec"]["numCores"], 7);
    assert_eq!(
        summary(&v1.next_change().await.expect("m")),
        pair("MODIFIED", "new")
    );
    assert_eq!(
        summary(&v1.next_change().await.expect("d")),
        pair("DELETED", "new")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn selector_transitions_and_resume() {
    let api = Api::start().await;
    let start = api.create(&labelled(machine("m"), &[("tier", "db")])).await;
    let rv = start["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_owned();
    let mut web = api
        .get(&format!(
            "{}?watch=true&labelSelector=tier%3Dweb&resourceVersion={rv}",
            machines()
        ))
        .watch()
        .await;
    let path = item("v1alpha2", "default", MACHINES, "m");
    for tier in ["web", "db"] {
        api.patch(&path)
            .merge_patch(&json!({"metadata": {"labels": {"tier": tier}}}))
            .send()
            .await;
    }
    assert_eq!(
        summary(&web.next_change().await.expect("enters")),
        pair("ADDED", "m")
    );
    let left = web.next_change().await.expect("leaves");
    assert_eq!(summary(&left), pair("DELETED", "m"));
    assert_eq!(
        left["object"]["metadata"]["labels"]["tier"], "web",
        "last selected state"
    );

    // Resuming from a revision replays only what came after it.
    let mut resumed = api
        .get(&format!("{}?watch=true&resourceVersion={rv}", machines()))
        .watch()
        .await;
    let first = resumed.next_change().await.expect("first change");
    assert_eq!(summary(&first), pair("MODIFIED", "m"));
    assert_eq!(first["object"]["metadata"]["labels"]["tier"], "web");

    // A single object by name, from "0": its current state first.
    let mut single = api
        .get(&format!(
            "{}?watch=true&fieldSelector=metadata.name%3Dm&resourceVersion=0",
            machines()
        ))
        .watch()
        .await;
    assert_eq!(
        summary(&single.next_change().await.expect("state")),
        pair("ADDED", "m")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn expired_starts_bookmarks_and_watch_list() {
    let api = Api::start().await;
    let first = api.create(&machine("a")).await;
    let old: i64 = first["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .expect("rv");
    api.create(&machine("b")).await;
    api.create(&machine("c")).await;
    // Revisions before old + 2 are forgotten: a watch from `old` would need old + 1.
    api.dev
        .server
        .store
        .compact(old + 2)
        .await
        .expect("compact");
    let expired = api
        .get(&format!("{}?watch=true&resourceVersion={old}", machines()))
        .send()
        .await;
    assert_eq!(expired.status, 410);
    assert_eq!(expired.reason(), "Expired");

    let mut bookmarks = api
        .get(&format!(
            "{}?watch=true&allowWatchBookmarks=true&resourceVersion={}",
            machines(),
            old + 2
        ))
        .watch()
        .await;
    let mut saw_bookmark = None;
    for _ in 0..10 {
        match bookmarks.next().await {
            Some(event) if event["type"] == "BOOKMARK" => {
                saw_bookmark = Some(event);
                break;
            }
            Some(_) => {}
            None => break,
        }
    }
    let bookmark = saw_bookmark.expect("a bookmark within a few progress intervals");
    assert_eq!(bookmark["object"]["kind"], "ProxmoxMachine");
    assert!(bookmark["object"]["metadata"]["resourceVersion"].is_string());

    // WatchList: the initial state, then the initial-events-end bookmark.
    let mut list = api
        .get(&format!(
            "{}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
            machines()
        ))
        .watch()
        .await;
    assert_eq!(summary(&list.next().await.expect("a")), pair("ADDED", "a"));
    assert_eq!(summary(&list.next().await.expect("b")), pair("ADDED", "b"));
    assert_eq!(summary(&list.next().await.expect("c")), pair("ADDED", "c"));
    let end = list.next().await.expect("end bookmark");
    assert_eq!(end["type"], "BOOKMARK");
    assert_eq!(
        end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    let refused = api
        .get(&format!(
            "{}?watch=true&resourceVersionMatch=NotOlderThan",
            machines()
        ))
        .send()
        .await;
    assert_eq!(refused.status, 422);
}

#[tokio::test(flavor = "multi_thread")]
async fn timeouts_and_table_events() {
    let api = Api::start().await;
    api.create(&machine("a")).await;
    let mut timed = api
        .get(&format!("{}?watch=true&timeoutSeconds=1", machines()))
        .watch()
        .await;
    assert_eq!(
        summary(&timed.next().await.expect("initial")),
        pair("ADDED", "a")
    );
    assert!(
        timed.next_within(Duration::from_secs(5)).await.is_none(),
        "the stream ends after timeoutSeconds"
    );

    let mut table = api
        .get(&format!("{}?watch=true", machines()))
        .accept("application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
        .watch()
        .await;
    let first = table.next_change().await.expect("first");
    assert_eq!(first["object"]["kind"], "Table");
    assert_eq!(first["object"]["columnDefinitions"][0]["name"], "Name");
    assert_eq!(first["object"]["rows"][0]["cells"][0], "a");
    api.create(&machine("b")).await;
    let second = table.next_change().await.expect("second");
    assert_eq!(second["object"]["rows"][0]["cells"][0], "b");
    assert_eq!(second["object"]["columnDefinitions"], json!([]));
}

/// GETs, LISTs and watches in plain JSON share each revision's encoding; an object leaving a
/// filtered watch shows its last selected state although another watcher, a GET and a LIST
/// read the new state of the same revision, and every path reads as the decoded one does.
#[tokio::test(flavor = "multi_thread")]
async fn one_revision_reads_alike_in_every_path() {
    let api = Api::start().await;
    let created = api
        .create(&labelled(machine("m"), &[("tier", "web")]))
        .await;
    let rv = created["metadata"]["resourceVersion"].as_str().expect("rv");
    let watch = |selector: &str| {
        format!(
            "{}?watch=true&resourceVersion={rv}&labelSelector={selector}",
            machines()
        )
    };
    let mut all = api.get(&watch("")).watch().await;
    let mut web = api.get(&watch("tier%3Dweb")).watch().await;
    let path = item("v1alpha2", "default", MACHINES, "m");
    api.patch(&path)
        .merge_patch(&json!({"metadata": {"labels": {"tier": "db"}}}))
        .send()
        .await;
    let left = web.next_change().await.expect("leaves");
    assert_eq!(summary(&left), pair("DELETED", "m"));
    assert_eq!(left["object"]["metadata"]["labels"]["tier"], "web");
    let modified = all.next_change().await.expect("modified");
    assert_eq!(summary(&modified), pair("MODIFIED", "m"));
    let current = &modified["object"];
    assert_eq!(current["metadata"]["labels"]["tier"], "db");
    assert_eq!(
        left["object"]["metadata"]["resourceVersion"],
        current["metadata"]["resourceVersion"]
    );

    for version in ["v1alpha2", "v1alpha1"] {
        let path = item(version, "default", MACHINES, "m");
        let plain = api.get(&path).send().await.json();
        let pretty = api.get(&format!("{path}?pretty=true")).send().await.json();
        assert_eq!(
            plain, pretty,
            "{version}: the cached encoding reads as decoded"
        );
        assert_eq!(plain["metadata"]["labels"]["tier"], "db");
        let listed = api
            .get(&collection(version, "default", MACHINES))
            .send()
            .await
            .json();
        assert_eq!(listed["items"][0], plain, "{version}");
    }
    assert_eq!(
        &api.get(&path).send().await.json(),
        current,
        "the watch event is the object a GET reads"
    );
}
