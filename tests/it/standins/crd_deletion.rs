//! Deleting a co-tenant kind's CRD deletes its objects, as kube's `customresourcecleanup`
//! finalizer does: those without finalizers go at once, creates are refused while the kind
//! terminates, it stays served until the last object's finalizers are removed, and a CRD of
//! the same name created later starts empty. Also when the CRD went while no server watched:
//! the next one finds its record and finishes the job.

use std::sync::Arc;
use std::time::Duration;

use capmox_apiserver::registry::admission::NoAdmission;
use capmox_apiserver::registry::catalog::{self, Catalog};
use capmox_apiserver::registry::cotenant::CoTenants;
use capmox_apiserver::registry::cotenant::cleanup::{Cleanup, Pending};
use capmox_apiserver::registry::cotenant::records::CrdRecords;
use capmox_apiserver::registry::list_options::ListOptions;
use capmox_apiserver::registry::object_store::NoObserver;
use capmox_apiserver::registry::rest::RestConfig;
use capmox_apiserver::server::admission::Caller;
use capmox_apiserver::server::cotenants::serve_from_crds;
use capmox_storage::{EmbeddedConfig, Store};
use serde_json::{Value, json};

use super::crds::SAMPLE_NETWORKS;
use super::serve_crd;
use crate::auth::eventually;
use crate::rest::kubectl::Kubectl;
use crate::rest::{Api, GROUP};

fn network(name: &str, finalizers: &[&str]) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/v1alpha2"),
        "kind": "SampleNetwork",
        "metadata": {"name": name, "namespace": "default", "finalizers": finalizers},
        "spec": {"cidr": "10.0.0.0/24"},
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn deleting_a_crd_deletes_its_objects_once_their_finalizers_are_done() {
    let api = Api::start().await;
    let k = Kubectl::new(&api, "1.33").in_namespace("default");
    let collection = format!("/apis/{GROUP}/v1alpha2/namespaces/default/samplenetworks");
    let serve = || {
        serve_crd(
            &api,
            &k,
            "samplenetworks.yaml",
            SAMPLE_NETWORKS,
            &collection,
        )
    };
    let file = serve().await;
    for object in [
        network("plain", &[]),
        network("held", &["example.com/release-addresses"]),
    ] {
        let created = api.post(&collection).json(&object).send().await;
        assert_eq!(created.status, 201, "{}", created.text);
    }

    k.ok(&["delete", "-f", &file, "--wait=false"]).await;
    eventually(
        Duration::from_secs(10),
        "the plain network deleted",
        || async { api.get(&format!("{collection}/plain")).send().await.status == 404 },
    )
    .await;
    let held = api.get(&format!("{collection}/held")).send().await;
    assert_eq!(held.status, 200, "finalizers keep it: {}", held.text);
    assert!(
        held.json()["metadata"]["deletionTimestamp"].is_string(),
        "{}",
        held.text
    );
    let refused = api
        .post(&collection)
        .json(&network("late", &[]))
        .send()
        .await;
    assert_eq!(refused.status, 405, "{}", refused.text);
    assert_eq!(
        refused.message(),
        "create not allowed while custom resource definition is terminating"
    );
    let (listed, out, err) = k.run(&["get", "samplenetworks", "-o", "name"]).await;
    assert!(
        listed && out.trim() == "samplenetwork.infrastructure.cluster.x-k8s.io/held",
        "served until its last object is gone: {out} {err}"
    );

    // Its controller finishes: the last object goes, and the kind with it.
    k.ok(&[
        "patch",
        "samplenetworks",
        "held",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ])
    .await;
    eventually(
        Duration::from_secs(10),
        "SampleNetwork forgotten",
        || async { api.get(&collection).send().await.status == 404 },
    )
    .await;

    // A CRD of the same name created again starts empty.
    serve().await;
    let listed = api.get(&collection).send().await.json();
    assert_eq!(listed["items"], json!([]), "{listed}");
}

/// The server's view of a store: its catalog, and the co-tenants served over it from `crds`.
struct Replica {
    cotenants: Arc<CoTenants>,
    _catalog: Arc<Catalog>,
}

impl Replica {
    fn over(store: &Store, crds: &[Value]) -> Self {
        let catalog = Arc::new(
            Catalog::new(
                catalog::strategies(),
                store,
                Arc::new(NoObserver),
                &RestConfig::default(),
                Arc::new(NoAdmission),
            )
            .expect("catalog"),
        );
        let cotenants = Arc::new(CoTenants::for_group(
            GROUP,
            catalog.resources().iter().map(|r| r.descriptor()),
        ));
        serve_from_crds(
            &cotenants,
            &catalog,
            Arc::new(Caller::without_cluster()),
            false,
        );
        cotenants.replace(crds);
        Self {
            cotenants,
            _catalog: catalog,
        }
    }

    fn cleanup(&self) -> Cleanup {
        Cleanup::new(Arc::clone(&self.cotenants))
    }
}

fn sample_networks_crd() -> Value {
    serde_saphyr::from_str(SAMPLE_NETWORKS).expect("CRD")
}

#[tokio::test]
async fn a_crd_deleted_while_no_server_watched_is_cleaned_up_from_its_record() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(EmbeddedConfig::new(dir.path().join("data")))
        .await
        .expect("store");
    let before = Replica::over(&store, &[sample_networks_crd()]);
    let rest = before
        .cotenants
        .current()
        .served("v1alpha2", "samplenetworks")
        .expect("served");
    let version = rest.descriptor().storage_version();
    for name in ["a", "b"] {
        rest.create(
            version,
            "default",
            network(name, &[]),
            &[],
            &Default::default(),
        )
        .await
        .expect("created");
    }
    let records = CrdRecords::new(store.clone());
    assert_eq!(before.cleanup().pass(&records).await, Pending::Nothing);
    drop((rest, before));

    // The CRD is gone when the next server starts: it knows the kind only from the record.
    let after = Replica::over(&store, &[]);
    let rest = {
        let mut cleanup = after.cleanup();
        assert_eq!(cleanup.pass(&records).await, Pending::Nothing);
        assert!(
            after.cotenants.current().kinds.is_empty(),
            "retired from its record, drained, forgotten"
        );
        Replica::over(&store, &[sample_networks_crd()])
            .cotenants
            .current()
            .served("v1alpha2", "samplenetworks")
            .expect("served")
    };
    let left = rest
        .list(version, None, &ListOptions::default())
        .await
        .expect("list");
    assert!(left.items.is_empty(), "{:?}", left.items);
    store.close().await;
}
