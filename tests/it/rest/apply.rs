//! Server-side apply and `managedFields` end to end: raw PATCHes with
//! `application/apply-patch+yaml` (options, create, conflicts, dry run, field validation,
//! managers recorded on every write), kubectl 1.33 `apply --server-side` (conflicts,
//! `--force-conflicts`, field removal, two managers sharing the network device list, the
//! client-side → server-side migration), the Python dynamic client, and an apply in
//! v1alpha1 read back in v1alpha2.

use serde_json::{Value, json};

use super::kubectl::Kubectl;
use super::{Api, GROUP, item, machine, machine_v1};
use crate::server::{python, run};

const APPLY: &str = "application/apply-patch+yaml";

fn machine_path(version: &str, name: &str) -> String {
    item(version, "default", "proxmoxmachines", name)
}

/// The `managedFields` entry of `manager` with `operation`.
fn entry<'a>(object: &'a Value, manager: &str, operation: &str) -> Option<&'a Value> {
    object["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == operation)
}

/// Whether `manager`'s `operation` entry owns the field at `path` (`FieldsV1` keys).
fn owns_field(object: &Value, manager: &str, operation: &str, path: &[&str]) -> bool {
    entry(object, manager, operation).is_some_and(|e| {
        path.iter()
            .try_fold(&e["fieldsV1"], |at, key| at.get(*key))
            .is_some()
    })
}

/// [`owns_field`], asserted to be `expected`, showing the managed fields when it is not.
#[track_caller]
fn check_owner(object: &Value, manager: &str, operation: &str, path: &[&str], expected: bool) {
    assert_eq!(
        owns_field(object, manager, operation, path),
        expected,
        "{manager} {operation} owning {path:?}: {:#}",
        object["metadata"]["managedFields"]
    );
}

#[track_caller]
fn owns(object: &Value, manager: &str, operation: &str, path: &[&str]) {
    check_owner(object, manager, operation, path, true);
}

#[track_caller]
fn disowns(object: &Value, manager: &str, operation: &str, path: &[&str]) {
    check_owner(object, manager, operation, path, false);
}

/// The machine `name` as kubectl reads it, managed fields included.
async fn read_managed(k: &Kubectl, name: &str) -> Value {
    k.json(&["get", "moxm", name, "--show-managed-fields"])
        .await
}

/// The names of a v1alpha2 machine's network devices, in order.
fn device_names(object: &Value) -> Vec<&str> {
    object["spec"]["network"]["networkDevices"]
        .as_array()
        .map(|devices| devices.iter().filter_map(|d| d["name"].as_str()).collect())
        .unwrap_or_default()
}

fn machine_yaml(name: &str, body: &str) -> String {
    format!("apiVersion: {GROUP}/v1alpha2\nkind: ProxmoxMachine\nmetadata:\n  name: {name}\n{body}")
}

