//! What kube-apiserver's aggregator returns of our answers' headers. Its own filters set
//! `Audit-Id` and `Cache-Control` on every answer it writes, and its proxy adds the backend's
//! headers beside them: a header both set reaches the client twice.

use capmox_apiserver::api::{Kind, Version};
use reqwest::Method;

use super::side::{self, Pair, Side};

/// How many times each of kube's per-answer headers came back for a GET of `path`.
async fn header_counts(side: &Side, path: &str) -> [(&'static str, usize); 2] {
    let response = side
        .request(Method::GET, path)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{}: GET {path}: {e}", side.name));
    ["audit-id", "cache-control"]
        .map(|name| (name, response.headers().get_all(name).iter().count()))
}

#[tokio::test]
#[ignore = "needs the pair: run `tests/e2e/run differential`"]
async fn each_header_comes_back_once_as_from_kubes_crd_handler() {
    let pair = Pair::from_env();
    let collection = side::path(Kind::ProxmoxMachine, Version::V1alpha2, "default", None);
    let missing = side::path(
        Kind::ProxmoxMachine,
        Version::V1alpha2,
        "default",
        Some("nobody-made-me"),
    );
    for path in [&collection, &missing] {
        let ours = header_counts(&pair.ours, path).await;
        let peer = header_counts(&pair.peer, path).await;
        assert_eq!(
            ours, peer,
            "GET {path}: header counts, ours then the peer's"
        );
        assert_eq!(ours, [("audit-id", 1), ("cache-control", 1)], "GET {path}");
    }
}
