//! kubectl 1.27 … 1.33 against the dev server: the core flow on every version, the long tail
//! (describe, apply, diff, edit, watch, wait, delete cascades) on 1.33 and 1.28.
//!
//! kubectl ≤ 1.28 validates `create`/`apply`/`edit` and runs `explain` and `diff` through
//! protobuf OpenAPI v2 (served by `server::openapi_proto`); later versions through OpenAPI v3.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::{Api, GROUP};
use crate::server::kubectl as kubectl_binary;

/// One kubectl version with its own cache directory, working in one namespace.
pub(crate) struct Kubectl {
    binary: PathBuf,
    kubeconfig: String,
    cache: String,
    dir: PathBuf,
    minor: u32,
    namespace: String,
}

impl Kubectl {
    pub(crate) fn new(api: &Api, version: &str) -> Self {
        let minor = version
            .rsplit('.')
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or(0);
        let dir = api.dev.dir.path().join(format!("kubectl-{version}"));
        std::fs::create_dir_all(&dir).expect("dir");
        Self {
            binary: kubectl_binary(version),
            kubeconfig: api.dev.kubeconfig().to_string_lossy().into_owned(),
            cache: dir.join("cache").to_string_lossy().into_owned(),
            dir,
            minor,
            namespace: format!("k{}", version.replace('.', "")),
        }
    }

    /// The same kubectl (binary, cache, directory) working in `namespace`.
    pub(crate) fn in_namespace(&self, namespace: &str) -> Self {
        Self {
            binary: self.binary.clone(),
            kubeconfig: self.kubeconfig.clone(),
            cache: self.cache.clone(),
            dir: self.dir.clone(),
            minor: self.minor,
            namespace: namespace.to_owned(),
        }
    }

    pub(crate) fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&self.binary);
        command
            .args(["--kubeconfig", &self.kubeconfig, "--cache-dir", &self.cache])
            .args(["--namespace", &self.namespace])
            .args(args)
            .env_remove("KUBECONFIG");
        command
    }

    pub(crate) async fn run_with(
        &self,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> (bool, String, String) {
        let mut command = self.command(args);
        for (k, v) in env {
            command.env(k, v);
        }
        let output = command.output().await.expect("kubectl runs");
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    pub(crate) async fn run(&self, args: &[&str]) -> (bool, String, String) {
        self.run_with(args, &[]).await
    }

    /// Runs and expects success; the standard output.
    pub(crate) async fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args).await;
        assert!(
            ok,
            "kubectl 1.{} {args:?} failed:\n{err}\n{out}",
            self.minor
        );
        out
    }

    /// Runs and expects failure; the standard error.
    pub(crate) async fn fails(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args).await;
        assert!(!ok, "kubectl 1.{} {args:?} should fail:\n{out}", self.minor);
        err
    }

    /// Writes a manifest into the working directory; its path.
    pub(crate) fn manifest(&self, file: &str, text: &str) -> String {
        let path = self.dir.join(file);
        std::fs::write(&path, text).expect("write manifest");
        path.to_string_lossy().into_owned()
    }

    pub(crate) async fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&all).await).expect("kubectl JSON")
    }
}

fn machine_yaml(name: &str, sockets: u32, labels: &str) -> String {
    format!(
        "apiVersion: {GROUP}/v1alpha2\nkind: ProxmoxMachine\nmetadata:\n  name: {name}\n  labels:\n    cluster.x-k8s.io/cluster-name: demo\n{labels}spec:\n  sourceNode: pve1\n  templateID: 100\n  numSockets: {sockets}\n  network:\n    networkDevices:\n    - name: net0\n      bridge: vmbr0\n      model: virtio\n"
    )
}

