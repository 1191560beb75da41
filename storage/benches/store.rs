//! Storage benchmark: both backends, at 1 and 16 concurrent writers, next to the raw backend
//! measured in the same run. Prints figures; asserts nothing.
//!
//! Run: `cargo bench -p capmox-storage --bench store` (starts its own etcd; needs `etcd` on PATH).

#[path = "../tests/conformance/support/etcd.rs"]
mod etcd_process;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use capmox_storage::{EmbeddedConfig, Event, Revision, Store};
use etcd_client::{Compare, CompareOp, Txn, TxnOp};
use futures::StreamExt;
use redb::{ReadableDatabase, TableDefinition};

use etcd_process::EtcdProcess;

/// Operations per measurement, spread over the writers.
const OPS: usize = 4000;
const LIST_KEYS: usize = 10_000;
const VALUE_BYTES: usize = 512;
const WRITERS: [usize; 2] = [1, 16];

fn value() -> Bytes {
    Bytes::from(vec![b'v'; VALUE_BYTES])
}

/// Runs `ops` calls of `op(i)` on `writers` concurrent tasks; returns operations per second.
async fn rate<F, Fut>(writers: usize, ops: usize, op: F) -> f64
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let op = Arc::new(op);
    let started = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|writer| {
            let op = op.clone();
            tokio::spawn(async move {
                for i in (writer..ops).step_by(writers) {
                    op(i).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("benchmark task");
    }
    ops as f64 / started.elapsed().as_secs_f64()
}

/// Operations per second of `ops` calls of `op` on `threads` OS threads (for redb, which blocks).
fn thread_rate(threads: usize, ops: usize, op: impl Fn(usize) + Send + Sync + 'static) -> f64 {
    let op = Arc::new(op);
    let started = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|thread| {
            let op = op.clone();
            std::thread::spawn(move || {
                for i in (thread..ops).step_by(threads) {
                    op(i);
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().expect("benchmark thread");
    }
    ops as f64 / started.elapsed().as_secs_f64()
}

struct Report {
    backend: &'static str,
    rows: Vec<(String, usize, String, String)>,
}

impl Report {
    fn new(backend: &'static str) -> Self {
        Self {
            backend,
            rows: Vec::new(),
        }
    }

    fn rate(&mut self, metric: &str, writers: usize, store: f64, raw: Option<f64>) {
        let raw_text = raw.map_or("-".into(), |raw| {
            format!("{raw:>9.0}  ({:.2}x)", store / raw)
        });
        self.rows
            .push((metric.into(), writers, format!("{store:>9.0}"), raw_text));
    }

    fn text(&mut self, metric: &str, writers: usize, store: String, raw: String) {
        self.rows.push((metric.into(), writers, store, raw));
    }

    fn print(&self) {
        println!("\n{} backend", self.backend);
        let (metric, writers, store) = ("metric", "writers", "store");
        println!("  {metric:<34} {writers:>7}  {store:>18}  raw baseline (store/raw)");
        for (metric, writers, store, raw) in &self.rows {
            println!("  {metric:<34} {writers:>7}  {store:>18}  {raw}");
        }
    }
}

/// Watch delivery: `writers` tasks create `ops` keys; the time from issuing each create to its
/// event arriving at a watcher. Returns (p50, p99).
async fn watch_latency(
    store: &Store,
    prefix: &str,
    writers: usize,
    ops: usize,
) -> (Duration, Duration) {
    let start = store.current_revision().await.expect("revision");
    let mut watch = store.watch(prefix, start).await.expect("watch");
    let issued = Arc::new(std::sync::Mutex::new(vec![None::<Instant>; ops]));
    let receiver = tokio::spawn(async move {
        let mut arrived = Vec::with_capacity(ops);
        while arrived.len() < ops {
            match watch.next().await {
                Some(Ok(Event::Put { kv, .. })) => arrived.push((kv.key, Instant::now())),
                Some(Ok(_)) => {}
                other => panic!("watch ended: {other:?}"),
            }
        }
        arrived
    });
    let writer_store = store.clone();
    let writer_issued = issued.clone();
    let prefix_owned = prefix.to_owned();
    rate(writers, ops, move |i| {
        let (store, issued, prefix) = (
            writer_store.clone(),
            writer_issued.clone(),
            prefix_owned.clone(),
        );
        async move {
            if let Ok(mut issued) = issued.lock() {
                issued[i] = Some(Instant::now());
            }
            store
                .create(&format!("{prefix}{i:06}"), value())
                .await
                .expect("create");
        }
    })
    .await;
    let arrived = receiver.await.expect("watcher");
    let issued = issued
        .lock()
        .map(|issued| issued.clone())
        .unwrap_or_default();
    let mut latencies: Vec<Duration> = arrived
        .into_iter()
        .filter_map(|(key, at)| {
            let index: usize = key.rsplit('/').next()?.parse().ok()?;
            Some(at.duration_since(issued.get(index).copied().flatten()?))
        })
        .collect();
    latencies.sort();
    let pick = |q: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or_default()
    };
    (pick(0.50), pick(0.99))
}

/// The store-level measurements shared by both backends. `raw` supplies the baselines.
async fn measure_store(store: &Store, report: &mut Report, raw: &dyn RawBaseline) {
    for writers in WRITERS {
        let prefix = format!("/bench/w{writers}/");
        let (s, p) = (store.clone(), prefix.clone());
        let creates = rate(writers, OPS, move |i| {
            let (s, key) = (s.clone(), format!("{p}{i:06}"));
            async move {
                s.create(&key, value()).await.expect("create");
            }
        })
        .await;
        report.rate(
            "creates/s",
            writers,
            creates,
            Some(raw.creates(writers).await),
        );

        let (s, p) = (store.clone(), prefix.clone());
        // Each writer updates its own keys, so every compare-and-swap is expected to win.
        let revisions: Arc<Vec<std::sync::atomic::AtomicI64>> =
            Arc::new((0..OPS).map(|_| 0.into()).collect());
        for (i, slot) in revisions.iter().enumerate() {
            let kv = store.get(&format!("{prefix}{i:06}")).await.expect("get");
            slot.store(kv.revision, std::sync::atomic::Ordering::Relaxed);
        }
        let updates = rate(writers, OPS, move |i| {
            let (s, key, revisions) = (s.clone(), format!("{p}{i:06}"), revisions.clone());
            async move {
                let expected: Revision = revisions[i].load(std::sync::atomic::Ordering::Relaxed);
                let revision = s.update(&key, value(), expected).await.expect("update");
                revisions[i].store(revision, std::sync::atomic::Ordering::Relaxed);
            }
        })
        .await;
        report.rate(
            "CAS updates/s",
            writers,
            updates,
            Some(raw.updates(writers).await),
        );

        let (s, p) = (store.clone(), prefix.clone());
        let gets = rate(writers, OPS, move |i| {
            let (s, key) = (s.clone(), format!("{p}{i:06}"));
            async move {
                s.get(&key).await.expect("get");
            }
        })
        .await;
        report.rate("gets/s", writers, gets, Some(raw.gets(writers).await));
    }

    // Listing 10,000 keys: in one page, and in pages of 500 as kube clients do.
    let (s, prefix) = (store.clone(), "/bench/list/".to_owned());
    let p = prefix.clone();
    rate(16, LIST_KEYS, move |i| {
        let (s, key) = (s.clone(), format!("{p}{i:06}"));
        async move {
            s.create(&key, value()).await.expect("create");
        }
    })
    .await;
    let started = Instant::now();
    let page = store.list(&prefix, None, None, None).await.expect("list");
    let whole = started.elapsed();
    assert_eq!(page.items.len(), LIST_KEYS);
    let started = Instant::now();
    let (mut after, mut at, mut count) = (None::<String>, None, 0);
    loop {
        let page = store
            .list(&prefix, after.as_deref(), Some(500), at)
            .await
            .expect("list page");
        count += page.items.len();
        at = Some(page.revision);
        after = page.items.last().map(|kv| kv.key.clone());
        if !page.more {
            break;
        }
    }
    let paged = started.elapsed();
    assert_eq!(count, LIST_KEYS);
    let raw_list = raw.list(&prefix).await;
    report.text(
        "list 10,000 keys (one page)",
        1,
        format!("{:.1} ms", whole.as_secs_f64() * 1e3),
        format!("{:.1} ms", raw_list.as_secs_f64() * 1e3),
    );
    report.text(
        "list 10,000 keys (pages of 500)",
        1,
        format!("{:.1} ms", paged.as_secs_f64() * 1e3),
        "-".into(),
    );

    for writers in WRITERS {
        let (p50, p99) =
            watch_latency(store, &format!("/bench/watch{writers}/"), writers, 2000).await;
        report.text(
            "watch delivery p50 / p99",
            writers,
            format!(
                "{:.2} / {:.2} ms",
                p50.as_secs_f64() * 1e3,
                p99.as_secs_f64() * 1e3
            ),
            "-".into(),
        );
    }
}

/// The same work done directly against the backend, without the store.
trait RawBaseline {
    fn creates(&self, writers: usize) -> std::pin::Pin<Box<dyn Future<Output = f64> + '_>>;
    fn updates(&self, writers: usize) -> std::pin::Pin<Box<dyn Future<Output = f64> + '_>>;
    fn gets(&self, writers: usize) -> std::pin::Pin<Box<dyn Future<Output = f64> + '_>>;
    fn list<'a>(
        &'a self,
        prefix: &'a str,
    ) -> std::pin::Pin<Box<dyn Future<Output = Duration> + 'a>>;
}

/// Raw etcd-client: create-if-absent txns, CAS txns, gets and a range read.
struct RawEtcd {
    client: etcd_client::Client,
    /// The revision of every raw key, by writer count, as the creates left them.
    revisions: std::sync::Mutex<std::collections::HashMap<usize, Revisions>>,
}

type Revisions = Arc<Vec<std::sync::atomic::AtomicI64>>;

fn revisions() -> Revisions {
    Arc::new((0..OPS).map(|_| 0.into()).collect())
}

impl RawBaseline for RawEtcd {
    fn creates(&self, writers: usize) -> std::pin::Pin<Box<dyn Future<Output = f64> + '_>> {
        Box::pin(async move {
            let client = self.client.clone();
            let revisions = revisions();
            if let Ok(mut all) = self.revisions.lock() {
                all.insert(writers, revisions.clone());
            }
            rate(writers, OPS, move |i| {
                let mut kv = client.kv_client();
                let key = format!("/raw/w{writers}/{i:06}");
                let revisions = revisions.clone();
                async move {
                    let txn = Txn::new()
                        .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
                        .and_then([TxnOp::put(key, value().to_vec(), None)]);
                    let answer = kv.txn(txn).await.expect("raw txn");
                    let revision = answer.header().map_or(0, |header| header.revision());
                    revisions[i].store(revision, std::sync::atomic::Ordering::Relaxed);
                }
            })
            .await
        })
    }

    fn updates(&self, writers: usize) -> std::pin::Pin<Box<dyn Future<Output = f64> + '_>> {
        Box::pin(async move {
            let client = self.client.clone();
            let revisions = self
                .revisions
                .lock()
                .ok()
                .and_then(|all| all.get(&writers).cloned())
                .unwrap_or_else(revisions);
            rate(writers, OPS, move |i| {
                let mut kv = client.kv_client();
                let key = format!("/raw/w{writers}/{i:06}");
                let revisions = revisions.clone();
                async move {
                    let expected = revisions[i].load(std::sync::atomic::Ordering::Relaxed);
                    let txn = Txn::new()
                        .when([Compare::mod_revision(
                            key.clone(),
                            CompareOp::Equal,
                            expected,
                        )])
                        .and_then([TxnOp::put(key.clone(), value().to_vec(), None)])
                        .or_else([TxnOp::get(key, None)]);
                    let answer = kv.txn(txn).await.expect("raw txn");
                    assert!(answer.succeeded(), "raw compare-and-swap lost");
                    let revision = answer.header().map_or(0, |header| header.revision());
                    revisions[i].store(revision, std::sync::atomic::Ordering::Relaxed);
                }
            })
            .await
        })
    }

    fn gets(&self, writers: usize) -> std::pin::Pin<Box<dyn Future<Output = f64> + '_>> {
        Box::pin(async move {
            let client = self.client.clone();
            rate(writers, OPS, move |i| {
                let mut kv = client.kv_client();
                let key = format!("/raw/w{writers}/{i:06}");
                async move {
                    kv.get(key, None).await.expect("raw get");
                }
            })
            .await
        })
    }

    fn list<'a>(
        &'a self,
        prefix: &'a str,
    ) -> std::pin::Pin<Box<dyn Future<Output = Duration> + 'a>> {
        Box::pin(async move {
            let mut kv = self.client.kv_client().max_decoding_message_size(64 << 20);
            let started = Instant::now();
            let found = kv
                .get(
                    format!("/registry{prefix}"),
                    Some(etcd_client::GetOptions::new().with_prefix()),
                )
                .await
                .expect("raw range");
            assert_eq!(found.kvs().len(), LIST_KEYS);
            started.elapsed()
        })
    }
}

