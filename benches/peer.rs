//! Peer benchmark: ours (capmox-apiserver behind kube-apiserver's aggregator) against upstream
//! CAPMOX v0.9.0 (its CRDs behind kube-apiserver, its manager serving the conversion, defaulting
//! and validation webhooks), driven by the same load generator in one run. Prints a table of
//! figures and ratios; asserts nothing but that every request succeeds.
//!
//! Run: `tests/e2e/run peer-bench` (brings up the pair, exports its `pair.env`, runs this).
//!
//! Measured on each side, through its kube-apiserver (and, as a reference, on our server
//! without the aggregator for the rates and LISTs): creates/s and gets/s of v1alpha2
//! ProxmoxMachines at 1 and 16 clients (best of `ROUNDS`, sides interleaved in each round);
//! the CPU every process of the side spent per 1,000 creates at 16 clients; LIST of 1,000 and
//! 10,000 machines in v1alpha2 and v1alpha1; a v1alpha1 watch during 1,000 updates (latency
//! from sending the update to reading its event); server-side apply of a machine with 20
//! network devices at 1 and 16 clients.
//!
//! The aggregator's ceiling, in the same rounds: the creates, gets and the v1alpha2 LIST of
//! 1,000 through ours' kube-apiserver to a no-op aggregated server (`support/ceiling.rs`)
//! answering bytes ours wrote, printed as ours ÷ ceiling.
//!
//! Then the same rates, LISTs and watch for another provider's kind in our group-versions,
//! CAPK's KubevirtMachine (v1alpha1): on the peer kube-apiserver's CRD handler serves it, on
//! ours this server serves it from the same CRD (`tests/e2e/run peer-bench` installs CAPK's
//! CRDs on both).
//!
//! With `PEER_BENCH_PROFILE=DIR` it measures nothing of the above: it runs one round of 16-client
//! creates and then gets on ours, direct and the ceiling, each phase under `perf record` of
//! kube-apiserver and our server (`support/profile.rs`), prints each phase's CPU per 1,000
//! requests and leaves the recordings in DIR.

#[path = "support/ceiling.rs"]
mod ceiling;
#[path = "support/machine.rs"]
mod machine;
#[path = "support/profile.rs"]
mod profile;
#[path = "support/rate.rs"]
mod rate;

use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use capmox_apiserver::server::tls;
use futures::StreamExt;
use serde_json::{Value, json};

use ceiling::Ceiling;
use machine::machine;
use rate::rate;

const GROUP: &str = "infrastructure.cluster.x-k8s.io";
/// Operations per timed round at 1 and at 16 clients; each rate is the best of `ROUNDS`
/// rounds (the machine is shared, so the best round is the least disturbed one).
const SINGLE_OPS: usize = 300;
const MANY_OPS: usize = 3_000;
const ROUNDS: usize = 3;
/// Machines stored for the LISTs: the first count is listed, then the store is filled up to
/// the second.
const LISTED: [usize; 2] = [1_000, 10_000];
const LIST_REPEATS: usize = 5;
const UPDATES: usize = 1_000;
const DEVICES: usize = 20;
const APPLY_SINGLE_OPS: usize = 200;
const APPLY_MANY_OPS: usize = 1_600;

fn ops(workers: usize) -> usize {
    if workers == 1 { SINGLE_OPS } else { MANY_OPS }
}

/// The kind a group of rows measures: its plural, the versions it is written in and watched
/// in, the object created, and what its rows and namespaces are prefixed with.
struct Subject {
    title: &'static str,
    plural: &'static str,
    write_version: &'static str,
    watch_version: &'static str,
    object: fn(&str) -> Value,
    prefix: &'static str,
}

/// Our ProxmoxMachine, written in v1alpha2 and watched in v1alpha1 (converted).
const PROXMOX_MACHINES: Subject = Subject {
    title: "",
    plural: "proxmoxmachines",
    write_version: "v1alpha2",
    watch_version: "v1alpha1",
    object: machine,
    prefix: "",
};

/// CAPK's KubevirtMachine, a co-tenant kind served from its CRD (v1alpha1 only).
const KUBEVIRT_MACHINES: Subject = Subject {
    title: "KubevirtMachine: ",
    plural: "kubevirtmachines",
    write_version: "v1alpha1",
    watch_version: "v1alpha1",
    object: kubevirt_machine,
    prefix: "kv-",
};

