//! docs/guide.md, the user's guide: every command block says how it is tested (and what it
//! names exists), the conditions table covers every reason the controller writes, and the
//! backup and restore blocks work as written against dev servers: an export restored into a
//! fresh store, and a copy of the embedded store's file, give back the same objects.

use std::path::{Path, PathBuf};
use std::process::Command;

use capmox_apiserver::controller::machine::phase::Phase;
use capmox_apiserver::controller::names::{DHCP_ADDRESSES_KNOWN, cluster_reason, dhcp_reason};
use capmox_apiserver::server::ApiRouter;
use capmox_apiserver::server::dev::{DevOptions, DevServer};
use capmox_apiserver::server::tls;
use serde_json::Value;

use crate::server::kubectl;

/// Where the guide puts the embedded store; the tests put it elsewhere.
const GUIDE_DATA_DIR: &str = "/var/lib/capmox-apiserver";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The guide's `sh` blocks with the comment line before each.
fn blocks() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(repo().join("docs/guide.md")).expect("guide");
    let mut blocks = Vec::new();
    let mut previous = "";
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line == "```sh" {
            let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
            blocks.push((previous.to_owned(), body.join("\n")));
        }
        if !line.trim().is_empty() {
            previous = line;
        }
    }
    blocks
}

#[test]
fn every_command_block_says_how_it_is_tested() {
    let blocks = blocks();
    assert!(blocks.len() >= 10, "{} blocks", blocks.len());
    let scenario = std::fs::read_to_string(repo().join("tests/e2e/scenario.sh")).expect("e2e");
    for (tag, body) in &blocks {
        let note = tag
            .strip_prefix("<!-- ")
            .and_then(|t| t.strip_suffix(" -->"))
            .unwrap_or_else(|| panic!("a block without a test note:\n{body}"));
        if let Some(why) = note.strip_prefix("not testable here: ") {
            assert!(why.len() > 20, "say why: {note}");
            continue;
        }
        let what = note
            .strip_prefix("tested: ")
            .unwrap_or_else(|| panic!("neither tested nor untestable: {note}"));
        // Every test file named exists; every e2e step named is a function of the scenario.
        for word in what.split([' ', ',', '(', ')']) {
            if word.starts_with("tests/") {
                assert!(repo().join(word).exists(), "{note}: no {word}");
            }
        }
        if let Some(steps) = what.strip_prefix("e2e scenario (") {
            let step = steps.split([' ', ')']).next().unwrap_or_default();
            if step.chars().all(|c| c.is_ascii_lowercase() || c == '_') && step.contains('_') {
                assert!(
                    scenario.contains(&format!("\n{step}() ")),
                    "{note}: the scenario has no {step}"
                );
            }
        }
    }
}

#[test]
fn the_conditions_table_covers_every_reason() {
    let text = std::fs::read_to_string(repo().join("docs/guide.md")).expect("guide");
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("| ")).collect();
    let row_with = |object: &str, condition: &str, reason: &str| {
        rows.iter().any(|row| {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            cells.len() > 4
                && (cells[1] == object || cells[1] == "both")
                && cells[2] == format!("`{condition}`")
                && cells[3].split(", ").any(|r| r == format!("`{reason}`"))
        })
    };
    for phase in Phase::ALL {
        assert!(
            row_with(
                "ProxmoxMachine",
                "VirtualMachineProvisioned",
                phase.reason()
            ),
            "no row for {}",
            phase.reason()
        );
    }
    for reason in [
        cluster_reason::PROVISIONED,
        cluster_reason::PROXMOX_UNREACHABLE,
        cluster_reason::CREDENTIALS_NOT_FOUND,
        cluster_reason::MISSING_CONTROL_PLANE_ENDPOINT,
        cluster_reason::DELETING,
    ] {
        assert!(
            row_with("ProxmoxCluster", "ProxmoxAvailable", reason),
            "no row for {reason}"
        );
    }
    for reason in ["InfoReported", "IssuesReported", "UnknownReported"] {
        assert!(row_with("ProxmoxMachine", "Ready", reason), "{reason}");
    }
    assert!(row_with("ProxmoxCluster", "Paused", "Paused"));
    for reason in [dhcp_reason::NO_GUEST_AGENT, dhcp_reason::REPORTED] {
        assert!(
            row_with("ProxmoxMachine", DHCP_ADDRESSES_KNOWN, reason),
            "no row for {reason}"
        );
    }
}

/// A dev server on the directory `dir` (its embedded store in `dir/data`).
async fn dev_on(dir: &Path) -> DevServer {
    tls::install_default_provider();
    let options = DevOptions {
        dir: dir.to_owned(),
        port: 0,
        ..DevOptions::default()
    };
    DevServer::start(&options, |r: ApiRouter| r)
        .await
        .expect("dev server starts")
}