async fn core_flow(version: &str) {
    let api = Api::start().await;
    let k = Kubectl::new(&api, version);

    let resources = k.ok(&["api-resources", "--api-group", GROUP]).await;
    for expected in [
        "proxmoxmachines",
        "moxm",
        "pmt",
        "pct",
        "ProxmoxClusterTemplate",
    ] {
        assert!(resources.contains(expected), "{version}: {resources}");
    }
    let versions = k.ok(&["api-versions"]).await;
    assert!(
        versions.contains(&format!("{GROUP}/v1alpha1")),
        "{versions}"
    );
    assert!(
        versions.contains(&format!("{GROUP}/v1alpha2")),
        "{versions}"
    );

    let file = k.manifest("core.yaml", &machine_yaml("core", 2, ""));
    let created = k.ok(&["create", "-f", &file]).await;
    assert!(
        created.contains(&format!("proxmoxmachine.{GROUP}/core created")),
        "{created}"
    );

    let table = k.ok(&["get", "moxm"]).await;
    let header = table.lines().next().unwrap_or_default();
    assert!(
        header.contains("NAME") && header.contains("CLUSTER"),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("core ") && l.contains("demo")),
        "{table}"
    );
    let wide = k.ok(&["get", "moxm", "core", "-o", "wide"]).await;
    assert!(wide.contains("PROVIDER_ID"), "{wide}");
    let yaml = k.ok(&["get", "moxm", "core", "-o", "yaml"]).await;
    assert!(
        yaml.contains("kind: ProxmoxMachine") && yaml.contains("uid:"),
        "{yaml}"
    );
    let object = k.json(&["get", "moxm", "core"]).await;
    assert_eq!(object["spec"]["numSockets"], 2);
    let jsonpath = k
        .ok(&[
            "get",
            "moxm",
            "core",
            "-o",
            "jsonpath={.metadata.generation}/{.spec.numSockets}",
        ])
        .await;
    assert_eq!(jsonpath, "1/2");
    let columns = k
        .ok(&[
            "get",
            "moxm",
            "-o",
            "custom-columns=NAME:.metadata.name,SOCKETS:.spec.numSockets",
        ])
        .await;
    assert!(
        columns
            .lines()
            .any(|l| l.split_whitespace().eq(["core", "2"])),
        "{columns}"
    );

    assert!(
        k.ok(&["label", "moxm", "core", "tier=web"])
            .await
            .contains("labeled")
    );
    // kubectl 1.27 prints "annotate", later versions "annotated".
    assert!(
        k.ok(&["annotate", "moxm", "core", "note=hi"])
            .await
            .contains("annotate")
    );
    let selected = k.ok(&["get", "moxm", "-l", "tier=web", "-o", "name"]).await;
    assert_eq!(selected.trim(), format!("proxmoxmachine.{GROUP}/core"));
    k.ok(&[
        "patch",
        "moxm",
        "core",
        "--type=merge",
        "-p",
        r#"{"spec":{"numSockets":3}}"#,
    ])
    .await;
    k.ok(&[
        "patch",
        "moxm",
        "core",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/spec/numCores","value":4}]"#,
    ])
    .await;
    let strategic = k
        .fails(&[
            "patch",
            "moxm",
            "core",
            "-p",
            r#"{"spec":{"numSockets":5}}"#,
        ])
        .await;
    assert!(strategic.contains("is not supported"), "{strategic}");
    let patched = k.json(&["get", "moxm", "core"]).await;
    assert_eq!(patched["spec"]["numSockets"], 3);
    assert_eq!(patched["spec"]["numCores"], 4);
    assert_eq!(patched["metadata"]["generation"], 3);
    assert_eq!(patched["metadata"]["labels"]["tier"], "web");

    // `replace -f` of a manifest (no uid, creationTimestamp or resourceVersion: kubectl
    // fills in the resourceVersion, the server keeps the rest), then `replace --force`
    // (delete and create: a new uid).
    let before = patched["metadata"].clone();
    let replacement = k.manifest("replace.yaml", &machine_yaml("core", 4, "    tier: web\n"));
    let replaced = k.ok(&["replace", "-f", &replacement]).await;
    assert!(replaced.contains("replaced"), "{version}: {replaced}");
    let after = k.json(&["get", "moxm", "core"]).await;
    assert_eq!(after["spec"]["numSockets"], 4);
    assert_eq!(after["metadata"]["uid"], before["uid"]);
    assert_eq!(
        after["metadata"]["creationTimestamp"],
        before["creationTimestamp"]
    );
    assert_eq!(after["metadata"]["generation"], 4);
    let forced = k.ok(&["replace", "--force", "-f", &replacement]).await;
    assert!(forced.contains("replaced"), "{version}: {forced}");
    let recreated = k.json(&["get", "moxm", "core"]).await;
    assert_ne!(recreated["metadata"]["uid"], before["uid"]);
    assert_eq!(recreated["metadata"]["generation"], 1);
    assert_eq!(recreated["spec"]["numSockets"], 4);

    // The same object in v1alpha1.
    let v1 = k
        .ok(&[
            "get",
            &format!("proxmoxmachines.v1alpha1.{GROUP}"),
            "core",
            "-o",
            "jsonpath={.apiVersion}",
        ])
        .await;
    assert_eq!(v1, format!("{GROUP}/v1alpha1"));

    if k.minor >= 29 {
        let explain = k.ok(&["explain", "moxm.spec.network"]).await;
        assert!(explain.contains("networkDevices"), "{explain}");
        let explain_v1 = k
            .ok(&[
                "explain",
                "moxm.spec.network",
                "--api-version",
                &format!("{GROUP}/v1alpha1"),
            ])
            .await;
        assert!(explain_v1.contains("additionalDevices"), "{explain_v1}");
    }

    let deleted = k.ok(&["delete", "moxm", "core"]).await;
    assert!(deleted.contains("deleted"), "{deleted}");
    let gone = k.fails(&["get", "moxm", "core"]).await;
    assert!(gone.contains("NotFound"), "{gone}");
}

macro_rules! core_flow_tests {
    ($($name:ident => $version:literal),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread")]
        async fn $name() {
            core_flow($version).await;
        }
    )*};
}