/// A KubevirtMachine as CAPK's default cluster template makes them.
fn kubevirt_machine(name: &str) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/v1alpha1"),
        "kind": "KubevirtMachine",
        "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": "bench"}},
        "spec": {
            "virtualMachineBootstrapCheck": {"checkStrategy": "ssh"},
            "virtualMachineTemplate": {
                "metadata": {"namespace": "bench"},
                "spec": {"runStrategy": "Always", "template": {"spec": {
                    "domain": {
                        "cpu": {"cores": 2}, "memory": {"guest": "4Gi"},
                        "devices": {"networkInterfaceMultiqueue": true,
                            "disks": [{"disk": {"bus": "virtio"}, "name": "containervolume"}]}
                    },
                    "evictionStrategy": "External",
                    "volumes": [{"containerDisk": {"image": "quay.io/capk/ubuntu-2204-container-disk:v1.31.0"},
                        "name": "containervolume"}]
                }}}
            }
        }
    })
}

/// An environment variable `tests/e2e/run pair` writes to `pair.env`.
fn pair_var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!(
            "{name} is not set: this benchmark needs the pair of control planes; \
             run it with `tests/e2e/run peer-bench`"
        )
    })
}

/// The admin client certificate and the CA of all three servers.
struct Credentials {
    ca: Vec<u8>,
    identity: Vec<u8>,
}

impl Credentials {
    fn from_env() -> Self {
        let read = |var: &str| {
            let path = pair_var(var);
            std::fs::read(&path).unwrap_or_else(|e| panic!("{var}: cannot read {path}: {e}"))
        };
        let mut identity = read("PAIR_CLIENT_CERT");
        identity.extend(read("PAIR_CLIENT_KEY"));
        Self {
            ca: read("PAIR_CA"),
            identity,
        }
    }

    /// A keep-alive client with its own connection pool (so each load-generating client has its
    /// own connection); HTTP/2 by ALPN on every server.
    fn client(&self) -> reqwest::Client {
        reqwest::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(&self.ca).expect("PAIR_CA")])
            .identity(reqwest::Identity::from_pem(&self.identity).expect("client identity"))
            .pool_max_idle_per_host(4)
            .build()
            .expect("client")
    }

    fn clients(&self, n: usize) -> Arc<Vec<reqwest::Client>> {
        Arc::new((0..n).map(|_| self.client()).collect())
    }
}

/// One server under test and the processes whose CPU counts for it.
struct Side {
    label: &'static str,
    base: String,
    /// The API group its subjects are served in: ours, or the ceiling's.
    group: &'static str,
    /// name=pid of the side's processes (etcd, kube-apiserver, our server or upstream's manager).
    processes: Vec<(String, u32)>,
}

impl Side {
    fn from_env(label: &'static str, url_var: &str, pids_var: &str) -> Self {
        let processes = pair_var(pids_var)
            .split_whitespace()
            .map(|entry| {
                let (name, pid) = entry
                    .split_once('=')
                    .unwrap_or_else(|| panic!("{pids_var}: {entry:?} is not name=pid"));
                (name.to_owned(), pid.parse().expect("pid"))
            })
            .collect();
        Self {
            label,
            base: pair_var(url_var),
            group: GROUP,
            processes,
        }
    }

    fn collection(&self, subject: &Subject, version: &str, namespace: &str) -> String {
        format!(
            "{}/apis/{}/{version}/namespaces/{namespace}/{}",
            self.base, self.group, subject.plural
        )
    }

    fn machines(&self, version: &str, namespace: &str) -> String {
        self.collection(&PROXMOX_MACHINES, version, namespace)
    }

    /// The namespace of this side's objects for `purpose`. Ours and its direct reference share
    /// one store, so each writes its own namespaces.
    fn namespace(&self, purpose: &str) -> String {
        format!("{}-{purpose}", self.label)
    }

    /// CPU time each process of the side has used since `before` (its `cpu_times`).
    fn cpu_since(&self, before: &[Duration], ticks_per_second: u64) -> Vec<Duration> {
        self.cpu_times(ticks_per_second)
            .iter()
            .zip(before)
            .map(|(after, before)| after.saturating_sub(*before))
            .collect()
    }

    /// CPU time (user + system) each process of the side has used so far.
    fn cpu_times(&self, ticks_per_second: u64) -> Vec<Duration> {
        self.processes
            .iter()
            .map(|(_, pid)| process_cpu_time(*pid, ticks_per_second))
            .collect()
    }
}

/// The kernel's clock ticks per second (USER_HZ), in which `/proc/PID/stat` counts CPU time.
fn clock_ticks_per_second() -> u64 {
    let output = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .expect("run getconf CLK_TCK");
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .expect("getconf CLK_TCK prints a number")
}

/// utime + stime of a process, from `/proc/PID/stat`.
fn process_cpu_time(pid: u32, ticks_per_second: u64) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .unwrap_or_else(|e| panic!("process {pid} (from pair.env): {e}"));
    // The command name may contain spaces; the fields after it start past the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks: u64 = fields[11..=12]
        .iter()
        .map(|f| f.parse::<u64>().expect("CPU ticks"))
        .sum();
    Duration::from_secs_f64(ticks as f64 / ticks_per_second as f64)
}