/// Runs a guide block as written with bash in `cwd`, `kubectl` and `capmox-apiserver` on the
/// PATH, the embedded store at `data` instead of the guide's path.
fn run_block(body: &str, cwd: &Path, kubeconfig: Option<&Path>, data: &Path) {
    let bin = cwd.join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    for (name, target) in [
        ("kubectl", kubectl("1.33")),
        (
            "capmox-apiserver",
            PathBuf::from(env!("CARGO_BIN_EXE_capmox-apiserver")),
        ),
    ] {
        let link = bin.join(name);
        if !link.exists() {
            std::os::unix::fs::symlink(target, link).expect("link");
        }
    }
    let script = body.replace(GUIDE_DATA_DIR, &data.to_string_lossy());
    let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("PATH");
    let mut command = Command::new("bash");
    command
        .args(["-euo", "pipefail", "-c", &script])
        .current_dir(cwd)
        .env("PATH", path);
    if let Some(kubeconfig) = kubeconfig {
        command.env("KUBECONFIG", kubeconfig);
    }
    let output = command.output().expect("bash");
    assert!(
        output.status.success(),
        "{script}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Runs kubectl on `kubeconfig`; its standard output.
fn kubectl_ok(kubeconfig: &Path, args: &[&str]) -> Vec<u8> {
    let output = Command::new(kubectl("1.33"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("kubectl");
    assert!(
        output.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

fn kubectl_json(kubeconfig: &Path, args: &[&str]) -> Value {
    let args: Vec<&str> = args.iter().copied().chain(["-o", "json"]).collect();
    serde_json::from_slice(&kubectl_ok(kubeconfig, &args)).expect("json")
}

/// What a restore must give back of each object: identity, spec and status.
fn essentials(list: &Value) -> Vec<Value> {
    let mut items: Vec<Value> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|o| {
            serde_json::json!({
                "kind": o["kind"], "name": o["metadata"]["name"], "uid": o["metadata"]["uid"],
                "created": o["metadata"]["creationTimestamp"],
                "generation": o["metadata"]["generation"], "spec": o["spec"], "status": o["status"],
            })
        })
        .collect();
    items.sort_by_key(|o| format!("{}/{}", o["kind"], o["name"]));
    items
}

const KINDS: &str =
    "proxmoxclusters,proxmoxclustertemplates,proxmoxmachines,proxmoxmachinetemplates";

#[tokio::test(flavor = "multi_thread")]
async fn backup_and_restore_work_as_written() {
    let blocks = blocks();
    let block = |first: &str| {
        blocks
            .iter()
            .find(|(tag, body)| tag.contains("tests/it/guide.rs") && body.starts_with(first))
            .map(|(_, body)| body.clone())
            .unwrap_or_else(|| panic!("no tested block starting with {first}"))
    };
    let (export, import, copy) = (
        block("kubectl get proxmoxclusters"),
        block("capmox-apiserver migrate import"),
        block("cp "),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).expect("work");

    // Objects with status on a dev server.
    let first = dir.path().join("first");
    let server = dev_on(&first).await;
    let kubeconfig = server.kubeconfig.clone();
    let examples = repo().join("examples/dev");
    for file in ["10-cluster.yaml", "20-control-plane.yaml"] {
        kubectl_ok(
            &kubeconfig,
            &["apply", "-f", &examples.join(file).to_string_lossy()],
        );
    }
    kubectl_ok(
        &kubeconfig,
        &[
            "patch",
            "proxmoxmachine",
            "dev-cp-0",
            "--subresource",
            "status",
            "--type",
            "merge",
            "-p",
            r#"{"status":{"vmStatus":"ready","proxmoxNode":"pve2","initialization":{"provisioned":true}}}"#,
        ],
    );
    let before = essentials(&kubectl_json(&kubeconfig, &["get", KINDS, "-A"]));
    assert!(before.len() >= 4, "{before:?}");

    run_block(&export, &work, Some(&kubeconfig), &first.join("data"));
    assert!(work.join("capmox-backup.json").exists());
    server.server.shutdown().await;
    run_block(&copy, &work, None, &first.join("data"));

    // The export, imported into a fresh store.
    let restored = dir.path().join("restored");
    run_block(&import, &work, None, &restored.join("data"));
    let server = dev_on(&restored).await;
    let after = essentials(&kubectl_json(&server.kubeconfig, &["get", KINDS, "-A"]));
    assert_eq!(
        after, before,
        "the import gives back every object as it was"
    );
    server.server.shutdown().await;

    // The copy of the stopped server's file, put back in place.
    let copied = dir.path().join("copied");
    std::fs::create_dir_all(copied.join("data")).expect("data dir");
    std::fs::copy(
        work.join("capmox.redb.backup"),
        copied.join("data/capmox.redb"),
    )
    .expect("put the copy back");
    let server = dev_on(&copied).await;
    let after = essentials(&kubectl_json(&server.kubeconfig, &["get", KINDS, "-A"]));
    assert_eq!(after, before, "the copied file holds every object");
    server.server.shutdown().await;
}
