//! `migrate import`: objects as `kubectl get -o json` exports them from upstream CAPMOX's
//! CRDs (shaped like those its v0.9.0 controller left in the e2e run) are restored with the
//! identity the management cluster refers to and the status the controller wrote; refused
//! input changes nothing; a second run skips what is there. Objects of another provider's kind
//! in our group-versions move in the same way, defined by the CRD exported with them.

use std::path::Path;
use std::sync::Arc;

use capmox_apiserver::registry::catalog::{self, Catalog};
use capmox_apiserver::registry::object_store::NoObserver;
use capmox_apiserver::registry::rest::RestConfig;
use capmox_apiserver::run::migrate::{ImportReport, import};
use capmox_apiserver::server::serve::StorageOptions;
use capmox_storage::{EmbeddedConfig, Store};
use serde_json::{Value, json};

const GROUP: &str = "infrastructure.cluster.x-k8s.io";
const MACHINE_UID: &str = "d0890a8e-b7a8-4534-b84f-fdb37e79a587";

/// A provisioned ProxmoxMachine as upstream stores it (v1alpha2).
fn upstream_machine() -> Value {
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
        "kind": "ProxmoxMachine",
        "metadata": {
            "name": "e2e-control-plane-7lscw", "namespace": "e2e", "uid": MACHINE_UID,
            "resourceVersion": "924", "generation": 3,
            "creationTimestamp": "2026-12-02T01:53:26Z",
            "finalizers": ["proxmoxmachine.infrastructure.cluster.x-k8s.io"],
            "labels": {"cluster.x-k8s.io/cluster-name": "e2e"},
            "annotations": {"cluster.x-k8s.io/cloned-from-name": "e2e-control-plane"},
            "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                "name": "e2e-control-plane-7lscw", "uid": "f1225c9f-98f1-4bf1-a579-53abcb92161a",
                "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [{"manager": "manager", "operation": "Update",
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
                "time": "2026-12-02T01:55:58Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:providerID": {}}}}]
        },
        "spec": {
            "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 100}},
            "format": "qcow2", "full": true, "memoryMiB": 4096, "numCores": 2, "numSockets": 1,
            "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0", "model": "virtio",
                "defaultIPv4": true, "defaultIPv6": true}]},
            "providerID": "proxmox://83f91ca7-864a-4135-b6b9-aeef0d2df7ab",
            "sourceNode": "pve1", "templateID": 9000, "virtualMachineID": 100
        },
        "status": {
            "addresses": [{"type": "Hostname", "address": "e2e-control-plane-7lscw"},
                          {"type": "InternalIP", "address": "127.0.1.10"}],
            "bootstrapDataProvided": true,
            "conditions": [{"type": "VirtualMachineProvisioned", "status": "True",
                "reason": "Provisioned", "message": "", "observedGeneration": 3,
                "lastTransitionTime": "2026-12-02T01:55:58Z"}],
            "initialization": {"provisioned": true},
            "proxmoxNode": "pve1", "vmStatus": "ready"
        }
    })
}