#[tokio::test(flavor = "multi_thread")]
async fn apply_patch_options_create_conflict_and_dry_run() {
    let api = Api::start().await;
    let path = machine_path("v1alpha2", "ssa");
    let config = machine_yaml(
        "ssa",
        "spec:\n  sourceNode: pve1\n  templateID: 100\n  numSockets: 2\n  network:\n    networkDevices:\n    - name: net0\n      bridge: vmbr0\n",
    );

    let no_manager = api.patch(&path).raw(APPLY, config.clone()).send().await;
    assert_eq!(no_manager.status, 422, "{}", no_manager.text);
    assert_eq!(
        no_manager.message(),
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );

    let dry = api
        .patch(&format!("{path}?fieldManager=me&dryRun=All"))
        .raw(APPLY, config.clone())
        .send()
        .await;
    assert_eq!(dry.status, 201, "{}", dry.text);
    assert_eq!(
        api.get(&path).send().await.status,
        404,
        "dry run stores nothing"
    );

    let strict = api
        .patch(&format!("{path}?fieldManager=me&fieldValidation=Strict"))
        .raw(APPLY, format!("{config}  bogus: 1\n"))
        .send()
        .await;
    assert_eq!(strict.status, 400, "{}", strict.text);
    assert_eq!(
        strict.message(),
        "strict decoding error: unknown field \"spec.bogus\""
    );
    let warned = api
        .patch(&format!("{path}?fieldManager=me&dryRun=All"))
        .raw(APPLY, format!("{config}  bogus: 1\n"))
        .send()
        .await;
    assert_eq!(warned.status, 201, "{}", warned.text);
    assert_eq!(warned.warnings(), ["unknown field \"spec.bogus\""]);

    // A YAML body creates the object: 201, owned by its applier in the request's version.
    let created = api
        .patch(&format!("{path}?fieldManager=me"))
        .raw(APPLY, config.clone())
        .send()
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
    let created = created.json();
    assert_eq!(created["spec"]["numSockets"], 2);
    let mine = entry(&created, "me", "Apply").expect("the applier's entry");
    assert_eq!(mine["apiVersion"], format!("{GROUP}/v1alpha2"));
    owns(&created, "me", "Apply", &["f:spec", "f:numSockets"]);

    // Another manager changing the field conflicts: 409 with FieldManagerConflict causes.
    let other = config.replace("numSockets: 2", "numSockets: 4");
    let conflict = api
        .patch(&format!("{path}?fieldManager=other"))
        .raw(APPLY, other.clone())
        .send()
        .await;
    assert_eq!(conflict.status, 409, "{}", conflict.text);
    assert_eq!(conflict.reason(), "Conflict");
    assert_eq!(
        conflict.message(),
        "Apply failed with 1 conflict: conflict with \"me\": .spec.numSockets"
    );
    let causes = &conflict.json()["details"]["causes"];
    assert_eq!(causes[0]["reason"], "FieldManagerConflict");
    assert_eq!(causes[0]["field"], ".spec.numSockets");

    // JSON bodies (what kubectl sends) work too; force takes the field over.
    let forced = api
        .patch(&format!("{path}?fieldManager=other&force=true"))
        .raw(
            APPLY,
            json!({
                "apiVersion": format!("{GROUP}/v1alpha2"), "kind": "ProxmoxMachine",
                "metadata": {"name": "ssa"},
                "spec": {"sourceNode": "pve1", "templateID": 100, "numSockets": 4,
                         "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0"}]}}
            })
            .to_string(),
        )
        .send()
        .await;
    assert_eq!(forced.status, 200, "{}", forced.text);
    let forced = forced.json();
    assert_eq!(forced["spec"]["numSockets"], 4);
    owns(&forced, "other", "Apply", &["f:spec", "f:numSockets"]);
    disowns(&forced, "me", "Apply", &["f:spec", "f:numSockets"]);

    // `force` belongs to apply only.
    let forced_merge = api
        .patch(&format!("{path}?force=true"))
        .merge_patch(&json!({"spec": {"numSockets": 1}}))
        .send()
        .await;
    assert_eq!(forced_merge.status, 422, "{}", forced_merge.text);
    assert_eq!(
        forced_merge.message(),
        "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
    );
    // Applying through /status owns status fields only, recorded with its subresource.
    let status = api
        .patch(&format!("{path}/status?fieldManager=reporter"))
        .raw(
            APPLY,
            machine_yaml(
                "ssa",
                "spec:\n  numSockets: 9\nstatus:\n  addresses:\n  - type: InternalIP\n    address: 10.0.0.7\n",
            ),
        )
        .send()
        .await;
    assert_eq!(status.status, 200, "{}", status.text);
    let status = status.json();
    assert_eq!(status["status"]["addresses"][0]["address"], "10.0.0.7");
    assert_eq!(
        status["spec"]["numSockets"], 4,
        "spec is not written through /status"
    );
    let reporter = entry(&status, "reporter", "Apply").expect("the status applier's entry");
    assert_eq!(reporter["subresource"], "status");
    owns(&status, "reporter", "Apply", &["f:status", "f:addresses"]);
    disowns(&status, "reporter", "Apply", &["f:spec", "f:numSockets"]);

    let status_of_missing = api
        .patch(&format!(
            "{}/status?fieldManager=me",
            machine_path("v1alpha2", "absent")
        ))
        .raw(APPLY, machine_yaml("absent", ""))
        .send()
        .await;
    assert_eq!(status_of_missing.status, 404, "{}", status_of_missing.text);
}

