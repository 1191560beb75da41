//! The fake's management objects as `serve`'s built-in controller meets them: through the
//! real management seam (`KubeManagement`) and change streams, kube-rs's `Api` (statuses,
//! patches, `/status`, watches replaying from a list's resourceVersion, 410 after the
//! history) and raw requests (the token, unserved kinds).

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use capmox_apiserver::controller::seams::{Management, ManagementError};
use capmox_apiserver::management::client::client;
use capmox_apiserver::management::kube::KubeManagement;
use capmox_apiserver::management::kube::changes::{ObjectKey, proxmox_machine_changes};
use capmox_apiserver::management::kube::kinds::Kind;
use capmox_apiserver::management::types::{IpAddressClaim, IpPool, PoolKind};
use capmox_apiserver::server::tls;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::{Value, json};
use tempfile::TempDir;

use super::fake_kube::FakeKube;
use super::fake_objects::HISTORY;
use crate::management::{capi_object, infra_ref};

const NS: &str = "capi";

/// The fake and a client built from its kubeconfig as `serve` builds one.
struct Env {
    _dir: TempDir,
    kube: FakeKube,
    client: kube::Client,
}

impl Env {
    async fn start() -> Self {
        tls::install_default_provider();
        let dir = tempfile::tempdir().expect("tempdir");
        let kube = FakeKube::start(dir.path(), None).await;
        let client = client(Some(&kube.kubeconfig))
            .await
            .expect("a client for the fake");
        Self {
            _dir: dir,
            kube,
            client,
        }
    }
}

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// A Machine with bootstrap data whose infrastructure is the ProxmoxMachine `infra`.
fn machine(name: &str, infra: &str) -> Value {
    let spec = json!({
        "clusterName": "c1",
        "bootstrap": {"dataSecretName": format!("{name}-bootstrap")},
        "infrastructureRef": infra_ref("ProxmoxMachine", infra),
    });
    capi_object("Machine", NS, name, spec)
}

fn secret(namespace: &str, name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace}, "data": {"value": b64(value)}})
}

fn claim(name: &str, role: &str) -> IpAddressClaim {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS, "labels": {"role": role}},
        "spec": {"poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "p"}},
    }))
    .expect("a claim")
}

fn pool(kind: PoolKind, addresses: &[&str]) -> IpPool {
    let namespace = (kind == PoolKind::InCluster).then_some(NS);
    serde_json::from_value(json!({
        "kind": kind.as_str(),
        "metadata": {"name": "p", "namespace": namespace},
        "spec": {"addresses": addresses, "prefix": 24},
    }))
    .expect("a pool")
}