/// The applied machine: 20 devices. Their names are zero-padded (net00 … net19) because
/// upstream's webhook sorts the devices by name as strings and then requires the i-th to be
/// device number i, so it refuses net0 … net19 (net10 sorts third); both sides accept these.
/// `generation` alternates the cores and net07's bridge, so every apply changes the object.
fn applied_machine(name: &str, generation: usize) -> String {
    let devices: Vec<Value> = (0..DEVICES)
        .map(|i| {
            let bridge = if i == 7 && generation % 2 == 1 {
                "vmbr-alt".to_owned()
            } else {
                format!("vmbr{i}")
            };
            json!({
                "name": format!("net{i:02}"), "bridge": bridge, "model": "virtio", "mtu": 1500,
                "dnsServers": ["10.0.0.53", "10.0.1.53"]
            })
        })
        .collect();
    json!({
        "apiVersion": format!("{GROUP}/v1alpha2"),
        "kind": "ProxmoxMachine",
        "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": "bench"}},
        "spec": {
            "sourceNode": "pve1", "templateID": 100, "numSockets": 1,
            "numCores": 2 + 2 * (generation % 2), "memoryMiB": 4096,
            "allowedNodes": ["pve1", "pve2", "pve3"],
            "network": {"networkDevices": devices}
        }
    })
    .to_string()
}

/// Sends a request and fails loudly unless the answer is 2xx: a refused request is not a
/// measurement. Returns the body.
async fn expect_success(side: &str, what: &str, request: reqwest::RequestBuilder) -> bytes::Bytes {
    let reply = request
        .send()
        .await
        .unwrap_or_else(|e| panic!("{side}: {what}: {e}"));
    let status = reply.status();
    let body = reply.bytes().await.expect("body");
    assert!(
        status.is_success(),
        "{side}: {what}: {status}: {}",
        String::from_utf8_lossy(&body)
    );
    body
}

/// Creates `namespace` on a kube-apiserver (ours admits creates only into namespaces its
/// management cluster has). An existing one is fine.
async fn ensure_namespace(client: &reqwest::Client, kube_apiserver: &str, namespace: &str) {
    let reply = client
        .post(format!("{kube_apiserver}/api/v1/namespaces"))
        .json(&json!({"metadata": {"name": namespace}}))
        .send()
        .await
        .expect("create namespace");
    let status = reply.status();
    assert!(
        status.is_success() || status == reqwest::StatusCode::CONFLICT,
        "namespace {namespace} on {kube_apiserver}: {status}: {}",
        reply.text().await.unwrap_or_default()
    );
}

/// Creates objects `m-<first>` … `m-<first+ops-1>` of `subject` in `namespace` with `workers`
/// clients; creates/s.
async fn creates(
    side: &Side,
    subject: &Subject,
    credentials: &Credentials,
    workers: usize,
    namespace: &str,
    first: usize,
    ops: usize,
) -> f64 {
    let clients = credentials.clients(workers);
    let (label, object) = (side.label, subject.object);
    let url = side.collection(subject, subject.write_version, namespace);
    rate(workers, ops, move |worker, i| {
        let request = clients[worker]
            .post(&url)
            .json(&object(&format!("m-{:06}", first + i)));
        async move {
            expect_success(label, "create", request).await;
        }
    })
    .await
}

/// Gets objects `m-0` … `m-<ops-1>` of `subject` in `namespace` with `workers` clients; gets/s.
async fn gets(
    side: &Side,
    subject: &Subject,
    credentials: &Credentials,
    workers: usize,
    namespace: &str,
    ops: usize,
) -> f64 {
    let clients = credentials.clients(workers);
    let (label, url) = (
        side.label,
        side.collection(subject, subject.write_version, namespace),
    );
    rate(workers, ops, move |worker, i| {
        let request = clients[worker].get(format!("{url}/m-{i:06}"));
        async move {
            expect_success(label, "get", request).await;
        }
    })
    .await
}

/// Create and get rates of one side at one client count, and the CPU its processes spent on
/// the creates (summed over the rounds).
#[derive(Default, Clone)]
struct Rates {
    creates: f64,
    gets: f64,
    cpu: Vec<Duration>,
    created: usize,
}

