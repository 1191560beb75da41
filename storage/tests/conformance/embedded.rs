//! What only the embedded backend has: persistence across reopen, a bounded history, watchers
//! that fall behind, an exclusive data dir, and crash safety.

mod crash;

use std::time::Duration;

use bytes::Bytes;
use capmox_storage::{EmbeddedConfig, Error, Event, Revision, Store};
use futures::StreamExt;

use crate::support::{changes, next_change};

fn config(dir: &tempfile::TempDir) -> EmbeddedConfig {
    EmbeddedConfig::new(dir.path()).with_progress_interval(None)
}

#[tokio::test]
async fn data_and_history_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(config(&dir)).await.unwrap();
    let first = store.create("/a", Bytes::from_static(b"1")).await.unwrap();
    let second = store
        .update("/a", Bytes::from_static(b"2"), first)
        .await
        .unwrap();
    store.create("/b", Bytes::from_static(b"b")).await.unwrap();
    let before = store.current_revision().await.unwrap();
    store.close().await;

    let store = Store::open(config(&dir)).await.unwrap();
    assert_eq!(store.current_revision().await.unwrap(), before);
    let a = store.get("/a").await.unwrap();
    assert_eq!(
        (a.value, a.revision, a.create_revision),
        (Bytes::from_static(b"2"), second, first)
    );
    // The change log came back too: reads and watches in the past still work.
    let past = store.list("/", None, None, Some(first)).await.unwrap();
    assert_eq!(past.items.len(), 1);
    let mut watch = store.watch("/", first).await.unwrap();
    let replayed: Vec<Revision> = changes(&mut watch, 2)
        .await
        .iter()
        .map(Event::revision)
        .collect();
    assert_eq!(replayed, [second, before]);
    // New writes continue the revision sequence.
    assert_eq!(store.create("/c", Bytes::new()).await.unwrap(), before + 1);
}

#[tokio::test]
async fn history_is_bounded_and_older_revisions_expire() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(config(&dir).with_history(5)).await.unwrap();
    let mut revisions = Vec::new();
    for i in 0..12 {
        revisions.push(
            store
                .create(&format!("/k{i:02}"), Bytes::new())
                .await
                .unwrap(),
        );
    }
    let last = *revisions.last().unwrap();
    // The log keeps the last five revisions: reads at them work, older ones expire.
    let oldest_kept = last - 4;
    assert_eq!(
        store
            .list("/", None, None, Some(oldest_kept))
            .await
            .unwrap()
            .items
            .len(),
        8
    );
    let error = store
        .list("/", None, None, Some(oldest_kept - 1))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Expired { .. }), "{error:?}");
    assert!(matches!(
        store.watch("/", oldest_kept - 2).await,
        Err(Error::Expired { .. })
    ));
    let mut watch = store.watch("/", oldest_kept - 1).await.unwrap();
    assert_eq!(changes(&mut watch, 5).await.len(), 5);
}

#[tokio::test]
async fn a_lagging_watcher_catches_up_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    // Room for just one live batch: everything else must come from the log.
    let store = Store::open(config(&dir).with_watch_buffer(1))
        .await
        .unwrap();
    let start = store.current_revision().await.unwrap();
    let mut watch = store.watch("/", start).await.unwrap();
    let first = next_change_after(&store, &mut watch).await;
    let mut acked = vec![first];
    for i in 0..300 {
        acked.push(
            store
                .create(&format!("/lag/{i:03}"), Bytes::new())
                .await
                .unwrap(),
        );
    }
    let delivered: Vec<Revision> = changes(&mut watch, 300)
        .await
        .iter()
        .map(Event::revision)
        .collect();
    assert_eq!(delivered, acked[1..]);
}

/// Writes one key and returns its revision once the watch has delivered it (so the watch is
/// known to be following live batches).
async fn next_change_after(store: &Store, watch: &mut capmox_storage::WatchStream) -> Revision {
    let revision = store.create("/lag/first", Bytes::new()).await.unwrap();
    assert_eq!(next_change(watch).await.revision(), revision);
    revision
}

