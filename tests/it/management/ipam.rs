//! The emulated in-cluster IPAM provider against the dev server: claims get addresses
//! from their pool, nothing is allocated twice (also across a loop restart), a full pool
//! says so, deleted claims release their address, and the gates (cluster, pool) hold.

use std::collections::BTreeSet;
use std::time::Duration;

use capmox_apiserver::emulation::ipam::{PROTECT_FINALIZER, RELEASE_FINALIZER};
use capmox_apiserver::emulation::spawn_ipam;
use capmox_apiserver::management::kube::kinds::Kind;
use serde_json::{Value, json};

use super::{Env, Running, capi_object, eventually, never, proxmox_backed_cluster};

const NS: &str = "ipam";

fn pool(kind: &str, namespace: Option<&str>, name: &str, addresses: &[&str]) -> Value {
    let mut metadata = json!({"name": name});
    if let Some(ns) = namespace {
        metadata["namespace"] = json!(ns);
    }
    json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": kind, "metadata": metadata,
        "spec": {"addresses": addresses, "prefix": 24, "gateway": "10.0.0.1"},
    })
}

fn claim(namespace: &str, name: &str, pool_kind: &str, pool: &str, cluster: Option<&str>) -> Value {
    let mut claim = json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddressClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": pool_kind, "name": pool}},
    });
    if let Some(cluster) = cluster {
        claim["spec"]["clusterName"] = json!(cluster);
    }
    claim
}

