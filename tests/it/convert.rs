//! `capmox-apiserver convert`, the offline conversion of manifests: the release's cluster
//! templates convert both ways with their variables in place; the stored objects as context
//! make a round trip through v1alpha1 lossless; other documents are kept byte for byte;
//! errors name the document and write nothing; the binary runs as the clusterctl plugin.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use capmox_apiserver::api::object::to_value;
use capmox_apiserver::api::{Kind, Version, manifest};
use capmox_apiserver::run::convert::{self, ConvertOptions};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::api::support::admit_create;
use crate::conversion::generate::hub;
use crate::deploy::envsubst::substitute;
use crate::deploy::templates::{FLAVORS, cluster_classes, render, templates, test_values};
use crate::deploy::{documents, release_dir};

/// Runs `convert` in process: (stdout, stderr) or the error's chain.
fn run(options: ConvertOptions) -> Result<(String, String), String> {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    convert::run(&options, &mut out, &mut err).map_err(|e| format!("{e:#}"))?;
    let text = |bytes| String::from_utf8(bytes).expect("utf-8");
    Ok((text(out), text(err)))
}

fn options(inputs: &[&Path], to: Version) -> ConvertOptions {
    ConvertOptions {
        inputs: inputs.iter().map(|p| p.to_path_buf()).collect(),
        recursive: false,
        to,
        context: Vec::new(),
        in_place: None,
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path
}

/// The Proxmox objects of a rendered template, converted by the server's own conversion.
fn converted_proxmox_objects(docs: Vec<Value>, to: Version) -> Vec<Value> {
    docs.into_iter()
        .map(
            |doc| match Kind::from_name(doc["kind"].as_str().unwrap_or_default()) {
                // A kind new in v1alpha2 stays in it, as `convert` leaves it.
                Some(kind) if kind.descriptor().serves(to) => {
                    let from =
                        Version::from_api_version(doc["apiVersion"].as_str().unwrap_or_default())
                            .expect("served version");
                    let mut object = manifest::convert(kind, from, doc, to, None)
                        .expect("converts")
                        .object;
                    object.as_object_mut().expect("object").remove("status");
                    object
                }
                _ => doc,
            },
        )
        .collect()
}

/// Objects without their empty lists: an expression that defaults to `[]`
/// (`${ALLOWED_NODES:=[]}`) stays in a converted template and becomes an empty list, where
/// converting the substituted template omits the list; both mean the same.
fn without_empty_lists(mut docs: Vec<Value>) -> Vec<Value> {
    fn strip(value: &mut Value) {
        match value {
            Value::Object(map) => {
                map.retain(|_, v| v.as_array().is_none_or(|a| !a.is_empty()));
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    docs.iter_mut().for_each(strip);
    docs
}

#[test]
fn cluster_templates_convert_both_ways_with_their_variables_in_place() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert_eq!(templates().len(), FLAVORS.len());
    // The files holding Proxmox objects: every flavor but the topology one (a Cluster naming
    // its class), and the ClusterClass files.
    let files = templates()
        .into_iter()
        .chain(cluster_classes())
        .filter(|(_, text)| text.contains("\nkind: Proxmox"));
    for (name, text) in files {
        let original = release_dir().join(&name);
        let (down, warnings) =
            run(options(&[&original], Version::V1alpha1)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            down.contains("infrastructure.cluster.x-k8s.io/v1alpha1"),
            "{name}"
        );
        // Every Proxmox object is converted, but a kind new in v1alpha2 (a release).
        let left_in_v1alpha2 = |docs: &[Value]| -> Vec<String> {
            docs.iter()
                .filter(|d| d["apiVersion"] == Version::V1alpha2.api_version())
                .map(|d| d["kind"].as_str().unwrap_or_default().to_owned())
                .collect()
        };
        let new_kinds: Vec<String> = render(&name, &text)
            .iter()
            .filter(|d| {
                Kind::from_name(d["kind"].as_str().unwrap_or_default())
                    .is_some_and(|k| !k.descriptor().serves(Version::V1alpha1))
            })
            .map(|d| d["kind"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(
            left_in_v1alpha2(&render(&name, &down)),
            new_kinds,
            "{name}: every Proxmox object is converted"
        );
        // Substituting the converted template gives what converting the substituted one
        // gives: every expression kept its place and its type.
        assert_eq!(
            without_empty_lists(render(&name, &down)),
            without_empty_lists(converted_proxmox_objects(
                render(&name, &text),
                Version::V1alpha1
            )),
            "{name}: converted, then substituted"
        );
        assert!(
            warnings
                .lines()
                .all(|w| w.contains("v1alpha1 cannot show every field")
                    || w.contains("is not served in v1alpha1: left in v1alpha2")
                    || w.contains("comments are not kept")),
            "{name}: {warnings}"
        );
        // Back up, with the stored objects as context: exactly the objects of the original.
        let rendered_original: Vec<Value> = render(&name, &text);
        let stored = write(dir.path(), "stored.yaml", &yaml_stream(&rendered_original));
        let rendered_down = write(dir.path(), "down.yaml", &yaml_stream(&render(&name, &down)));
        let (up, _) = run(ConvertOptions {
            context: vec![stored],
            ..options(&[&rendered_down], Version::V1alpha2)
        })
        .expect("converts up");
        assert_eq!(
            documents(&up),
            // The objects in their typed form (where an empty list is no list), as stored.
            converted_proxmox_objects(rendered_original, Version::V1alpha2),
            "{name}: up with context"
        );
        // And back up without context: every object the down conversion did not warn about
        // is admitted by the API.
        let v1 = write(dir.path(), &name, &down);
        let (up, _) = run(options(&[&v1], Version::V1alpha2)).expect("converts up");
        let warned = substitute(&warnings, &test_values()).expect("substitutes");
        for doc in render(&name, &up) {
            let Some(kind) = Kind::from_name(doc["kind"].as_str().unwrap_or_default()) else {
                continue;
            };
            let what = format!(
                "{kind} {}: v1alpha1 cannot show",
                doc["metadata"]["name"].as_str().unwrap_or_default()
            );
            if !warned.contains(&what) {
                let refused = admit_create(kind, doc.clone());
                assert!(refused.is_empty(), "{name}: {refused:?}\n{doc:#}");
            }
        }
    }
}

/// Objects as a YAML stream.
fn yaml_stream(objects: &[Value]) -> String {
    objects
        .iter()
        .map(|o| format!("---\n{}", serde_saphyr::to_string(o).expect("yaml")))
        .collect()
}

#[test]
fn documents_not_converted_are_kept_byte_for_byte() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cluster = "# the workload cluster\napiVersion: cluster.x-k8s.io/v1beta2\nkind: Cluster\nmetadata: {name: c1}   # flow style kept\n";
    let other_provider = "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\nkind: DockerMachine\nmetadata:\n  name: d1\n";
    let already = "apiVersion: infrastructure.cluster.x-k8s.io/v1alpha2\nkind: ProxmoxClusterTemplate\nmetadata:\n  name: t1\nspec:\n  template:\n    spec:\n      ipv4Config: {addresses: [10.0.0.10-10.0.0.20], prefix: 24, gateway: 10.0.0.1}\n      dnsServers: [10.0.0.1]\n";
    let machine = "apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1\nkind: ProxmoxMachine\nmetadata:\n  name: m1\n  namespace: ns\nspec:\n  sourceNode: pve1\n  templateID: 100\n  numCores: 4\n";
    let text = format!("{cluster}---\n{other_provider}--- # third\n{already}---\n{machine}");
    let input = write(dir.path(), "mixed.yaml", &text);
    let (out, _) = run(options(&[&input], Version::V1alpha2)).expect("converts");
    let expected_start = format!("{cluster}---\n{other_provider}--- # third\n{already}---\n");
    assert!(out.starts_with(&expected_start), "{out}");
    let converted = documents(&out[expected_start.len()..]);
    assert_eq!(converted.len(), 1);
    assert_eq!(
        converted[0]["apiVersion"],
        "infrastructure.cluster.x-k8s.io/v1alpha2"
    );
    assert_eq!(converted[0]["spec"]["numCores"], 4);
    assert_eq!(
        converted[0]["spec"]["network"],
        json!({"networkDevices": [{"name": "net0", "defaultIPv4": true, "defaultIPv6": true}]}),
        "v1alpha1 without a network: net0 on the cluster's pools"
    );
    assert!(
        converted[0].get("status").is_none(),
        "a manifest stays without status"
    );
}

#[test]
fn a_kubectl_list_converts_its_proxmox_items() {
    let dir = tempfile::tempdir().expect("tempdir");
    let list = json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}},
            {"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2", "kind": "ProxmoxMachine",
             "metadata": {"name": "m1", "namespace": "default"},
             "spec": {"sourceNode": "pve1", "templateID": 100,
                      "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0", "mtu": 9000}]}}},
        ],
    });
    let input = write(dir.path(), "list.json", &list.to_string());
    let (out, _) = run(options(&[&input], Version::V1alpha1)).expect("converts");
    let out: Value = serde_json::from_str(&out).expect("JSON in, JSON out");
    assert_eq!(out["items"][0], list["items"][0]);
    assert_eq!(
        out["items"][1]["apiVersion"],
        "infrastructure.cluster.x-k8s.io/v1alpha1"
    );
    assert_eq!(
        out["items"][1]["spec"]["network"]["default"],
        json!({"bridge": "vmbr0", "mtu": 9000})
    );
}

