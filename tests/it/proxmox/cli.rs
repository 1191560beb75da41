//! `capmox-apiserver pve-sim` as a real process: it prints URL, token and fingerprint, and
//! a client using them works.

use std::process::Stdio;
use std::time::Duration;

use capmox_apiserver::proxmox::{ApiToken, Client, ClientConfig, TlsMode};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// The value after `label:` on a line of the banner.
fn field<'a>(line: &'a str, label: &str) -> Option<&'a str> {
    line.trim().strip_prefix(label).map(str::trim)
}

#[tokio::test]
async fn pve_sim_subcommand_serves_what_it_prints() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_capmox-apiserver"))
        .args([
            "pve-sim",
            "--port",
            "0",
            "--profile",
            "instant",
            "--seed",
            "single",
        ])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("binary starts");
    let stdout = child.stdout.take().expect("stdout");
    let banner = async {
        let mut lines = BufReader::new(stdout).lines();
        let (mut url, mut token, mut fingerprint) = (None, None, None);
        while let Ok(Some(line)) = lines.next_line().await {
            url = url.or(field(&line, "URL:").map(str::to_string));
            token = token.or(field(&line, "token:").map(str::to_string));
            fingerprint = fingerprint.or(field(&line, "fingerprint:").map(str::to_string));
            if let (Some(u), Some(t), Some(f)) = (&url, &token, &fingerprint) {
                return (u.clone(), t.clone(), f.clone());
            }
        }
        panic!("banner incomplete");
    };
    let (url, token, fingerprint) = tokio::time::timeout(Duration::from_secs(60), banner)
        .await
        .expect("banner printed in time");
    let client = Client::new(ClientConfig::new(
        url,
        ApiToken::parse(&token).expect("printed token parses"),
        TlsMode::Fingerprint(fingerprint),
    ))
    .expect("client");
    client.version().await.expect("version");
    let nodes = client.nodes().await.expect("nodes");
    assert_eq!(nodes.len(), 1, "the single-node seed");
    child.kill().await.expect("stop the simulator we started");
}
