//! The Python `kubernetes` client reaches `/version` with the generated kubeconfig.

use super::{Dev, python, run};

const SCRIPT: &str = r#"
import sys
from kubernetes import client, config
config.load_kube_config(config_file=sys.argv[1])
info = client.VersionApi().get_code()
print(info.git_version, info.platform)
"#;

#[tokio::test(flavor = "multi_thread")]
async fn python_client_reads_version() {
    let dev = Dev::start(|r| r).await;
    let (ok, out, err) = run(
        &python(),
        &["-c", SCRIPT, dev.kubeconfig().to_str().expect("utf8")],
    )
    .await;
    assert!(ok, "python client failed: {err}");
    assert_eq!(
        out.trim(),
        format!(
            "v{} {}/{}",
            env!("CARGO_PKG_VERSION"),
            std::env::consts::OS,
            if cfg!(target_arch = "x86_64") {
                "amd64"
            } else {
                std::env::consts::ARCH
            }
        )
    );
}