/// One round of creates then gets on `side` at `workers` clients, into a fresh namespace.
async fn rate_round(
    side: &Side,
    subject: &Subject,
    credentials: &Credentials,
    workers: usize,
    round: usize,
    rates: &mut Rates,
    ticks: u64,
) {
    let namespace = side.namespace(&format!("{}c{workers}-r{round}", subject.prefix));
    let before = side.cpu_times(ticks);
    let created = creates(
        side,
        subject,
        credentials,
        workers,
        &namespace,
        0,
        ops(workers),
    )
    .await;
    let cpu = side.cpu_since(&before, ticks);
    let got = gets(
        side,
        subject,
        credentials,
        workers,
        &namespace,
        ops(workers),
    )
    .await;
    println!(
        "    round {round}, {:<6} {workers:>2} clients: {created:>6.0} creates/s {got:>6.0} gets/s, \
         CPU per 1,000 creates: {} (load average {})",
        side.label,
        cpu_breakdown(side, &cpu, ops(workers)),
        load_average()
    );
    rates.creates = rates.creates.max(created);
    rates.gets = rates.gets.max(got);
    rates.cpu = if rates.cpu.is_empty() {
        cpu
    } else {
        rates.cpu.iter().zip(&cpu).map(|(a, b)| *a + *b).collect()
    };
    rates.created += ops(workers);
}

/// "etcd 0.12 s, kube-apiserver 1.40 s, …": CPU per 1,000 operations of each process.
fn cpu_breakdown(side: &Side, cpu: &[Duration], ops: usize) -> String {
    let mut line = String::new();
    for ((name, _), spent) in side.processes.iter().zip(cpu) {
        let _ = write!(line, "{name} {:.2} s, ", per_thousand(*spent, ops));
    }
    let _ = write!(line, "total {:.2} s", per_thousand(cpu.iter().sum(), ops));
    line
}

/// "1 client", "16 clients".
fn clients(workers: usize) -> String {
    format!("{workers} client{}", if workers == 1 { "" } else { "s" })
}

fn per_thousand(cpu: Duration, ops: usize) -> f64 {
    cpu.as_secs_f64() * 1000.0 / ops as f64
}

/// The 1-minute load average, as a reminder of how busy the shared machine was.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

/// The fastest of `LIST_REPEATS` LISTs of `namespace` in `version`; every one must hold
/// `expected` items.
async fn list_time(
    side: &Side,
    subject: &Subject,
    client: &reqwest::Client,
    version: &str,
    namespace: &str,
    expected: usize,
) -> Duration {
    let mut fastest = Duration::MAX;
    for _ in 0..LIST_REPEATS {
        let started = Instant::now();
        let body = expect_success(
            side.label,
            "list",
            client.get(side.collection(subject, version, namespace)),
        )
        .await;
        fastest = fastest.min(started.elapsed());
        let list: Value = serde_json::from_slice(&body).expect("list JSON");
        let items = list["items"].as_array().map_or(0, Vec::len);
        assert_eq!(
            items, expected,
            "{}: LIST {version} of {namespace}",
            side.label
        );
    }
    fastest
}

/// A watch of one object of `subject` (in its watch version) while it is updated `UPDATES`
/// times (a label through a merge patch in its write version, one at a time); each event's
/// latency from sending its update.
async fn watch_latencies(
    side: &Side,
    subject: &Subject,
    credentials: &Credentials,
) -> Vec<Duration> {
    let client = credentials.client();
    let namespace = side.namespace(&format!("{}watch", subject.prefix));
    let collection = side.collection(subject, subject.write_version, &namespace);
    let created = expect_success(
        side.label,
        "create the watched object",
        client.post(&collection).json(&(subject.object)("watched")),
    )
    .await;
    let created: Value = serde_json::from_slice(&created).expect("JSON");
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion");
    let watch = client
        .get(format!(
            "{}?watch=true&resourceVersion={rv}&fieldSelector=metadata.name%3Dwatched",
            side.collection(subject, subject.watch_version, &namespace)
        ))
        .send()
        .await
        .expect("watch");
    assert!(watch.status().is_success(), "{}: watch", side.label);
    let sent: Arc<Vec<OnceLock<Instant>>> =
        Arc::new((0..UPDATES).map(|_| OnceLock::new()).collect());
    let reader = tokio::spawn(read_events(watch, sent.clone()));
    let url = format!("{collection}/watched");
    for (seq, at) in sent.iter().enumerate() {
        let _ = at.set(Instant::now());
        let patch = json!({"metadata": {"labels": {"seq": seq.to_string()}}});
        expect_success(
            side.label,
            "update",
            client
                .patch(&url)
                .header("content-type", "application/merge-patch+json")
                .body(patch.to_string()),
        )
        .await;
    }
    let latencies = tokio::time::timeout(Duration::from_secs(60), reader)
        .await
        .unwrap_or_else(|_| panic!("{}: the watch did not deliver every update", side.label))
        .expect("watch reader");
    assert_eq!(latencies.len(), UPDATES, "{}: events delivered", side.label);
    latencies
}

