//! `KubeManagement` against the dev server's stand-ins: every `Management` method,
//! absent objects, conflicts, AlreadyExists, invalid writes and an unreachable server;
//! and the change streams the controller runtime requeues from.

use std::collections::BTreeMap;
use std::time::Duration;

use capmox_apiserver::controller::seams::{Management, ManagementError};
use capmox_apiserver::management::kube::KubeManagement;
use capmox_apiserver::management::kube::changes::{capi_cluster_changes, proxmox_machine_changes};
use capmox_apiserver::management::kube::kinds::Kind;
use capmox_apiserver::management::types::{
    IpAddressClaim, IpAddressClaimSpec, IpPool, IpPoolSpec, PoolKind, PoolRef,
};
use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::json;

use super::{Env, capi_object, infra_ref};

const NS: &str = "mgmt";

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(str::to_string),
        ..ObjectMeta::default()
    }
}

fn claim(name: &str, pool: &str, labels: &[(&str, &str)]) -> IpAddressClaim {
    let mut metadata = meta(name, Some(NS));
    metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    IpAddressClaim {
        metadata,
        spec: IpAddressClaimSpec {
            pool_ref: PoolRef {
                api_group: "ipam.cluster.x-k8s.io".into(),
                kind: "InClusterIPPool".into(),
                name: pool.into(),
            },
            cluster_name: Some("c1".into()),
        },
        ..IpAddressClaim::default()
    }
}