/// The address a claim was given, once its status names it and it is Ready.
async fn allocated(env: &Env, namespace: &str, name: &str) -> String {
    eventually(&format!("an address for {namespace}/{name}"), || async {
        let claim = env.get(Kind::IpAddressClaim, namespace, name).await?;
        let address_name = claim["status"]["addressRef"]["name"].as_str()?.to_string();
        let ready = claim["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        let address = env.get(Kind::IpAddress, namespace, &address_name).await?;
        ready.then(|| address["spec"]["address"].as_str().map(str::to_string))?
    })
    .await
}

/// The `Ready` condition of a claim once it has the given reason.
async fn ready_reason(env: &Env, namespace: &str, name: &str, reason: &str) -> Value {
    eventually(
        &format!("{namespace}/{name} Ready reason {reason}"),
        || async {
            let claim = env.get(Kind::IpAddressClaim, namespace, name).await?;
            claim["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "Ready" && c["reason"] == reason)
                .cloned()
        },
    )
    .await
}

/// Every allocated address of the server, as `namespace/name → address`.
async fn all_addresses(env: &Env) -> Vec<(String, String)> {
    env.objects
        .list(Kind::IpAddress, None, "")
        .await
        .expect("list addresses")
        .iter()
        .map(|a| {
            (
                format!(
                    "{}/{}",
                    a["metadata"]["namespace"].as_str().unwrap_or_default(),
                    a["metadata"]["name"].as_str().unwrap_or_default()
                ),
                a["spec"]["address"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

fn assert_distinct(addresses: &[(String, String)]) {
    let unique: BTreeSet<&String> = addresses.iter().map(|(_, a)| a).collect();
    assert_eq!(
        unique.len(),
        addresses.len(),
        "an address was handed out twice: {addresses:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn claims_get_addresses_and_exhaustion_and_release_work() {
    let env = Env::start().await;
    let pool = env
        .create(
            Kind::InClusterIpPool,
            pool("InClusterIPPool", Some(NS), "p", &["10.0.0.1-10.0.0.4"]),
        )
        .await;
    env.create(Kind::Cluster, proxmox_backed_cluster(NS, "c1"))
        .await;
    let ipam = Running::start(&env.client, spawn_ipam);
    let a = env
        .create(
            Kind::IpAddressClaim,
            claim(NS, "a", "InClusterIPPool", "p", Some("c1")),
        )
        .await;
    env.create(
        Kind::IpAddressClaim,
        claim(NS, "b", "InClusterIPPool", "p", Some("c1")),
    )
    .await;
    assert_eq!(allocated(&env, NS, "a").await, "10.0.0.2");
    assert_eq!(allocated(&env, NS, "b").await, "10.0.0.3");

    // The address is what the in-cluster provider creates.
    let address = env.get(Kind::IpAddress, NS, "a").await.expect("address a");
    assert_eq!(
        address["spec"],
        json!({"address": "10.0.0.2", "prefix": 24, "gateway": "10.0.0.1",
               "claimRef": {"name": "a"},
               "poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "p"}})
    );
    assert_eq!(
        address["metadata"]["labels"],
        json!({"cluster.x-k8s.io/cluster-name": "c1"})
    );
    assert_eq!(
        address["metadata"]["finalizers"],
        json!([PROTECT_FINALIZER])
    );
    let owners = address["metadata"]["ownerReferences"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(owners.len(), 2, "{owners:?}");
    assert_eq!(owners[0]["kind"], "IPAddressClaim");
    assert_eq!(owners[0]["uid"], a["metadata"]["uid"]);
    assert_eq!(owners[0]["controller"], true);
    assert_eq!(owners[1]["kind"], "InClusterIPPool");
    assert_eq!(owners[1]["uid"], pool["metadata"]["uid"]);
    assert_eq!(owners[1]["controller"], false);
    assert_eq!(owners[1]["blockOwnerDeletion"], true);
    let claimed = env
        .get(Kind::IpAddressClaim, NS, "a")
        .await
        .expect("claim a");
    assert_eq!(
        claimed["metadata"]["finalizers"],
        json!([RELEASE_FINALIZER])
    );

    // Fill the pool, then one more.
    env.create(
        Kind::IpAddressClaim,
        claim(NS, "c", "InClusterIPPool", "p", Some("c1")),
    )
    .await;
    assert_eq!(allocated(&env, NS, "c").await, "10.0.0.4");
    env.create(
        Kind::IpAddressClaim,
        claim(NS, "d", "InClusterIPPool", "p", Some("c1")),
    )
    .await;
    let exhausted = ready_reason(&env, NS, "d", "PoolExhausted").await;
    assert_eq!(exhausted["status"], "False");
    assert!(
        exhausted["message"]
            .as_str()
            .is_some_and(|m| m.contains("InClusterIPPool ipam/p") && m.contains("no free address")),
        "{exhausted}"
    );
    assert!(env.get(Kind::IpAddress, NS, "d").await.is_none());

    // Deleting a claim releases its address (finalizers first), and the waiting claim
    // gets it.
    env.delete(Kind::IpAddressClaim, NS, "a").await;
    eventually("claim a and its address gone", || async {
        let gone = env.get(Kind::IpAddressClaim, NS, "a").await.is_none()
            && env.get(Kind::IpAddress, NS, "a").await.is_none();
        gone.then_some(())
    })
    .await;
    assert_eq!(allocated(&env, NS, "d").await, "10.0.0.2");
    assert_distinct(&all_addresses(&env).await);

    // Growing the pool serves a new claim at once.
    env.edit(Kind::InClusterIpPool, NS, "p", false, |p| {
        p["spec"]["addresses"] = json!(["10.0.0.1-10.0.0.5"]);
    })
    .await;
    env.create(
        Kind::IpAddressClaim,
        claim(NS, "e", "InClusterIPPool", "p", Some("c1")),
    )
    .await;
    assert_eq!(allocated(&env, NS, "e").await, "10.0.0.5");
    ipam.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_never_allocates_twice_and_releases_orphans() {
    let env = Env::start().await;
    env.create(
        Kind::InClusterIpPool,
        pool("InClusterIPPool", Some(NS), "p", &["10.0.0.0/29"]),
    )
    .await;
    let ipam = Running::start(&env.client, spawn_ipam);
    for name in ["r1", "r2", "r3"] {
        env.create(
            Kind::IpAddressClaim,
            claim(NS, name, "InClusterIPPool", "p", None),
        )
        .await;
    }
    let r1 = allocated(&env, NS, "r1").await;
    let r2 = allocated(&env, NS, "r2").await;
    let r3 = allocated(&env, NS, "r3").await;
    assert_eq!([&r1, &r2, &r3], ["10.0.0.2", "10.0.0.3", "10.0.0.4"]);
    ipam.stop().await;

    // While no provider runs: new claims, and a claim force-removed (finalizer dropped by
    // hand, then deleted) whose address is left behind.
    for name in ["r4", "r5"] {
        env.create(
            Kind::IpAddressClaim,
            claim(NS, name, "InClusterIPPool", "p", None),
        )
        .await;
    }
    env.edit(Kind::IpAddressClaim, NS, "r2", false, |c| {
        c["metadata"]["finalizers"] = json!([]);
    })
    .await;
    env.delete(Kind::IpAddressClaim, NS, "r2").await;
    assert!(env.get(Kind::IpAddressClaim, NS, "r2").await.is_none());
    assert!(env.get(Kind::IpAddress, NS, "r2").await.is_some());

    let ipam = Running::start(&env.client, spawn_ipam);
    let r4 = allocated(&env, NS, "r4").await;
    let r5 = allocated(&env, NS, "r5").await;
    eventually("the orphaned address released", || async {
        env.get(Kind::IpAddress, NS, "r2")
            .await
            .is_none()
            .then_some(())
    })
    .await;
    let addresses = all_addresses(&env).await;
    assert_distinct(&addresses);
    assert_eq!(addresses.len(), 4, "{addresses:?}");
    // The survivors keep theirs; the new claims got free ones: .5 and .6 (the /29's last
    // usable addresses) or r2's .3 once it was released.
    let by_claim: std::collections::BTreeMap<_, _> = addresses.into_iter().collect();
    assert_eq!(by_claim.get("ipam/r1"), Some(&r1));
    assert_eq!(by_claim.get("ipam/r3"), Some(&r3));
    for taken in [&r4, &r5] {
        assert!(
            ["10.0.0.3", "10.0.0.5", "10.0.0.6"].contains(&taken.as_str()),
            "{taken}"
        );
    }
    ipam.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn global_pools_serve_every_namespace_without_duplicates() {
    let env = Env::start().await;
    env.create(
        Kind::GlobalInClusterIpPool,
        pool(
            "GlobalInClusterIPPool",
            None,
            "shared",
            &["10.0.0.10-10.0.0.19"],
        ),
    )
    .await;
    let ipam = Running::start(&env.client, spawn_ipam);
    for ns in ["one", "two", "three"] {
        for name in ["x", "y"] {
            env.create(
                Kind::IpAddressClaim,
                claim(ns, name, "GlobalInClusterIPPool", "shared", None),
            )
            .await;
        }
    }
    let mut got = BTreeSet::new();
    for ns in ["one", "two", "three"] {
        for name in ["x", "y"] {
            got.insert(allocated(&env, ns, name).await);
        }
    }
    let expected: BTreeSet<String> = (10..16).map(|i| format!("10.0.0.{i}")).collect();
    assert_eq!(got, expected);
    let address = env.get(Kind::IpAddress, "two", "x").await.expect("address");
    assert_eq!(address["spec"]["poolRef"]["kind"], "GlobalInClusterIPPool");
    assert_eq!(
        address["metadata"]["ownerReferences"][1]["kind"],
        "GlobalInClusterIPPool"
    );
    ipam.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn claims_wait_for_their_cluster_their_pool_and_ignore_other_providers() {
    let env = Env::start().await;
    let ipam = Running::start(&env.client, spawn_ipam);
    // No pool yet: PoolNotReady.
    env.create(
        Kind::IpAddressClaim,
        claim(NS, "early", "InClusterIPPool", "later", None),
    )
    .await;
    let not_ready = ready_reason(&env, NS, "early", "PoolNotReady").await;
    assert_eq!(not_ready["status"], "False");
    assert!(
        not_ready["message"]
            .as_str()
            .is_some_and(|m| m.contains("InClusterIPPool ipam/later not found"))
    );
    env.create(
        Kind::InClusterIpPool,
        pool(
            "InClusterIPPool",
            Some(NS),
            "later",
            &["10.0.0.50-10.0.0.59"],
        ),
    )
    .await;
    assert_eq!(allocated(&env, NS, "early").await, "10.0.0.50");

    // A claim of a Cluster that does not exist (yet), and one of a paused Cluster.
    env.create(
        Kind::IpAddressClaim,
        claim(NS, "orphan", "InClusterIPPool", "later", Some("c9")),
    )
    .await;
    env.create(
        Kind::Cluster,
        capi_object("Cluster", NS, "paused", json!({"paused": true})),
    )
    .await;
    env.create(
        Kind::IpAddressClaim,
        claim(NS, "held", "InClusterIPPool", "later", Some("paused")),
    )
    .await;
    // A claim for another provider's pool.
    let mut foreign = claim(NS, "foreign", "MetalPool", "m", None);
    foreign["spec"]["poolRef"]["apiGroup"] = json!("ipam.metal.example.com");
    env.create(Kind::IpAddressClaim, foreign).await;
    never(
        "a gated or foreign claim is served",
        Duration::from_secs(3),
        async || {
            let mut touched = false;
            for name in ["orphan", "held", "foreign"] {
                let claim = env
                    .get(Kind::IpAddressClaim, NS, name)
                    .await
                    .unwrap_or_default();
                touched |= !claim["status"].is_null() || !claim["metadata"]["finalizers"].is_null();
            }
            touched
        },
    )
    .await;
    env.create(Kind::Cluster, capi_object("Cluster", NS, "c9", json!({})))
        .await;
    allocated(&env, NS, "orphan").await;
    env.edit(Kind::Cluster, NS, "paused", false, |c| {
        c["spec"]["paused"] = json!(false);
    })
    .await;
    allocated(&env, NS, "held").await;
    assert!(env.get(Kind::IpAddress, NS, "foreign").await.is_none());
    assert_distinct(&all_addresses(&env).await);
    ipam.stop().await;
}
