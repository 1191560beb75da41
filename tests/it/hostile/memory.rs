//! The worst requests against `capmox-apiserver dev` as its own process under an
//! address-space limit (`prlimit --as`): a request that allocated without bound would abort
//! the process (as the JSON-patch copy attack once did at 23 GB), here it must be answered
//! and leave the server ready. Prints the peak resident memory against the idle one.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::bodies::billion_laughs;
use crate::rest::{GROUP, collection, item, machine};

/// The process's address-space limit: its idle virtual size (allocator reservations and
/// thread stacks) is under 2 GiB; an unbounded request needs far more.
const ADDRESS_SPACE_LIMIT: u64 = 3 << 30;

/// A `kB` field of `/proc/<pid>/status`.
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("process alive");
    status
        .lines()
        .find_map(|line| {
            line.strip_prefix(field)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"))
}

struct Server {
    child: Child,
    base: String,
    client: reqwest::Client,
}

impl Server {
    async fn start(dir: &Path) -> Self {
        let mut child = Command::new("prlimit")
            .arg(format!("--as={ADDRESS_SPACE_LIMIT}"))
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_capmox-apiserver"))
            .args(["dev", "--port", "0", "--sim-port", "0", "--dir"])
            .arg(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("prlimit starts the server");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let banner = async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(url) = line.split("listening on ").nth(1) {
                    return url.trim().to_owned();
                }
            }
            panic!("the dev server printed no address");
        };
        let base = tokio::time::timeout(Duration::from_secs(60), banner)
            .await
            .expect("the dev server starts in time");
        // The rest of what it prints is never read: the server must outlive its closed stdout.
        drop(lines);
        let read = |name: &str| std::fs::read(dir.join(name)).expect("dev PKI file");
        let identity = [read("admin.crt"), read("admin.key")].concat();
        let client = reqwest::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(&read("ca.crt")).expect("ca")])
            .identity(reqwest::Identity::from_pem(&identity).expect("identity"))
            .timeout(Duration::from_secs(120))
            .build()
            .expect("client");
        Self {
            child,
            base,
            client,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> u16 {
        self.client
            .request(method, format!("{}{path}", self.base))
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .map(|r| r.status().as_u16())
            .unwrap_or_else(|e| {
                let alive = std::fs::metadata(format!("/proc/{}", self.pid())).is_ok();
                panic!("{path}: no answer ({e:?}), server process alive: {alive}")
            })
    }

    async fn ready(&self) -> bool {
        self.client
            .get(format!("{}/readyz", self.base))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
    }
}

/// What it is, method, path, content type, body, and the status code it gets.
type WorstRequest = (
    &'static str,
    reqwest::Method,
    String,
    &'static str,
    Vec<u8>,
    u16,
);

fn patch_ops(ops: Vec<Value>) -> Vec<u8> {
    Value::Array(ops).to_string().into_bytes()
}