/// A machine template read at v1alpha1 (export in the other version works too).
fn upstream_template_v1alpha1() -> Value {
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
        "kind": "ProxmoxMachineTemplate",
        "metadata": {"name": "e2e-workers", "namespace": "e2e",
            "uid": "5b1f1d52-61c4-4a9e-9a56-7a1c2f3e4d5c", "resourceVersion": "400",
            "generation": 1, "creationTimestamp": "2026-12-02T01:50:00Z"},
        "spec": {"template": {"spec": {"sourceNode": "pve1", "templateID": 9000,
            "numCores": 2, "memoryMiB": 4096,
            "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 100}}}}}
    })
}

fn list(items: Vec<Value>) -> Value {
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}

fn write_file(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write export");
    path
}

/// The stored object `name` of `plural` in `version`, read through the registry.
async fn read(data: &Path, plural: &str, version: &str, name: &str) -> Option<Value> {
    let store = Store::open(EmbeddedConfig::new(data)).await.expect("store");
    let catalog = Catalog::new(
        catalog::strategies(),
        &store,
        Arc::new(NoObserver),
        &RestConfig::default(),
        Arc::new(capmox_apiserver::registry::admission::NoAdmission),
    )
    .expect("catalog");
    let rest = catalog
        .resource("infrastructure.cluster.x-k8s.io", plural)
        .expect("served");
    let version = rest.descriptor().version_named(version).expect("version");
    let object = rest.get(version, "e2e", name, "").await.ok();
    drop(catalog);
    store.close().await;
    object
}

/// What the management cluster refers an object by, and `more` metadata, as exported.
fn assert_identity_kept(stored: &Value, exported: &Value, more: &[&str]) {
    let identity = [
        "uid",
        "creationTimestamp",
        "generation",
        "finalizers",
        "ownerReferences",
        "labels",
    ];
    for field in identity.iter().chain(more) {
        assert_eq!(
            stored["metadata"][field], exported["metadata"][field],
            "metadata.{field}"
        );
    }
}

/// The exported ProxmoxMachine as stored, if it is.
async fn restored_machine(data: &Path) -> Option<Value> {
    read(
        data,
        "proxmoxmachines",
        "v1alpha2",
        "e2e-control-plane-7lscw",
    )
    .await
}

#[tokio::test]
async fn an_upstream_export_is_restored_with_its_identity_and_status() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let export = write_file(
        dir.path(),
        "export.json",
        &list(vec![upstream_machine(), upstream_template_v1alpha1()]).to_string(),
    );
    let storage = StorageOptions::embedded(&data);
    let report = import(&export, &storage, false).await.expect("import");
    assert_eq!(
        report,
        ImportReport {
            kinds: [
                ("ProxmoxMachine".to_owned(), (1, 0)),
                ("ProxmoxMachineTemplate".to_owned(), (1, 0))
            ]
            .into(),
            dry_run: false
        }
    );

    let machine = restored_machine(&data).await.expect("restored");
    let exported = upstream_machine();
    assert_identity_kept(&machine, &exported, &["annotations"]);
    assert_eq!(
        machine["metadata"]["managedFields"][0]["manager"], "manager",
        "managed fields kept"
    );
    assert_ne!(
        machine["metadata"]["resourceVersion"], "924",
        "our revision"
    );
    assert_eq!(
        machine["spec"]["providerID"],
        exported["spec"]["providerID"]
    );
    assert_eq!(machine["spec"]["virtualMachineID"], 100);
    assert_eq!(machine["status"]["initialization"]["provisioned"], true);
    assert_eq!(
        machine["status"]["conditions"][0]["reason"], "WaitingForBootstrapReady",
        "upstream's Provisioned still has its seed attached: ours resumes where it removes it"
    );
    assert_eq!(machine["status"]["conditions"][0]["status"], "True");
    assert_eq!(
        machine["status"]["addresses"],
        exported["status"]["addresses"]
    );
    let template = read(&data, "proxmoxmachinetemplates", "v1alpha1", "e2e-workers")
        .await
        .expect("restored");
    assert_eq!(
        template["metadata"]["uid"],
        "5b1f1d52-61c4-4a9e-9a56-7a1c2f3e4d5c"
    );
    assert_eq!(template["spec"]["template"]["spec"]["numCores"], 2);

    // Run again (after an interruption, say): nothing to do.
    let again = import(&export, &storage, false)
        .await
        .expect("import again");
    assert_eq!(
        again.kinds["ProxmoxMachine"],
        (0, 1),
        "already there, skipped"
    );
}