const RAW: TableDefinition<&str, &[u8]> = TableDefinition::new("raw");

/// Raw redb: one durable commit per write, on OS threads; plain read transactions.
struct RawRedb {
    db: Arc<redb::Database>,
    /// A copy of the store's 10,000 list keys, to time a raw range scan.
    _dir: tempfile::TempDir,
}

impl RawRedb {
    fn open() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = redb::Database::create(dir.path().join("raw.redb")).expect("raw redb");
        let txn = db.begin_write().expect("write");
        {
            let mut table = txn.open_table(RAW).expect("table");
            for i in 0..LIST_KEYS {
                table
                    .insert(format!("/bench/list/{i:06}").as_str(), value().as_ref())
                    .expect("insert");
            }
        }
        txn.commit().expect("commit");
        Self {
            db: Arc::new(db),
            _dir: dir,
        }
    }

    fn durable_puts(&self, writers: usize) -> f64 {
        let db = self.db.clone();
        thread_rate(writers, OPS, move |i| {
            let txn = db.begin_write().expect("write");
            {
                let mut table = txn.open_table(RAW).expect("table");
                table
                    .insert(format!("/raw/w{writers}/{i:06}").as_str(), value().as_ref())
                    .expect("insert");
            }
            txn.commit().expect("durable commit");
        })
    }
}