core_flow_tests! {
    core_flow_1_27 => "1.27",
    core_flow_1_28 => "1.28",
    core_flow_1_29 => "1.29",
    core_flow_1_30 => "1.30",
    core_flow_1_31 => "1.31",
    core_flow_1_32 => "1.32",
    core_flow_1_33 => "1.33",
}

/// `kubectl get <resource> -w` prints an ADDED line containing `name` within 20 s.
pub(crate) async fn watch_shows(
    k: &Kubectl,
    resource: &str,
    trigger: impl Future<Output = ()>,
    name: &str,
) {
    let mut child = k
        .command(&["get", resource, "-w", "--output-watch-events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("kubectl get -w");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    // The header arrives once the initial list is done; then the watch is open.
    let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("kubectl prints the initial list");
    assert!(first.is_ok());
    trigger.await;
    let seen = tokio::time::timeout(Duration::from_secs(20), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains(name) && line.contains("ADDED") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(seen, Ok(true), "kubectl get -w shows {name}");
    child.kill().await.expect("stop kubectl");
}

async fn long_tail(version: &str) {
    let api = Api::start().await;
    let k = Kubectl::new(&api, version);

    let file = k.manifest("tail.yaml", &machine_yaml("tail", 2, "    app: tail\n"));
    assert!(k.ok(&["apply", "-f", &file]).await.contains("created"));
    let changed = k.manifest("tail.yaml", &machine_yaml("tail", 6, "    app: tail\n"));
    let (same, out, err) = k.run(&["diff", "-f", &changed]).await;
    assert!(!same, "diff shows the change: {err}");
    assert!(out.contains("numSockets: 6"), "{out}");
    assert!(
        k.ok(&["apply", "-f", &changed])
            .await
            .contains("configured")
    );
    assert_eq!(
        k.json(&["get", "moxm", "tail"]).await["spec"]["numSockets"],
        6
    );

    let described = k.ok(&["describe", "moxm", "tail"]).await;
    assert!(
        described.contains("Name:") && described.contains("tail"),
        "{described}"
    );
    assert!(described.contains("Num Sockets:"), "{described}");

    let (ok, _, err) = k
        .run_with(
            &["edit", "moxm", "tail"],
            &[("KUBE_EDITOR", "sed -i -e s/numSockets:.6/numSockets:\\ 8/")],
        )
        .await;
    assert!(ok, "edit: {err}");
    assert_eq!(
        k.json(&["get", "moxm", "tail"]).await["spec"]["numSockets"],
        8
    );

    let listed = k.ok(&["get", "cluster-api", "-A"]).await;
    assert!(listed.contains("tail"), "{listed}");

    // get -w shows objects as they are created.
    let second = k.manifest("second.yaml", &machine_yaml("second", 1, ""));
    watch_shows(
        &k,
        "moxm",
        async {
            k.ok(&["create", "-f", &second]).await;
        },
        "second",
    )
    .await;

    // wait --for a condition written meanwhile, and for deletion.
    let waiter = k.run(&[
        "wait",
        "moxm/tail",
        "--for=jsonpath={.metadata.labels.ready}=yes",
        "--timeout=30s",
    ]);
    let labeller = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        k.ok(&["label", "moxm", "tail", "ready=yes"]).await;
    };
    let ((ok, _, err), ()) = tokio::join!(waiter, labeller);
    assert!(ok, "wait --for=jsonpath: {err}");
    let waiter = k.run(&["wait", "moxm/second", "--for=delete", "--timeout=30s"]);
    let deleter = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        k.ok(&["delete", "moxm", "second", "--wait=false"]).await;
    };
    let ((ok, _, err), ()) = tokio::join!(waiter, deleter);
    assert!(ok, "wait --for=delete: {err}");

    // Cascading deletes: foreground and orphan leave the object terminating with the
    // garbage collector's finalizer (no garbage collector runs in dev), background removes it.
    for (cascade, finalizer) in [("foreground", "foregroundDeletion"), ("orphan", "orphan")] {
        let name = format!("cascade-{cascade}");
        let path = k.manifest(&format!("{name}.yaml"), &machine_yaml(&name, 1, ""));
        k.ok(&["create", "-f", &path]).await;
        let cascade_flag = format!("--cascade={cascade}");
        k.ok(&["delete", "moxm", &name, &cascade_flag, "--wait=false"])
            .await;
        let object = k.json(&["get", "moxm", &name]).await;
        assert_eq!(object["metadata"]["finalizers"][0], finalizer, "{object}");
        assert!(object["metadata"]["deletionTimestamp"].is_string());
    }
    let deleted = k
        .ok(&["delete", "moxm", "tail", "--cascade=background"])
        .await;
    assert!(deleted.contains("deleted"), "{deleted}");
    k.fails(&["get", "moxm", "tail"]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn long_tail_1_33() {
    long_tail("1.33").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn long_tail_1_28() {
    long_tail("1.28").await;
}
