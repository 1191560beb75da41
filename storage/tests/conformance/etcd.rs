//! What only the etcd backend has: the key prefix layout, several endpoints, TLS client
//! certificates, large responses, and watches that reconnect after the connection breaks.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use capmox_storage::{
    ClientCertFiles, Error, EtcdConfig, Event, Revision, Store, TlsFiles, WatchStream,
};
use futures::StreamExt;

use crate::support::etcd::{EtcdProcess, ServerTls, free_port};
use crate::support::proxy::Proxy;
use crate::support::{EVENT_TIMEOUT, changes, next_change, shared_etcd};

fn socket_addr(endpoint: &str) -> SocketAddr {
    endpoint
        .trim_start_matches("http://")
        .trim_start_matches("https://")
        .parse()
        .expect("endpoint is host:port")
}

#[tokio::test]
async fn keys_live_below_the_configured_prefix() {
    let etcd = shared_etcd().await;
    let custom = Store::open(etcd.config("/custom-prefix/")).await.unwrap();
    let default = Store::open(EtcdConfig::new(etcd.endpoints.clone()))
        .await
        .unwrap();
    let key = "/infrastructure.cluster.x-k8s.io/proxmoxmachines/default/m1";
    custom.create(key, Bytes::from_static(b"{}")).await.unwrap();

    let mut raw = etcd_client::Client::connect(&etcd.endpoints, None)
        .await
        .unwrap();
    let found = raw.get(format!("/custom-prefix{key}"), None).await.unwrap();
    assert_eq!(
        found.kvs().len(),
        1,
        "stored as <prefix>/<group>/<plural>/<namespace>/<name>"
    );
    assert_eq!(
        custom.get(key).await.unwrap().key,
        key,
        "keys come back without the prefix"
    );
    assert!(matches!(
        default.get(key).await,
        Err(Error::NotFound { .. })
    ));
    let listed = custom
        .list("/infrastructure.cluster.x-k8s.io/", None, None, None)
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_and_watches_fail_over_between_endpoints() {
    let etcd = shared_etcd().await;
    let proxy = Proxy::start(socket_addr(&etcd.endpoints[0])).await.unwrap();
    let dead = format!("http://127.0.0.1:{}", free_port().unwrap());
    let endpoints = [
        dead,
        format!("http://{}", proxy.addr),
        etcd.endpoints[0].clone(),
    ];
    let config = EtcdConfig::new(endpoints)
        .with_prefix("/fail-over")
        .with_progress_interval(None);
    let store = Store::open(config).await.unwrap();
    let start = store.current_revision().await.unwrap();
    let mut watch = store.watch("/", start).await.unwrap();

    let mut written = Vec::new();
    for i in 0..10 {
        written.push(
            store
                .create(&format!("/k{i:02}"), Bytes::new())
                .await
                .unwrap(),
        );
    }
    // The endpoint in use goes away: requests and the watch move on to the last one. A write
    // caught in the break may report Unavailable (it may or may not have been applied), as a
    // client would see it; it retries like the API server does.
    proxy.cut();
    for i in 10..20 {
        written.push(create_retrying(&store, &format!("/k{i:02}")).await);
    }
    assert_eq!(
        store.list("/", None, None, None).await.unwrap().items.len(),
        20
    );
    let delivered: Vec<Revision> = changes(&mut watch, 20)
        .await
        .iter()
        .map(Event::revision)
        .collect();
    assert_eq!(delivered, written);
}

/// Creates `key`, retrying while etcd is unavailable; a retry that finds the key means the
/// earlier attempt was applied.
async fn create_retrying(store: &Store, key: &str) -> Revision {
    for _ in 0..10 {
        match store.create(key, Bytes::new()).await {
            Ok(revision) => return revision,
            Err(Error::AlreadyExists { .. }) => return store.get(key).await.unwrap().revision,
            Err(error) if error.is_retryable() => continue,
            Err(error) => panic!("create {key}: {error:?}"),
        }
    }
    panic!("create {key}: etcd stayed unavailable")
}

#[tokio::test]
async fn an_unreachable_etcd_is_unavailable() {
    let mut config = EtcdConfig::new([format!("http://127.0.0.1:{}", free_port().unwrap())])
        .with_request_timeout(Duration::from_secs(2));
    config.connect_timeout = Duration::from_millis(500);
    let error = Store::open(config)
        .await
        .err()
        .expect("nothing listens there");
    assert!(matches!(error, Error::Unavailable(_)), "{error:?}");
    assert!(error.is_retryable());
}

#[tokio::test]
async fn a_lost_connection_fails_requests_as_unavailable() {
    let etcd = shared_etcd().await;
    let proxy = Proxy::start(socket_addr(&etcd.endpoints[0])).await.unwrap();
    let config = EtcdConfig::new([format!("http://{}", proxy.addr)])
        .with_prefix("/lost-connection")
        .with_request_timeout(Duration::from_secs(1));
    let store = Store::open(config).await.unwrap();
    store.create("/a", Bytes::new()).await.unwrap();
    proxy.cut();
    let error = store.get("/a").await.unwrap_err();
    assert!(matches!(error, Error::Unavailable(_)), "{error:?}");
    proxy.restore();
    // The client reconnects by itself once etcd is reachable again.
    let deadline = tokio::time::Instant::now() + EVENT_TIMEOUT;
    while store.get("/a").await.is_err() {
        assert!(tokio::time::Instant::now() < deadline, "no reconnect");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn responses_beyond_four_mebibytes_are_read() {
    let etcd = shared_etcd().await;
    let store = Store::open(etcd.config("/large")).await.unwrap();
    let value = Bytes::from(vec![b'x'; 600 * 1024]);
    for i in 0..10 {
        store
            .create(&format!("/big/{i}"), value.clone())
            .await
            .unwrap();
    }
    // 6 MB in one response: over tonic's default 4 MiB decode limit.
    let page = store.list("/big/", None, None, None).await.unwrap();
    assert_eq!(page.items.len(), 10);
    assert!(page.items.iter().all(|kv| kv.value == value));
}

/// A watch whose connection to etcd runs through a proxy the test can cut, a store that
/// writes directly, and the first change the watch delivered (the create of `/a`).
struct ProxiedWatch {
    proxy: Proxy,
    direct: Store,
    watch: WatchStream,
    first: Revision,
}

/// A store under `prefix` that reaches etcd only through `proxy` (no progress requests, so
/// a cut is the only thing that changes its traffic).
async fn through(proxy: &Proxy, prefix: &str) -> Store {
    Store::open(
        EtcdConfig::new([format!("http://{}", proxy.addr)])
            .with_prefix(prefix)
            .with_progress_interval(None),
    )
    .await
    .unwrap()
}

async fn watch_through_proxy(etcd: &EtcdProcess, prefix: &str) -> ProxiedWatch {
    let proxy = Proxy::start(socket_addr(&etcd.endpoints[0])).await.unwrap();
    let direct = Store::open(etcd.config(prefix)).await.unwrap();
    let via_proxy = through(&proxy, prefix).await;
    let start = direct.current_revision().await.unwrap();
    let mut watch = via_proxy.watch("/", start).await.unwrap();
    let first = direct.create("/a", Bytes::from_static(b"a")).await.unwrap();
    assert_eq!(next_change(&mut watch).await.revision(), first);
    ProxiedWatch {
        proxy,
        direct,
        watch,
        first,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_resumes_after_the_connection_breaks() {
    let etcd = shared_etcd().await;
    let ProxiedWatch {
        proxy,
        direct,
        mut watch,
        first: a,
    } = watch_through_proxy(&etcd, "/resume").await;

    proxy.cut();
    let b = direct.create("/b", Bytes::from_static(b"b")).await.unwrap();
    let c = direct
        .update("/a", Bytes::from_static(b"a2"), a)
        .await
        .unwrap();
    // Let the watch notice the break and fail a few reconnects.
    tokio::time::sleep(Duration::from_millis(400)).await;
    proxy.restore();

    let events = changes(&mut watch, 2).await;
    assert_eq!(
        events.iter().map(Event::revision).collect::<Vec<_>>(),
        [b, c]
    );
    match &events[1] {
        Event::Put {
            kv,
            prev: Some(prev),
        } => {
            assert_eq!((kv.value.as_ref(), prev.revision), (b"a2".as_slice(), a));
        }
        other => panic!("unexpected {other:?}"),
    }
    let d = direct.delete("/b", None).await.unwrap().revision;
    assert_eq!(next_change(&mut watch).await.revision(), d);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_that_resumes_into_compacted_history_expires() {
    let etcd = EtcdProcess::start().await.unwrap();
    let ProxiedWatch {
        proxy,
        direct,
        mut watch,
        ..
    } = watch_through_proxy(&etcd, "/expire").await;

    proxy.cut();
    direct.create("/b", Bytes::new()).await.unwrap();
    let c: Revision = direct.create("/c", Bytes::new()).await.unwrap();
    direct.compact(c).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    proxy.restore();

    let item = tokio::time::timeout(EVENT_TIMEOUT, watch.next())
        .await
        .expect("an answer");
    assert!(matches!(item, Some(Err(Error::Expired { .. }))), "{item:?}");
    assert!(watch.next().await.is_none());
}

/// A certificate authority for the TLS tests.
struct TestCa {
    cert_pem: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl TestCa {
    fn new() -> anyhow::Result<Self> {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let cert_pem = params.self_signed(&key)?.pem();
        Ok(Self {
            cert_pem,
            issuer: Issuer::new(params, key),
        })
    }

    /// A certificate and its key (PEM) for `names`, valid until `not_after` when given.
    fn leaf(
        &self,
        names: Vec<String>,
        usage: rcgen::ExtendedKeyUsagePurpose,
        not_after: Option<time::OffsetDateTime>,
    ) -> anyhow::Result<(String, String)> {
        let key = rcgen::KeyPair::generate()?;
        let mut params = rcgen::CertificateParams::new(names)?;
        params.extended_key_usages = vec![usage];
        if let Some(not_after) = not_after {
            params.not_after = not_after;
        }
        Ok((
            params.signed_by(&key, &self.issuer)?.pem(),
            key.serialize_pem(),
        ))
    }
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate (valid until
/// `client_not_after` when given), as PEM files in `dir`.
fn write_certificates(
    dir: &Path,
    client_not_after: Option<time::OffsetDateTime>,
) -> anyhow::Result<(ServerTls, TlsFiles, TestCa)> {
    use rcgen::ExtendedKeyUsagePurpose::{ClientAuth, ServerAuth};

    let ca = TestCa::new()?;
    let (server_cert, server_key) = ca.leaf(
        vec!["127.0.0.1".into(), "localhost".into()],
        ServerAuth,
        None,
    )?;
    let (client_cert, client_key) = ca.leaf(vec!["capmox".into()], ClientAuth, client_not_after)?;

    let write = |name: &str, pem: &str| -> anyhow::Result<std::path::PathBuf> {
        let path = dir.join(name);
        std::fs::write(&path, pem)?;
        Ok(path)
    };
    let ca_file = write("ca.pem", &ca.cert_pem)?;
    let server = ServerTls {
        ca: ca_file.clone(),
        cert: write("server.pem", &server_cert)?,
        key: write("server-key.pem", &server_key)?,
        client_cert_auth: true,
    };
    let client = TlsFiles {
        ca: ca_file,
        client: Some(ClientCertFiles {
            cert: write("client.pem", &client_cert)?,
            key: write("client-key.pem", &client_key)?,
        }),
    };
    Ok((server, client, ca))
}

#[tokio::test]
async fn tls_with_client_certificates() {
    let certs = tempfile::tempdir().unwrap();
    let (server, client, _) = write_certificates(certs.path(), None).unwrap();
    let etcd = EtcdProcess::start_with(1, Some(&server), Some(client.clone()))
        .await
        .unwrap();
    assert!(etcd.endpoints[0].starts_with("https://"));

    let store = Store::open(etcd.config("/tls")).await.unwrap();
    let revision = store
        .create("/a", Bytes::from_static(b"secret"))
        .await
        .unwrap();
    let mut watch = store.watch("/", revision - 1).await.unwrap();
    assert_eq!(next_change(&mut watch).await.revision(), revision);

    // Without a client certificate etcd refuses the connection.
    let mut anonymous = etcd.config("/tls").with_tls(TlsFiles {
        ca: client.ca.clone(),
        client: None,
    });
    anonymous.request_timeout = Duration::from_secs(3);
    assert!(Store::open(anonymous).await.is_err());
}

/// A renewed client certificate is used by every connection made after it: once the first one
/// has expired and the connection breaks, a store told of the renewal reconnects with the new
/// one, and a store that was not is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_client_certificate_is_used_for_new_connections() {
    let certs = tempfile::tempdir().unwrap();
    let expiry = time::OffsetDateTime::now_utc() + time::Duration::seconds(3);
    let (server, client, ca) = write_certificates(certs.path(), Some(expiry)).unwrap();
    let etcd = EtcdProcess::start_with(1, Some(&server), Some(client.clone()))
        .await
        .unwrap();
    let proxy = Proxy::start(socket_addr(&etcd.endpoints[0])).await.unwrap();
    let open = || async {
        let mut config = EtcdConfig::new([format!("https://{}", proxy.addr)])
            .with_prefix("/renewal")
            .with_progress_interval(None)
            .with_tls(client.clone());
        config.request_timeout = Duration::from_secs(3);
        Store::open(config).await.unwrap()
    };
    let (renewed, stale) = (open().await, open().await);
    renewed
        .create("/a", Bytes::from_static(b"a"))
        .await
        .unwrap();
    stale.create("/b", Bytes::from_static(b"b")).await.unwrap();

    let (cert, key) = ca
        .leaf(
            vec!["capmox".into()],
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
            None,
        )
        .unwrap();
    renewed
        .use_etcd_client_identity(cert.as_bytes(), key.as_bytes())
        .await
        .unwrap();
    let left = expiry - time::OffsetDateTime::now_utc() + time::Duration::milliseconds(500);
    tokio::time::sleep(Duration::try_from(left).unwrap_or_default()).await;
    proxy.cut();
    tokio::time::sleep(Duration::from_millis(100)).await;
    proxy.restore();

    renewed
        .create("/c", Bytes::from_static(b"c"))
        .await
        .expect("the renewed certificate is used");
    let refused = stale.create("/d", Bytes::from_static(b"d")).await;
    assert!(
        matches!(refused, Err(Error::Unavailable(_))),
        "the expired certificate is refused: {refused:?}"
    );
}

/// Leader election: one leader at a time, resigning hands over at once, and a leader whose
/// key is taken away notices the loss.
#[tokio::test]
async fn one_candidate_leads_and_hands_over() {
    let etcd = shared_etcd().await;
    let prefix = "/election-test";
    let a = Store::open(etcd.config(prefix)).await.unwrap();
    let b = Store::open(etcd.config(prefix)).await.unwrap();
    let key = "/elections/controller";
    let ttl = Duration::from_secs(2);
    let leader = a.campaign(key, "a", ttl).await.unwrap();
    assert!(leader.is_held());
    let waiting = tokio::spawn(async move { b.campaign(key, "b", ttl).await });
    // Beyond several renewals: the leader keeps its lease, the other keeps waiting.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!waiting.is_finished(), "b waits while a leads");
    assert!(leader.is_held());
    assert_eq!(a.get(key).await.unwrap().value, Bytes::from_static(b"a"));

    leader.resign().await;
    let mut second = tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .expect("b takes over at once after a resigned")
        .unwrap()
        .unwrap();
    assert_eq!(a.get(key).await.unwrap().value, Bytes::from_static(b"b"));

    // The key taken away (an operator, or a lease that expired): the loss is noticed.
    a.delete(key, None).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), second.lost())
        .await
        .expect("the loss is reported");
    assert!(!second.is_held());
}

/// A leader cut off from etcd: its fence stops holding at the lease's deadline (the last
/// renewal's send time plus the TTL), and no other candidate leads while it holds; a margin
/// beyond the TTL never holds; resigning ends the fence at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fence_holds_only_while_no_one_else_can_lead() {
    let etcd = shared_etcd().await;
    let proxy = Proxy::start(socket_addr(&etcd.endpoints[0])).await.unwrap();
    let prefix = "/fence-test";
    let cut_off = through(&proxy, prefix).await;
    let other = Store::open(etcd.config(prefix)).await.unwrap();
    let key = "/elections/controller";
    let ttl = Duration::from_secs(3);
    let leader = cut_off.campaign(key, "a", ttl).await.unwrap();
    let fence = leader.fence();
    assert!(fence.holds_for(Duration::from_secs(1)));
    assert!(
        !fence.holds_for(ttl),
        "no action may count on more than one TTL"
    );

    proxy.cut();
    let one_ttl_later = tokio::time::Instant::now() + ttl;
    let waiting = tokio::spawn(async move { other.campaign(key, "b", ttl).await });
    while fence.holds_for(Duration::ZERO) && tokio::time::Instant::now() < one_ttl_later {
        assert!(
            !waiting.is_finished(),
            "another candidate leads while the fence holds"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The last renewal was sent before the cut, so one TTL after it the lease's deadline has
    // passed however late this task runs.
    tokio::time::sleep_until(one_ttl_later).await;
    assert!(
        !fence.holds_for(Duration::ZERO),
        "the fence still holds one TTL after the cut"
    );
    let second = tokio::time::timeout(3 * ttl, waiting)
        .await
        .expect("b leads once the lease expired")
        .unwrap()
        .unwrap();
    assert!(
        !fence.holds_for(Duration::ZERO),
        "the old leader's fence stays down"
    );
    proxy.restore();
    drop(leader);

    let fence = second.fence();
    assert!(fence.holds_for(Duration::ZERO));
    second.resign().await;
    assert!(
        !fence.holds_for(Duration::ZERO),
        "resigned: the fence is down at once"
    );
}