/// A co-tenant's CRD as `kubectl get crd -o json` shows it (CAPK's KubevirtCluster, cut down
/// to what the test needs): a default, a bound, a status subresource.
fn kubevirt_cluster_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "kubevirtclusters.infrastructure.cluster.x-k8s.io", "uid": "c0c0c0c0-0000-0000-0000-000000000001"},
        "spec": {
            "group": "infrastructure.cluster.x-k8s.io",
            "names": {"kind": "KubevirtCluster", "listKind": "KubevirtClusterList", "plural": "kubevirtclusters", "singular": "kubevirtcluster"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
                    "spec": {"type": "object", "properties": {
                        "controlPlaneEndpoint": {"type": "object", "required": ["host", "port"], "properties": {
                            "host": {"type": "string"}, "port": {"type": "integer", "format": "int32", "maximum": 65535}
                        }},
                        "sshKeys": {"type": "object", "properties": {"dataSecretName": {"type": "string", "default": "ssh-keys"}}}
                    }},
                    "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
                }}}
            }]
        }
    })
}

/// A KubevirtCluster as kube-apiserver stored it, owned by its Cluster, with CAPK's finalizer.
fn kubevirt_cluster(port: u32) -> Value {
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
        "kind": "KubevirtCluster",
        "metadata": {
            "name": "kv", "namespace": "e2e", "uid": "4a4a4a4a-1111-2222-3333-444444444444",
            "generation": 3, "creationTimestamp": "2026-12-01T10:00:00Z", "resourceVersion": "777",
            "finalizers": ["kubevirtcluster.infrastructure.cluster.x-k8s.io"],
            "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "kv",
                "uid": "5b5b5b5b-1111-2222-3333-444444444444", "controller": true, "blockOwnerDeletion": true}],
            "labels": {"cluster.x-k8s.io/cluster-name": "kv"}
        },
        "spec": {"controlPlaneEndpoint": {"host": "10.0.0.9", "port": port}, "sshKeys": {"dataSecretName": "kv-ssh"}},
        "status": {"ready": true}
    })
}

#[tokio::test]
async fn a_cotenant_kind_moves_in_with_its_identity_defined_by_its_exported_crd() {
    use capmox_apiserver::registry::cotenant::CoTenants;

    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let storage = StorageOptions::embedded(&data);
    // Without its CRD the kind is unknown: refused, nothing written.
    let alone = write_file(
        dir.path(),
        "alone.json",
        &list(vec![kubevirt_cluster(6443)]).to_string(),
    );
    let error = import(&alone, &storage, false)
        .await
        .expect_err("no CRD")
        .to_string();
    assert!(
        error.contains("no CustomResourceDefinition in the file defines it"),
        "{error}"
    );
    // Checked against its schema like any write: a port beyond the bound is refused.
    let bad = write_file(
        dir.path(),
        "bad.json",
        &list(vec![kubevirt_cluster_crd(), kubevirt_cluster(65536)]).to_string(),
    );
    let error = import(&bad, &storage, false)
        .await
        .expect_err("bound")
        .to_string();
    assert!(error.contains("spec.controlPlaneEndpoint.port"), "{error}");

    let export = write_file(
        dir.path(),
        "export.json",
        &list(vec![
            kubevirt_cluster_crd(),
            kubevirt_cluster(6443),
            upstream_machine(),
        ])
        .to_string(),
    );
    let report = import(&export, &storage, false).await.expect("import");
    assert_eq!(
        report.kinds,
        [
            ("KubevirtCluster".to_owned(), (1, 0)),
            ("ProxmoxMachine".to_owned(), (1, 0))
        ]
        .into()
    );
    let again = import(&export, &storage, false).await.expect("again");
    assert_eq!(
        again.kinds["KubevirtCluster"],
        (0, 1),
        "already there, skipped"
    );

    // Read back as the server serves it: from the CRD, through the same registry.
    let store = Store::open(EmbeddedConfig::new(&data))
        .await
        .expect("store");
    let catalog = Arc::new(
        Catalog::new(
            catalog::strategies(),
            &store,
            Arc::new(NoObserver),
            &RestConfig::default(),
            Arc::new(capmox_apiserver::registry::admission::NoAdmission),
        )
        .expect("catalog"),
    );
    let cotenants = CoTenants::for_group(GROUP, catalog.resources().iter().map(|r| r.descriptor()));
    capmox_apiserver::server::cotenants::serve_from_crds(
        &cotenants,
        &catalog,
        Arc::new(capmox_apiserver::server::admission::Caller::without_cluster()),
        false,
    );
    cotenants.replace(&[kubevirt_cluster_crd()]);
    let rest = cotenants
        .current()
        .served("v1alpha1", "kubevirtclusters")
        .expect("served");
    let version = rest
        .descriptor()
        .version_named("v1alpha1")
        .expect("version");
    let stored = rest.get(version, "e2e", "kv", "").await.expect("restored");
    let exported = kubevirt_cluster(6443);
    assert_identity_kept(&stored, &exported, &[]);
    assert_eq!(stored["spec"], exported["spec"]);
    assert_eq!(stored["status"], exported["status"]);
    drop((rest, cotenants, catalog));
    store.close().await;
}