#[test]
fn errors_name_the_document_and_nothing_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = "apiVersion: infrastructure.cluster.x-k8s.io/v1alpha2\nkind: ProxmoxMachine\nmetadata: {name: ok}\nspec: {sourceNode: pve1, templateID: 100}\n";
    let bad = "apiVersion: infrastructure.cluster.x-k8s.io/v1alpha2\nkind: ProxmoxMachine\nmetadata: {name: m2, namespace: ns}\nspec:\n  network:\n    networkDevices: [{name: net0, bridge: vmbr0, mtu: -1}]\n";
    let first = write(dir.path(), "a.yaml", good);
    let second = write(dir.path(), "b.yaml", &format!("{good}---\n{bad}"));
    let error = run(ConvertOptions {
        in_place: Some(".bak".into()),
        ..options(&[dir.path()], Version::V1alpha1)
    })
    .expect_err("mtu -1 has no place in v1alpha1");
    assert_eq!(
        error,
        format!(
            "{}: document 2: ProxmoxMachine ns/m2: spec.network.networkDevices[0].mtu: -1 is \
             out of range for this API version (0 to 65535)",
            second.display()
        )
    );
    assert_eq!(std::fs::read_to_string(&first).expect("read"), good);
    assert!(!dir.path().join("a.yaml.bak").exists(), "nothing written");

    let boolean = "apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1\nkind: ProxmoxCluster\nmetadata: {name: c}\nspec: {externalManagedControlPlane: '${EXTERNAL}'}\n";
    let input = write(dir.path(), "bool.yaml", boolean);
    let error = run(options(&[&input], Version::V1alpha2)).expect_err("a boolean expression");
    assert!(
        error.ends_with(
            "spec.externalManagedControlPlane: ${EXTERNAL} stands for a boolean, \
                         which cannot be converted before it is substituted (clusterctl \
                         generate yaml)"
        ),
        "{error}"
    );
}

