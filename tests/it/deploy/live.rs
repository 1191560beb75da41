//! The `infrastructure.cluster.x-k8s.io` objects of every cluster template, applied to a live
//! `dev` server with kubectl 1.33 the ways users apply them — client-side, again (nothing
//! changes), server-side over the client-side objects, server-side into an empty namespace —
//! and read back in v1alpha1 and v1alpha2. A refused object fails with the server's message.

use capmox_apiserver::api::{Kind, Version};
use serde_json::Value;

use super::templates::{render_with_classes, templates};
use crate::rest::kubectl::Kubectl;
use crate::rest::{Api, GROUP};

/// `default` for cluster-template.yaml, else the flavor's name.
fn flavor(file: &str) -> &str {
    file.strip_prefix("cluster-template-")
        .and_then(|f| f.strip_suffix(".yaml"))
        .unwrap_or("default")
}

fn kind_of(doc: &Value) -> Kind {
    Kind::from_name(doc["kind"].as_str().unwrap_or_default()).expect("a kind of ours")
}

fn name_of(doc: &Value) -> &str {
    doc["metadata"]["name"].as_str().unwrap_or_default()
}

/// Runs kubectl apply and checks that it reports every object with one of its `verbs`.
async fn apply(
    k: &Kubectl,
    args: &[&str],
    objects: &[&Value],
    verbs: impl Fn(&Value) -> &'static [&'static str],
    what: &str,
) {
    let out = k.ok(args).await;
    for object in objects {
        let verbs = verbs(object);
        let subject = format!(
            "{}.{GROUP}/{}",
            kind_of(object).descriptor().singular,
            name_of(object)
        );
        assert!(
            out.lines().any(|l| l
                .strip_prefix(&subject)
                .and_then(|verb| verb.strip_prefix(' '))
                .is_some_and(|verb| verbs.contains(&verb))),
            "{what}: {subject} is not {verbs:?} in\n{out}"
        );
    }
}

/// `(kind, name, resourceVersion, generation)` of every object of ours in the namespace.
async fn versions(k: &Kubectl) -> Vec<(Kind, String, Value, Value)> {
    let mut all = Vec::new();
    for kind in Kind::ALL {
        for item in read(k, kind, "v1alpha2").await {
            let meta = &item["metadata"];
            all.push((
                kind,
                name_of(&item).to_owned(),
                meta["resourceVersion"].clone(),
                meta["generation"].clone(),
            ));
        }
    }
    all
}

/// `applied` ⊆ `read`: every field given is there with the same value. Empty lists and maps
/// match an absent field (they are not serialized).
fn contained(applied: &Value, read: &Value, path: &str) -> Result<(), String> {
    match (applied, read) {
        (Value::Object(a), Value::Object(r)) => a.iter().try_for_each(|(key, value)| {
            let path = format!("{path}.{key}");
            match r.get(key) {
                Some(found) => contained(value, found, &path),
                None if is_empty(value) => Ok(()),
                None => Err(format!("{path} is missing")),
            }
        }),
        (Value::Array(a), Value::Array(r)) if a.len() == r.len() => a
            .iter()
            .zip(r)
            .enumerate()
            .try_for_each(|(i, (a, r))| contained(a, r, &format!("{path}[{i}]"))),
        _ if applied == read => Ok(()),
        _ => Err(format!("{path}: applied {applied}, read {read}")),
    }
}

fn holds_empty_list(value: &Value) -> bool {
    match value {
        Value::Array(a) => a.is_empty() || a.iter().any(holds_empty_list),
        Value::Object(o) => o.values().any(holds_empty_list),
        _ => false,
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Null => true,
        _ => false,
    }
}

/// The objects of `kind` in the namespace, read in `version`, by name.
async fn read(k: &Kubectl, kind: Kind, version: &str) -> Vec<Value> {
    let resource = format!("{}.{version}.{GROUP}", kind.descriptor().plural);
    let list = k.json(&["get", &resource]).await;
    let items = list["items"].as_array().cloned().unwrap_or_default();
    for item in &items {
        assert_eq!(item["apiVersion"], format!("{GROUP}/{version}"));
    }
    items
}

fn find<'a>(items: &'a [Value], name: &str, what: &str) -> &'a Value {
    items
        .iter()
        .find(|i| name_of(i) == name)
        .unwrap_or_else(|| panic!("{what}: {name} is not listed"))
}

