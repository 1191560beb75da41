//! Test fixtures: a store of either backend with its own key prefix, and watch helpers.

pub mod etcd;
pub mod proxy;

use std::sync::{Arc, Weak};
use std::time::Duration;

use capmox_storage::{EmbeddedConfig, Event, Store, WatchStream};
use futures::StreamExt;
use tokio::sync::Mutex;

use self::etcd::EtcdProcess;

/// How long a test waits for an expected watch event before failing.
pub const EVENT_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Etcd,
    Embedded,
}

/// Whether a test may share its etcd with others. Tests that compact need their own: compaction
/// is cluster-wide and would expire the pinned revisions of tests running next to them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    Shared,
    Own,
}

/// What keeps a fixture's backend alive.
#[expect(dead_code, reason = "held only so the backend outlives the test")]
pub enum Guard {
    Etcd(Arc<EtcdProcess>),
    Embedded(tempfile::TempDir),
}

pub struct Fixture {
    pub store: Store,
    /// Every key of the test lives below this; it ends with `/`.
    pub prefix: String,
    _guard: Guard,
}

/// One etcd shared by the tests that run at the same time; it is killed when the last of them
/// drops it, and a later test starts a fresh one.
static SHARED_ETCD: Mutex<Weak<EtcdProcess>> = Mutex::const_new(Weak::new());

pub async fn shared_etcd() -> Arc<EtcdProcess> {
    let mut shared = SHARED_ETCD.lock().await;
    if let Some(etcd) = shared.upgrade() {
        return etcd;
    }
    let etcd = Arc::new(EtcdProcess::start().await.expect("start etcd"));
    *shared = Arc::downgrade(&etcd);
    etcd
}

impl Fixture {
    pub async fn new(backend: Backend, name: &str, isolation: Isolation) -> Self {
        let prefix = format!("/{name}/");
        match backend {
            Backend::Etcd => {
                let etcd = match isolation {
                    Isolation::Shared => shared_etcd().await,
                    Isolation::Own => Arc::new(EtcdProcess::start().await.expect("start etcd")),
                };
                // Progress marks only on request, so tests see exactly what they ask for.
                let config = etcd.config("/registry").with_progress_interval(None);
                let store = Store::open(config).await.expect("open etcd store");
                Self {
                    store,
                    prefix,
                    _guard: Guard::Etcd(etcd),
                }
            }
            Backend::Embedded => {
                let dir = tempfile::tempdir().expect("temp dir");
                let config = EmbeddedConfig::new(dir.path()).with_progress_interval(None);
                let store = Store::open(config).await.expect("open embedded store");
                Self {
                    store,
                    prefix,
                    _guard: Guard::Embedded(dir),
                }
            }
        }
    }

    /// The key `name` below the test's prefix.
    pub fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// A key next to the test's prefix that a list or watch of it must not see.
    pub fn sibling(&self, name: &str) -> String {
        format!("{}-sibling/{name}", self.prefix.trim_end_matches('/'))
    }
}

/// The next event that is not a progress mark.
pub async fn next_change(watch: &mut WatchStream) -> Event {
    loop {
        let event = next_event(watch).await;
        if !matches!(event, Event::Progress { .. }) {
            return event;
        }
    }
}

/// The next item of a watch; panics on an error, the end of the stream, or a timeout.
pub async fn next_event(watch: &mut WatchStream) -> Event {
    match tokio::time::timeout(EVENT_TIMEOUT, watch.next()).await {
        Ok(Some(Ok(event))) => event,
        Ok(Some(Err(error))) => panic!("watch failed: {error:?}"),
        Ok(None) => panic!("watch ended"),
        Err(_) => panic!("no watch event within {EVENT_TIMEOUT:?}"),
    }
}

/// The next `count` changes (progress marks skipped).
pub async fn changes(watch: &mut WatchStream, count: usize) -> Vec<Event> {
    let mut events = Vec::with_capacity(count);
    while events.len() < count {
        events.push(next_change(watch).await);
    }
    events
}

/// Asserts that nothing but progress marks arrives for a short while.
pub async fn assert_quiet(watch: &mut WatchStream) {
    let quiet = Duration::from_millis(300);
    let deadline = tokio::time::Instant::now() + quiet;
    loop {
        match tokio::time::timeout_at(deadline, watch.next()).await {
            Err(_) => return,
            Ok(Some(Ok(Event::Progress { .. }))) => continue,
            Ok(other) => panic!("expected no watch events, got {other:?}"),
        }
    }
}
