//! `serve` with each storage backend: a real etcd over mutual TLS (`--etcd-cafile`,
//! `--etcd-certfile`, `--etcd-keyfile`) and the embedded store; objects outlive the server
//! process; readiness includes storage; metrics count requests, storage calls and watches.

use std::time::Duration;

use capmox_apiserver::server::pki::DevPki;
use capmox_apiserver::server::serve::{self, DelegationOptions, ServeOptions, StorageOptions};
use capmox_apiserver::server::tls;
use capmox_storage::{ClientCertFiles, TlsFiles};
use serde_json::{Value, json};

use crate::auth::fake_kube::FakeKube;

use super::etcd::{EtcdProcess, ServerTls};
use super::etcd_proxy::Proxy;
use super::{GROUP, collection, item, machine};
use crate::server::pki_client;

/// The management cluster: it publishes the dev CA as the client CA, so the admin
/// certificate (group `system:masters`) is authorized without a SubjectAccessReview.
async fn management(dir: &std::path::Path, pki: &DevPki) -> FakeKube {
    let kube_dir = dir.join("management");
    std::fs::create_dir_all(&kube_dir).expect("management dir");
    FakeKube::start(
        &kube_dir,
        Some(json!({ "client-ca-file": pki.ca.cert_pem })),
    )
    .await
}

/// A temporary directory with the dev PKI, and a stand-in management cluster trusting its CA.
async fn prepare() -> (tempfile::TempDir, DevPki, FakeKube) {
    tls::install_default_provider();
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = DevPki::ensure(dir.path(), &[]).expect("pki");
    let kube = management(dir.path(), &pki).await;
    (dir, pki, kube)
}

fn options(dir: &std::path::Path, kube: &FakeKube) -> ServeOptions {
    ServeOptions {
        delegation: DelegationOptions {
            authentication_kubeconfig: Some(kube.kubeconfig.clone()),
            authorization_kubeconfig: Some(kube.kubeconfig.clone()),
            ..DelegationOptions::default()
        },
        bind_address: [127, 0, 0, 1].into(),
        secure_port: 0,
        tls_cert_file: Some(dir.join("serving.crt")),
        tls_private_key_file: Some(dir.join("serving.key")),
        tls_dns_names: vec![],
        client_ca_file: Some(dir.join("ca.crt")),
        storage: StorageOptions::embedded(dir.join("data")),
        rest: Default::default(),
    }
}

/// A `system:masters` client of a server started from `pki`.
fn admin(pki: &DevPki) -> reqwest::Client {
    pki_client(pki, Some(&pki.admin))
}

async fn text(client: &reqwest::Client, url: String) -> String {
    client
        .get(url)
        .send()
        .await
        .expect("request")
        .text()
        .await
        .expect("body")
}

/// Creates machine `name` in `default` on the server at `base`.
async fn create_machine(client: &reqwest::Client, base: &str, name: &str) {
    let created = client
        .post(format!(
            "{base}{}",
            collection("v1alpha2", "default", "proxmoxmachines")
        ))
        .json(&machine(name))
        .send()
        .await
        .expect("create");
    assert_eq!(created.status(), 201);
}

