//! Crash safety: a child process writes to an embedded store and reports every acknowledged
//! write; it is killed with SIGKILL at random moments, again and again. After each kill the
//! store must open cleanly, hold every acknowledged write (an in-flight write may or may not
//! have landed) and nothing else, and keep its revisions increasing.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use capmox_storage::{EmbeddedConfig, Error, Revision, Store};
use futures::StreamExt;

const KILLS: usize = 24;

/// The state of one key as the child reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Present { value: String, revision: Revision },
    Absent,
}

#[derive(Debug, Default)]
struct Key {
    /// The last acknowledged state (`None`: never acknowledged, so absent).
    acked: Option<State>,
    /// The write issued but not acknowledged when the child died: (op, value).
    pending: Option<(String, String)>,
}

/// A small xorshift generator: the kill moments differ per run, and the seed is printed so a
/// failing sequence can be replayed.
struct Random(u64);

impl Random {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
        | 1;
    println!("crash test seed {seed}");
    let mut random = Random(seed);
    let mut keys: BTreeMap<String, Key> = BTreeMap::new();
    let mut highest_acked: Revision = 0;
    let mut total_acks = 0;
    // Writes in flight at a kill: (applied anyway, not applied).
    let mut in_flight = (0, 0);

    for run in 0..KILLS {
        let mut child = Command::new(env!("CARGO_BIN_EXE_capmox-storage-crash-writer"))
            .arg(dir.path())
            .arg(run.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the crash writer");
        let stdout = child.stdout.take().expect("child stdout");
        let (lines_tx, lines) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if lines_tx.send(line).is_err() {
                    break;
                }
            }
        });

        // Kill at a random moment once the child has had a write acknowledged.
        let mut early = Vec::new();
        while !early
            .last()
            .is_some_and(|line: &String| line.starts_with("ack "))
        {
            early.push(
                lines
                    .recv_timeout(Duration::from_secs(30))
                    .expect("the child writes"),
            );
        }
        std::thread::sleep(Duration::from_millis(random.below(150)));
        child.kill().expect("SIGKILL the child");
        let status = child.wait().expect("reap the child");
        assert!(
            !status.success(),
            "run {run}: the child must die by the signal"
        );
        reader.join().expect("reader thread");

        let mut acks_this_run = Vec::new();
        for line in early.into_iter().chain(lines.try_iter()) {
            if let Some(revision) = apply_line(&mut keys, &line) {
                acks_this_run.push(revision);
            }
        }
        assert!(
            !acks_this_run.is_empty(),
            "run {run}: the child acknowledged nothing"
        );
        assert!(
            acks_this_run
                .iter()
                .all(|revision| *revision > highest_acked),
            "run {run}: revisions went back below {highest_acked}"
        );
        let mut sorted = acks_this_run.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(
            sorted.len(),
            acks_this_run.len(),
            "run {run}: a revision was acknowledged twice"
        );
        highest_acked = highest_acked.max(*sorted.last().unwrap_or(&0));
        total_acks += acks_this_run.len();

        let (landed, lost) = verify_after_crash(dir.path(), &mut keys, highest_acked, run).await;
        in_flight = (in_flight.0 + landed, in_flight.1 + lost);
    }
    println!(
        "crash test: {KILLS} kills, {total_acks} acknowledged writes, {} keys; writes in flight \
         at a kill: {} applied, {} not",
        keys.len(),
        in_flight.0,
        in_flight.1
    );
}

/// Applies one line of the child's report; returns the revision of an acknowledgement.
fn apply_line(keys: &mut BTreeMap<String, Key>, line: &str) -> Option<Revision> {
    let mut parts = line.splitn(4, ' ');
    let (Some(kind), Some(key), Some(op), Some(arg)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        panic!("malformed line from the child: {line:?}");
    };
    let entry = keys.entry(key.to_owned()).or_default();
    match kind {
        "begin" => {
            entry.pending = Some((op.to_owned(), arg.to_owned()));
            None
        }
        "ack" => {
            let revision: Revision = arg.parse().expect("revision");
            let (pending_op, value) = entry.pending.take().expect("an ack follows its begin");
            assert_eq!(pending_op, op);
            entry.acked = Some(match op {
                "delete" => State::Absent,
                _ => State::Present { value, revision },
            });
            Some(revision)
        }
        other => panic!("unknown line kind {other:?}"),
    }
}

/// Reopens the store and checks it against the model; resolves in-flight writes to what landed.
/// Returns how many in-flight writes were applied and how many were not.
async fn verify_after_crash(
    dir: &std::path::Path,
    keys: &mut BTreeMap<String, Key>,
    highest_acked: Revision,
    run: usize,
) -> (usize, usize) {
    let (mut landed, mut lost) = (0, 0);
    let store = Store::open(EmbeddedConfig::new(dir))
        .await
        .unwrap_or_else(|error| panic!("run {run}: reopen failed: {error}"));
    let current = store.current_revision().await.unwrap();
    assert!(
        current >= highest_acked,
        "run {run}: revision {current} lost acknowledged {highest_acked}"
    );

    for (key, model) in keys.iter_mut() {
        let found = match store.get(key).await {
            Ok(kv) => State::Present {
                value: String::from_utf8(kv.value.to_vec()).unwrap(),
                revision: kv.revision,
            },
            Err(Error::NotFound { .. }) => State::Absent,
            Err(error) => panic!("run {run}: get {key}: {error}"),
        };
        let acked = model.acked.clone().unwrap_or(State::Absent);
        let landed_pending = match (&model.pending, &found) {
            (Some((op, _)), State::Absent) => op == "delete",
            (
                Some((op, value)),
                State::Present {
                    value: found_value, ..
                },
            ) => op != "delete" && found_value == value,
            (None, _) => false,
        };
        assert!(
            found == acked || landed_pending,
            "run {run}: {key} is {found:?}, acknowledged {acked:?}, in flight {:?}",
            model.pending
        );
        if model.pending.is_some() {
            if found == acked {
                lost += 1;
            } else {
                landed += 1;
            }
        }
        model.acked = Some(found);
        model.pending = None;
    }

    // Nothing the child never wrote appears, and the change log replays in order.
    let listed = store.list("/", None, None, None).await.unwrap();
    let present = keys
        .values()
        .filter(|k| matches!(k.acked, Some(State::Present { .. })))
        .count();
    assert_eq!(
        listed.items.len(),
        present,
        "run {run}: unexpected keys on disk"
    );
    let from = (current - 200).max(1);
    let mut watch = store.watch("/", from).await.unwrap();
    let mut last = from;
    while last < current {
        let event = tokio::time::timeout(Duration::from_secs(10), watch.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(event.revision() > last, "run {run}: log out of order");
        last = event.revision();
    }
    drop(watch);
    // The store keeps working after the crash.
    let probe = format!("/probe/{run}");
    assert!(store.create(&probe, Bytes::new()).await.unwrap() > current);
    store.delete(&probe, None).await.unwrap();
    store.close().await;
    (landed, lost)
}