fn names(claims: Vec<IpAddressClaim>) -> Vec<String> {
    claims.into_iter().filter_map(|c| c.metadata.name).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_seam_reads_seeds_and_writes_claims_pools_and_secrets() {
    let env = Env::start().await;
    let mgmt = KubeManagement::new(env.client.clone());
    let cluster_spec = json!({"infrastructureRef": infra_ref("ProxmoxCluster", "c1")});
    env.kube
        .put_object(capi_object("Cluster", NS, "c1", cluster_spec));
    env.kube.put_object(machine("m1", "pm1"));
    env.kube
        .put_object(secret(NS, "m1-bootstrap", "#cloud-config"));
    // kube-system has a static route of its own (the authentication ConfigMap's).
    env.kube.put_object(secret("kube-system", "other", "x"));

    let cluster = mgmt.cluster(NS, "c1").await.expect("read").expect("seeded");
    let reference = cluster.spec.infrastructure_ref.expect("infrastructureRef");
    assert_eq!(reference.name, "c1");
    assert!(cluster.metadata.uid.is_some() && cluster.metadata.creation_timestamp.is_some());
    assert_eq!(cluster.metadata.generation, Some(1));
    let machine = mgmt.machine(NS, "m1").await.expect("read").expect("seeded");
    assert_eq!(
        machine.spec.bootstrap.data_secret_name.as_deref(),
        Some("m1-bootstrap")
    );
    let bootstrap = mgmt
        .secret(NS, "m1-bootstrap")
        .await
        .expect("read")
        .expect("seeded");
    assert_eq!(
        bootstrap.data.as_ref().expect("data")["value"].0,
        b"#cloud-config"
    );
    assert!(
        mgmt.secret("kube-system", "other")
            .await
            .expect("read")
            .is_some()
    );
    assert!(mgmt.cluster(NS, "nope").await.expect("read").is_none());
    assert!(
        mgmt.machine("elsewhere", "m1")
            .await
            .expect("read")
            .is_none()
    );
    assert_eq!(mgmt.secret(NS, "nope").await, Ok(None));

    let created = mgmt
        .create_claim(&claim("ip-a", "a"))
        .await
        .expect("created");
    assert!(created.metadata.uid.is_some());
    assert!(matches!(
        mgmt.create_claim(&claim("ip-a", "a")).await,
        Err(ManagementError::AlreadyExists(_))
    ));
    mgmt.create_claim(&claim("ip-b", "b"))
        .await
        .expect("created");
    let role_a = BTreeMap::from([("role".to_owned(), "a".to_owned())]);
    let everything = BTreeMap::new();
    assert_eq!(
        names(mgmt.list_claims(NS, &role_a).await.expect("list")),
        ["ip-a"]
    );
    assert_eq!(
        names(mgmt.list_claims(NS, &everything).await.expect("list")),
        ["ip-a", "ip-b"]
    );
    assert!(
        names(
            mgmt.list_claims("elsewhere", &everything)
                .await
                .expect("list")
        )
        .is_empty()
    );
    mgmt.delete_claim(NS, "ip-a").await.expect("deleted");
    assert_eq!(mgmt.claim(NS, "ip-a").await, Ok(None));
    mgmt.delete_claim(NS, "ip-a").await.expect("absent is fine");
    let claims = env
        .kube
        .objects("ipam.cluster.x-k8s.io/v1beta2", "ipaddressclaims");
    assert_eq!(claims.len(), 1);

    // The address the IPAM provider would allocate for the claim.
    env.kube.put_object(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddress",
        "metadata": {"name": "ip-b", "namespace": NS},
        "spec": {"claimRef": {"name": "ip-b"}, "address": "10.0.0.7", "prefix": 24,
            "poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "p"}},
    }));
    let address = mgmt.ip_address(NS, "ip-b").await.expect("read");
    assert_eq!(address.map(|a| a.spec.address).as_deref(), Some("10.0.0.7"));

    // Pools are created, then merged into (a spec change: generation 2); the global kind
    // is cluster-scoped.
    for kind in [PoolKind::InCluster, PoolKind::GlobalInCluster] {
        mgmt.apply_pool(&pool(kind, &["10.0.0.10-10.0.0.20"]))
            .await
            .expect("created");
        let updated = mgmt
            .apply_pool(&pool(kind, &["10.0.0.30"]))
            .await
            .expect("merged");
        assert_eq!(updated.spec.addresses, ["10.0.0.30"]);
        assert_eq!(updated.metadata.generation, Some(2));
        let scoped = kind == PoolKind::InCluster;
        assert_eq!(updated.metadata.namespace.is_some(), scoped, "{kind:?}");
        let read = mgmt
            .pool(kind, NS, "p")
            .await
            .expect("read")
            .expect("applied");
        assert_eq!(read, updated);
        mgmt.delete_pool(kind, NS, "p").await.expect("deleted");
        assert_eq!(mgmt.pool(kind, NS, "p").await, Ok(None));
    }

    // A finalizer of the controller's holds a deleted bootstrap Secret until it lets go.
    let mut held = bootstrap;
    held.metadata.finalizers = Some(vec!["capmox.test/bootstrap".to_owned()]);
    let kept = mgmt
        .update_secret_metadata(&held)
        .await
        .expect("metadata written");
    assert_ne!(
        kept.metadata.resource_version,
        held.metadata.resource_version
    );
    assert!(
        matches!(
            mgmt.update_secret_metadata(&held).await,
            Err(ManagementError::Conflict(_))
        ),
        "a stale resourceVersion conflicts"
    );
    let stored = env
        .kube
        .object("v1", "secrets", NS, "m1-bootstrap")
        .expect("stored");
    assert_eq!(
        stored["metadata"]["finalizers"],
        json!(["capmox.test/bootstrap"])
    );
    assert_eq!(stored["data"]["value"], json!(b64("#cloud-config")));
    assert!(env.kube.delete_object(&stored));
    let mut deleting = mgmt
        .secret(NS, "m1-bootstrap")
        .await
        .expect("read")
        .expect("held");
    assert!(deleting.metadata.deletion_timestamp.is_some());
    deleting.metadata.finalizers = None;
    mgmt.update_secret_metadata(&deleting)
        .await
        .expect("released");
    assert_eq!(mgmt.secret(NS, "m1-bootstrap").await, Ok(None));
}