/// Reads watch events (one JSON object a line) until every update's event has arrived; the
/// latency of each from the instant its update was sent (the `seq` label says which).
async fn read_events(watch: reqwest::Response, sent: Arc<Vec<OnceLock<Instant>>>) -> Vec<Duration> {
    let mut stream = watch.bytes_stream();
    let mut buffer = Vec::new();
    let mut latencies = Vec::with_capacity(UPDATES);
    while latencies.len() < UPDATES {
        let Some(chunk) = stream.next().await else {
            break;
        };
        buffer.extend_from_slice(&chunk.expect("watch stream"));
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            let event: Value = serde_json::from_slice(&line).expect("watch event");
            let seq = event["object"]["metadata"]["labels"]["seq"]
                .as_str()
                .and_then(|s| s.parse::<usize>().ok());
            if let Some(at) = seq.and_then(|s| sent.get(s)).and_then(OnceLock::get) {
                latencies.push(at.elapsed());
            }
        }
    }
    latencies
}

/// Quantile `q` (0–1) of sorted durations.
fn quantile(sorted: &[Duration], q: f64) -> Duration {
    let index = ((sorted.len() as f64 * q) as usize).min(sorted.len().saturating_sub(1));
    sorted.get(index).copied().unwrap_or_default()
}

/// Server-side applies of the 20-device machine with `workers` clients, each applying its own
/// machine again and again, every apply a change; applies/s.
async fn applies(side: &Side, credentials: &Credentials, workers: usize, round: usize) -> f64 {
    let clients = credentials.clients(workers);
    let label = side.label;
    let namespace = side.namespace("apply");
    let url = side.machines("v1alpha2", &namespace);
    let ops = if workers == 1 {
        APPLY_SINGLE_OPS
    } else {
        APPLY_MANY_OPS
    };
    rate(workers, ops, move |worker, i| {
        let name = format!("applied-c{workers}-w{worker}");
        // Successive rounds go on alternating from where the last one stopped.
        let generation = round * ops + i / workers;
        let request = clients[worker]
            .patch(format!("{url}/{name}?fieldManager=peer-bench"))
            .header("content-type", "application/apply-patch+yaml")
            .body(applied_machine(&name, generation));
        async move {
            expect_success(label, "apply", request).await;
        }
    })
    .await
}

/// Whether a larger figure is the better one (rates), or a smaller (times, CPU).
#[derive(Clone, Copy)]
enum Better {
    Higher,
    Lower,
}

struct Row {
    what: String,
    unit: &'static str,
    better: Better,
    ours: f64,
    peer: f64,
    direct: Option<f64>,
    /// The aggregator's ceiling (`support/ceiling.rs`), where measured.
    ceiling: Option<f64>,
}

impl Row {
    /// Ours against `other`: > 1 means ours is better, whichever way the figure goes.
    fn against(&self, other: f64) -> f64 {
        match self.better {
            Better::Higher => self.ours / other,
            Better::Lower => other / self.ours,
        }
    }
}

fn print_table(rows: &[Row]) {
    println!();
    println!(
        "ratio: ours ÷ peer for rates, peer ÷ ours for times and CPU (> 1 = ours better); \
         direct: our server without the aggregator; ceiling: a no-op aggregated server behind \
         ours' kube-apiserver, and ours ÷ it the same way (1 = all the aggregator allows)"
    );
    println!(
        "{:<58} {:>10} {:>10} {:>7} {:>10} {:>10} {:>7}",
        "", "ours", "peer", "ratio", "direct", "ceiling", "÷ceil"
    );
    let dash = || "—".to_owned();
    for row in rows {
        println!(
            "{:<58} {:>10} {:>10} {:>7.2} {:>10} {:>10} {:>7}",
            format!("{} ({})", row.what, row.unit),
            figure(row.ours),
            figure(row.peer),
            row.against(row.peer),
            row.direct.map_or_else(dash, figure),
            row.ceiling.map_or_else(dash, figure),
            row.ceiling
                .map_or_else(dash, |ceiling| format!("{:.2}", row.against(ceiling))),
        );
    }
}

