//! The emulated Cluster API core against the dev server, with ProxmoxClusters and
//! ProxmoxMachines through the real API: owner references and labels, Cluster and
//! Machine status propagation (the pretend node join), and the deletion cascade with
//! finalizers.

use std::time::Duration;

use capmox_apiserver::emulation::capi::machine::JOINED_MESSAGE;
use capmox_apiserver::emulation::capi::{CLUSTER_FINALIZER, MACHINE_FINALIZER};
use capmox_apiserver::emulation::spawn_capi;
use capmox_apiserver::management::kube::kinds::Kind;
use serde_json::{Value, json};

use super::{Env, Running, capi_object, eventually, infra_ref, never, proxmox_backed_cluster};
use crate::api::support::{cluster_v2, machine_v2};

const NS: &str = "capi";
/// Keeps our objects around after a delete until the test lets them go.
const HOLD: &str = "test.example.com/hold";

/// A valid ProxmoxCluster (endpoint 10.10.10.9:6443).
fn proxmox_cluster(name: &str) -> Value {
    let mut pc = cluster_v2();
    pc["metadata"] = json!({"name": name, "namespace": NS, "finalizers": [HOLD]});
    pc
}

fn proxmox_machine(name: &str) -> Value {
    let mut pm = machine_v2();
    pm["metadata"] = json!({"name": name, "namespace": NS, "finalizers": [HOLD]});
    pm
}

fn capi_machine(name: &str, cluster: &str) -> Value {
    capi_object(
        "Machine",
        NS,
        name,
        json!({"clusterName": cluster, "bootstrap": {"dataSecretName": format!("{name}-bootstrap")},
               "infrastructureRef": infra_ref("ProxmoxMachine", name)}),
    )
}

fn finalizers(object: &Value) -> Value {
    object["metadata"]["finalizers"].clone()
}

/// The single owner reference of `object`, once it has one of `kind`.
async fn owner_of(env: &Env, kind: Kind, name: &str, owner_kind: &str) -> Value {
    eventually(&format!("{name} owned by a {owner_kind}"), || async {
        let object = env.get(kind, NS, name).await?;
        object["metadata"]["ownerReferences"]
            .as_array()?
            .iter()
            .find(|o| o["kind"] == owner_kind)
            .cloned()
    })
    .await
}

/// The reconciler's part: the ProxmoxCluster reports provisioned.
async fn provision_cluster(env: &Env, name: &str) {
    env.edit(Kind::ProxmoxCluster, NS, name, true, |pc| {
        pc["status"]["initialization"] = json!({"provisioned": true});
    })
    .await;
}

/// The Cluster once CAPI marked its infrastructure provisioned.
async fn provisioned(env: &Env, name: &str) -> Value {
    eventually(&format!("Cluster {name} provisioned"), || async {
        let cluster = env.get(Kind::Cluster, NS, name).await?;
        (cluster["status"]["initialization"]["infrastructureProvisioned"] == true)
            .then_some(cluster)
    })
    .await
}

async fn release(env: &Env, kind: Kind, name: &str) {
    env.edit(kind, NS, name, false, |o| {
        o["metadata"]["finalizers"] = json!([]);
    })
    .await;
}