/// What v1alpha1 must show of a v1alpha2 object: the fields both versions spell alike, and
/// the device list folded into `default` + `additionalDevices`.
fn check_v1alpha1(applied: &Value, v1: &Value, what: &str) {
    let spec = &applied["spec"];
    match kind_of(applied) {
        Kind::ProxmoxCluster | Kind::ProxmoxClusterTemplate => {
            for field in [
                "controlPlaneEndpoint",
                "ipv4Config",
                "ipv6Config",
                "dnsServers",
            ] {
                if let Some(value) = spec.get(field) {
                    contained(value, &v1["spec"][field], field)
                        .unwrap_or_else(|e| panic!("{what}: v1alpha1 {e}"));
                }
            }
        }
        // Only v1alpha2 serves it: check_read_back does not read it in v1alpha1.
        Kind::ProxmoxKubernetesRelease => {}
        Kind::ProxmoxMachine | Kind::ProxmoxMachineTemplate => {
            let machine = &spec["template"]["spec"];
            let v1_machine = &v1["spec"]["template"]["spec"];
            for field in [
                "sourceNode",
                "templateID",
                "templateSelector",
                "checks",
                "disks",
            ] {
                if let Some(value) = machine.get(field) {
                    contained(value, &v1_machine[field], field)
                        .unwrap_or_else(|e| panic!("{what}: v1alpha1 {e}"));
                }
            }
            let devices = machine["network"]["networkDevices"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let network = &v1_machine["network"];
            assert_eq!(
                network["default"]["bridge"], devices[0]["bridge"],
                "{what}: net0 is v1alpha1's default device"
            );
            let additional: Vec<&Value> = network["additionalDevices"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|d| &d["name"])
                .collect();
            let expected: Vec<&Value> = devices[1..].iter().map(|d| &d["name"]).collect();
            assert_eq!(additional, expected, "{what}: v1alpha1 additionalDevices");
            assert_eq!(
                network["vrfs"].as_array().map_or(0, Vec::len),
                machine["network"]["vrfs"].as_array().map_or(0, Vec::len),
                "{what}: v1alpha1 vrfs"
            );
        }
    }
}

/// Every applied object is served in every version of its kind with what was applied.
async fn check_read_back(k: &Kubectl, objects: &[&Value], what: &str) {
    for kind in Kind::ALL {
        let applied: Vec<&&Value> = objects.iter().filter(|o| kind_of(o) == kind).collect();
        let v2 = read(k, kind, "v1alpha2").await;
        assert_eq!(v2.len(), applied.len(), "{what}: {kind:?} in v1alpha2");
        let v1 = if kind.descriptor().serves(Version::V1alpha1) {
            let v1 = read(k, kind, "v1alpha1").await;
            assert_eq!(v1.len(), applied.len(), "{what}: {kind:?} in v1alpha1");
            Some(v1)
        } else {
            None
        };
        for object in applied {
            let name = name_of(object);
            let what = format!("{what}: {kind:?} {name}");
            let served = find(&v2, name, &what);
            for part in ["spec", "metadata"] {
                contained(&object[part], &served[part], part)
                    .unwrap_or_else(|e| panic!("{what}: v1alpha2 {e}"));
            }
            if let Some(v1) = &v1 {
                check_v1alpha1(object, find(v1, name, &what), &what);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn cluster_templates_apply_to_a_live_server() {
    let api = Api::start().await;
    let kubectl = Kubectl::new(&api, "1.33");
    for (file, text) in templates() {
        let docs = render_with_classes(&file, &text);
        let ours: Vec<&Value> = docs
            .iter()
            .filter(|d| {
                d["apiVersion"]
                    .as_str()
                    .is_some_and(|v| v.starts_with(&format!("{GROUP}/")))
            })
            .collect();
        assert!(!ours.is_empty(), "{file}");
        let manifest = ours
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("\n---\n");
        let flavor = flavor(&file);
        let path = kubectl.manifest(&format!("{flavor}.yaml"), &manifest);

        let client_side = kubectl.in_namespace(&format!("csa-{flavor}"));
        let what = format!("{file} (client-side apply)");
        let args = ["apply", "-f", &path];
        apply(&client_side, &args, &ours, |_| &["created"], &what).await;
        // Applying the same file again changes nothing. Only where the file holds an empty
        // list (`allowedNodes: []`) may kubectl say "configured": the server does not store
        // empty lists (docs/api.md), so kubectl's patch re-sends it and changes nothing.
        let before = versions(&client_side).await;
        let again = |object: &Value| -> &'static [&'static str] {
            if holds_empty_list(object) {
                &["unchanged", "configured"]
            } else {
                &["unchanged"]
            }
        };
        apply(&client_side, &args, &ours, again, &what).await;
        assert_eq!(
            versions(&client_side).await,
            before,
            "{what}: a repeated apply wrote nothing"
        );
        let what = format!("{file} (server-side apply over client-side)");
        server_side_apply(&client_side, &path, &ours, &what).await;

        let fresh = kubectl.in_namespace(&format!("ssa-{flavor}"));
        let what = format!("{file} (server-side apply)");
        server_side_apply(&fresh, &path, &ours, &what).await;
    }
}

/// `kubectl apply --server-side`, then every object read back in both versions.
async fn server_side_apply(k: &Kubectl, path: &str, objects: &[&Value], what: &str) {
    let args = ["apply", "--server-side", "-f", path];
    apply(k, &args, objects, |_| &["serverside-applied"], what).await;
    check_read_back(k, objects, what).await;
}