#[tokio::test]
async fn a_refused_object_leaves_the_store_untouched() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let storage = StorageOptions::embedded(&data);
    let mut bad = upstream_machine();
    bad["metadata"]["name"] = json!("bad-0");
    bad["metadata"]["uid"] = json!("11111111-2222-3333-4444-555555555555");
    bad["spec"]["numSockets"] = json!("two");
    let export = write_file(
        dir.path(),
        "export.json",
        &list(vec![upstream_machine(), bad]).to_string(),
    );
    let error = import(&export, &storage, false)
        .await
        .expect_err("refused")
        .to_string();
    assert!(
        error.contains("1 of 2 objects cannot be restored, nothing was written")
            && error.contains("ProxmoxMachine e2e/bad-0")
            && error.contains("spec.numSockets"),
        "{error}"
    );
    assert!(
        restored_machine(&data).await.is_none(),
        "the valid object was not written either"
    );

    // The same name under another uid is another object: refused, not overwritten.
    let only_good = write_file(
        dir.path(),
        "good.json",
        &list(vec![upstream_machine()]).to_string(),
    );
    import(&only_good, &storage, false).await.expect("import");
    let mut other = upstream_machine();
    other["metadata"]["uid"] = json!("99999999-2222-3333-4444-555555555555");
    let clash = write_file(dir.path(), "clash.json", &other.to_string());
    let error = import(&clash, &storage, false)
        .await
        .expect_err("another uid")
        .to_string();
    assert!(error.contains("already exists"), "{error}");
}

#[tokio::test]
async fn the_command_line_imports_yaml_documents() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let yaml: Vec<String> = [upstream_machine(), upstream_template_v1alpha1()]
        .iter()
        .map(|o| serde_saphyr::to_string(o).expect("yaml"))
        .collect();
    let export = write_file(dir.path(), "export.yaml", &yaml.join("---\n"));
    let run = |extra: &[&str]| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_capmox-apiserver"));
        command
            .args(["migrate", "import", "--file"])
            .arg(&export)
            .arg("--data-dir")
            .arg(&data)
            .args(extra);
        command.output().expect("runs")
    };
    let dry = run(&["--dry-run"]);
    assert!(dry.status.success(), "{dry:?}");
    assert_eq!(
        String::from_utf8_lossy(&dry.stdout),
        "ProxmoxMachine: would restore 1, 0 already there\n\
         ProxmoxMachineTemplate: would restore 1, 0 already there\n\n"
    );
    assert!(
        restored_machine(&data).await.is_none(),
        "a dry run writes nothing"
    );
    let real = run(&[]);
    assert!(real.status.success(), "{real:?}");
    assert!(
        String::from_utf8_lossy(&real.stdout)
            .contains("ProxmoxMachine: restored 1, 0 already there")
    );
    assert!(restored_machine(&data).await.is_some());
}