/// Creates a machine, reads it back, and checks readiness and metrics.
async fn exercise(options: &ServeOptions, pki: &DevPki) -> Value {
    let server = serve::start(options, |r| r).await.expect("serve starts");
    let client = admin(pki);
    let url = |path: &str| format!("https://{}{path}", server.local_addr());
    create_machine(&client, &url(""), "served").await;
    let read: Value = client
        .get(url(&item(
            "v1alpha2",
            "default",
            "proxmoxmachines",
            "served",
        )))
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    assert_eq!(read["metadata"]["name"], "served");

    // The management-cluster stand-ins are dev's alone: the real cluster serves them.
    let groups: Value = serde_json::from_str(&text(&client, url("/apis")).await).expect("apis");
    assert_eq!(
        groups["groups"].as_array().map(Vec::len),
        Some(1),
        "{groups}"
    );
    let core: Value = serde_json::from_str(&text(&client, url("/api")).await).expect("api");
    assert_eq!(core["versions"], serde_json::json!([]));
    for path in [
        "/api/v1/namespaces/default/secrets",
        "/apis/cluster.x-k8s.io/v1beta2/namespaces/default/clusters",
        "/apis/ipam.cluster.x-k8s.io/v1beta2/namespaces/default/ipaddressclaims",
    ] {
        let answer = client.get(url(path)).send().await.expect("get");
        assert_eq!(answer.status(), 404, "{path}");
    }

    let ready = text(&client, url("/readyz?verbose")).await;
    assert!(ready.contains("[+]storage ok"), "{ready}");
    let watch = client
        .get(url(&format!(
            "{}?watch=true",
            collection("v1alpha2", "default", "proxmoxmachines")
        )))
        .send()
        .await
        .expect("watch");
    assert_eq!(watch.status(), 200);
    let metrics = text(&client, url("/metrics")).await;
    let line = |prefix: &str| metrics.lines().any(|l| l.starts_with(prefix));
    assert!(
        line(&format!(
            "apiserver_request_total{{verb=\"POST\",group=\"{GROUP}\",version=\"v1alpha2\",resource=\"proxmoxmachines\",subresource=\"\",scope=\"namespace\",component=\"apiserver\",code=\"201\"}}"
        )),
        "{metrics}"
    );
    assert!(
        line(
            "capmox_storage_request_duration_seconds_count{operation=\"create\",resource=\"proxmoxmachines\"}"
        ),
        "{metrics}"
    );
    assert!(
        metrics.lines().any(
            |l| l.starts_with("apiserver_longrunning_requests{verb=\"WATCH\"") && l.ends_with(" 1")
        ),
        "{metrics}"
    );
    drop(watch);
    server.shutdown().await;
    read
}