impl RawBaseline for RawRedb {
    fn creates(&self, writers: usize) -> std::pin::Pin<Box<dyn Future<Output = f64> + '_>> {
        Box::pin(async move { self.durable_puts(writers) })
    }

    fn updates(&self, writers: usize) -> std::pin::Pin<Box<dyn Future<Output = f64> + '_>> {
        Box::pin(async move { self.durable_puts(writers) })
    }

    fn gets(&self, writers: usize) -> std::pin::Pin<Box<dyn Future<Output = f64> + '_>> {
        Box::pin(async move {
            let db = self.db.clone();
            thread_rate(writers, OPS, move |i| {
                let txn = db.begin_read().expect("read");
                let table = txn.open_table(RAW).expect("table");
                let _ = table
                    .get(format!("/raw/w{writers}/{i:06}").as_str())
                    .expect("get");
            })
        })
    }

    fn list<'a>(
        &'a self,
        prefix: &'a str,
    ) -> std::pin::Pin<Box<dyn Future<Output = Duration> + 'a>> {
        Box::pin(async move {
            let started = Instant::now();
            let txn = self.db.begin_read().expect("read");
            let table = txn.open_table(RAW).expect("table");
            let mut items = Vec::new();
            for entry in table.range(prefix..).expect("range") {
                let (key, value) = entry.expect("entry");
                if !key.value().starts_with(prefix) {
                    break;
                }
                items.push((
                    key.value().to_owned(),
                    Bytes::copy_from_slice(value.value()),
                ));
            }
            assert_eq!(items.len(), LIST_KEYS);
            started.elapsed()
        })
    }
}