#[tokio::test(flavor = "multi_thread")]
async fn every_write_records_its_manager() {
    let api = Api::start().await;
    let path = machine_path("v1alpha2", "tracked");
    let mut body = machine("tracked");
    body["metadata"]["namespace"] = json!("default");
    let created = api
        .post(&format!(
            "{}?fieldManager=creator",
            super::collection("v1alpha2", "default", "proxmoxmachines")
        ))
        .json(&body)
        .send()
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
    let created = created.json();
    let creator = entry(&created, "creator", "Update").expect("the creator's entry");
    assert_eq!(creator["apiVersion"], format!("{GROUP}/v1alpha2"));
    owns(&created, "creator", "Update", &["f:spec", "f:sourceNode"]);

    // Without fieldManager the manager is the User-Agent up to its first '/'.
    let patched = api
        .patch(&path)
        .header("user-agent", "capi-controller/1.9 (linux)")
        .merge_patch(&json!({"spec": {"numSockets": 5}}))
        .send()
        .await
        .json();
    owns(
        &patched,
        "capi-controller",
        "Update",
        &["f:spec", "f:numSockets"],
    );
    owns(&patched, "creator", "Update", &["f:spec", "f:sourceNode"]);

    // A status write is recorded with subresource "status".
    let mut status = patched.clone();
    status["status"] = json!({"addresses": [{"type": "InternalIP", "address": "10.0.0.5"}]});
    let written = api
        .put(&format!("{path}/status?fieldManager=reporter"))
        .json(&status)
        .send()
        .await;
    assert_eq!(written.status, 200, "{}", written.text);
    let written = written.json();
    let reporter = entry(&written, "reporter", "Update")
        .unwrap_or_else(|| panic!("the status writer's entry: {written:#}"));
    assert_eq!(reporter["subresource"], "status");
    owns(&written, "reporter", "Update", &["f:status", "f:addresses"]);

    // An empty list sent with an update resets the managed fields.
    let mut reset = written.clone();
    reset["metadata"]["managedFields"] = json!([]);
    let reset = api
        .put(&format!("{path}?fieldManager=resetter"))
        .json(&reset)
        .send()
        .await;
    assert_eq!(reset.status, 200, "{}", reset.text);
    assert!(
        reset.json()["metadata"]["managedFields"].is_null(),
        "{}",
        reset.text
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_server_side_apply_flow() {
    let api = Api::start().await;
    let k = Kubectl::new(&api, "1.33");
    let manifest = |sockets: &str, labels: &str| {
        machine_yaml(
            "ssa",
            &format!(
                "{labels}spec:\n  sourceNode: pve1\n  templateID: 100\n{sockets}  network:\n    networkDevices:\n    - name: net0\n      bridge: vmbr0\n"
            ),
        )
    };
    let apply = |file: String, extra: &'static [&'static str]| {
        let k = &k;
        async move {
            let mut args = vec!["apply", "--server-side", "-f", file.as_str()];
            args.extend(extra);
            k.run(&args).await
        }
    };

    let labelled = "  labels:\n    team: blue\n";
    let file = k.manifest("v1.yaml", &manifest("  numSockets: 2\n", labelled));
    let (ok, out, err) = apply(file, &[]).await;
    assert!(ok, "{err}");
    assert!(out.contains("serverside-applied"), "{out}");
    let object = read_managed(&k, "ssa").await;
    assert_eq!(object["spec"]["numSockets"], 2);
    owns(&object, "kubectl", "Apply", &["f:spec", "f:numSockets"]);

    let file = k.manifest("v2.yaml", &manifest("  numSockets: 3\n", labelled));
    assert!(apply(file, &[]).await.0);
    assert_eq!(read_managed(&k, "ssa").await["spec"]["numSockets"], 3);

    let theirs = k.manifest("other.yaml", &manifest("  numSockets: 4\n", ""));
    let (ok, _, err) = apply(theirs.clone(), &["--field-manager=other"]).await;
    assert!(!ok);
    assert!(
        err.contains("conflict") && err.contains(".spec.numSockets"),
        "{err}"
    );
    assert_eq!(read_managed(&k, "ssa").await["spec"]["numSockets"], 3);

    let (ok, _, err) = apply(theirs, &["--field-manager=other", "--force-conflicts"]).await;
    assert!(ok, "{err}");
    let object = read_managed(&k, "ssa").await;
    assert_eq!(object["spec"]["numSockets"], 4);
    owns(&object, "other", "Apply", &["f:spec", "f:numSockets"]);

    // Re-applying without the label removes it; numSockets, now other's, stays.
    let file = k.manifest("v3.yaml", &manifest("", ""));
    assert!(apply(file, &[]).await.0);
    let object = read_managed(&k, "ssa").await;
    assert!(
        object["metadata"]["labels"].get("team").is_none(),
        "{object}"
    );
    assert_eq!(object["spec"]["numSockets"], 4);
}

#[tokio::test(flavor = "multi_thread")]
async fn two_managers_share_the_network_device_list() {
    let api = Api::start().await;
    let k = Kubectl::new(&api, "1.33");
    let devices = |devices: &str| {
        machine_yaml(
            "shared",
            &format!(
                "spec:\n  sourceNode: pve1\n  templateID: 100\n  network:\n    networkDevices:\n{devices}"
            ),
        )
    };
    let first = k.manifest(
        "a.yaml",
        &devices("    - name: net0\n      bridge: vmbr0\n"),
    );
    k.ok(&["apply", "--server-side", "--field-manager=a", "-f", &first])
        .await;
    let second = k.manifest(
        "b.yaml",
        &machine_yaml(
            "shared",
            "spec:\n  network:\n    networkDevices:\n    - name: net1\n      bridge: vmbr1\n",
        ),
    );
    k.ok(&["apply", "--server-side", "--field-manager=b", "-f", &second])
        .await;
    let object = read_managed(&k, "shared").await;
    let names = device_names(&object);
    assert_eq!(names, ["net0", "net1"], "{object}");
    let device = |name: &str| format!(r#"k:{{"name":"{name}"}}"#);
    let path =
        |name: &str| ["f:spec", "f:network", "f:networkDevices", &device(name)].map(String::from);
    let owns_device = |manager: &str, name: &str, expected: bool| {
        let path = path(name);
        let path: Vec<&str> = path.iter().map(String::as_str).collect();
        check_owner(&object, manager, "Apply", &path, expected);
    };
    owns_device("a", "net0", true);
    owns_device("a", "net1", false);
    owns_device("b", "net1", true);
    owns_device("b", "net0", false);

    // b stops applying its device: only net1 goes.
    let none = k.manifest("b2.yaml", &machine_yaml("shared", ""));
    k.ok(&["apply", "--server-side", "--field-manager=b", "-f", &none])
        .await;
    let object = read_managed(&k, "shared").await;
    let names = device_names(&object);
    assert_eq!(names, ["net0"], "{object}");
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_client_side_apply_migrates_to_server_side() {
    let api = Api::start().await;
    let k = Kubectl::new(&api, "1.33");
    let manifest = |sockets: u32| {
        machine_yaml(
            "migrated",
            &format!(
                "spec:\n  sourceNode: pve1\n  templateID: 100\n  numSockets: {sockets}\n  network:\n    networkDevices:\n    - name: net0\n      bridge: vmbr0\n"
            ),
        )
    };
    let file = k.manifest("csa.yaml", &manifest(2));
    k.ok(&["apply", "-f", &file]).await;
    let object = read_managed(&k, "migrated").await;
    owns(
        &object,
        "kubectl-client-side-apply",
        "Update",
        &["f:spec", "f:numSockets"],
    );

    let file = k.manifest("ssa.yaml", &manifest(3));
    let (ok, out, err) = k.run(&["apply", "--server-side", "-f", &file]).await;
    assert!(ok, "no conflict expected:\n{err}");
    assert!(out.contains("serverside-applied"), "{out}");
    let object = read_managed(&k, "migrated").await;
    assert_eq!(object["spec"]["numSockets"], 3);
    owns(&object, "kubectl", "Apply", &["f:spec", "f:numSockets"]);
    disowns(
        &object,
        "kubectl-client-side-apply",
        "Update",
        &["f:spec", "f:numSockets"],
    );
}

const PYTHON_APPLY: &str = r#"
import json, sys
from kubernetes import client, config, dynamic

config.load_kube_config(config_file=sys.argv[1])
dyn = dynamic.DynamicClient(client.ApiClient())
group = "infrastructure.cluster.x-k8s.io"
machines = dyn.resources.get(api_version=group + "/v1alpha2", kind="ProxmoxMachine")
body = {
    "apiVersion": group + "/v1alpha2", "kind": "ProxmoxMachine",
    "metadata": {"name": "py-ssa", "namespace": "python"},
    "spec": {"sourceNode": "pve1", "templateID": 100, "numSockets": 2,
             "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0"}]}},
}
first = machines.server_side_apply(body=body, namespace="python", field_manager="py")
body["spec"]["numSockets"] = 6
second = machines.server_side_apply(body=body, namespace="python", field_manager="py")
body["spec"]["numSockets"] = 8
try:
    machines.server_side_apply(body=body, namespace="python", field_manager="rival")
    rival = None