async fn next_key(changes: &mut (impl Stream<Item = ObjectKey> + Unpin)) -> ObjectKey {
    tokio::time::timeout(Duration::from_secs(10), changes.next())
        .await
        .expect("a change in time")
        .expect("the stream goes on")
}

#[tokio::test(flavor = "multi_thread")]
async fn machine_changes_after_the_list_reach_the_controller() {
    let env = Env::start().await;
    env.kube.put_object(machine("m1", "pm1"));
    let mut changes = Box::pin(proxmox_machine_changes(env.client.clone()));
    let key = |name: &str| (NS.to_owned(), name.to_owned());
    assert_eq!(next_key(&mut changes).await, key("pm1"), "the initial list");
    env.kube.put_object(machine("m2", "pm2"));
    assert_eq!(next_key(&mut changes).await, key("pm2"), "a new Machine");
    let mut joined = machine("m1", "pm1");
    joined["status"] = json!({"nodeRef": {"name": "node-1"}});
    env.kube.put_object(joined);
    assert_eq!(
        next_key(&mut changes).await,
        key("pm1"),
        "a changed Machine"
    );
    assert!(env.kube.delete_object(&machine("m2", "pm2")));
    assert_eq!(
        next_key(&mut changes).await,
        key("pm2"),
        "a deleted Machine"
    );
}

/// The events of a watch until it ends, as `(type, name)`.
async fn events(
    api: &Api<DynamicObject>,
    params: &WatchParams,
    since: &str,
) -> Vec<(&'static str, String)> {
    let stream = api.watch(params, since).await.expect("watch");
    let events = tokio::time::timeout(Duration::from_secs(10), stream.collect::<Vec<_>>())
        .await
        .expect("the watch ends at its timeout");
    events
        .into_iter()
        .map(|event| match event.expect("an event") {
            WatchEvent::Added(o) => ("ADDED", o.name_any()),
            WatchEvent::Modified(o) => ("MODIFIED", o.name_any()),
            WatchEvent::Deleted(o) => ("DELETED", o.name_any()),
            WatchEvent::Bookmark(b) => ("BOOKMARK", b.metadata.resource_version),
            WatchEvent::Error(status) => panic!("watch failed: {status:?}"),
        })
        .collect()
}

/// The resourceVersion of a list, where a watcher's watch starts.
async fn list_version<K>(api: &Api<K>) -> String
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let list = api.list(&Default::default()).await.expect("list");
    list.metadata
        .resource_version
        .expect("a list resourceVersion")
}

