//! Differential conformance on other providers' kinds: the same requests on CRD kinds of our
//! group-versions sent to a kube-apiserver that serves them from their CRDs (the peer's) and to
//! ours, where our APIServices hold the group-versions and this server serves them from the
//! same CRDs. `tests/e2e/run differential` installs the CRDs of two real providers on both
//! (docs/e2e.md, "Co-tenants") and runs it; `COTENANT_REQUESTS` (default 2,000) and
//! `DIFFERENTIAL_SEED` size and seed it, `COTENANT_NAMESPACE` (default `cotenants`) is where. The divergences docs/api.md lists under "Differences
//! from kube-apiserver's CRD handler" are counted as documented, any other fails.

mod crds;
mod kept_by_kube;
mod runner;
mod schema;

use super::documented;
use super::env_number;
use super::side::Pair;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the pair with co-tenant CRDs: run `tests/e2e/run differential`"]
async fn differential() {
    let dirs = crds::directories();
    let kinds = crds::kinds(&dirs);
    assert!(
        !kinds.is_empty(),
        "no CRD in COTENANT_CRDS has a kind served only in our group-versions"
    );
    let templates = crds::template_objects(&dirs, &kinds);
    let target = env_number("COTENANT_REQUESTS", 2_000) as usize;
    let seed = env_number("DIFFERENTIAL_SEED", 1);
    let documented = documented::load(documented::FROM_KUBE_CRDS);
    let namespace = std::env::var("COTENANT_NAMESPACE").unwrap_or_else(|_| "cotenants".into());
    let mut runner =
        runner::Runner::new(Pair::from_env(), namespace, kinds, seed, documented).await;
    runner.run(target, templates).await;
    let report = runner.report();
    println!("{report}");
    assert!(
        report.undocumented == 0,
        "{} undocumented divergences from kube-apiserver's CRD handler (above): fix them, or \
         list them in docs/api.md with the reason",
        report.undocumented
    );
}