/// A figure with the precision its size deserves.
fn figure(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else if value >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The three servers: ours behind the aggregator, the peer, ours directly.
struct Pair {
    ours: Side,
    peer: Side,
    direct: Side,
    credentials: Credentials,
}

impl Pair {
    fn from_env() -> Self {
        let ours = Side::from_env("ours", "PAIR_OURS_URL", "PAIR_OURS_PIDS");
        let direct = Side {
            label: "direct",
            base: pair_var("PAIR_OURS_DIRECT_URL"),
            group: GROUP,
            processes: ours.processes.clone(),
        };
        Self {
            peer: Side::from_env("peer", "PAIR_PEER_URL", "PAIR_PEER_PIDS"),
            ours,
            direct,
            credentials: Credentials::from_env(),
        }
    }

    fn sides(&self) -> [&Side; 3] {
        [&self.ours, &self.peer, &self.direct]
    }

    /// The aggregator's ceiling: ProxmoxMachines of its group behind ours' kube-apiserver,
    /// answered with one of ours' machines as our server wrote it. Its CPU is the
    /// kube-apiserver's (the no-op server runs in this process).
    async fn start_ceiling(&self) -> (Side, Ceiling) {
        let namespace = self.direct.namespace("ceiling");
        creates(
            &self.direct,
            &PROXMOX_MACHINES,
            &self.credentials,
            1,
            &namespace,
            0,
            1,
        )
        .await;
        let url = format!(
            "{}/m-{:06}",
            self.direct.machines("v1alpha2", &namespace),
            0
        );
        let client = self.credentials.client();
        let object = expect_success("direct", "get", client.get(url)).await;
        let no_op = Ceiling::start(
            &client,
            &self.ours.base,
            PROXMOX_MACHINES.plural,
            "ProxmoxMachine",
            object,
        )
        .await;
        let side = Side {
            label: "ceiling",
            base: self.ours.base.clone(),
            group: ceiling::GROUP,
            processes: self
                .ours
                .processes
                .iter()
                .filter(|(name, _)| name == "kube-apiserver")
                .cloned()
                .collect(),
        };
        (side, no_op)
    }

    /// Every namespace any side writes to, on both kube-apiservers.
    async fn create_namespaces(&self) {
        let client = self.credentials.client();
        let mut purposes = vec![
            "apply".to_owned(),
            "ceiling".to_owned(),
            "profile".to_owned(),
        ];
        for prefix in [PROXMOX_MACHINES.prefix, KUBEVIRT_MACHINES.prefix] {
            purposes.extend([format!("{prefix}list"), format!("{prefix}watch")]);
            for workers in [1, 16] {
                purposes.extend((0..ROUNDS).map(|round| format!("{prefix}c{workers}-r{round}")));
            }
        }
        for kube_apiserver in [&self.ours.base, &self.peer.base] {
            for side in self.sides() {
                for purpose in &purposes {
                    ensure_namespace(&client, kube_apiserver, &side.namespace(purpose)).await;
                }
            }
        }
    }

    /// The HTTP version each server negotiated, so a reader sees both sides used the same.
    async fn print_protocols(&self) {
        let client = self.credentials.client();
        for side in self.sides() {
            let reply = client
                .get(side.machines("v1alpha2", &side.namespace("list")))
                .send()
                .await
                .expect("probe");
            println!("  {}: {} {:?}", side.label, side.base, reply.version());
        }
    }
}

/// Create and get rates at 1 and 16 clients, and the CPU per 1,000 creates at 16; the
/// `ceiling`'s rates too, measured in the same rounds, when given.
async fn rate_rows(
    pair: &Pair,
    subject: &Subject,
    ceiling: Option<&Side>,
    rows: &mut Vec<Row>,
    ticks: u64,
) {
    let title = subject.title;
    let sides: Vec<&Side> = pair.sides().into_iter().chain(ceiling).collect();
    for workers in [1, 16] {
        let mut rates = vec![Rates::default(); sides.len()];
        for round in 0..ROUNDS {
            for (side, rates) in sides.iter().zip(&mut rates) {
                rate_round(
                    side,
                    subject,
                    &pair.credentials,
                    workers,
                    round,
                    rates,
                    ticks,
                )
                .await;
            }
        }
        let [ours, peer, direct] = [&rates[0], &rates[1], &rates[2]];
        let ceiling_rates = rates.get(3);
        let clients = clients(workers);
        rows.push(Row {
            what: format!("{title}creates, {clients}"),
            unit: "/s",
            better: Better::Higher,
            ours: ours.creates,
            peer: peer.creates,
            direct: Some(direct.creates),
            ceiling: ceiling_rates.map(|r| r.creates),
        });
        rows.push(Row {
            what: format!("{title}gets, {clients}"),
            unit: "/s",
            better: Better::Higher,
            ours: ours.gets,
            peer: peer.gets,
            direct: Some(direct.gets),
            ceiling: ceiling_rates.map(|r| r.gets),
        });
        if workers == 16 {
            let cpu = |r: &Rates| per_thousand(r.cpu.iter().sum(), r.created);
            for (side, rates) in sides.iter().zip(&rates) {
                println!(
                    "  CPU per 1,000 creates at 16 clients, {}: {}",
                    side.label,
                    cpu_breakdown(side, &rates.cpu, rates.created)
                );
            }
            rows.push(Row {
                what: format!("{title}CPU per 1,000 creates, 16 clients"),
                unit: "s",
                better: Better::Lower,
                ours: cpu(ours),
                peer: cpu(peer),
                direct: Some(cpu(direct)),
                ceiling: None,
            });
        }
    }
}

/// LISTs of 1,000 and 10,000 machines in both versions. Ours and the direct reference list
/// the same stored machines (one store behind both); the `ceiling` answers ours' v1alpha2 list
/// of 1,000, its bytes as our server wrote them, when given.
async fn list_rows(
    pair: &Pair,
    subject: &Subject,
    ceiling: Option<(&Side, &Ceiling)>,
    rows: &mut Vec<Row>,
) {
    let client = pair.credentials.client();
    let mut stored = 0;
    let purpose = format!("{}list", subject.prefix);
    // A kind served in one version is listed in that one.
    let mut versions = vec![subject.write_version];
    if subject.watch_version != subject.write_version {
        versions.push(subject.watch_version);
    }
    for count in LISTED {
        for side in [&pair.ours, &pair.peer] {
            let namespace = side.namespace(&purpose);
            let rate = creates(
                side,
                subject,
                &pair.credentials,
                16,
                &namespace,
                stored,
                count - stored,
            )
            .await;
            println!(
                "  {}: {count} {} stored ({rate:.0} creates/s)",
                side.label, subject.plural
            );
        }
        stored = count;
        for &version in &versions {
            let namespace = pair.ours.namespace(&purpose);
            let ours = list_time(&pair.ours, subject, &client, version, &namespace, count).await;
            let direct =
                list_time(&pair.direct, subject, &client, version, &namespace, count).await;
            let peer_namespace = pair.peer.namespace(&purpose);
            let peer = list_time(
                &pair.peer,
                subject,
                &client,
                version,
                &peer_namespace,
                count,
            )
            .await;
            let ceiling_list = match ceiling {
                Some((side, no_op)) if count == LISTED[0] && version == ceiling::VERSION => {
                    let url = pair.direct.collection(subject, version, &namespace);
                    no_op.set_list(expect_success("direct", "list", client.get(url)).await);
                    let ceiling_namespace = side.namespace(&purpose);
                    let time =
                        list_time(side, subject, &client, version, &ceiling_namespace, count).await;
                    Some(millis(time))
                }
                _ => None,
            };
            rows.push(Row {
                what: format!("{}LIST {count} {version}", subject.title),
                unit: "ms",
                better: Better::Lower,
                ours: millis(ours),
                peer: millis(peer),
                direct: Some(millis(direct)),
                ceiling: ceiling_list,
            });
        }
    }
}

async fn watch_rows(pair: &Pair, subject: &Subject, rows: &mut Vec<Row>) {
    let mut quantiles = Vec::new();
    for side in [&pair.ours, &pair.peer] {
        let mut latencies = watch_latencies(side, subject, &pair.credentials).await;
        latencies.sort();
        println!(
            "  {}: {} events, max {:.1} ms",
            side.label,
            latencies.len(),
            millis(latencies[latencies.len() - 1])
        );
        quantiles.push([0.5, 0.99].map(|q| millis(quantile(&latencies, q))));
    }
    for (i, name) in ["p50", "p99"].into_iter().enumerate() {
        rows.push(Row {
            what: format!(
                "{}{} watch, {UPDATES} updates: {name}",
                subject.title, subject.watch_version
            ),
            unit: "ms",
            better: Better::Lower,
            ours: quantiles[0][i],
            peer: quantiles[1][i],
            direct: None,
            ceiling: None,
        });
    }
}

async fn apply_rows(pair: &Pair, rows: &mut Vec<Row>) {
    for workers in [1, 16] {
        let mut best = [0.0f64; 2];
        for round in 0..ROUNDS {
            for (side, best) in [&pair.ours, &pair.peer].into_iter().zip(&mut best) {
                let rate = applies(side, &pair.credentials, workers, round).await;
                println!(
                    "    round {round}, {:<6} {workers:>2} clients: {rate:>6.0} applies/s",
                    side.label
                );
                *best = best.max(rate);
            }
        }
        rows.push(Row {
            what: format!("apply, {DEVICES} devices, {}", clients(workers)),
            unit: "/s",
            better: Better::Higher,
            ours: best[0],
            peer: best[1],
            direct: None,
            ceiling: None,
        });
    }
}

/// The phases `PEER_BENCH_PROFILE` records on each side.
#[derive(Clone, Copy)]
enum Phase {
    Creates,
    Gets,
    Lists,
}

impl Phase {
    const ALL: [Phase; 3] = [Phase::Creates, Phase::Gets, Phase::Lists];
    /// LISTs of the phase's `MANY_OPS` machines in a recorded phase.
    const LISTS: usize = 20;

    fn name(self) -> &'static str {
        match self {
            Phase::Creates => "creates",
            Phase::Gets => "gets",
            Phase::Lists => "lists",
        }
    }

    fn requests(self) -> usize {
        match self {
            Phase::Lists => Self::LISTS,
            _ => MANY_OPS,
        }
    }
}