#[test]
fn in_place_rewrites_the_files_and_keeps_the_originals() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sub = dir.path().join("flavors");
    std::fs::create_dir(&sub).expect("mkdir");
    let template = release_dir().join("cluster-template.yaml");
    let original = std::fs::read_to_string(&template).expect("read");
    let copy = write(&sub, "cluster-template.yaml", &original);
    run(ConvertOptions {
        recursive: true,
        in_place: Some(".orig".into()),
        ..options(&[dir.path()], Version::V1alpha1)
    })
    .expect("converts");
    assert_eq!(
        std::fs::read_to_string(sub.join("cluster-template.yaml.orig")).expect("backup"),
        original
    );
    let converted = std::fs::read_to_string(&copy).expect("read");
    assert!(converted.contains("infrastructure.cluster.x-k8s.io/v1alpha1"));
    // The comment-only header document before the first object is kept as it was.
    assert!(converted.starts_with(original.split("---\n").next().expect("header")));
}

/// Up-conversion of everything `stored` shows in v1alpha1, with `stored` as context: the
/// stored objects again, field for field.
fn round_trip_with_context(stored: Vec<Value>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let stored_file = write(dir.path(), "stored.yaml", &yaml_stream(&stored));
    let (down, _) = run(options(&[&stored_file], Version::V1alpha1)).expect("converts down");
    let down_file = write(dir.path(), "v1alpha1.yaml", &down);
    let (up, warnings) = run(ConvertOptions {
        context: vec![stored_file],
        ..options(&[&down_file], Version::V1alpha2)
    })
    .expect("converts up");
    prop_assert_eq!(documents(&up), stored);
    prop_assert!(!warnings.contains("cannot show"), "{}", warnings);
    Ok(())
}

