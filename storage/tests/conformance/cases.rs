//! The conformance suite: every case runs against both backends (see `main.rs`), which must
//! behave identically.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bytes::Bytes;
use capmox_storage::{Deleted, Error, Event, KeyValue, Revision};
use futures::future::join_all;

use crate::support::{Fixture, assert_quiet, changes, next_change, next_event};

fn bytes(text: &str) -> Bytes {
    Bytes::copy_from_slice(text.as_bytes())
}

pub async fn get_missing_is_not_found(t: Fixture) {
    let key = t.key("missing");
    let error = t.store.get(&key).await.unwrap_err();
    assert!(
        matches!(&error, Error::NotFound { key: k } if *k == key),
        "{error:?}"
    );
}

pub async fn create_then_get_round_trips_bytes(t: Fixture) {
    let before = t.store.current_revision().await.unwrap();
    let json = bytes(r#"{"kind":"ProxmoxMachine"}"#);
    let revision = t.store.create(&t.key("json"), json.clone()).await.unwrap();
    assert!(revision > before, "{revision} > {before}");
    assert_eq!(
        t.store.get(&t.key("json")).await.unwrap(),
        KeyValue {
            key: t.key("json"),
            value: json,
            revision,
            create_revision: revision,
        }
    );
    assert!(t.store.current_revision().await.unwrap() >= revision);

    let binary = Bytes::from((0..=255u8).collect::<Vec<_>>());
    t.store
        .create(&t.key("binary"), binary.clone())
        .await
        .unwrap();
    t.store.create(&t.key("empty"), Bytes::new()).await.unwrap();
    assert_eq!(t.store.get(&t.key("binary")).await.unwrap().value, binary);
    assert_eq!(
        t.store.get(&t.key("empty")).await.unwrap().value,
        Bytes::new()
    );
}

pub async fn create_of_an_existing_key_is_already_exists(t: Fixture) {
    let key = t.key("a");
    let revision = t.store.create(&key, bytes("one")).await.unwrap();
    let error = t.store.create(&key, bytes("two")).await.unwrap_err();
    assert!(
        matches!(&error, Error::AlreadyExists { key: k } if *k == key),
        "{error:?}"
    );
    let kv = t.store.get(&key).await.unwrap();
    assert_eq!((kv.value, kv.revision), (bytes("one"), revision));
}

pub async fn update_is_compare_and_swap_on_the_revision(t: Fixture) {
    let key = t.key("a");
    let created = t.store.create(&key, bytes("v1")).await.unwrap();
    let updated = t.store.update(&key, bytes("v2"), created).await.unwrap();
    assert!(updated > created);
    let current = t.store.get(&key).await.unwrap();
    assert_eq!(
        current,
        KeyValue {
            key: key.clone(),
            value: bytes("v2"),
            revision: updated,
            create_revision: created,
        }
    );

    // A writer that read the first version loses, and learns the current object.
    let error = t
        .store
        .update(&key, bytes("stale"), created)
        .await
        .unwrap_err();
    match error {
        Error::Conflict {
            key: k,
            expected,
            current_revision,
            current: Some(found),
        } => {
            assert_eq!(
                (k, expected, current_revision),
                (key.clone(), created, updated)
            );
            assert_eq!(*found, current);
        }
        other => panic!("expected a conflict with the current object, got {other:?}"),
    }
    assert_eq!(t.store.get(&key).await.unwrap().value, bytes("v2"));
}

pub async fn update_of_a_missing_key_is_not_found(t: Fixture) {
    let error = t
        .store
        .update(&t.key("missing"), bytes("x"), 1)
        .await
        .unwrap_err();
    assert!(matches!(error, Error::NotFound { .. }), "{error:?}");
    assert!(matches!(
        t.store.get(&t.key("missing")).await,
        Err(Error::NotFound { .. })
    ));
}

pub async fn delete_returns_the_previous_object_and_its_revision(t: Fixture) {
    let key = t.key("a");
    let created = t.store.create(&key, bytes("v1")).await.unwrap();
    t.store.update(&key, bytes("v2"), created).await.unwrap();
    let before = t.store.get(&key).await.unwrap();

    let Deleted { prev, revision } = t.store.delete(&key, None).await.unwrap();
    assert_eq!(prev, before);
    assert!(revision > before.revision);
    assert!(matches!(
        t.store.get(&key).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        t.store.delete(&key, None).await,
        Err(Error::NotFound { .. })
    ));

    // The key can come back, as a new incarnation.
    let recreated = t.store.create(&key, bytes("v3")).await.unwrap();
    assert!(recreated > revision);
    assert_eq!(t.store.get(&key).await.unwrap().create_revision, recreated);
}

pub async fn delete_honours_a_revision_precondition(t: Fixture) {
    let key = t.key("a");
    let created = t.store.create(&key, bytes("v1")).await.unwrap();
    let updated = t.store.update(&key, bytes("v2"), created).await.unwrap();

    match t.store.delete(&key, Some(created)).await.unwrap_err() {
        Error::Conflict {
            current_revision,
            current: Some(found),
            ..
        } => {
            assert_eq!(current_revision, updated);
            assert_eq!(found.value, bytes("v2"));
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(t.store.get(&key).await.unwrap().revision, updated);

    let deleted = t.store.delete(&key, Some(updated)).await.unwrap();
    assert_eq!(deleted.prev.revision, updated);
    let error = t.store.delete(&key, Some(updated)).await.unwrap_err();
    assert!(matches!(error, Error::NotFound { .. }), "{error:?}");
}

pub async fn writes_get_strictly_increasing_revisions(t: Fixture) {
    let mut last = t.store.current_revision().await.unwrap();
    let key = t.key("counter");
    let mut expected = t.store.create(&key, bytes("0")).await.unwrap();
    assert!(expected > last);
    last = expected;
    for step in 1..20 {
        let revision = t
            .store
            .update(&key, bytes(&step.to_string()), expected)
            .await
            .unwrap();
        assert!(revision > last, "revision {revision} after {last}");
        let other = t
            .store
            .create(&t.key(&format!("k{step}")), bytes("x"))
            .await
            .unwrap();
        assert!(other > revision);
        last = other;
        expected = revision;
    }
    assert!(t.store.current_revision().await.unwrap() >= last);
}

pub async fn invalid_arguments_are_rejected(t: Fixture) {
    let store = &t.store;
    assert!(matches!(
        store.get("no-slash").await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        store.create("", bytes("x")).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        store.update(&t.key("a"), bytes("x"), 0).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        store.list(&t.prefix, None, None, Some(0)).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        store.watch(&t.prefix, -1).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        store.compact(0).await,
        Err(Error::InvalidArgument(_))
    ));
}

/// Creates `names` under the test prefix in order; returns their revisions.
async fn create_all(t: &Fixture, names: &[&str]) -> Vec<Revision> {
    let mut revisions = Vec::new();
    for name in names {
        revisions.push(t.store.create(&t.key(name), bytes(name)).await.unwrap());
    }
    revisions
}

fn keys(items: &[KeyValue]) -> Vec<&str> {
    items.iter().map(|kv| kv.key.as_str()).collect()
}

pub async fn list_returns_the_prefix_sorted(t: Fixture) {
    create_all(&t, &["b", "a", "c/d"]).await;
    t.store.create(&t.sibling("x"), bytes("x")).await.unwrap();
    let last = t.store.create(&t.key("e"), bytes("e")).await.unwrap();

    let page = t.store.list(&t.prefix, None, None, None).await.unwrap();
    assert_eq!(
        keys(&page.items),
        [t.key("a"), t.key("b"), t.key("c/d"), t.key("e")]
    );
    assert_eq!(page.items[1].value, bytes("b"));
    assert!(page.revision >= last);
    assert!(!page.more);
    assert_eq!(page.remaining, Some(0));

    let empty = t
        .store
        .list(&t.key("nothing/"), None, None, None)
        .await
        .unwrap();
    assert!(empty.items.is_empty() && !empty.more);
}

pub async fn list_pages_with_limit_and_start_after(t: Fixture) {
    let names: Vec<String> = (0..10).map(|i| format!("k{i:02}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    create_all(&t, &names).await;

    let mut seen = Vec::new();
    let mut shape = Vec::new();
    let mut start_after: Option<String> = None;
    let mut at = None;
    loop {
        let page = t
            .store
            .list(&t.prefix, start_after.as_deref(), Some(3), at)
            .await
            .unwrap();
        assert!(
            at.is_none_or(|at| at == page.revision),
            "pages stay at one revision"
        );
        at = Some(page.revision);
        shape.push((page.items.len(), page.more, page.remaining));
        seen.extend(page.items.iter().map(|kv| kv.key.clone()));
        start_after = page.items.last().map(|kv| kv.key.clone());
        if !page.more {
            break;
        }
    }
    assert_eq!(
        shape,
        [
            (3, true, Some(7)),
            (3, true, Some(4)),
            (3, true, Some(1)),
            (1, false, Some(0))
        ]
    );
    let expected: Vec<String> = names.iter().map(|name| t.key(name)).collect();
    assert_eq!(seen, expected);

    // A start key before the prefix starts at its beginning; one past its end yields nothing.
    let page = t
        .store
        .list(&t.prefix, Some("/"), Some(2), None)
        .await
        .unwrap();
    assert_eq!(keys(&page.items), [t.key("k00"), t.key("k01")]);
    let page = t
        .store
        .list(&t.prefix, Some(&t.key("z")), None, None)
        .await
        .unwrap();
    assert!(page.items.is_empty());
}

pub async fn list_reads_the_past_at_a_revision(t: Fixture) {
    let a = t.key("a");
    let b = t.key("b");
    let a1 = t.store.create(&a, bytes("a1")).await.unwrap();
    let b1 = t.store.create(&b, bytes("b1")).await.unwrap();
    let a2 = t.store.update(&a, bytes("a2"), a1).await.unwrap();
    let gone = t.store.delete(&b, None).await.unwrap().revision;
    t.store.create(&t.key("c"), bytes("c1")).await.unwrap();

    let values = |page: capmox_storage::ListPage| {
        page.items
            .into_iter()
            .map(|kv| (kv.key, kv.value, kv.revision))
            .collect::<Vec<_>>()
    };
    let at_b1 = t.store.list(&t.prefix, None, None, Some(b1)).await.unwrap();
    assert_eq!(at_b1.revision, b1);
    assert_eq!(
        values(at_b1),
        [(a.clone(), bytes("a1"), a1), (b.clone(), bytes("b1"), b1)]
    );
    let at_a2 = t.store.list(&t.prefix, None, None, Some(a2)).await.unwrap();
    assert_eq!(
        values(at_a2),
        [(a.clone(), bytes("a2"), a2), (b.clone(), bytes("b1"), b1)]
    );
    let at_gone = t
        .store
        .list(&t.prefix, None, None, Some(gone))
        .await
        .unwrap();
    assert_eq!(values(at_gone), [(a.clone(), bytes("a2"), a2)]);

    // Paging works in the past too.
    let page = t
        .store
        .list(&t.prefix, Some(&a), Some(1), Some(b1))
        .await
        .unwrap();
    assert_eq!(
        (keys(&page.items), page.more, page.remaining),
        (vec![b.as_str()], false, Some(0))
    );
    let page = t
        .store
        .list(&t.prefix, None, Some(1), Some(a2))
        .await
        .unwrap();
    assert_eq!(
        (keys(&page.items), page.more, page.remaining),
        (vec![a.as_str()], true, Some(1))
    );
}

/// A reader of `list_with` is lent each key the page returns, in order, as `list` returns it
/// (the past included), and no other.
pub async fn list_with_lends_each_returned_key_to_its_reader(t: Fixture) {
    let a = t.key("a");
    let a1 = t.store.create(&a, bytes("a1")).await.unwrap();
    t.store.create(&t.key("b"), bytes("b1")).await.unwrap();
    t.store.create(&t.key("c"), bytes("c1")).await.unwrap();
    t.store.update(&a, bytes("a2"), a1).await.unwrap();

    for at in [None, Some(a1 + 2)] {
        let listed = t.store.list(&t.prefix, None, Some(2), at).await.unwrap();
        let lent = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = std::sync::Arc::clone(&lent);
        let page = t
            .store
            .list_with(&t.prefix, None, Some(2), at, move |item| {
                seen.lock().unwrap().push(item.key.to_owned());
                item.to_key_value()
            })
            .await
            .unwrap();
        // The revisions of two present reads differ when other cases write to a shared etcd.
        assert_eq!(
            (&page.items, page.more, page.remaining),
            (&listed.items, listed.more, listed.remaining),
            "at {at:?}"
        );
        assert_eq!(*lent.lock().unwrap(), keys(&listed.items), "at {at:?}");
    }
}

pub async fn list_at_a_future_revision_is_refused(t: Fixture) {
    let current = t.store.current_revision().await.unwrap();
    let error = t
        .store
        .list(&t.prefix, None, None, Some(current + 1000))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::FutureRevision { .. }), "{error:?}");
    assert!(error.is_retryable());
}

/// One write of the background writer in `paging_is_consistent_while_writing`.
enum Change {
    /// key, value, create revision
    Put(String, Bytes, Revision),
    Delete(String),
}

pub async fn paging_is_consistent_while_writing(t: Fixture) {
    let names: Vec<String> = (0..60).map(|i| format!("k{i:03}")).collect();
    let mut state: BTreeMap<String, KeyValue> = BTreeMap::new();
    for name in &names {
        let key = t.key(name);
        let revision = t.store.create(&key, bytes("0")).await.unwrap();
        state.insert(
            key.clone(),
            KeyValue {
                key,
                value: bytes("0"),
                revision,
                create_revision: revision,
            },
        );
    }

    // A writer rewrites, deletes and creates keys all the time while we page.
    let store = t.store.clone();
    let writer_state = state.clone();
    let prefix = t.prefix.clone();
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let writer = tokio::spawn(async move {
        let mut live = writer_state;
        let mut log: Vec<(Revision, Change)> = Vec::new();
        let mut step = 0u64;
        while stopped.try_recv().is_err() {
            step += 1;
            let key = format!("{prefix}k{:03}", (step * 7) % 70);
            let value = Bytes::from(step.to_string());
            match live.get(&key).cloned() {
                Some(kv) if step.is_multiple_of(5) => {
                    let revision = store
                        .delete(&key, Some(kv.revision))
                        .await
                        .unwrap()
                        .revision;
                    live.remove(&key);
                    log.push((revision, Change::Delete(key)));
                }
                Some(kv) => {
                    let revision = store
                        .update(&key, value.clone(), kv.revision)
                        .await
                        .unwrap();
                    live.insert(
                        key.clone(),
                        KeyValue {
                            revision,
                            value: value.clone(),
                            ..kv.clone()
                        },
                    );
                    log.push((revision, Change::Put(key, value, kv.create_revision)));
                }
                None => {
                    let revision = store.create(&key, value.clone()).await.unwrap();
                    live.insert(
                        key.clone(),
                        KeyValue {
                            key: key.clone(),
                            value: value.clone(),
                            revision,
                            create_revision: revision,
                        },
                    );
                    log.push((revision, Change::Put(key, value, revision)));
                }
            }
        }
        log
    });

    // Let the writer get going, then page through at the revision of the first page.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut pages = Vec::new();
    let mut start_after: Option<String> = None;
    let mut at = None;
    loop {
        let page = t
            .store
            .list(&t.prefix, start_after.as_deref(), Some(7), at)
            .await
            .unwrap();
        at = Some(page.revision);
        start_after = page.items.last().map(|kv| kv.key.clone());
        let more = page.more;
        pages.extend(page.items);
        tokio::time::sleep(Duration::from_millis(5)).await;
        if !more {
            break;
        }
    }
    let at = at.unwrap();
    let _ = stop.send(());
    let log = writer.await.unwrap();
    assert!(
        log.iter().any(|(revision, _)| *revision > at),
        "the writer kept writing while we paged"
    );

    // The pages must show exactly the state at the first page's revision.
    for (revision, change) in log.into_iter().filter(|(revision, _)| *revision <= at) {
        match change {
            Change::Put(key, value, create_revision) => {
                state.insert(
                    key.clone(),
                    KeyValue {
                        key,
                        value,
                        revision,
                        create_revision,
                    },
                );
            }
            Change::Delete(key) => {
                state.remove(&key);
            }
        }
    }
    let expected: Vec<KeyValue> = state.into_values().collect();
    assert_eq!(pages, expected);
}

pub async fn watch_reports_changes_with_previous_values(t: Fixture) {
    let start = t.store.current_revision().await.unwrap();
    let mut watch = t.store.watch(&t.prefix, start).await.unwrap();
    let key = t.key("a");
    let created = t.store.create(&key, bytes("v1")).await.unwrap();
    let updated = t.store.update(&key, bytes("v2"), created).await.unwrap();
    let deleted = t.store.delete(&key, None).await.unwrap().revision;

    let v1 = KeyValue {
        key: key.clone(),
        value: bytes("v1"),
        revision: created,
        create_revision: created,
    };
    let v2 = KeyValue {
        key: key.clone(),
        value: bytes("v2"),
        revision: updated,
        create_revision: created,
    };
    assert_eq!(
        changes(&mut watch, 3).await,
        [
            Event::Put {
                kv: v1.clone(),
                prev: None
            },
            Event::Put {
                kv: v2.clone(),
                prev: Some(v1)
            },
            Event::Delete {
                key,
                revision: deleted,
                prev: Some(v2)
            },
        ]
    );
}

pub async fn watch_sees_only_its_prefix(t: Fixture) {
    let start = t.store.current_revision().await.unwrap();
    let mut watch = t.store.watch(&t.key("in/"), start).await.unwrap();
    t.store.create(&t.sibling("x"), bytes("x")).await.unwrap();
    t.store.create(&t.key("inside"), bytes("x")).await.unwrap();
    t.store.create(&t.key("out/x"), bytes("x")).await.unwrap();
    let inside = t.store.create(&t.key("in/x"), bytes("x")).await.unwrap();
    let event = next_change(&mut watch).await;
    assert_eq!(
        (event.key(), event.revision()),
        (Some(t.key("in/x").as_str()), inside)
    );
    assert_quiet(&mut watch).await;
}

pub async fn watch_replays_history_then_follows_live(t: Fixture) {
    let revisions = create_all(&t, &["a", "b", "c", "d", "e"]).await;
    // Resume after the second write: the three later ones are replayed...
    let mut watch = t.store.watch(&t.prefix, revisions[1]).await.unwrap();
    let replayed: Vec<Revision> = changes(&mut watch, 3)
        .await
        .iter()
        .map(Event::revision)
        .collect();
    assert_eq!(replayed, revisions[2..]);
    // ...and the stream continues seamlessly with new writes.
    let live = t.store.create(&t.key("f"), bytes("f")).await.unwrap();
    assert_eq!(next_change(&mut watch).await.revision(), live);

    // A watch that starts at the latest revision sees only what comes after it.
    let mut from_now = t.store.watch(&t.prefix, live).await.unwrap();
    let next = t.store.create(&t.key("g"), bytes("g")).await.unwrap();
    assert_eq!(next_change(&mut from_now).await.revision(), next);
}

pub async fn watch_from_a_future_revision_waits_for_it(t: Fixture) {
    let after = t.store.current_revision().await.unwrap() + 2;
    let mut watch = t.store.watch(&t.prefix, after).await.unwrap();
    let revisions = create_all(&t, &["a", "b", "c", "d", "e"]).await;
    let expected: Vec<Revision> = revisions.into_iter().filter(|r| *r > after).collect();
    let seen: Vec<Revision> = changes(&mut watch, expected.len())
        .await
        .iter()
        .map(Event::revision)
        .collect();
    assert_eq!(seen, expected);
}

pub async fn watch_keeps_order_under_concurrent_writes(t: Fixture) {
    const WRITERS: usize = 8;
    const WRITES: usize = 25;
    let start = t.store.current_revision().await.unwrap();
    let mut watch = t.store.watch(&t.prefix, start).await.unwrap();
    let writers = (0..WRITERS).map(|w| {
        let store = t.store.clone();
        let key = t.key(&format!("w{w}"));
        async move {
            let mut acked = vec![(
                store.create(&key, bytes("0")).await.unwrap(),
                key.clone(),
                bytes("0"),
            )];
            for step in 1..WRITES {
                let value = bytes(&step.to_string());
                let revision = store
                    .update(&key, value.clone(), acked[step - 1].0)
                    .await
                    .unwrap();
                acked.push((revision, key.clone(), value));
            }
            acked
        }
    });
    let mut acked: Vec<(Revision, String, Bytes)> =
        join_all(writers).await.into_iter().flatten().collect();
    acked.sort();

    let events = changes(&mut watch, WRITERS * WRITES).await;
    let delivered: Vec<(Revision, String, Bytes)> = events
        .into_iter()
        .map(|event| match event {
            Event::Put { kv, .. } => (kv.revision, kv.key, kv.value),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert!(
        delivered.windows(2).all(|w| w[0].0 < w[1].0),
        "revisions strictly increase"
    );
    assert_eq!(delivered, acked);
}

pub async fn concurrent_writers_race_with_exactly_one_winner(t: Fixture) {
    const RACERS: usize = 16;
    let key = t.key("contended");
    let mut expected = t.store.create(&key, bytes("start")).await.unwrap();
    for round in 0..5 {
        let attempts = (0..RACERS).map(|racer| {
            let store = t.store.clone();
            let key = key.clone();
            async move {
                store
                    .update(&key, bytes(&format!("{round}-{racer}")), expected)
                    .await
            }
        });
        let results = join_all(attempts).await;
        let winners: Vec<Revision> = results
            .iter()
            .filter_map(|r| r.as_ref().ok().copied())
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        let winner = winners[0];
        for result in &results {
            match result {
                Ok(_) => {}
                Err(Error::Conflict {
                    current_revision,
                    current: Some(current),
                    ..
                }) => {
                    assert_eq!(*current_revision, winner);
                    assert_eq!(current.revision, winner);
                }
                Err(other) => panic!("unexpected {other:?}"),
            }
        }
        expected = winner;
    }

    // Creating one new key from many tasks: one creates, the others find it there.
    let fresh = t.key("fresh");
    race(
        |racer| {
            let (store, fresh) = (t.store.clone(), fresh.clone());
            async move { store.create(&fresh, bytes(&racer.to_string())).await }
        },
        |lost| matches!(lost, Error::AlreadyExists { .. }),
    )
    .await;

    // Deleting with the same precondition: one deletes, the others find nothing.
    let revision = t.store.get(&fresh).await.unwrap().revision;
    race(
        |_| {
            let (store, fresh) = (t.store.clone(), fresh.clone());
            async move { store.delete(&fresh, Some(revision)).await }
        },
        |lost| matches!(lost, Error::NotFound { .. }),
    )
    .await;
}

/// Runs `attempt` from many tasks at once: exactly one may succeed, and every other must fail
/// the way `lost` accepts.
async fn race<T: std::fmt::Debug, F>(attempt: impl Fn(usize) -> F, lost: impl Fn(&Error) -> bool)
where
    F: std::future::Future<Output = Result<T, Error>>,
{
    let results = join_all((0..16).map(attempt)).await;
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "{results:?}"
    );
    assert!(
        results.iter().all(|r| r.as_ref().err().is_none_or(&lost)),
        "{results:?}"
    );
}

pub async fn watch_progress_on_request(t: Fixture) {
    let start = t.store.current_revision().await.unwrap();
    let mut watch = t.store.watch(&t.prefix, start).await.unwrap();
    let elsewhere = t.store.create(&t.sibling("x"), bytes("x")).await.unwrap();
    // A mark may take a moment (an old etcd's is passed on only once the watch is surely in
    // sync); ask until one comes.
    let mut mark = None;
    for _ in 0..30 {
        watch.request_progress();
        match tokio::time::timeout(Duration::from_millis(500), next_event(&mut watch)).await {
            Ok(Event::Progress { revision }) => {
                mark = Some(revision);
                break;
            }
            Ok(other) => panic!("expected a progress mark, got {other:?}"),
            Err(_) => continue,
        }
    }
    let revision = mark.expect("a progress mark within 15 s");
    assert!(
        revision >= elsewhere,
        "progress {revision} covers the write at {elsewhere}"
    );
    let later = t.store.create(&t.key("a"), bytes("a")).await.unwrap();
    let event = next_change(&mut watch).await;
    assert_eq!(event.revision(), later);
    assert!(later > revision);
}

pub async fn compaction_expires_older_revisions(t: Fixture) {
    let key = t.key("a");
    let r1 = t.store.create(&key, bytes("1")).await.unwrap();
    let r2 = t.store.update(&key, bytes("2"), r1).await.unwrap();
    let r3 = t.store.create(&t.key("b"), bytes("b")).await.unwrap();
    let r4 = t.store.update(&key, bytes("4"), r2).await.unwrap();
    let r5 = t.store.delete(&t.key("b"), None).await.unwrap().revision;

    t.store.compact(r3).await.unwrap();

    let error = t
        .store
        .list(&t.prefix, None, None, Some(r2))
        .await
        .unwrap_err();
    assert!(
        matches!(error, Error::Expired { requested } if requested == r2),
        "{error:?}"
    );
    let at_r3 = t.store.list(&t.prefix, None, None, Some(r3)).await.unwrap();
    assert_eq!(
        at_r3.items.iter().map(|kv| kv.revision).collect::<Vec<_>>(),
        [r2, r3]
    );
    assert_eq!(t.store.get(&key).await.unwrap().revision, r4);

    let error = t
        .store
        .watch(&t.prefix, r1)
        .await
        .err()
        .expect("watch from before the compaction");
    assert!(matches!(error, Error::Expired { .. }), "{error:?}");
    // Watching from just before the compacted revision still works: its events are kept.
    let mut watch = t.store.watch(&t.prefix, r3 - 1).await.unwrap();
    let replayed: Vec<Revision> = changes(&mut watch, 3)
        .await
        .iter()
        .map(Event::revision)
        .collect();
    assert_eq!(replayed, [r3, r4, r5]);

    let error = t.store.compact(r2).await.unwrap_err();
    assert!(matches!(error, Error::Expired { .. }), "{error:?}");
    let error = t.store.compact(r5 + 100).await.unwrap_err();
    assert!(matches!(error, Error::FutureRevision { .. }), "{error:?}");

    // Writing and watching go on as before.
    let r6 = t.store.update(&key, bytes("6"), r4).await.unwrap();
    assert_eq!(next_change(&mut watch).await.revision(), r6);
}

pub async fn many_keys_list_in_one_page(t: Fixture) {
    let writers = (0..4).map(|w| {
        let store = t.store.clone();
        let prefix = t.prefix.clone();
        async move {
            for i in 0..250 {
                store
                    .create(&format!("{prefix}{w}-{i:04}"), vec![b'x'; 512])
                    .await
                    .unwrap();
            }
        }
    });
    join_all(writers).await;
    let page = t.store.list(&t.prefix, None, None, None).await.unwrap();
    assert_eq!(page.items.len(), 1000);
    let keys: BTreeSet<&str> = page.items.iter().map(|kv| kv.key.as_str()).collect();
    assert_eq!(keys.len(), 1000);
    assert!(page.items.windows(2).all(|w| w[0].key < w[1].key));
}

/// A progress mark promises that every earlier event was delivered; asking for one while a watch
/// replays history must not produce a mark ahead of the replay (etcd before 3.4.25 would).
pub async fn progress_marks_never_overtake_replayed_events(t: Fixture) {
    let start = t.store.current_revision().await.unwrap();
    let mut written = Vec::new();
    for i in 0..25 {
        written.push(
            t.store
                .create(&t.key(&format!("k{i:02}")), bytes("x"))
                .await
                .unwrap(),
        );
    }
    let mut watch = t.store.watch(&t.prefix, start).await.unwrap();
    let mut last = start;
    let mut delivered = Vec::new();
    while delivered.len() < written.len() {
        watch.request_progress();
        match next_event(&mut watch).await {
            Event::Progress { revision } => {
                assert!(revision >= last, "mark {revision} behind {last}");
                last = revision;
            }
            change => {
                assert!(
                    change.revision() > last,
                    "event {} after mark or event {last}",
                    change.revision()
                );
                last = change.revision();
                delivered.push(last);
            }
        }
    }
    assert_eq!(delivered, written);
}
