//! kube-rs with `DynamicObject`: CRUD, list with selectors, a raw watch, and the runtime
//! watcher both as list+watch and as a streaming list (WatchList).

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::ResourceExt;
use kube::api::{
    Api as KubeApi, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
    WatchEvent, WatchParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

use super::{Api, GROUP, labelled, machine};

async fn client(api: &Api) -> kube::Client {
    let kubeconfig = Kubeconfig::read_from(api.dev.kubeconfig()).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config");
    kube::Client::try_from(config).expect("client")
}

fn machines(client: kube::Client, version: &str) -> KubeApi<DynamicObject> {
    let gvk = GroupVersionKind::gvk(GROUP, version, "ProxmoxMachine");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "proxmoxmachines");
    KubeApi::namespaced_with(client, "kube", &resource)
}

fn object(name: &str, app: &str) -> DynamicObject {
    let mut value = labelled(machine(name), &[("app", app)]);
    value["metadata"]["namespace"] = json!("kube");
    serde_json::from_value(value).expect("dynamic object")
}

#[tokio::test(flavor = "multi_thread")]
async fn dynamic_objects_crud_selectors_and_watch() {
    let api = Api::start().await;
    let client = client(&api).await;
    let v2 = machines(client.clone(), "v1alpha2");
    let created = v2
        .create(&PostParams::default(), &object("kr-0", "kube"))
        .await
        .expect("create");
    assert_eq!(created.metadata.generation, Some(1));
    let rv = created.metadata.resource_version.clone().expect("rv");
    v2.create(&PostParams::default(), &object("kr-1", "other"))
        .await
        .expect("create");

    let selected = v2
        .list(&ListParams::default().labels("app=kube"))
        .await
        .expect("list");
    let names: Vec<String> = selected
        .items
        .iter()
        .filter_map(|o| o.metadata.name.clone())
        .collect();
    assert_eq!(names, ["kr-0"]);
    let by_field = v2
        .list(&ListParams::default().fields("metadata.name=kr-1"))
        .await
        .expect("list");
    assert_eq!(by_field.items.len(), 1);
    let paged = v2
        .list(&ListParams::default().limit(1))
        .await
        .expect("page");
    assert_eq!(paged.items.len(), 1);
    assert_eq!(paged.metadata.remaining_item_count, Some(1));

    let patched = v2
        .patch(
            "kr-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"numSockets": 5}})),
        )
        .await
        .expect("patch");
    assert_eq!(patched.data["spec"]["numSockets"], 5);
    let mut current = v2.get("kr-0").await.expect("get");
    current.labels_mut().insert("replaced".into(), "yes".into());
    let replaced = v2
        .replace("kr-0", &PostParams::default(), &current)
        .await
        .expect("replace");
    assert_eq!(replaced.labels()["replaced"], "yes");
    let stale = v2
        .replace("kr-0", &PostParams::default(), &current)
        .await
        .expect_err("stale resourceVersion");
    assert!(
        matches!(stale, kube::Error::Api(ref s) if s.code == 409),
        "{stale:?}"
    );

    // The same object in v1alpha1.
    let v1 = machines(client.clone(), "v1alpha1");
    let spoke = v1.get("kr-0").await.expect("v1alpha1 get");
    assert_eq!(
        spoke.types.as_ref().map(|t| t.api_version.as_str()),
        Some("infrastructure.cluster.x-k8s.io/v1alpha1")
    );

    // A raw watch from the creation's revision replays what came after it.
    let mut events = v2
        .watch(&WatchParams::default().timeout(10), &rv)
        .await
        .expect("watch")
        .boxed();
    let mut seen = Vec::new();
    while seen.len() < 3 {
        match tokio::time::timeout(Duration::from_secs(10), events.try_next()).await {
            Ok(Ok(Some(WatchEvent::Added(o)))) => {
                seen.push(("ADDED", o.metadata.name.unwrap_or_default()))
            }
            Ok(Ok(Some(WatchEvent::Modified(o)))) => {
                seen.push(("MODIFIED", o.metadata.name.unwrap_or_default()));
            }
            Ok(Ok(Some(_))) => {}
            other => panic!("watch ended early: {other:?}"),
        }
    }
    assert_eq!(
        seen,
        [
            ("ADDED", "kr-1".to_owned()),
            ("MODIFIED", "kr-0".to_owned()),
            ("MODIFIED", "kr-0".to_owned())
        ]
    );

    v2.delete("kr-1", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(v2.get_opt("kr-1").await.expect("get").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn runtime_watcher_lists_and_streams() {
    let api = Api::start().await;
    let client = client(&api).await;
    let v2 = machines(client, "v1alpha2");
    v2.create(&PostParams::default(), &object("w-0", "kube"))
        .await
        .expect("create");
    for config in [
        watcher::Config::default(),
        watcher::Config::default().streaming_lists(),
    ] {
        let mut stream = watcher(v2.clone(), config).boxed();
        let mut initial = Vec::new();
        loop {
            let event = tokio::time::timeout(Duration::from_secs(10), stream.try_next())
                .await
                .expect("watcher event")
                .expect("watcher ok")
                .expect("not ended");
            match event {
                watcher::Event::InitApply(o) => initial.push(o.metadata.name.unwrap_or_default()),
                watcher::Event::InitDone => break,
                _ => {}
            }
        }
        assert_eq!(initial, ["w-0"]);
    }
    let mut applied = watcher(v2.clone(), watcher::Config::default().streaming_lists())
        .applied_objects()
        .boxed();
    let first = applied.try_next().await.expect("ok").expect("object");
    assert_eq!(first.metadata.name.as_deref(), Some("w-0"));
    v2.create(&PostParams::default(), &object("w-1", "kube"))
        .await
        .expect("create");
    let next = tokio::time::timeout(Duration::from_secs(10), applied.try_next())
        .await
        .expect("in time")
        .expect("ok")
        .expect("object");
    assert_eq!(next.metadata.name.as_deref(), Some("w-1"));
}
