//! A 3-member etcd cluster of real processes on 127.0.0.1, each member's peer URL behind a
//! [`PeerProxy`] so that one member can be partitioned from the others. Which member
//! leads, and the member ids the proxies filter on, come from etcd's own JSON gateway.
//!
//! Clients speak mutual TLS with the certificates `deploy/manual-certs --etcd` makes, as the HA
//! overlay's members and replicas do. Peers speak plain HTTP: the proxies read the sending
//! member from each request's headers to partition it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::process::Process;
use super::proxy::PeerProxy;
use crate::deploy::deploy_dir;
use crate::rest::etcd::free_port;

/// The etcd binary: `CAPMOX_CHAOS_ETCD` (e.g. the 3.6 the e2e harness builds), else `etcd`
/// on the PATH (Debian's, which tests/run installs).
fn etcd_binary() -> String {
    std::env::var("CAPMOX_CHAOS_ETCD").unwrap_or_else(|_| "etcd".to_owned())
}

pub struct Member {
    pub process: Process,
    pub client_url: String,
    /// The member id as etcd's peers name it in `X-Server-From` (hex).
    pub id: String,
    proxy: PeerProxy,
}

pub struct EtcdCluster {
    pub members: Vec<Member>,
    /// The certificates `deploy/manual-certs --etcd` made.
    certs: PathBuf,
    http: reqwest::Client,
}

/// Makes etcd's CA, the members' and a client's certificate in `dir` with deploy/manual-certs.
fn make_certificates(dir: &Path) {
    let output = std::process::Command::new(deploy_dir().join("manual-certs"))
        .args(["--etcd", "--dir"])
        .arg(dir)
        .output()
        .expect("run deploy/manual-certs");
    assert!(
        output.status.success(),
        "deploy/manual-certs --etcd failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A client of the gateway with the API server's etcd client certificate.
fn gateway_client(certs: &Path) -> reqwest::Client {
    let read = |name: &str| std::fs::read(certs.join(name)).expect("certificate");
    let mut identity = read("etcd-client.crt");
    identity.extend(read("etcd-client.key"));
    reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(&read("etcd-ca.crt")).expect("ca")])
        .identity(reqwest::Identity::from_pem(&identity).expect("identity"))
        .timeout(Duration::from_secs(1))
        .build()
        .expect("client")
}

impl EtcdCluster {
    /// Starts `size` members in `dir` and waits until the cluster has a leader.
    pub async fn start(dir: &Path, size: usize) -> Self {
        let certs = dir.join("etcd-certs");
        make_certificates(&certs);
        let cert = |name: &str| certs.join(name).display().to_string();
        let mut proxies = Vec::new();
        let mut upstreams = Vec::new();
        for _ in 0..size {
            let upstream = Arc::new(Mutex::new(None));
            proxies.push(PeerProxy::start(Arc::clone(&upstream)).await);
            upstreams.push(upstream);
        }
        let initial_cluster = proxies
            .iter()
            .enumerate()
            .map(|(i, p)| format!("m{i}=http://{}", p.addr))
            .collect::<Vec<_>>()
            .join(",");
        let mut members = Vec::new();
        for (i, proxy) in proxies.into_iter().enumerate() {
            let peer_port = free_port().expect("free port");
            let client_url = format!("https://127.0.0.1:{}", free_port().expect("free port"));
            *upstreams[i].lock().expect("upstream") =
                Some(SocketAddr::from(([127, 0, 0, 1], peer_port)));
            let args = vec![
                format!("--name=m{i}"),
                format!("--data-dir={}", dir.join(format!("etcd-m{i}")).display()),
                format!("--listen-client-urls={client_url}"),
                format!("--advertise-client-urls={client_url}"),
                format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
                format!("--initial-advertise-peer-urls=http://{}", proxy.addr),
                format!("--initial-cluster={initial_cluster}"),
                "--initial-cluster-state=new".to_owned(),
                "--initial-cluster-token=capmox-chaos".to_owned(),
                format!("--cert-file={}", cert("etcd-member.crt")),
                format!("--key-file={}", cert("etcd-member.key")),
                format!("--trusted-ca-file={}", cert("etcd-ca.crt")),
                "--client-cert-auth".to_owned(),
            ];
            let process = Process::start(
                &format!("etcd m{i}"),
                etcd_binary(),
                args,
                vec![],
                dir.join(format!("etcd-m{i}.log")),
            );
            members.push(Member {
                process,
                client_url,
                id: String::new(),
                proxy,
            });
        }
        let mut cluster = Self {
            members,
            http: gateway_client(&certs),
            certs,
        };
        cluster.wait_for_leader(Duration::from_secs(30)).await;
        cluster.learn_ids().await;
        cluster
    }

