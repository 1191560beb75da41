//! Property tests: random sequences of writes, checked against a model of the store, on both
//! backends. After every sequence, reads at every revision it produced and a watch replaying it
//! must agree with the model.

use std::cell::Cell;
use std::collections::BTreeMap;

use bytes::Bytes;
use capmox_storage::{Error, Event, KeyValue, Revision, Store};
use proptest::prelude::*;
use proptest::test_runner::TestRunner;

use crate::support::{Backend, Fixture, Isolation, changes, shared_etcd};

/// The revision a conditional write passes.
#[derive(Debug, Clone, Copy)]
enum Expect {
    Current,
    Stale,
}

#[derive(Debug, Clone)]
enum Op {
    Create(usize, u8),
    Update(usize, u8, Expect),
    Delete(usize, Option<Expect>),
}

const KEYS: usize = 4;

fn op() -> impl Strategy<Value = Op> {
    let expect = prop_oneof![3 => Just(Expect::Current), 1 => Just(Expect::Stale)];
    prop_oneof![
        (0..KEYS, any::<u8>()).prop_map(|(k, v)| Op::Create(k, v)),
        (0..KEYS, any::<u8>(), expect.clone()).prop_map(|(k, v, e)| Op::Update(k, v, e)),
        (0..KEYS, prop::option::of(expect)).prop_map(|(k, e)| Op::Delete(k, e)),
    ]
}

/// What the store should hold, and everything that happened to it.
#[derive(Default)]
struct Model {
    now: BTreeMap<String, KeyValue>,
    /// The state after each successful write, by its revision.
    history: Vec<(Revision, BTreeMap<String, KeyValue>)>,
    events: Vec<Event>,
    last: Revision,
}

impl Model {
    fn expected_revision(&self, key: &str, expect: Expect) -> Revision {
        let current = self.now.get(key).map_or(1, |kv| kv.revision);
        match expect {
            Expect::Current => current,
            Expect::Stale => (current - 1).max(1),
        }
    }

    fn conflict_or_missing(&self, key: &str, expected: Revision) -> Option<Error> {
        match self.now.get(key) {
            None => Some(Error::NotFound {
                key: key.to_owned(),
            }),
            Some(kv) if kv.revision != expected => Some(Error::Conflict {
                key: key.to_owned(),
                expected,
                current_revision: kv.revision,
                current: Some(Box::new(kv.clone())),
            }),
            Some(_) => None,
        }
    }

    fn written(&mut self, revision: Revision, event: Event) {
        assert!(
            revision > self.last,
            "revision {revision} after {}",
            self.last
        );
        self.last = revision;
        self.events.push(event);
        self.history.push((revision, self.now.clone()));
    }
}

/// Errors compare by what they say, not by their message text.
fn same_error(left: &Error, right: &Error) -> bool {
    format!("{left:?}") == format!("{right:?}")
}

async fn run(store: &Store, prefix: &str, ops: Vec<Op>, page: usize) {
    let start = store.current_revision().await.unwrap();
    let mut model = Model {
        last: start,
        ..Model::default()
    };
    for op in ops {
        match op {
            Op::Create(k, v) => {
                let key = format!("{prefix}{k}");
                let value = Bytes::from(vec![v]);
                let result = store.create(&key, value.clone()).await;
                if model.now.contains_key(&key) {
                    let error = result.unwrap_err();
                    assert!(matches!(error, Error::AlreadyExists { .. }), "{error:?}");
                    continue;
                }
                let revision = result.unwrap();
                let kv = KeyValue {
                    key: key.clone(),
                    value,
                    revision,
                    create_revision: revision,
                };
                model.now.insert(key, kv.clone());
                model.written(revision, Event::Put { kv, prev: None });
            }
            Op::Update(k, v, expect) => {
                let key = format!("{prefix}{k}");
                let value = Bytes::from(vec![v]);
                let expected = model.expected_revision(&key, expect);
                let result = store.update(&key, value.clone(), expected).await;
                if let Some(want) = model.conflict_or_missing(&key, expected) {
                    let error = result.unwrap_err();
                    assert!(same_error(&error, &want), "{error:?} != {want:?}");
                    continue;
                }
                let revision = result.unwrap();
                let prev = model.now[&key].clone();
                let kv = KeyValue {
                    value,
                    revision,
                    ..prev.clone()
                };
                model.now.insert(key, kv.clone());
                model.written(
                    revision,
                    Event::Put {
                        kv,
                        prev: Some(prev),
                    },
                );
            }
            Op::Delete(k, expect) => {
                let key = format!("{prefix}{k}");
                let expected = expect.map(|expect| model.expected_revision(&key, expect));
                let result = store.delete(&key, expected).await;
                let want = match expected {
                    Some(expected) => model.conflict_or_missing(&key, expected),
                    None => (!model.now.contains_key(&key))
                        .then(|| Error::NotFound { key: key.clone() }),
                };
                if let Some(want) = want {
                    let error = result.unwrap_err();
                    assert!(same_error(&error, &want), "{error:?} != {want:?}");
                    continue;
                }
                let deleted = result.unwrap();
                let prev = model.now.remove(&key).unwrap();
                assert_eq!(deleted.prev, prev);
                model.written(
                    deleted.revision,
                    Event::Delete {
                        key,
                        revision: deleted.revision,
                        prev: Some(prev),
                    },
                );
            }
        }
    }

    // Every revision the sequence produced reads back as the model had it, page by page.
    for (revision, state) in &model.history {
        let mut items = Vec::new();
        let mut start_after: Option<String> = None;
        loop {
            let listed = store
                .list(prefix, start_after.as_deref(), Some(page), Some(*revision))
                .await
                .unwrap();
            assert_eq!(listed.revision, *revision);
            start_after = listed.items.last().map(|kv| kv.key.clone());
            items.extend(listed.items);
            if !listed.more {
                break;
            }
        }
        assert_eq!(
            items,
            state.values().cloned().collect::<Vec<_>>(),
            "at revision {revision}"
        );
    }
    let current: Vec<KeyValue> = store.list(prefix, None, None, None).await.unwrap().items;
    assert_eq!(current, model.now.values().cloned().collect::<Vec<_>>());

    // A watch from the start replays exactly the model's events.
    let mut watch = store.watch(prefix, start).await.unwrap();
    assert_eq!(changes(&mut watch, model.events.len()).await, model.events);
}

/// Runs `cases` random sequences on one backend; shrinks a failing one to a minimal example.
fn property(backend: Backend, cases: u32) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // Keep one etcd for all cases instead of one per case.
    let etcd = (backend == Backend::Etcd).then(|| runtime.block_on(shared_etcd()));
    let case = Cell::new(0);
    let mut runner = TestRunner::new(ProptestConfig::with_cases(cases));
    let result = runner.run(
        &(prop::collection::vec(op(), 1..40), 1usize..5),
        |(ops, page)| {
            case.set(case.get() + 1);
            runtime.block_on(async {
                let fixture =
                    Fixture::new(backend, &format!("model-{}", case.get()), Isolation::Shared)
                        .await;
                run(&fixture.store, &fixture.prefix, ops, page).await;
            });
            Ok(())
        },
    );
    drop(etcd);
    if let Err(failure) = result {
        panic!("{failure}");
    }
}

#[test]
fn embedded_store_matches_the_model() {
    property(Backend::Embedded, 48);
}

#[test]
fn etcd_store_matches_the_model() {
    property(Backend::Etcd, 16);
}
