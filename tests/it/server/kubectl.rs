//! kubectl 1.27 and 1.33 reach the dev server with the generated kubeconfig.

use super::{Dev, kubectl, run};

/// `kubectl.<version> get --raw <path>` with the dev kubeconfig: (success, stdout, stderr).
async fn get_raw(dev: &Dev, version: &str, path: &str) -> (bool, String, String) {
    let cache = dev.dir.path().join(format!("cache-{version}"));
    let kubeconfig = dev.kubeconfig().to_str().expect("utf8 path");
    let cache = cache.to_str().expect("utf8 path");
    run(
        &kubectl(version),
        &[
            "--kubeconfig",
            kubeconfig,
            "--cache-dir",
            cache,
            "get",
            "--raw",
            path,
        ],
    )
    .await
}

async fn raw(dev: &Dev, version: &str, path: &str) -> String {
    let (ok, out, err) = get_raw(dev, version, path).await;
    assert!(ok, "kubectl {version} get --raw {path} failed: {err}");
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_reads_health_and_version() {
    let dev = Dev::start(|r| r).await;
    for version in ["1.27", "1.33"] {
        assert_eq!(raw(&dev, version, "/healthz").await, "ok");
        assert_eq!(
            raw(&dev, version, "/readyz?verbose").await,
            "[+]ping ok\n[+]storage ok\n[+]shutdown ok\nreadyz check passed\n"
        );
        let info: serde_json::Value =
            serde_json::from_str(&raw(&dev, version, "/version").await).expect("json");
        assert_eq!(
            info["gitVersion"],
            format!("v{}", env!("CARGO_PKG_VERSION"))
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_shows_kube_status_errors() {
    let dev = Dev::start(|r| r).await;
    let (ok, _, err) = get_raw(&dev, "1.33", "/no/such/path").await;
    assert!(!ok);
    assert!(
        err.contains(
            "Error from server (NotFound): the server could not find the requested resource"
        ),
        "{err}"
    );
}