/// `PEER_BENCH_PROFILE=DIR`: on each of `sides`, into a namespace of its own, 16-client creates,
/// then gets of each, then LISTs of them all in v1alpha2, each phase recorded by perf (the
/// ceiling lists ours' bytes of the same machines); the CPU each process spent per 1,000
/// requests of the phase, and where the recordings are.
async fn profile_pass(pair: &Pair, sides: &[&Side], no_op: &Ceiling, dir: &Path, ticks: u64) {
    const WORKERS: usize = 16;
    let credentials = &pair.credentials;
    let client = credentials.client();
    println!(
        "profiles ({WORKERS} clients; {MANY_OPS} creates and gets, {} LISTs a side):",
        Phase::LISTS
    );
    for side in sides {
        let namespace = side.namespace("profile");
        for phase in Phase::ALL {
            if let (Phase::Lists, ceiling::GROUP) = (phase, side.group) {
                let ours = pair
                    .direct
                    .machines(ceiling::VERSION, &pair.direct.namespace("profile"));
                no_op.set_list(expect_success("direct", "list", client.get(ours)).await);
            }
            let recording = profile::record(
                dir,
                &format!("{}-{}", side.label, phase.name()),
                &side.processes,
            );
            let before = side.cpu_times(ticks);
            let started = Instant::now();
            match phase {
                Phase::Creates => {
                    creates(
                        side,
                        &PROXMOX_MACHINES,
                        credentials,
                        WORKERS,
                        &namespace,
                        0,
                        MANY_OPS,
                    )
                    .await;
                }
                Phase::Gets => {
                    gets(
                        side,
                        &PROXMOX_MACHINES,
                        credentials,
                        WORKERS,
                        &namespace,
                        MANY_OPS,
                    )
                    .await;
                }
                Phase::Lists => {
                    // Each call lists `LIST_REPEATS` times.
                    for _ in 0..Phase::LISTS / LIST_REPEATS {
                        list_time(
                            side,
                            &PROXMOX_MACHINES,
                            &client,
                            "v1alpha2",
                            &namespace,
                            MANY_OPS,
                        )
                        .await;
                    }
                }
            }
            let rate = phase.requests() as f64 / started.elapsed().as_secs_f64();
            let cpu = side.cpu_since(&before, ticks);
            let files = recording.finish();
            profile::note_phase(dir, side.label, phase.name(), phase.requests());
            println!(
                "  {:<7} {:<7} {rate:>7.1}/s, CPU per 1,000: {}",
                side.label,
                phase.name(),
                cpu_breakdown(side, &cpu, phase.requests())
            );
            for file in files {
                println!("    {}", file.display());
            }
        }
    }
}