fn pool(kind: PoolKind, name: &str, addresses: &[&str]) -> IpPool {
    let namespace = (kind == PoolKind::InCluster).then_some(NS);
    let mut metadata = meta(name, namespace);
    metadata.labels = Some(BTreeMap::from([("zone".into(), "default".into())]));
    metadata.annotations = Some(BTreeMap::from([("family".into(), "ipv4".into())]));
    IpPool {
        kind: kind.as_str().into(),
        metadata,
        spec: IpPoolSpec {
            addresses: addresses.iter().map(|s| s.to_string()).collect(),
            prefix: 24,
            gateway: Some("10.0.0.1".into()),
            address_reuse_grace_period_seconds: Some(60),
            ..IpPoolSpec::default()
        },
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn absent_objects_read_as_none_and_delete_fine() {
    let env = Env::start().await;
    let mgmt = KubeManagement::new(env.client.clone());
    assert_eq!(mgmt.cluster(NS, "nope").await, Ok(None));
    assert_eq!(mgmt.machine(NS, "nope").await, Ok(None));
    assert_eq!(mgmt.secret(NS, "nope").await, Ok(None));
    assert_eq!(mgmt.claim(NS, "nope").await, Ok(None));
    assert_eq!(mgmt.ip_address(NS, "nope").await, Ok(None));
    assert_eq!(mgmt.pool(PoolKind::InCluster, NS, "nope").await, Ok(None));
    assert_eq!(
        mgmt.pool(PoolKind::GlobalInCluster, NS, "nope").await,
        Ok(None)
    );
    assert_eq!(mgmt.delete_claim(NS, "nope").await, Ok(()));
    assert_eq!(
        mgmt.delete_pool(PoolKind::InCluster, NS, "nope").await,
        Ok(())
    );
    assert_eq!(
        mgmt.delete_pool(PoolKind::GlobalInCluster, "", "nope")
            .await,
        Ok(())
    );
    assert_eq!(mgmt.list_claims(NS, &BTreeMap::new()).await, Ok(Vec::new()));
}

#[tokio::test(flavor = "multi_thread")]
async fn clusters_machines_and_addresses_read_typed() {
    let env = Env::start().await;
    let mgmt = KubeManagement::new(env.client.clone());
    env.create(
        Kind::Cluster,
        capi_object(
            "Cluster",
            NS,
            "c1",
            json!({"paused": true, "infrastructureRef": infra_ref("ProxmoxCluster", "c1"),
                   "controlPlaneEndpoint": {"host": "10.0.0.5", "port": 6443},
                   "topology": {"classRef": {"name": "kept-but-unread"}}}),
        ),
    )
    .await;
    env.edit(Kind::Cluster, NS, "c1", true, |c| {
        c["status"] = json!({"initialization": {"infrastructureProvisioned": true}});
    })
    .await;
    let cluster = mgmt.cluster(NS, "c1").await.expect("read").expect("exists");
    assert!(cluster.is_paused());
    assert!(cluster.infrastructure_provisioned());
    let reference = cluster.spec.infrastructure_ref.expect("infrastructureRef");
    assert_eq!(
        (reference.kind.as_str(), reference.name.as_str()),
        ("ProxmoxCluster", "c1")
    );
    assert_eq!(
        cluster
            .spec
            .control_plane_endpoint
            .map(|e| (e.host, e.port)),
        Some(("10.0.0.5".to_string(), 6443))
    );

    let mut machine = capi_object(
        "Machine",
        NS,
        "m1",
        json!({"clusterName": "c1", "bootstrap": {"dataSecretName": "m1-bootstrap"},
               "infrastructureRef": infra_ref("ProxmoxMachine", "m1")}),
    );
    machine["metadata"]["labels"] = json!({"cluster.x-k8s.io/control-plane": ""});
    env.create(Kind::Machine, machine).await;
    env.edit(Kind::Machine, NS, "m1", true, |m| {
        m["status"] = json!({"nodeRef": {"name": "node-1"}, "conditions": [
            {"type": "Available", "status": "True", "reason": "Available",
             "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
    })
    .await;
    let machine = mgmt.machine(NS, "m1").await.expect("read").expect("exists");
    assert_eq!(machine.cluster_name(), Some("c1"));
    assert!(machine.is_control_plane());
    assert!(machine.node_joined());
    assert_eq!(
        machine.spec.bootstrap.data_secret_name.as_deref(),
        Some("m1-bootstrap")
    );

    env.create(
        Kind::IpAddress,
        json!({"apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddress",
               "metadata": {"name": "a1", "namespace": NS},
               "spec": {"address": "10.0.0.9", "prefix": 24, "gateway": "10.0.0.1",
                        "claimRef": {"name": "a1"},
                        "poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "p"}}}),
    )
    .await;
    let address = mgmt
        .ip_address(NS, "a1")
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(address.spec.address, "10.0.0.9");
    assert_eq!(address.spec.prefix, Some(24));
    assert_eq!(address.spec.pool_ref.name, "p");
}

#[tokio::test(flavor = "multi_thread")]
async fn secret_metadata_updates_check_the_resource_version() {
    let env = Env::start().await;
    let mgmt = KubeManagement::new(env.client.clone());
    let secrets: kube::Api<Secret> = kube::Api::namespaced(env.client.clone(), NS);
    secrets
        .create(
            &Default::default(),
            &Secret {
                metadata: meta("creds", Some(NS)),
                data: Some(BTreeMap::from([(
                    "token".to_string(),
                    ByteString(b"root@pam!capi".to_vec()),
                )])),
                ..Secret::default()
            },
        )
        .await
        .expect("create secret");
    let read = mgmt
        .secret(NS, "creds")
        .await
        .expect("read")
        .expect("exists");

    let mut owned = read.clone();
    owned.metadata.finalizers = Some(vec!["example.com/keep".into()]);
    owned.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "infrastructure.cluster.x-k8s.io/v1alpha2".into(),
        kind: "ProxmoxCluster".into(),
        name: "c1".into(),
        uid: "0a5e4c3e-1b44-4cb1-9b8d-3f0f4f2f8a11".into(),
        ..OwnerReference::default()
    }]);
    // Data the caller changed is not written: only metadata moves.
    owned.data = None;
    let updated = mgmt.update_secret_metadata(&owned).await.expect("update");
    assert_eq!(updated.metadata.finalizers, owned.metadata.finalizers);
    assert_eq!(
        updated.metadata.owner_references.as_ref().map(Vec::len),
        Some(1)
    );
    assert_eq!(
        updated
            .data
            .as_ref()
            .and_then(|d| d.get("token"))
            .map(|b| b.0.clone()),
        Some(b"root@pam!capi".to_vec())
    );
    assert_ne!(
        updated.metadata.resource_version,
        read.metadata.resource_version
    );

    // The object read first is stale now.
    let mut stale = read.clone();
    stale.metadata.labels = Some(BTreeMap::from([("a".into(), "b".into())]));
    assert!(matches!(
        mgmt.update_secret_metadata(&stale).await,
        Err(ManagementError::Conflict(_))
    ));
    let mut unversioned = updated.clone();
    unversioned.metadata.resource_version = None;
    assert!(matches!(
        mgmt.update_secret_metadata(&unversioned).await,
        Err(ManagementError::Invalid(_))
    ));

    // A Secret that went away: read again (Conflict), never recreated.
    let mut released = updated.clone();
    released.metadata.finalizers = None;
    let released = mgmt
        .update_secret_metadata(&released)
        .await
        .expect("drop finalizer");
    secrets
        .delete("creds", &Default::default())
        .await
        .expect("delete");
    assert!(matches!(
        mgmt.update_secret_metadata(&released).await,
        Err(ManagementError::Conflict(_))
    ));
    assert_eq!(mgmt.secret(NS, "creds").await, Ok(None));
}

#[tokio::test(flavor = "multi_thread")]
async fn claims_are_created_once_listed_by_labels_and_deleted() {
    let env = Env::start().await;
    let mgmt = KubeManagement::new(env.client.clone());
    let mut wanted = claim(
        "m1-net0-00-inet",
        "p",
        &[("cluster.x-k8s.io/cluster-name", "c1")],
    );
    wanted.status.address_ref = Some(capmox_apiserver::management::types::NameRef {
        name: "ignored-on-create".into(),
    });
    let created = mgmt.create_claim(&wanted).await.expect("create");
    assert!(created.metadata.uid.is_some());
    assert_eq!(created.spec, wanted.spec);
    assert_eq!(created.status.address_ref, None);
    assert!(matches!(
        mgmt.create_claim(&wanted).await,
        Err(ManagementError::AlreadyExists(_))
    ));
    mgmt.create_claim(&claim(
        "m2-net0-00-inet",
        "p",
        &[("cluster.x-k8s.io/cluster-name", "c2")],
    ))
    .await
    .expect("create");
    mgmt.create_claim(&claim("bare", "p", &[]))
        .await
        .expect("create");

    let of_c1 = mgmt
        .list_claims(
            NS,
            &BTreeMap::from([("cluster.x-k8s.io/cluster-name".into(), "c1".into())]),
        )
        .await
        .expect("list");
    let names: Vec<_> = of_c1
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    assert_eq!(names, ["m1-net0-00-inet"]);
    assert_eq!(
        mgmt.list_claims(NS, &BTreeMap::new())
            .await
            .map(|l| l.len()),
        Ok(3)
    );
    assert_eq!(
        mgmt.list_claims("elsewhere", &BTreeMap::new()).await,
        Ok(Vec::new())
    );
    assert_eq!(
        mgmt.claim(NS, "m1-net0-00-inet")
            .await
            .expect("read")
            .map(|c| c.spec),
        Some(wanted.spec.clone())
    );

    let invalid = claim("Not_A_Name", "p", &[]);
    assert!(matches!(
        mgmt.create_claim(&invalid).await,
        Err(ManagementError::Invalid(_))
    ));

    mgmt.delete_claim(NS, "m1-net0-00-inet")
        .await
        .expect("delete");
    assert_eq!(mgmt.claim(NS, "m1-net0-00-inet").await, Ok(None));
    assert_eq!(mgmt.delete_claim(NS, "m1-net0-00-inet").await, Ok(()));
}

#[tokio::test(flavor = "multi_thread")]
async fn pools_are_applied_keeping_foreign_labels_and_annotations() {
    let env = Env::start().await;
    let mgmt = KubeManagement::new(env.client.clone());
    for kind in [PoolKind::InCluster, PoolKind::GlobalInCluster] {
        let first = pool(kind, "c1-v4-icip", &["10.0.0.10-10.0.0.20"]);
        let created = mgmt.apply_pool(&first).await.expect("create");
        assert_eq!(created.spec, first.spec);
        assert_eq!(created.pool_kind(), Some(kind));
        let namespace = (kind == PoolKind::InCluster).then_some(NS);
        assert_eq!(created.metadata.namespace.as_deref(), namespace);

        // Someone else labels and annotates the pool.
        let resource = Kind::of_pool(kind);
        env.edit(resource, NS, "c1-v4-icip", false, |p| {
            p["metadata"]["labels"]["foreign"] = json!("label");
            p["metadata"]["annotations"]["foreign"] = json!("annotation");
        })
        .await;

        let mut second = pool(kind, "c1-v4-icip", &["10.0.0.10-10.0.0.30"]);
        second.metadata.annotations = Some(BTreeMap::from([("family".into(), "ipv6".into())]));
        second.metadata.labels = None;
        let applied = mgmt.apply_pool(&second).await.expect("update");
        assert_eq!(applied.spec.addresses, ["10.0.0.10-10.0.0.30"]);
        let labels = applied.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("zone").map(String::as_str), Some("default"));
        assert_eq!(labels.get("foreign").map(String::as_str), Some("label"));
        let annotations = applied.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(annotations.get("family").map(String::as_str), Some("ipv6"));
        assert_eq!(
            annotations.get("foreign").map(String::as_str),
            Some("annotation")
        );
        let read = mgmt
            .pool(kind, NS, "c1-v4-icip")
            .await
            .expect("read")
            .expect("exists");
        assert_eq!(read.spec, applied.spec);

        // Applying what is stored changes nothing but still answers the pool.
        let again = mgmt.apply_pool(&second).await.expect("reapply");
        assert_eq!(again.spec, applied.spec);

        mgmt.delete_pool(kind, NS, "c1-v4-icip")
            .await
            .expect("delete");
        assert_eq!(mgmt.pool(kind, NS, "c1-v4-icip").await, Ok(None));
    }
    let mut unknown = pool(PoolKind::InCluster, "x", &["10.0.0.1"]);
    unknown.kind = "InClusterPrefixPool".into();
    assert!(matches!(
        mgmt.apply_pool(&unknown).await,
        Err(ManagementError::Invalid(_))
    ));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_cluster_is_unavailable() {
    capmox_apiserver::server::tls::install_default_provider();
    let mut config = kube::Config::new("https://127.0.0.1:1".parse().expect("url"));
    config.connect_timeout = Some(Duration::from_secs(2));
    let client = kube::Client::try_from(config).expect("client");
    let mgmt = KubeManagement::new(client);
    assert!(matches!(
        mgmt.cluster(NS, "c1").await,
        Err(ManagementError::Unavailable(_))
    ));
    assert!(matches!(
        mgmt.secret(NS, "s").await,
        Err(ManagementError::Unavailable(_))
    ));
    assert!(matches!(
        mgmt.delete_claim(NS, "c").await,
        Err(ManagementError::Unavailable(_))
    ));
    assert!(matches!(
        mgmt.apply_pool(&pool(PoolKind::InCluster, "p", &["10.0.0.2"]))
            .await,
        Err(ManagementError::Unavailable(_))
    ));
}

async fn within<T>(next: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), next)
        .await
        .expect("a change within 20 s")
}

#[tokio::test(flavor = "multi_thread")]
async fn change_streams_name_our_objects_of_changed_capi_objects() {
    let env = Env::start().await;
    let mut machines = Box::pin(proxmox_machine_changes(env.client.clone()));
    let mut clusters = Box::pin(capi_cluster_changes(env.client.clone()));
    env.create(
        Kind::Machine,
        capi_object(
            "Machine",
            NS,
            "docker",
            json!({"clusterName": "c1", "infrastructureRef": {
                "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachine", "name": "d"}}),
        ),
    )
    .await;
    env.create(
        Kind::Machine,
        capi_object(
            "Machine",
            NS,
            "m1",
            json!({"clusterName": "c1", "infrastructureRef": infra_ref("ProxmoxMachine", "pm-1")}),
        ),
    )
    .await;
    assert_eq!(
        within(machines.next()).await,
        Some((NS.to_string(), "pm-1".to_string()))
    );
    env.create(
        Kind::Cluster,
        capi_object(
            "Cluster",
            NS,
            "c1",
            json!({"infrastructureRef": infra_ref("ProxmoxCluster", "pc-1")}),
        ),
    )
    .await;
    assert_eq!(
        within(clusters.next()).await,
        Some((NS.to_string(), "c1".to_string()))
    );
    // A later change (the node joined) and a deletion requeue again.
    env.edit(Kind::Machine, NS, "m1", true, |m| {
        m["status"] = json!({"nodeRef": {"name": "n"}});
    })
    .await;
    assert_eq!(
        within(machines.next()).await,
        Some((NS.to_string(), "pm-1".to_string()))
    );
    env.delete(Kind::Cluster, NS, "c1").await;
    assert_eq!(
        within(clusters.next()).await,
        Some((NS.to_string(), "c1".to_string()))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_without_the_kinds_reads_as_empty_and_the_loops_idle() {
    use capmox_apiserver::emulation::{spawn_capi, spawn_ipam};
    use capmox_apiserver::server::dev::DevOptions;
    use kube::config::{KubeConfigOptions, Kubeconfig};

    let dev = crate::server::Dev::start_with(
        DevOptions {
            stand_ins: false,
            ..DevOptions::default()
        },
        |r| r,
    )
    .await;
    let kubeconfig = Kubeconfig::read_from(dev.kubeconfig()).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config");
    let client = kube::Client::try_from(config).expect("client");
    let mgmt = KubeManagement::new(client.clone());
    assert_eq!(mgmt.cluster(NS, "c1").await, Ok(None));
    assert_eq!(mgmt.secret(NS, "s").await, Ok(None));
    assert_eq!(mgmt.list_claims(NS, &BTreeMap::new()).await, Ok(Vec::new()));
    // Creating a kind that is not served is unavailable (retried), not a success.
    assert!(matches!(
        mgmt.create_claim(&claim("c", "p", &[])).await,
        Err(ManagementError::Unavailable(m)) if m.contains("is not served")
    ));

    // The loops keep running (watches back off) and stop on their signal.
    let ipam = super::Running::start(&client, spawn_ipam);
    let capi = super::Running::start(&client, spawn_capi);
    tokio::time::sleep(Duration::from_secs(1)).await;
    ipam.stop().await;
    capi.stop().await;
}