/// Starts the server again and reads the machine `exercise` created.
async fn read_back(options: &ServeOptions, pki: &DevPki) -> Value {
    let server = serve::start(options, |r| r).await.expect("restart");
    let object = admin(pki)
        .get(format!(
            "https://{}{}",
            server.local_addr(),
            item("v1alpha2", "default", "proxmoxmachines", "served")
        ))
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    server.shutdown().await;
    object
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_on_etcd_over_mutual_tls() {
    let (dir, pki, kube) = prepare().await;
    let server_tls = ServerTls {
        ca: dir.path().join("ca.crt"),
        cert: dir.path().join("serving.crt"),
        key: dir.path().join("serving.key"),
        client_cert_auth: true,
    };
    let client_tls = TlsFiles {
        ca: dir.path().join("ca.crt"),
        client: Some(ClientCertFiles {
            cert: dir.path().join("admin.crt"),
            key: dir.path().join("admin.key"),
        }),
    };
    let etcd = EtcdProcess::start_with(1, Some(&server_tls), Some(client_tls))
        .await
        .expect("etcd starts");
    let base = options(dir.path(), &kube);
    let options = ServeOptions {
        storage: StorageOptions {
            etcd_servers: etcd.endpoints.clone(),
            etcd_prefix: "/capmox-test".into(),
            etcd_cafile: Some(dir.path().join("ca.crt")),
            etcd_certfile: Some(dir.path().join("admin.crt")),
            etcd_keyfile: Some(dir.path().join("admin.key")),
            ..base.storage.clone()
        },
        ..base
    };
    let first = exercise(&options, &pki).await;
    // A new server process on the same etcd sees the object.
    let again = read_back(&options, &pki).await;
    assert_eq!(again["metadata"]["uid"], first["metadata"]["uid"]);
    // Without the client certificate etcd refuses the connection and serve does not start
    // (once it stops waiting for the store to become reachable).
    let refused = ServeOptions {
        storage: StorageOptions {
            etcd_certfile: None,
            etcd_keyfile: None,
            initialization_timeout: Duration::from_secs(2),
            ..options.storage.clone()
        },
        ..options.clone()
    };
    let result = tokio::time::timeout(Duration::from_secs(60), serve::start(&refused, |r| r)).await;
    assert!(
        matches!(result, Ok(Err(_))),
        "serve must fail without a client certificate"
    );
}

/// A replica that starts before etcd can be reached (in the HA overlay, before the members'
/// names resolve) waits for it instead of exiting.
#[tokio::test(flavor = "multi_thread")]
async fn serve_waits_for_an_etcd_not_reachable_yet() {
    let (dir, pki, kube) = prepare().await;
    let etcd = EtcdProcess::start().await.expect("etcd starts");
    let address = etcd.endpoints[0].trim_start_matches("http://");
    let proxy = Proxy::start(address.parse().expect("address"))
        .await
        .expect("proxy");
    proxy.cut();
    let base = options(dir.path(), &kube);
    let options = ServeOptions {
        storage: StorageOptions {
            etcd_servers: vec![format!("http://{}", proxy.addr)],
            etcd_prefix: "/capmox-waits".into(),
            ..base.storage.clone()
        },
        ..base
    };
    let starting = tokio::spawn(async move { serve::start(&options, |r| r).await });
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !starting.is_finished(),
        "serve gave up while etcd was unreachable"
    );
    proxy.restore();
    let server = tokio::time::timeout(Duration::from_secs(30), starting)
        .await
        .expect("serve starts once etcd is reachable")
        .expect("task")
        .expect("serve starts");
    let list = admin(&pki)
        .get(format!(
            "https://{}{}",
            server.local_addr(),
            collection("v1alpha2", "default", "proxmoxmachines")
        ))
        .send()
        .await
        .expect("list");
    assert_eq!(list.status(), 200, "a list from etcd");
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_on_the_embedded_store_keeps_objects_across_restarts() {
    let (dir, pki, kube) = prepare().await;
    let options = options(dir.path(), &kube);
    let first = exercise(&options, &pki).await;
    let again = read_back(&options, &pki).await;
    assert_eq!(again["metadata"]["uid"], first["metadata"]["uid"]);
}

/// `serve` runs the built-in controller by default: it leads (embedded store), is fed by
/// the registry, and reconciles a new machine (which waits for its CAPI Machine: the fake
/// management cluster has none); `--controller=false` serves the API only.
#[tokio::test(flavor = "multi_thread")]
async fn serve_runs_the_controller_unless_disabled() {
    use capmox_apiserver::run::serve::{ControllerSettings, start};

    let (dir, pki, kube) = prepare().await;
    let options = options(dir.path(), &kube);
    let settings = ControllerSettings {
        enabled: true,
        workers: 2,
        ..ControllerSettings::default()
    };
    let server = start(&options, &settings).await.expect("serve starts");
    let client = admin(&pki);
    let url = |path: &str| format!("https://{}{path}", server.local_addr());
    create_machine(&client, &url(""), "reconciled").await;
    let leads = |metrics: &str| metrics.lines().any(|l| l == "capmox_controller_leader 1");
    let reconciled = |metrics: &str| {
        leads(metrics)
            && metrics.lines().any(|l| {
                l.starts_with("capmox_controller_reconcile_total{kind=\"ProxmoxMachine\"")
                    && !l.ends_with(" 0")
            })
    };
    let (client_ref, url_ref) = (&client, &url);
    crate::auth::eventually(
        Duration::from_secs(20),
        "the controller reconciled a machine",
        move || async move { reconciled(&text(client_ref, url_ref("/metrics")).await) },
    )
    .await;
    server.shutdown().await;

    let disabled = start(&options, &ControllerSettings::default())
        .await
        .expect("serve starts");
    let metrics = text(
        &client,
        format!("https://{}/metrics", disabled.local_addr()),
    )
    .await;
    assert!(!leads(&metrics), "{metrics}");
    disabled.shutdown().await;
}