#[tokio::main]
async fn main() {
    tls::install_default_provider();
    let pair = Pair::from_env();
    let ticks = clock_ticks_per_second();
    pair.create_namespaces().await;
    println!("servers (HTTP version negotiated):");
    pair.print_protocols().await;
    let (ceiling_side, no_op) = pair.start_ceiling().await;
    println!(
        "  ceiling: {} (APIService {}.{}, Available)",
        ceiling_side.base,
        ceiling::VERSION,
        ceiling::GROUP
    );
    if let Some(dir) = std::env::var_os("PEER_BENCH_PROFILE") {
        let sides = [&pair.ours, &pair.direct, &ceiling_side];
        profile_pass(&pair, &sides, &no_op, Path::new(&dir), ticks).await;
        return;
    }
    let mut rows = Vec::new();
    println!("creates and gets (best of {ROUNDS} rounds):");
    rate_rows(
        &pair,
        &PROXMOX_MACHINES,
        Some(&ceiling_side),
        &mut rows,
        ticks,
    )
    .await;
    println!("LISTs (fastest of {LIST_REPEATS}):");
    list_rows(
        &pair,
        &PROXMOX_MACHINES,
        Some((&ceiling_side, &no_op)),
        &mut rows,
    )
    .await;
    println!("v1alpha1 watch:");
    watch_rows(&pair, &PROXMOX_MACHINES, &mut rows).await;
    println!("server-side apply:");
    apply_rows(&pair, &mut rows).await;
    println!("a co-tenant kind, KubevirtMachine (CAPK's CRD):");
    rate_rows(&pair, &KUBEVIRT_MACHINES, None, &mut rows, ticks).await;
    list_rows(&pair, &KUBEVIRT_MACHINES, None, &mut rows).await;
    watch_rows(&pair, &KUBEVIRT_MACHINES, &mut rows).await;
    print_table(&rows);
}