/// Distinct names, so that each object finds its own stored version.
fn named(mut objects: Vec<Value>) -> Vec<Value> {
    for (index, object) in objects.iter_mut().enumerate() {
        object["metadata"]["name"] = format!("object-{index}").into();
        object["metadata"]["namespace"] = "default".into();
    }
    objects
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn stored_objects_as_context_make_a_round_trip_lossless(
        clusters in proptest::collection::vec(hub::cluster(), 1..3),
        cluster_templates in proptest::collection::vec(hub::cluster_template(), 1..3),
        machines in proptest::collection::vec(hub::machine(), 1..3),
        machine_templates in proptest::collection::vec(hub::machine_template(), 1..3),
    ) {
        let mut objects: Vec<Value> = clusters.iter().map(to_value).collect();
        objects.extend(cluster_templates.iter().map(to_value));
        objects.extend(machines.iter().map(to_value));
        objects.extend(machine_templates.iter().map(to_value));
        round_trip_with_context(named(objects))?;
    }
}

#[test]
fn runs_as_the_clusterctl_plugin() {
    let dir = tempfile::tempdir().expect("tempdir");
    let machine = "apiVersion: infrastructure.cluster.x-k8s.io/v1alpha2\nkind: ProxmoxMachineTemplate\nmetadata: {name: w}\nspec:\n  template:\n    spec:\n      sourceNode: pve1\n      templateID: 100\n      numCores: ${NUM_CORES:=4}\n      network:\n        networkDevices: [{name: net0, bridge: vmbr0, defaultIPv4: true, defaultIPv6: true}]\n";
    for plugin in capmox_apiserver::cli::CLUSTERCTL_PLUGINS {
        let link = dir.path().join(plugin);
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_capmox-apiserver"), &link).expect("link");
        let mut child = Command::new(&link)
            .args([
                "--output-version",
                "infrastructure.cluster.x-k8s.io/v1alpha1",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        use std::io::Write as _;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(machine.as_bytes())
            .expect("write");
        let output = child.wait_with_output().expect("wait");
        let warnings = String::from_utf8(output.stderr).expect("utf-8");
        assert!(
            output.status.success() && warnings.is_empty(),
            "{plugin}: {warnings}"
        );
        let out = String::from_utf8(output.stdout).expect("utf-8");
        assert!(
            out.contains("apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1\n"),
            "{out}"
        );
        assert!(out.contains("      numCores: ${NUM_CORES:=4}\n"), "{out}");
        let help = Command::new(&link).arg("--help").output().expect("help");
        let help = String::from_utf8(help.stdout).expect("utf-8");
        assert!(help.contains("Usage: clusterctl capmox-convert"), "{help}");
    }
}