fn api_status(error: kube::Error) -> kube::core::Status {
    match error {
        kube::Error::Api(status) => *status,
        other => panic!("not an API error: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kube_rs_writes_and_watches_with_kube_semantics() {
    let env = Env::start().await;
    let machines = Kind::Machine.api(&env.client, NS);
    let absent = api_status(machines.get("nope").await.expect_err("absent"));
    assert_eq!((absent.code, absent.reason.as_str()), (404, "NotFound"));
    assert_eq!(
        absent.message,
        r#"machines.cluster.x-k8s.io "nope" not found"#
    );
    let details = absent.details.expect("details");
    assert_eq!(
        (
            details.name.as_str(),
            details.group.as_str(),
            details.kind.as_str()
        ),
        ("nope", "cluster.x-k8s.io", "machines")
    );

    let since = list_version(&machines).await;
    env.kube.put_object(machine("m1", "pm1"));
    let body: DynamicObject = serde_json::from_value(machine("m2", "pm2")).expect("object");
    let post = PostParams::default();
    let created = machines.create(&post, &body).await.expect("created");
    let taken = api_status(machines.create(&post, &body).await.expect_err("taken"));
    assert_eq!((taken.code, taken.reason.as_str()), (409, "AlreadyExists"));

    let patch = PatchParams::default();
    let merge = |value| Patch::Merge(value);
    machines
        .patch(
            "m2",
            &patch,
            &merge(json!({"metadata": {"labels": {"role": "x"}}})),
        )
        .await
        .expect("labelled");
    let stale = api_status(
        machines
            .replace("m2", &post, &created)
            .await
            .expect_err("stale"),
    );
    assert_eq!((stale.code, stale.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        stale.message,
        "Operation cannot be fulfilled on machines.cluster.x-k8s.io \"m2\": the object has been \
         modified; please apply your changes to the latest version and try again"
    );
    // The main resource moves the generation and keeps the status; `/status` the reverse.
    let spec = json!({"spec": {"version": "v1.33.0"}});
    let respecced = machines
        .patch("m2", &patch, &merge(spec))
        .await
        .expect("spec");
    assert_eq!(respecced.metadata.generation, Some(2));
    let status = json!({"status": {"phase": "Running"}, "spec": {"version": "ignored"}});
    let running = machines
        .patch_status("m2", &patch, &merge(status))
        .await
        .expect("status");
    assert_eq!(running.data["status"]["phase"], "Running");
    assert_eq!(running.data["spec"]["version"], "v1.33.0");
    assert_eq!(running.metadata.generation, Some(2));
    let ignored = json!({"status": {"phase": "Failed"}});
    let unchanged = machines
        .patch("m2", &patch, &merge(ignored))
        .await
        .expect("no-op");
    assert_eq!(
        unchanged.resource_version(),
        running.resource_version(),
        "no change, no write"
    );
    let gone = machines
        .delete("m1", &DeleteParams::default())
        .await
        .expect("deleted");
    assert!(
        gone.is_right(),
        "an immediate delete answers a Success Status"
    );

    // Everything since the list, in order (a list-then-watch loses nothing); a selector
    // watch sees the Machine appear when it gains the label.
    let replay = WatchParams::default().timeout(1);
    let all = [
        ("ADDED", "m1"),
        ("ADDED", "m2"),
        ("MODIFIED", "m2"),
        ("MODIFIED", "m2"),
        ("MODIFIED", "m2"),
        ("DELETED", "m1"),
    ];
    let as_owned = |expected: &[(&'static str, &str)]| {
        expected
            .iter()
            .map(|(t, n)| (*t, (*n).to_owned()))
            .collect::<Vec<_>>()
    };
    assert_eq!(events(&machines, &replay, &since).await, as_owned(&all));
    let labelled = replay.clone().labels("role=x");
    let selected = [("ADDED", "m2"), ("MODIFIED", "m2"), ("MODIFIED", "m2")];
    assert_eq!(
        events(&machines, &labelled, &since).await,
        as_owned(&selected)
    );
    let everywhere = Kind::Machine.api_all(&env.client);
    assert_eq!(events(&everywhere, &replay, &since).await, as_owned(&all));
}

#[tokio::test(flavor = "multi_thread")]
async fn watches_from_before_the_history_expire() {
    let env = Env::start().await;
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), NS);
    let before = list_version(&secrets).await;
    for round in 0..=HISTORY {
        env.kube.put_object(secret(NS, "churn", &round.to_string()));
    }
    let mut stream = Box::pin(
        secrets
            .watch(&WatchParams::default().timeout(5), &before)
            .await
            .expect("watch"),
    );
    match stream.next().await {
        Some(Ok(WatchEvent::Error(status))) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
        }
        other => panic!("expected 410 Expired, got {other:?}"),
    }
    assert!(
        stream.next().await.is_none(),
        "the watch ends after the error"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn raw_requests_need_the_token_and_a_served_kind() {
    let env = Env::start().await;
    let kubeconfig: Value =
        serde_json::from_str(&std::fs::read_to_string(&env.kube.kubeconfig).expect("read"))
            .expect("kubeconfig is JSON");
    let cluster = &kubeconfig["clusters"][0]["cluster"];
    let ca = base64::engine::general_purpose::STANDARD
        .decode(cluster["certificate-authority-data"].as_str().expect("CA"))
        .expect("base64");
    let http = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(&ca).expect("CA")])
        .build()
        .expect("client");
    let server = cluster["server"].as_str().expect("server");
    let token = kubeconfig["users"][0]["user"]["token"]
        .as_str()
        .expect("token");
    let get = async |path: &str, token: Option<&str>| {
        let mut request = http.get(format!("{server}{path}"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send().await.expect("request").status().as_u16()
    };
    let machines = "/apis/cluster.x-k8s.io/v1beta2/namespaces/capi/machines";
    assert_eq!(get(machines, None).await, 401);
    assert_eq!(get(machines, Some(token)).await, 200);
    assert_eq!(get("/api/v1/secrets", Some(token)).await, 200);
    for unserved in [
        "/apis/cluster.x-k8s.io/v1beta1/namespaces/capi/machines",
        "/apis/cluster.x-k8s.io/v1beta2/machinesets",
        "/apis/ipam.cluster.x-k8s.io/v1alpha2/namespaces/capi/globalinclusterippools",
    ] {
        assert_eq!(get(unserved, Some(token)).await, 404, "{unserved}");
    }
    // The routes that were there before still answer.
    assert_eq!(get("/api/v1/namespaces/default", Some(token)).await, 200);
    let webhooks = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
    assert_eq!(get(webhooks, Some(token)).await, 200);
}
