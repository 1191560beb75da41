//! kube-rs against the stand-ins: `Api<DynamicObject>` for Cluster (CRUD, `/status`,
//! generation, finalizers, watch) and cluster-scoped pools, `Api<Secret>` for Secrets
//! (`stringData` merged into `data`).

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{
    Api as KubeApi, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
    WatchEvent, WatchParams,
};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

use super::{CAPI, IPAM, client};
use crate::rest::Api;

fn clusters(client: kube::Client) -> KubeApi<DynamicObject> {
    let gvk = GroupVersionKind::gvk(CAPI, "v1beta2", "Cluster");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "clusters");
    KubeApi::namespaced_with(client, "capi", &resource)
}

fn cluster(name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "Cluster",
        "metadata": {"name": name, "namespace": "capi", "labels": {"app": name}},
        "spec": {"infrastructureRef": {"kind": "ProxmoxCluster", "name": name}, "paused": false},
    }))
    .expect("cluster")
}

#[tokio::test(flavor = "multi_thread")]
async fn dynamic_cluster_crud_status_finalizers_and_watch() {
    let api = Api::start().await;
    let clusters = clusters(client(&api).await);
    let mut events = clusters
        .watch(&WatchParams::default().timeout(20), "0")
        .await
        .expect("watch")
        .try_filter(|e| std::future::ready(!matches!(e, WatchEvent::Bookmark(_))))
        .boxed();

    let created = clusters
        .create(&PostParams::default(), &cluster("c1"))
        .await
        .expect("create");
    assert_eq!(created.metadata.generation, Some(1));
    assert!(created.metadata.uid.is_some());
    assert_eq!(created.data["spec"]["infrastructureRef"]["name"], "c1");
    match events.try_next().await.expect("event") {
        Some(WatchEvent::Added(object)) => assert_eq!(object.name_any(), "c1"),
        other => panic!("expected ADDED, got {other:?}"),
    }

    // A status write changes only status; a main write keeps status and bumps generation.
    let mut with_status = created.clone();
    with_status.data["status"] =
        json!({"phase": "Provisioned", "initialization": {"infrastructureProvisioned": true}});
    with_status.data["spec"]["paused"] = json!(true);
    let status = clusters
        .replace_status("c1", &PostParams::default(), &with_status)
        .await
        .expect("status");
    assert_eq!(status.data["status"]["phase"], "Provisioned");
    assert_eq!(
        status.data["spec"]["paused"], false,
        "status write kept spec"
    );
    assert_eq!(status.metadata.generation, Some(1));

    let mut main = status.clone();
    main.data["spec"]["paused"] = json!(true);
    main.data["status"] = json!({"phase": "Lost"});
    let replaced = clusters
        .replace("c1", &PostParams::default(), &main)
        .await
        .expect("replace");
    assert_eq!(replaced.data["spec"]["paused"], true);
    assert_eq!(
        replaced.data["status"]["phase"], "Provisioned",
        "main write kept status"
    );
    assert_eq!(replaced.metadata.generation, Some(2));

    // A stale resourceVersion is a conflict.
    let stale = clusters.replace("c1", &PostParams::default(), &main).await;
    match stale {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 409),
        other => panic!("expected 409, got {other:?}"),
    }

    let listed = clusters
        .list(&ListParams::default().labels("app=c1"))
        .await
        .expect("list");
    assert_eq!(listed.items.len(), 1);

    // Finalizers keep the object terminating until the last one is removed.
    clusters
        .patch(
            "c1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["cluster.x-k8s.io"]}})),
        )
        .await
        .expect("add finalizer");
    let deleted = clusters
        .delete("c1", &DeleteParams::default())
        .await
        .expect("delete");
    let terminating = deleted.left().expect("still there");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    clusters
        .patch(
            "c1",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([{"op": "remove", "path": "/metadata/finalizers"}]))
                    .expect("json patch"),
            ),
        )
        .await
        .expect("remove finalizer");
    assert!(clusters.get_opt("c1").await.expect("get").is_none());

    let mut seen = Vec::new();
    while let Ok(Some(event)) = tokio::time::timeout(Duration::from_secs(5), events.try_next())
        .await
        .map(|e| e.expect("event"))
    {
        let kind = match event {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Error(e) => panic!("watch error {e:?}"),
        };
        seen.push(kind);
        if kind == "DELETED" {
            break;
        }
    }
    assert_eq!(seen.first(), Some(&"MODIFIED"));
    assert_eq!(seen.last(), Some(&"DELETED"));
}

#[tokio::test(flavor = "multi_thread")]
async fn cluster_scoped_pools() {
    let api = Api::start().await;
    let gvk = GroupVersionKind::gvk(IPAM, "v1alpha2", "GlobalInClusterIPPool");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "globalinclusterippools");
    let pools: KubeApi<DynamicObject> = KubeApi::all_with(client(&api).await, &resource);
    let pool: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2",
        "kind": "GlobalInClusterIPPool",
        "metadata": {"name": "shared"},
        "spec": {"addresses": ["10.0.0.10-10.0.0.20"], "prefix": 24, "gateway": "10.0.0.1"},
    }))
    .expect("pool");
    let created = pools
        .create(&PostParams::default(), &pool)
        .await
        .expect("create");
    assert_eq!(created.metadata.namespace, None);
    assert_eq!(created.data["spec"]["prefix"], 24);
    let listed = pools.list(&ListParams::default()).await.expect("list");
    assert_eq!(listed.items.len(), 1);
    pools
        .delete("shared", &DeleteParams::default())
        .await
        .expect("delete");
}

#[tokio::test(flavor = "multi_thread")]
async fn typed_secrets() {
    let api = Api::start().await;
    let secrets: KubeApi<Secret> = KubeApi::namespaced(client(&api).await, "capi");
    let mut watch = secrets
        .watch(&WatchParams::default().timeout(20), "0")
        .await
        .expect("watch")
        .try_filter(|e| std::future::ready(!matches!(e, WatchEvent::Bookmark(_))))
        .boxed();
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("creds".into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("a".into(), ByteString(b"old".to_vec()))])),
        string_data: Some(BTreeMap::from([
            ("a".into(), "new".into()),
            ("b".into(), "plain".into()),
        ])),
        ..Default::default()
    };
    let created = secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("create");
    let data = created.data.clone().expect("data");
    assert_eq!(data["a"].0, b"new");
    assert_eq!(data["b"].0, b"plain");
    assert_eq!(created.string_data, None);
    assert_eq!(created.type_.as_deref(), Some("Opaque"));
    match watch.try_next().await.expect("event") {
        Some(WatchEvent::Added(s)) => assert_eq!(s.name_any(), "creds"),
        other => panic!("expected ADDED, got {other:?}"),
    }

    let mut changed = created.clone();
    changed.data = Some(BTreeMap::from([("c".into(), ByteString(b"x".to_vec()))]));
    let replaced = secrets
        .replace("creds", &PostParams::default(), &changed)
        .await
        .expect("replace");
    assert_eq!(replaced.data.expect("data").len(), 1);
    let got = secrets.get("creds").await.expect("get");
    assert_eq!(got.data.expect("data")["c"].0, b"x");
    secrets
        .delete("creds", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(secrets.get_opt("creds").await.expect("get").is_none());
}