#[tokio::test]
async fn a_watcher_behind_the_history_ends_with_expired() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(config(&dir).with_history(10).with_watch_buffer(1))
        .await
        .unwrap();
    let start = store.current_revision().await.unwrap();
    let mut watch = store.watch("/", start).await.unwrap();
    for i in 0..50 {
        store.create(&format!("/k{i}"), Bytes::new()).await.unwrap();
    }
    let mut delivered = 0;
    loop {
        match tokio::time::timeout(Duration::from_secs(10), watch.next())
            .await
            .unwrap()
        {
            Some(Ok(_)) => delivered += 1,
            Some(Err(Error::Expired { .. })) => break,
            other => panic!("expected Expired, got {other:?}"),
        }
    }
    assert!(delivered < 50, "the watch could not have seen everything");
    assert!(
        watch.next().await.is_none(),
        "the stream ends after the error"
    );
}

#[tokio::test]
async fn closing_the_store_ends_its_watches() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(config(&dir)).await.unwrap();
    let mut watch = store.watch("/", 1).await.unwrap();
    store.clone().close().await;
    let item = tokio::time::timeout(Duration::from_secs(10), watch.next())
        .await
        .unwrap();
    assert!(matches!(item, Some(Err(Error::Unavailable(_)))), "{item:?}");
    assert!(matches!(
        store.create("/a", Bytes::new()).await,
        Err(Error::Unavailable(_))
    ));
}

#[tokio::test]
async fn a_data_dir_is_used_by_one_store_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let first = Store::open(config(&dir)).await.unwrap();
    let second = Store::open(config(&dir)).await;
    assert!(
        matches!(second, Err(Error::Unavailable(_))),
        "second open must fail cleanly"
    );
    first.close().await;
    Store::open(config(&dir)).await.expect("reopen after close");
}

#[tokio::test]
async fn periodic_progress_marks_follow_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(config(&dir).with_progress_interval(Some(Duration::from_millis(50))))
        .await
        .unwrap();
    let mut watch = store.watch("/mine/", 1).await.unwrap();
    let elsewhere = store.create("/other", Bytes::new()).await.unwrap();
    loop {
        match crate::support::next_event(&mut watch).await {
            Event::Progress { revision } if revision >= elsewhere => break,
            Event::Progress { .. } => continue,
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test]
async fn invalid_configuration_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let result = Store::open(config(&dir).with_history(0)).await;
    assert!(matches!(result, Err(Error::InvalidArgument(_))));
}

/// The embedded store's single process always leads.
#[tokio::test]
async fn the_embedded_store_always_leads() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(EmbeddedConfig::new(dir.path().join("db")))
        .await
        .unwrap();
    let mut leadership = store
        .campaign("/elections/controller", "solo", Duration::from_secs(2))
        .await
        .unwrap();
    assert!(leadership.is_held());
    assert!(leadership.fence().holds_for(Duration::from_secs(3600)));
    assert!(
        tokio::time::timeout(Duration::from_millis(200), leadership.lost())
            .await
            .is_err(),
        "never lost"
    );
    leadership.resign().await;
    store.close().await;
}

/// Group commit waits only for writers that exist: a lone writer never waits for the delay,
/// and closing the store while a commit waits for more writers commits what came.
#[tokio::test]
async fn the_commit_delay_waits_only_for_concurrent_writers() {
    let dir = tempfile::tempdir().unwrap();
    let delay = Duration::from_secs(30);
    let store = Store::open(config(&dir).with_commit_delay(delay))
        .await
        .unwrap();
    let lone = async {
        for i in 0..20 {
            store
                .create(&format!("/lone/{i}"), Bytes::new())
                .await
                .unwrap();
        }
    };
    tokio::time::timeout(Duration::from_secs(10), lone)
        .await
        .expect("a lone writer's writes do not wait for the commit delay");

    // Eight writers at once make the next commit wait for eight; the one write that comes
    // is committed when the store closes, not lost.
    let concurrent: Vec<_> = (0..8)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move { store.create(&format!("/many/{i}"), Bytes::new()).await })
        })
        .collect();
    for write in concurrent {
        write.await.unwrap().unwrap();
    }
    let waiting = {
        let store = store.clone();
        tokio::spawn(async move { store.create("/last", Bytes::from_static(b"x")).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    tokio::time::timeout(Duration::from_secs(10), store.close())
        .await
        .expect("closing does not wait for the commit delay");
    let revision = waiting
        .await
        .unwrap()
        .expect("the waiting write is committed");
    let store = Store::open(config(&dir)).await.unwrap();
    let last = store.get("/last").await.unwrap();
    assert_eq!(
        (last.value, last.revision),
        (Bytes::from_static(b"x"), revision)
    );
}