    /// The `serve` flags of a replica on this cluster, as the HA overlay gives them.
    pub fn serve_flags(&self) -> Vec<String> {
        let urls = self.members.iter().map(|m| m.client_url.as_str());
        let cert = |name: &str| self.certs.join(name).display().to_string();
        vec![
            format!("--etcd-servers={}", urls.collect::<Vec<_>>().join(",")),
            format!("--etcd-cafile={}", cert("etcd-ca.crt")),
            format!("--etcd-certfile={}", cert("etcd-client.crt")),
            format!("--etcd-keyfile={}", cert("etcd-client.key")),
        ]
    }

    /// One call of etcd's JSON gateway on member `i`.
    async fn gateway(&self, i: usize, path: &str, body: Value) -> Option<Value> {
        let response = self
            .http
            .post(format!("{}{path}", self.members[i].client_url))
            .json(&body)
            .send()
            .await
            .ok()?;
        response.json().await.ok()
    }

    async fn learn_ids(&mut self) {
        for i in 0..self.members.len() {
            let status = self
                .gateway(i, "/v3/maintenance/status", json!({}))
                .await
                .expect("member status");
            self.members[i].id = hex_id(&status["header"]["member_id"]);
        }
    }

    /// The index of the member the others follow, as seen by a running member.
    pub async fn leader(&self) -> Option<usize> {
        for i in 0..self.members.len() {
            if !self.members[i].process.is_running() {
                continue;
            }
            if let Some(status) = self.gateway(i, "/v3/maintenance/status", json!({})).await {
                let leader = hex_id(&status["leader"]);
                if let Some(found) = self.members.iter().position(|m| m.id == leader) {
                    return Some(found);
                }
                // Ids are learnt after the first leader is known; answer by the member's own.
                if hex_id(&status["header"]["member_id"]) == leader {
                    return Some(i);
                }
            }
        }
        None
    }

    /// Waits until a leader is elected and a quorum read goes through.
    pub async fn wait_for_leader(&self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if self.leader().await.is_some() && self.healthy().await {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "etcd has no leader:\n{}",
                self.log_tails()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Whether a linearizable range read succeeds on some member.
    async fn healthy(&self) -> bool {
        for (i, member) in self.members.iter().enumerate() {
            if member.process.is_running()
                && self
                    // Any key: a range is a quorum read unless asked to be serializable.
                    .gateway(i, "/v3/kv/range", json!({"key": "Y2hhb3M="}))
                    .await
                    .is_some_and(|v| v.get("header").is_some())
            {
                return true;
            }
        }
        false
    }

    /// Cuts member `i` off from its peers (`true`) or heals it.
    pub fn partition(&self, i: usize, on: bool) {
        for (j, member) in self.members.iter().enumerate() {
            if i == j {
                member.proxy.isolate(on);
            } else {
                member.proxy.block_source(&self.members[i].id, on);
            }
        }
    }

    pub fn log_tails(&self) -> String {
        self.members
            .iter()
            .map(|m| m.process.log_tail(1500))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A member id as the gateway gives it (a decimal string) in the hex of `X-Server-From`.
fn hex_id(value: &Value) -> String {
    let decimal = value.as_str().unwrap_or_default();
    decimal
        .parse::<u64>()
        .map(|id| format!("{id:x}"))
        .unwrap_or_default()
}