#[tokio::test(flavor = "multi_thread")]
async fn worst_requests_under_an_address_space_limit() {
    capmox_apiserver::server::tls::install_default_provider();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&dir.path().join("dev")).await;
    let mut ready = false;
    for _ in 0..600 {
        ready = server.ready().await;
        if ready {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ready, "the dev server became ready");
    let machines = collection("v1alpha2", "default", "proxmoxmachines");
    let target = item("v1alpha2", "default", "proxmoxmachines", "target");
    let created = server
        .send(
            reqwest::Method::POST,
            &machines,
            "application/json",
            machine("target").to_string().into_bytes(),
        )
        .await;
    assert_eq!(created, 201);
    let idle = status_kib(server.pid(), "VmRSS:");

    let with_extra = |extra: &str| {
        let mut object = machine("big").to_string();
        object.insert_str(object.len() - 1, &format!(",\"x\":{extra}"));
        object.into_bytes()
    };
    let mut copy_bomb = vec![json!({"op": "add", "path": "/spec/zz", "value": ["x".repeat(96)]})];
    copy_bomb
        .extend((0..25).map(|_| json!({"op": "copy", "from": "/spec/zz", "path": "/spec/zz/-"})));
    let mut moves = vec![json!({"op": "add", "path": "/n0", "value": {}})];
    for i in 0..4_999 {
        moves.push(json!({"op": "add", "path": format!("/n{}", i + 1), "value": {}}));
        moves.push(
            json!({"op": "move", "from": format!("/n{i}"), "path": format!("/n{}/x", i + 1)}),
        );
    }
    let labels = |count: usize| -> serde_json::Map<String, Value> {
        (0..count)
            .map(|i| (format!("k{i}"), json!("v".repeat(40))))
            .collect()
    };
    // The largest object stored with two managers' field sets of its labels stays below the
    // 1.5 MiB a stored object may take; 50,000 labels are over it.
    let mut over = machine("over");
    over["metadata"]["labels"] = Value::Object(labels(50_000));
    let labels = labels(18_000);
    let mut large = machine("large");
    large["metadata"]["labels"] = Value::Object(labels.clone());
    let apply_config = json!({
        "apiVersion": format!("{GROUP}/v1alpha2"), "kind": "ProxmoxMachine",
        "metadata": {"name": "target", "namespace": "default", "labels": labels},
    });
    let post = reqwest::Method::POST;
    let patch = reqwest::Method::PATCH;
    let worst: Vec<WorstRequest> = vec![
        (
            "3 MiB of zeros",
            post.clone(),
            machines.clone(),
            "application/json",
            with_extra(&format!("[{}]", vec!["0"; 1_500_000].join(","))),
            413,
        ),
        (
            "a billion laughs",
            post.clone(),
            machines.clone(),
            "application/yaml",
            billion_laughs().into_bytes(),
            413,
        ),
        (
            "JSON nested 1,000,000 deep",
            post.clone(),
            machines.clone(),
            "application/json",
            with_extra(&format!(
                "{}{}",
                "[".repeat(1_000_000),
                "]".repeat(1_000_000)
            )),
            400,
        ),
        (
            "25 self-doubling copies",
            patch.clone(),
            target.clone(),
            "application/json-patch+json",
            patch_ops(copy_bomb),
            422,
        ),
        (
            "9,999 operations nesting by moves",
            patch.clone(),
            target.clone(),
            "application/json-patch+json",
            patch_ops(moves),
            422,
        ),
        (
            "10,001 operations",
            patch.clone(),
            target.clone(),
            "application/json-patch+json",
            patch_ops(vec![
                json!({"op": "test", "path": "/kind", "value": "ProxmoxMachine"});
                10_001
            ]),
            413,
        ),
        (
            "a 2.9 MiB object (50,000 labels), refused",
            post.clone(),
            machines.clone(),
            "application/json",
            over.to_string().into_bytes(),
            413,
        ),
        (
            "a 1 MiB object (18,000 labels), created",
            post.clone(),
            machines.clone(),
            "application/json",
            large.to_string().into_bytes(),
            201,
        ),
        (
            "the same labels applied by a second manager",
            patch.clone(),
            format!("{target}?fieldManager=bulk"),
            "application/apply-patch+yaml",
            apply_config.to_string().into_bytes(),
            200,
        ),
    ];
    let mut peaks = Vec::new();
    for (what, method, path, content_type, body, want) in worst {
        let code = server.send(method, &path, content_type, body).await;
        println!("memory: {what}: {code}");
        assert_eq!(code, want, "{what}");
        assert!(server.ready().await, "not ready after {what}");
        peaks.push((what, status_kib(server.pid(), "VmHWM:")));
    }
    let mut previous = idle;
    for (what, peak) in &peaks {
        println!(
            "memory: {what}: peak RSS {:.1} MiB ({:.2}x idle){}",
            *peak as f64 / 1024.0,
            *peak as f64 / idle as f64,
            if *peak > previous {
                ""
            } else {
                ", no new peak"
            }
        );
        previous = previous.max(*peak);
    }
    println!(
        "memory: idle RSS {:.1} MiB, address space limited to {} GiB, all answered, server ready",
        idle as f64 / 1024.0,
        ADDRESS_SPACE_LIMIT >> 30
    );
}