fn print_targets(etcd: &Report, embedded: &Report) {
    let store_rate = |report: &Report, metric: &str, writers: usize| {
        report
            .rows
            .iter()
            .find(|row| row.0 == metric && row.1 == writers)
            .and_then(|row| row.2.trim().parse::<f64>().ok())
    };
    let raw_rate = |report: &Report, metric: &str, writers: usize| {
        report
            .rows
            .iter()
            .find(|row| row.0 == metric && row.1 == writers)
            .and_then(|row| row.3.split_whitespace().next()?.parse::<f64>().ok())
    };
    println!("\ntargets");
    if let (Some(store), Some(raw)) = (
        store_rate(etcd, "creates/s", 16),
        raw_rate(etcd, "creates/s", 16),
    ) {
        println!(
            "  etcd creates at 16 writers: {:.2}x raw etcd-client txn-creates (target >= 0.8)",
            store / raw
        );
    }
    if let (Some(store), Some(raw)) = (
        store_rate(etcd, "CAS updates/s", 16),
        raw_rate(etcd, "CAS updates/s", 16),
    ) {
        println!(
            "  etcd CAS updates at 16 writers: {:.2}x raw etcd-client CAS txns",
            store / raw
        );
    }
    for metric in ["creates/s", "CAS updates/s"] {
        if let (Some(one), Some(sixteen)) = (
            store_rate(embedded, metric, 1),
            store_rate(embedded, metric, 16),
        ) {
            println!(
                "  embedded {metric} at 16 writers: {:.2}x its single-writer rate (target >= 3)",
                sixteen / one
            );
        }
    }
}

#[tokio::main]
async fn main() {
    // `cargo bench` passes `--bench`; there are no other options.
    let etcd = EtcdProcess::start()
        .await
        .expect("start etcd (is `etcd` on PATH?)");
    let store = Store::open(etcd.config("/registry"))
        .await
        .expect("etcd store");
    let raw = RawEtcd {
        client: etcd_client::Client::connect(&etcd.endpoints, None)
            .await
            .expect("raw client"),
        revisions: Default::default(),
    };
    let mut etcd_report = Report::new("etcd");
    measure_store(&store, &mut etcd_report, &raw).await;
    etcd_report.print();
    drop((store, raw, etcd));

    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(EmbeddedConfig::new(dir.path()))
        .await
        .expect("embedded store");
    let raw = RawRedb::open();
    let mut embedded_report = Report::new("embedded (redb)");
    measure_store(&store, &mut embedded_report, &raw).await;
    embedded_report.print();
    store.close().await;

    print_targets(&etcd_report, &embedded_report);
}