except dynamic.exceptions.ConflictError as e:
    rival = json.loads(e.body)["details"]["causes"][0]["field"]
managers = [[e["manager"], e["operation"]] for e in second.to_dict()["metadata"]["managedFields"]]
print(json.dumps({"first": first.spec.numSockets, "second": second.spec.numSockets,
                  "managers": managers, "rival": rival}))
"#;

#[tokio::test(flavor = "multi_thread")]
async fn python_dynamic_client_server_side_apply() {
    let api = Api::start().await;
    let kubeconfig = api.dev.kubeconfig().to_string_lossy().into_owned();
    let (ok, out, err) = run(&python(), &["-c", PYTHON_APPLY, &kubeconfig]).await;
    assert!(ok, "python client failed:\n{err}");
    let result: Value = serde_json::from_str(out.trim()).expect("script output");
    assert_eq!(result["first"], 2);
    assert_eq!(result["second"], 6);
    assert_eq!(result["managers"], json!([["py", "Apply"]]));
    assert_eq!(result["rival"], ".spec.numSockets");
}

#[tokio::test(flavor = "multi_thread")]
async fn managed_fields_keep_their_api_version_across_versions() {
    let api = Api::start().await;
    let config = machine_v1("old");
    let applied = api
        .patch(&format!(
            "{}?fieldManager=legacy",
            machine_path("v1alpha1", "old")
        ))
        .raw(APPLY, config.to_string())
        .send()
        .await;
    assert_eq!(applied.status, 201, "{}", applied.text);

    let read = api
        .get(&machine_path("v1alpha2", "old"))
        .send()
        .await
        .json();
    let legacy = entry(&read, "legacy", "Apply").expect("the v1alpha1 applier's entry");
    assert_eq!(legacy["apiVersion"], format!("{GROUP}/v1alpha1"));
    owns(
        &read,
        "legacy",
        "Apply",
        &["f:spec", "f:network", "f:default"],
    );

    // A v1alpha2 applier changing a field the v1alpha1 applier owns conflicts with it (an
    // Apply owner is named without its version, as kube does).
    let conflict = api
        .patch(&format!(
            "{}?fieldManager=new",
            machine_path("v1alpha2", "old")
        ))
        .raw(
            APPLY,
            json!({
                "apiVersion": format!("{GROUP}/v1alpha2"), "kind": "ProxmoxMachine",
                "metadata": {"name": "old"}, "spec": {"sourceNode": "pve2"}
            })
            .to_string(),
        )
        .send()
        .await;
    assert_eq!(conflict.status, 409, "{}", conflict.text);
    assert!(
        conflict
            .message()
            .contains("conflict with \"legacy\": .spec.sourceNode"),
        "{}",
        conflict.text
    );
}

