//! kubectl reaches the server through the aggregator stand-in.

use super::front_proxy::ProxiedUser;
use super::{Setup, allow_users};
use crate::server::{kubectl, run};

/// `kubectl.1.33 get --raw <path>` against `url` with no credentials of its own.
async fn get_raw(setup: &Setup, url: &str, path: &str) -> (bool, String, String) {
    kubectl_at(setup, url, &["get", "--raw", path]).await
}

/// `kubectl.1.33 <args>` against `url` (an aggregator stand-in) with no credentials of its
/// own: success, stdout and stderr.
pub(super) async fn kubectl_at(setup: &Setup, url: &str, args: &[&str]) -> (bool, String, String) {
    let kubeconfig = setup
        .dir
        .path()
        .join(format!("proxy-{}.kubeconfig", url.len()));
    let document = serde_json::json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "proxy", "cluster": {"server": url}}],
        "users": [{"name": "nobody", "user": {}}],
        "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": "nobody"}}],
        "current-context": "proxy",
    });
    std::fs::write(&kubeconfig, document.to_string()).expect("kubeconfig");
    let cache = setup.dir.path().join("kubectl-cache");
    let mut all = vec![
        "--kubeconfig",
        kubeconfig.to_str().expect("utf8"),
        "--cache-dir",
        cache.to_str().expect("utf8"),
    ];
    all.extend_from_slice(args);
    run(&kubectl("1.33"), &all).await
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_through_the_front_proxy() {
    let setup = Setup::start(|_| {}).await;
    setup.kube.set_policy(allow_users(&["alice"]));
    let alice = setup
        .aggregator(ProxiedUser::named("alice", &["system:authenticated"]))
        .await;
    let carol = setup
        .aggregator(ProxiedUser::named("carol", &["system:authenticated"]))
        .await;

    let (ok, out, err) = get_raw(&setup, &alice.url, "/version").await;
    assert!(ok, "{err}");
    let version: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        version["gitVersion"],
        format!("v{}", env!("CARGO_PKG_VERSION"))
    );

    let path = "/apis/infrastructure.cluster.x-k8s.io/v1alpha2/namespaces/default/proxmoxmachines";
    let (ok, _, err) = get_raw(&setup, &carol.url, path).await;
    assert!(!ok);
    assert!(
        err.contains(
            "Error from server (Forbidden): proxmoxmachines.infrastructure.cluster.x-k8s.io is forbidden: \
             User \"carol\" cannot list resource \"proxmoxmachines\" in API group \
             \"infrastructure.cluster.x-k8s.io\" in the namespace \"default\""
        ),
        "{err}"
    );
}
