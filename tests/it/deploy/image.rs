//! `deploy/image` builds the OCI image without a container daemon: read back by skopeo (an
//! independent reader of both outputs) and unpacked by umoci, the image runs as its
//! non-root user from nothing but its own root filesystem (chroot): `--version`, and `dev`
//! answering `/readyz` over TLS with the CA it generated. Two builds of the same binary and
//! commit are the same image; deploy/Containerfile describes the same image.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use capmox_apiserver::server::tls;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::deploy_dir;

const UID: u32 = 65532;

fn run(command: &mut Command) -> String {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        output.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8")
}

/// Builds the image of the test binary into `out`, at a fixed time.
fn build(out: &Path) {
    run(Command::new(deploy_dir().join("image"))
        .args([
            "--binary",
            env!("CARGO_BIN_EXE_capmox-apiserver"),
            "--output",
        ])
        .arg(out)
        .env("SOURCE_DATE_EPOCH", "1764633600"));
}

fn skopeo_config(reference: &str) -> Value {
    let text = run(Command::new("skopeo").args(["inspect", "--config", reference]));
    serde_json::from_str(&text).expect("config JSON")
}

#[tokio::test]
async fn the_image_runs_as_its_user_from_its_own_root_filesystem() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    build(&first);
    build(&second);
    let version = env!("CARGO_PKG_VERSION");
    let tag = format!("v{version}");
    let layout = first.join("oci");
    let index = |out: &Path| std::fs::read_to_string(out.join("oci/index.json")).expect("index");
    assert_eq!(
        index(&first),
        index(&second),
        "the same inputs make the same image"
    );

    // The configuration, as skopeo reads it from both outputs.
    let oci = skopeo_config(&format!("oci:{}:{tag}", layout.display()));
    let archive = first.join(format!("capmox-apiserver-{tag}.docker.tar"));
    let docker = skopeo_config(&format!("docker-archive:{}", archive.display()));
    assert_eq!(oci, docker, "the docker archive holds the same image");
    let config = &oci["config"];
    assert_eq!(config["User"], format!("{UID}:{UID}"));
    assert_eq!(
        config["Entrypoint"],
        serde_json::json!(["/usr/local/bin/capmox-apiserver"])
    );
    assert_eq!(config["Cmd"], serde_json::json!(["serve"]));
    assert!(config["ExposedPorts"].get("6443/tcp").is_some(), "{config}");
    assert_eq!(
        config["Labels"]["org.opencontainers.image.version"],
        version
    );
    assert_eq!(
        config["Labels"]["org.opencontainers.image.licenses"],
        "Apache-2.0"
    );
    assert_eq!(
        config["Labels"]["org.opencontainers.image.created"],
        "2025-12-02T00:00:00Z"
    );
    let architecture = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    assert_eq!(
        (&oci["os"], &oci["architecture"]),
        (&"linux".into(), &architecture.into())
    );
    // The Containerfile (for builders with an engine, not testable here) says the same.
    let containerfile =
        std::fs::read_to_string(deploy_dir().join("Containerfile")).expect("Containerfile");
    for line in [
        format!("USER {UID}:{UID}"),
        r#"ENTRYPOINT ["/usr/local/bin/capmox-apiserver"]"#.to_owned(),
        r#"CMD ["serve"]"#.to_owned(),
        "EXPOSE 6443/tcp".to_owned(),
        format!(r#"org.opencontainers.image.version="{version}""#),
    ] {
        assert!(containerfile.contains(&line), "Containerfile lacks {line}");
    }
    let manifest: Value = serde_json::from_str(
        &std::process::Command::new("tar")
            .args(["-xOf"])
            .arg(&archive)
            .arg("manifest.json")
            .output()
            .map(|o| String::from_utf8(o.stdout).expect("utf-8"))
            .expect("tar"),
    )
    .expect("manifest.json");
    assert_eq!(
        manifest[0]["RepoTags"][0],
        format!("docker.io/library/capmox-apiserver:{tag}")
    );

    // The root filesystem: only what the binary needs, owned as the user needs it.
    let bundle = dir.path().join("bundle");
    run(Command::new("umoci")
        .args(["unpack", "--image"])
        .arg(format!("{}:{tag}", layout.display()))
        .arg(&bundle));
    let rootfs = bundle.join("rootfs");
    use std::os::unix::fs::MetadataExt;
    let owner = |path: &str| std::fs::metadata(rootfs.join(path)).expect(path).uid();
    assert_eq!(owner("home/nonroot"), UID);
    assert_eq!(owner("var/lib/capmox-apiserver"), UID);
    assert_eq!(
        owner("usr/local/bin/capmox-apiserver"),
        0,
        "the user cannot replace it"
    );
    let mode = std::fs::metadata(rootfs.join("tmp")).expect("tmp").mode();
    assert_eq!(mode & 0o7777, 0o1777);
    assert!(rootfs.join("etc/ssl/certs/ca-certificates.crt").exists());
    assert!(!rootfs.join("bin/sh").exists(), "no shell in the image");

    let chroot = |args: &[&str]| {
        let mut command = tokio::process::Command::new("chroot");
        command
            .arg(format!("--userspec={UID}:{UID}"))
            .arg(&rootfs)
            .arg("/usr/local/bin/capmox-apiserver")
            .args(args);
        command
    };
    let output = chroot(&["--version"]).output().await.expect("chroot");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!("capmox-apiserver {version}\n"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    // `dev` in the image, on free ports; /readyz answers over TLS with the CA it generated.
    let mut dev = chroot(&[
        "dev",
        "--dir",
        "/home/nonroot/.capmox-dev",
        "--port",
        "0",
        "--sim-port",
        "0",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .kill_on_drop(true)
    .spawn()
    .expect("dev starts");
    let mut lines = BufReader::new(dev.stdout.take().expect("stdout")).lines();
    let url = tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(url) = line.strip_prefix("capmox-apiserver dev server listening on ") {
                return url.to_owned();
            }
        }
        panic!("dev exited without its banner");
    })
    .await
    .expect("banner in time");
    tls::install_default_provider();
    let ca = std::fs::read(rootfs.join("home/nonroot/.capmox-dev/ca.crt")).expect("dev's CA");
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).expect("CA"))
        .build()
        .expect("client");
    let ready = client
        .get(format!("{url}/readyz"))
        .send()
        .await
        .expect("readyz");
    assert_eq!(ready.status(), 200);
    assert_eq!(ready.text().await.expect("body"), "ok");
    dev.kill().await.expect("stop the dev server we started");
}