/// Cluster API's topology controller learns whether to rotate a ProxmoxMachineTemplate by
/// applying the desired one with `dryRun=All` and `topology.cluster.x-k8s.io/dry-run`:
/// exactly that probe passes the template's immutability, nothing is stored, and a changed
/// template is refused otherwise (a plain server dry run, or the annotation without one).
#[tokio::test(flavor = "multi_thread")]
async fn the_topology_controller_s_dry_run_passes_template_immutability() {
    let api = Api::start().await;
    let path = item("v1alpha2", "default", "proxmoxmachinetemplates", "workers");
    let template = |cores: u32, annotated: bool| {
        let annotations = if annotated {
            "  annotations:\n    topology.cluster.x-k8s.io/dry-run: \"\"\n"
        } else {
            ""
        };
        format!(
            "apiVersion: {GROUP}/v1alpha2\nkind: ProxmoxMachineTemplate\nmetadata:\n  name: workers\n\
             {annotations}spec:\n  template:\n    spec:\n      sourceNode: pve1\n      \
             templateID: 100\n      numCores: {cores}\n      network:\n        \
             networkDevices:\n        - {{name: net0, bridge: vmbr0}}\n"
        )
    };
    let applied = |query: &'static str, body: String| {
        let api = &api;
        let path = &path;
        async move {
            api.patch(&format!(
                "{path}?fieldManager=capi-topology&force=true{query}"
            ))
            .raw(APPLY, body)
            .send()
            .await
        }
    };
    let created = applied("", template(2, false)).await;
    assert_eq!(created.status, 201, "{}", created.text);

    let probe = applied("&dryRun=All", template(4, true)).await;
    assert_eq!(probe.status, 200, "{}", probe.text);
    assert_eq!(probe.json()["spec"]["template"]["spec"]["numCores"], 4);
    let stored = api.get(&path).send().await.json();
    assert_eq!(
        stored["spec"]["template"]["spec"]["numCores"], 2,
        "a dry run stores nothing"
    );

    for (query, annotated) in [("&dryRun=All", false), ("", true)] {
        let refused = applied(query, template(4, annotated)).await;
        assert_eq!(refused.status, 422, "{query} {annotated}: {}", refused.text);
        assert!(
            refused
                .message()
                .ends_with("spec: Forbidden: ProxmoxMachineTemplate is immutable"),
            "{}",
            refused.message()
        );
    }
}