async fn gone(env: &Env, kind: Kind, name: &str) {
    eventually(&format!("{} gone", kind.describe(NS, name)), || async {
        env.get(kind, NS, name).await.is_none().then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn clusters_own_their_infrastructure_and_receive_its_endpoint() {
    let env = Env::start().await;
    let capi = Running::start(&env.client, spawn_capi);
    let cluster = env
        .create(Kind::Cluster, proxmox_backed_cluster(NS, "c1"))
        .await;
    env.create(Kind::ProxmoxCluster, proxmox_cluster("c1"))
        .await;

    let owner = owner_of(&env, Kind::ProxmoxCluster, "c1", "Cluster").await;
    assert_eq!(owner["apiVersion"], "cluster.x-k8s.io/v1beta2");
    assert_eq!(owner["name"], "c1");
    assert_eq!(owner["uid"], cluster["metadata"]["uid"]);
    assert_eq!(owner["controller"], true);
    assert_eq!(owner["blockOwnerDeletion"], true);
    let pc = env.get(Kind::ProxmoxCluster, NS, "c1").await.expect("pc");
    assert_eq!(
        pc["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"],
        "c1"
    );
    let cluster = env.get(Kind::Cluster, NS, "c1").await.expect("cluster");
    assert_eq!(finalizers(&cluster), json!([CLUSTER_FINALIZER]));

    // Not provisioned yet: CAPI reports nothing.
    never(
        "infrastructure reported before provisioning",
        Duration::from_secs(2),
        async || {
            let cluster = env.get(Kind::Cluster, NS, "c1").await.unwrap_or_default();
            !cluster["status"]["initialization"].is_null()
                || !cluster["spec"]["controlPlaneEndpoint"].is_null()
        },
    )
    .await;

    provision_cluster(&env, "c1").await;
    let cluster = provisioned(&env, "c1").await;
    assert_eq!(
        cluster["spec"]["controlPlaneEndpoint"],
        json!({"host": "10.10.10.9", "port": 6443})
    );

    // A Cluster with a valid endpoint of its own keeps it.
    env.create(
        Kind::Cluster,
        capi_object(
            "Cluster",
            NS,
            "c2",
            json!({
            "infrastructureRef": infra_ref("ProxmoxCluster", "c2"),
            "controlPlaneEndpoint": {"host": "192.0.2.1", "port": 443}}),
        ),
    )
    .await;
    env.create(Kind::ProxmoxCluster, proxmox_cluster("c2"))
        .await;
    owner_of(&env, Kind::ProxmoxCluster, "c2", "Cluster").await;
    provision_cluster(&env, "c2").await;
    let c2 = provisioned(&env, "c2").await;
    assert_eq!(
        c2["spec"]["controlPlaneEndpoint"],
        json!({"host": "192.0.2.1", "port": 443})
    );

    // Clusters of other providers are not touched.
    env.create(
        Kind::Cluster,
        capi_object(
            "Cluster",
            NS,
            "docker",
            json!({"infrastructureRef": {
            "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerCluster", "name": "d"}}),
        ),
    )
    .await;
    never(
        "a foreign Cluster gets a finalizer",
        Duration::from_secs(2),
        async || {
            let docker = env
                .get(Kind::Cluster, NS, "docker")
                .await
                .unwrap_or_default();
            !docker["metadata"]["finalizers"].is_null()
        },
    )
    .await;
    capi.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn provisioned_machines_get_provider_id_addresses_and_a_pretend_node() {
    let env = Env::start().await;
    let capi = Running::start(&env.client, spawn_capi);
    let m1 = env.create(Kind::Machine, capi_machine("m1", "c1")).await;
    env.create(Kind::ProxmoxMachine, proxmox_machine("m1"))
        .await;
    let owner = owner_of(&env, Kind::ProxmoxMachine, "m1", "Machine").await;
    assert_eq!(owner["uid"], m1["metadata"]["uid"]);
    assert_eq!(owner["controller"], true);
    let pm = env.get(Kind::ProxmoxMachine, NS, "m1").await.expect("pm");
    assert_eq!(
        pm["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"],
        "c1"
    );
    let machine = env.get(Kind::Machine, NS, "m1").await.expect("machine");
    assert_eq!(finalizers(&machine), json!([MACHINE_FINALIZER]));

    // The reconciler sets the provider ID and reports provisioned with addresses.
    env.edit(Kind::ProxmoxMachine, NS, "m1", false, |pm| {
        pm["spec"]["providerID"] = json!("proxmox://4c4f7cb8-0d27-4d4f-9d0d-1c0f5b0e6a11");
    })
    .await;
    let addresses = json!([
        {"type": "Hostname", "address": "m1"},
        {"type": "InternalIP", "address": "10.10.10.12"},
    ]);
    env.edit(Kind::ProxmoxMachine, NS, "m1", true, |pm| {
        pm["status"]["initialization"] = json!({"provisioned": true});
        pm["status"]["addresses"] = addresses.clone();
    })
    .await;
    let machine = eventually("the Machine joined", || async {
        let machine = env.get(Kind::Machine, NS, "m1").await?;
        (!machine["status"]["nodeRef"].is_null()).then_some(machine)
    })
    .await;
    assert_eq!(
        machine["spec"]["providerID"],
        "proxmox://4c4f7cb8-0d27-4d4f-9d0d-1c0f5b0e6a11"
    );
    assert_eq!(machine["status"]["addresses"], addresses);
    assert_eq!(machine["status"]["nodeRef"], json!({"name": "m1"}));
    assert_eq!(
        machine["status"]["initialization"]["infrastructureProvisioned"],
        true
    );
    let available = machine["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Available"))
        .cloned()
        .expect("Available");
    assert_eq!(available["status"], "True");
    assert_eq!(available["message"], JOINED_MESSAGE);
    // The typed view the controller reads agrees.
    let typed = capmox_apiserver::controller::seams::Management::machine(
        &capmox_apiserver::management::kube::KubeManagement::new(env.client.clone()),
        NS,
        "m1",
    )
    .await
    .expect("read")
    .expect("exists");
    assert!(typed.node_joined());

    // Provisioned without a provider ID: infrastructure reported, no node.
    env.create(Kind::Machine, capi_machine("m2", "c1")).await;
    env.create(Kind::ProxmoxMachine, proxmox_machine("m2"))
        .await;
    owner_of(&env, Kind::ProxmoxMachine, "m2", "Machine").await;
    env.edit(Kind::ProxmoxMachine, NS, "m2", true, |pm| {
        pm["status"]["initialization"] = json!({"provisioned": true});
    })
    .await;
    let m2 = eventually("m2 infrastructure provisioned", || async {
        let machine = env.get(Kind::Machine, NS, "m2").await?;
        (machine["status"]["initialization"]["infrastructureProvisioned"] == true)
            .then_some(machine)
    })
    .await;
    assert!(m2["status"]["nodeRef"].is_null());
    capi.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn deletion_cascades_through_machines_and_waits_for_finalizers() {
    let env = Env::start().await;
    let capi = Running::start(&env.client, spawn_capi);
    env.create(Kind::Cluster, proxmox_backed_cluster(NS, "c1"))
        .await;
    env.create(Kind::ProxmoxCluster, proxmox_cluster("c1"))
        .await;
    for name in ["m1", "m2"] {
        env.create(Kind::Machine, capi_machine(name, "c1")).await;
        env.create(Kind::ProxmoxMachine, proxmox_machine(name))
            .await;
    }
    for name in ["m1", "m2"] {
        owner_of(&env, Kind::ProxmoxMachine, name, "Machine").await;
    }
    owner_of(&env, Kind::ProxmoxCluster, "c1", "Cluster").await;

    // One Machine alone: its ProxmoxMachine is deleted, the Machine waits for it.
    env.delete(Kind::Machine, NS, "m1").await;
    eventually("pm m1 deleting", || async {
        let pm = env.get(Kind::ProxmoxMachine, NS, "m1").await?;
        (!pm["metadata"]["deletionTimestamp"].is_null()).then_some(())
    })
    .await;
    never(
        "Machine m1 goes before its ProxmoxMachine",
        Duration::from_secs(2),
        async || env.get(Kind::Machine, NS, "m1").await.is_none(),
    )
    .await;
    release(&env, Kind::ProxmoxMachine, "m1").await;
    gone(&env, Kind::ProxmoxMachine, "m1").await;
    gone(&env, Kind::Machine, "m1").await;

    // The Cluster: its Machines first, the ProxmoxCluster only after them.
    env.delete(Kind::Cluster, NS, "c1").await;
    eventually("pm m2 deleting", || async {
        let pm = env.get(Kind::ProxmoxMachine, NS, "m2").await?;
        (!pm["metadata"]["deletionTimestamp"].is_null()).then_some(())
    })
    .await;
    let machine = env
        .get(Kind::Machine, NS, "m2")
        .await
        .expect("m2 still there");
    assert!(!machine["metadata"]["deletionTimestamp"].is_null());
    never(
        "the ProxmoxCluster is deleted while Machines remain",
        Duration::from_secs(2),
        async || {
            let pc = env
                .get(Kind::ProxmoxCluster, NS, "c1")
                .await
                .unwrap_or_default();
            !pc["metadata"]["deletionTimestamp"].is_null()
        },
    )
    .await;
    release(&env, Kind::ProxmoxMachine, "m2").await;
    gone(&env, Kind::Machine, "m2").await;
    eventually("pc c1 deleting", || async {
        let pc = env.get(Kind::ProxmoxCluster, NS, "c1").await?;
        (!pc["metadata"]["deletionTimestamp"].is_null()).then_some(())
    })
    .await;
    assert!(env.get(Kind::Cluster, NS, "c1").await.is_some());
    release(&env, Kind::ProxmoxCluster, "c1").await;
    gone(&env, Kind::ProxmoxCluster, "c1").await;
    gone(&env, Kind::Cluster, "c1").await;
    capi.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_emulation_finishes_what_a_stopped_one_began() {
    let env = Env::start().await;
    env.create(Kind::Cluster, proxmox_backed_cluster(NS, "c1"))
        .await;
    env.create(Kind::ProxmoxCluster, proxmox_cluster("c1"))
        .await;
    let capi = Running::start(&env.client, spawn_capi);
    owner_of(&env, Kind::ProxmoxCluster, "c1", "Cluster").await;
    capi.stop().await;

    // Changes while nothing runs are picked up by the next instance's relist.
    provision_cluster(&env, "c1").await;
    env.create(Kind::Machine, capi_machine("m1", "c1")).await;
    env.create(Kind::ProxmoxMachine, proxmox_machine("m1"))
        .await;
    let capi = Running::start(&env.client, spawn_capi);
    owner_of(&env, Kind::ProxmoxMachine, "m1", "Machine").await;
    provisioned(&env, "c1").await;
    // Owner references are written once: the same uid, one entry.
    let pc = env.get(Kind::ProxmoxCluster, NS, "c1").await.expect("pc");
    assert_eq!(
        pc["metadata"]["ownerReferences"].as_array().map(Vec::len),
        Some(1)
    );
    capi.stop().await;
}
