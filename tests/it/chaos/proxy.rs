//! A TCP proxy in front of one etcd member's peer URL that can drop traffic by source, so
//! that the nemesis can cut one member off from the others on 127.0.0.1 (no network
//! namespaces or firewall rules are needed, or allowed, on this machine).
//!
//! All members share one view of the peer URLs, so a member cannot be given its own path to
//! each peer. But etcd's peer transport (rafthttp) names the sender of every stream and
//! pipeline request in the `X-Server-From` header (its member id in hex). The proxy reads the
//! request head, keeps the source, and forwards the bytes untouched. Isolating member `m`
//! means: its own proxy drops everything, and every other proxy drops what `m` sends. A
//! connection whose source becomes blocked is closed at once, as a partition would break it.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The most of a request head read to find the sender (rafthttp's heads are small).
const HEAD_LIMIT: usize = 16 << 10;

/// What the proxy lets through.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Rules {
    /// Drop everything (the member behind this proxy is isolated).
    all: bool,
    /// Member ids (hex, as in `X-Server-From`) whose traffic is dropped.
    sources: BTreeSet<String>,
}

impl Rules {
    fn blocks(&self, source: Option<&str>) -> bool {
        self.all || source.is_some_and(|s| self.sources.contains(s))
    }
}

/// A running proxy; dropping it stops accepting (open connections end with the test).
pub struct PeerProxy {
    pub addr: SocketAddr,
    rules: watch::Sender<Rules>,
    accept: JoinHandle<()>,
}

impl PeerProxy {
    /// Listens on a free loopback port, forwarding to `upstream` once set with
    /// [`PeerProxy::forward_to`] (the member's own port is chosen after the proxy's).
    pub async fn start(upstream: Arc<Mutex<Option<SocketAddr>>>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let (rules, _) = watch::channel(Rules::default());
        let watcher = rules.subscribe();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let target = *upstream.lock().expect("upstream");
                if let Some(target) = target {
                    tokio::spawn(relay(client, target, watcher.clone()));
                }
            }
        });
        Self {
            addr,
            rules,
            accept,
        }
    }

    /// Drops all traffic through this proxy (its member is cut off) or none.
    pub fn isolate(&self, on: bool) {
        self.rules.send_modify(|r| r.all = on);
    }

    /// Drops (or lets through again) what member `source` sends through this proxy.
    pub fn block_source(&self, source: &str, on: bool) {
        self.rules.send_modify(|r| {
            if on {
                r.sources.insert(source.to_owned());
            } else {
                r.sources.remove(source);
            }
        });
    }
}

impl Drop for PeerProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Forwards one connection while its source is let through.
async fn relay(mut client: TcpStream, target: SocketAddr, mut rules: watch::Receiver<Rules>) {
    let mut head = Vec::with_capacity(1024);
    let mut buffer = [0u8; 4096];
    // Read until the end of the request head (or the limit), to learn the sender.
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < HEAD_LIMIT {
        match client.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buffer[..n]),
        }
    }
    let source = sender(&head);
    if rules.borrow().blocks(source.as_deref()) {
        return;
    }
    let Ok(mut upstream) = TcpStream::connect(target).await else {
        return;
    };
    if upstream.write_all(&head).await.is_err() {
        return;
    }
    let copy = tokio::io::copy_bidirectional(&mut client, &mut upstream);
    let cut = rules.wait_for(|r| r.blocks(source.as_deref()));
    tokio::select! {
        _ = copy => {}
        _ = cut => {}
    }
}

/// The `X-Server-From` header of a request head, lowercased.
fn sender(head: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(head);
    text.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("x-server-from")
            .then(|| value.trim().to_ascii_lowercase())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sender_is_read_from_the_request_head() {
        let head = b"GET /raft/stream/msgappv2/8e9e05c52164694d HTTP/1.1\r\nHost: x\r\nX-Server-From: 8E9E05C52164694D\r\n\r\n";
        assert_eq!(sender(head).as_deref(), Some("8e9e05c52164694d"));
        assert_eq!(sender(b"GET /health HTTP/1.1\r\n\r\n"), None);
    }

    #[tokio::test]
    async fn a_blocked_source_is_cut_and_others_pass() {
        let echo = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let echo_addr = echo.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut s, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        let proxy = PeerProxy::start(Arc::new(Mutex::new(Some(echo_addr)))).await;
        let request = |from: &str| format!("POST /raft HTTP/1.1\r\nX-Server-From: {from}\r\n\r\n");
        let mut a = TcpStream::connect(proxy.addr).await.expect("connect");
        a.write_all(request("a").as_bytes()).await.expect("write");
        let mut echoed = vec![0u8; request("a").len()];
        a.read_exact(&mut echoed)
            .await
            .expect("echo through the proxy");

        proxy.block_source("a", true);
        let mut rest = Vec::new();
        let read =
            tokio::time::timeout(std::time::Duration::from_secs(5), a.read_to_end(&mut rest));
        assert!(
            read.await.is_ok(),
            "the open connection of a blocked source is closed"
        );
        let mut b = TcpStream::connect(proxy.addr).await.expect("connect");
        b.write_all(request("b").as_bytes()).await.expect("write");
        let mut echoed = vec![0u8; request("b").len()];
        b.read_exact(&mut echoed)
            .await
            .expect("another source still passes");

        proxy.isolate(true);
        let mut c = TcpStream::connect(proxy.addr).await.expect("connect");
        c.write_all(request("b").as_bytes()).await.expect("write");
        let mut rest = Vec::new();
        let n = c.read_to_end(&mut rest).await.unwrap_or(0);
        assert_eq!(n, 0, "an isolated member's proxy forwards nothing");
    }
}
