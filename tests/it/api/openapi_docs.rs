//! The OpenAPI documents: the checked-in copy matches the generator, the
//! documents pass a real OpenAPI validator, and they carry what kubectl and
//! server-side apply read (GVKs, ObjectMeta references, list semantics,
//! descriptions).

use std::path::{Path, PathBuf};
use std::process::Command;

use capmox_apiserver::api::openapi::{self, definition_name};
use capmox_apiserver::api::{Kind, Version};
use serde_json::{Value, json};

const REGENERATE: &str = "cargo run -- openapi --write openapi/";

fn checked_in(path: &Path) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("openapi")
        .join(path)
}

#[test]
fn checked_in_documents_match_the_generator() {
    let files = openapi::generated_files().expect("documents render");
    assert_eq!(
        files.len(),
        5,
        "v3 and v2 per version, plus printer columns"
    );
    for file in files {
        let path = checked_in(&file.path);
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            current == file.contents,
            "{} is out of date with the API types; regenerate with `{REGENERATE}`",
            path.display()
        );
    }
}

/// The Python interpreter of the test venv (set by tests/run), or `None`
/// when running outside it locally.
fn test_python() -> Option<String> {
    match std::env::var("CAPMOX_TEST_PYTHON") {
        Ok(python) if !python.is_empty() => Some(python),
        _ if std::env::var("CI").is_ok_and(|ci| ci == "true") => panic!(
            "CAPMOX_TEST_PYTHON is not set: run the suite through `bash tests/run`, which installs openapi-spec-validator into a venv"
        ),
        _ => {
            eprintln!(
                "skipping the OpenAPI validator: CAPMOX_TEST_PYTHON is not set (use `bash tests/run`)"
            );
            None
        }
    }
}

#[test]
fn documents_pass_openapi_spec_validator() {
    let Some(python) = test_python() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let written = openapi::write_all(dir.path()).expect("documents written");
    let documents: Vec<&PathBuf> = written
        .iter()
        .filter(|p| {
            p.parent()
                .and_then(Path::file_name)
                .is_some_and(|d| d == "v3" || d == "v2")
        })
        .collect();
    assert_eq!(documents.len(), 4);
    for document in documents {
        let output = Command::new(&python)
            .args([
                "-c",
                "import json, sys\nfrom openapi_spec_validator import validate\nvalidate(json.load(open(sys.argv[1])))",
            ])
            .arg(document)
            .output()
            .expect("the test venv's python runs");
        assert!(
            output.status.success(),
            "{} is not a valid OpenAPI document:\n{}",
            document.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
fn the_v3_model_keeps_every_field() {
    for version in Version::ALL {
        let built = openapi::v3_json(version);
        let through_model = serde_json::to_value(openapi::v3_document(version).expect("parses"))
            .expect("serializes");
        assert_eq!(
            built, through_model,
            "openapiv3 dropped or changed something in {version}"
        );
    }
}

fn v3_schemas(version: Version) -> Value {
    openapi::v3_json(version)["components"]["schemas"].clone()
}

#[test]
fn kinds_and_lists_are_published_like_crds() {
    for version in Version::ALL {
        let schemas = v3_schemas(version);
        for kind in Kind::ALL {
            let schema = &schemas[definition_name(version, kind.as_str())];
            if !kind.descriptor().serves(version) {
                assert_eq!(
                    schema,
                    &Value::Null,
                    "{kind} is not in {version}'s document"
                );
                continue;
            }
            assert_eq!(
                schema["x-kubernetes-group-version-kind"],
                json!([{ "group": "infrastructure.cluster.x-k8s.io", "version": version.as_str(), "kind": kind.as_str() }])
            );
            assert_eq!(
                schema["properties"]["metadata"]["allOf"],
                json!([{ "$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" }])
            );
            assert_eq!(schema["properties"]["apiVersion"]["type"], "string");
            let list = &schemas[definition_name(version, kind.descriptor().list_kind)];
            assert_eq!(
                list["properties"]["items"]["items"]["$ref"],
                format!("#/components/schemas/io.x-k8s.cluster.infrastructure.{version}.{kind}")
            );
            assert_eq!(
                list["properties"]["metadata"]["allOf"][0]["$ref"],
                "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"
            );
        }
        for meta in [
            "ObjectMeta",
            "ListMeta",
            "ManagedFieldsEntry",
            "OwnerReference",
            "Time",
            "Status",
        ] {
            assert!(
                schemas
                    .get(format!("io.k8s.apimachinery.pkg.apis.meta.v1.{meta}"))
                    .is_some(),
                "{meta} is included"
            );
        }
        assert_eq!(
            schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]["ownerReferences"]
                ["x-kubernetes-list-map-keys"],
            json!(["uid"])
        );
    }
    let v2 = openapi::v2_document(Version::V1alpha2);
    assert_eq!(v2["swagger"], "2.0");
    assert_eq!(
        v2["definitions"]["io.x-k8s.cluster.infrastructure.v1alpha2.ProxmoxMachine"]["properties"]
            ["metadata"]["$ref"],
        "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
}

#[test]
fn list_semantics_differ_per_version() {
    let machine = |version| v3_schemas(version)[definition_name(version, "ProxmoxMachine")].clone();
    let v2 = machine(Version::V1alpha2);
    let devices =
        &v2["properties"]["spec"]["properties"]["network"]["properties"]["networkDevices"];
    assert_eq!(devices["x-kubernetes-list-type"], "map");
    assert_eq!(devices["x-kubernetes-list-map-keys"], json!(["name"]));
    assert_eq!(
        v2["properties"]["status"]["properties"]["conditions"]["x-kubernetes-list-map-keys"],
        json!(["type"])
    );
    let v1 = machine(Version::V1alpha1);
    let additional =
        &v1["properties"]["spec"]["properties"]["network"]["properties"]["additionalDevices"];
    assert_eq!(additional["x-kubernetes-list-map-keys"], json!(["name"]));
    let pool = &v2["properties"]["spec"]["properties"]["network"]["properties"]["networkDevices"]["items"]
        ["properties"]["ipPoolRef"];
    assert_eq!(pool["x-kubernetes-list-type"], "atomic");
    assert_eq!(pool["items"]["x-kubernetes-map-type"], "atomic");
}

#[test]
fn every_field_is_described() {
    fn walk(schema: &Value, path: &str, missing: &mut Vec<String>) {
        if let Some(properties) = schema["properties"].as_object() {
            for (name, property) in properties {
                let child = format!("{path}.{name}");
                if property["description"].as_str().is_none_or(str::is_empty) {
                    missing.push(child.clone());
                }
                walk(property, &child, missing);
            }
        }
        if let Some(items) = schema.get("items") {
            walk(items, &format!("{path}[]"), missing);
        }
        if let Some(values) = schema.get("additionalProperties") {
            walk(values, &format!("{path}[*]"), missing);
        }
    }
    let mut missing = Vec::new();
    for version in Version::ALL {
        let schemas = v3_schemas(version);
        for kind in Kind::served_in(version) {
            walk(
                &schemas[definition_name(version, kind.as_str())],
                &format!("{version}.{kind}"),
                &mut missing,
            );
        }
    }
    assert!(
        missing.is_empty(),
        "fields without a description: {missing:#?}"
    );
}

#[test]
fn new_v1alpha2_fields_are_published() {
    let schemas = v3_schemas(Version::V1alpha2);
    let cluster = &schemas[definition_name(Version::V1alpha2, "ProxmoxCluster")]["properties"]["spec"]
        ["properties"];
    let vip = &cluster["controlPlaneEndpointIPPoolRef"];
    assert_eq!(vip["type"], "object");
    assert_eq!(
        vip["x-kubernetes-validations"].as_array().map(Vec::len),
        Some(2)
    );
    let device = &schemas[definition_name(Version::V1alpha2, "ProxmoxMachine")]["properties"]["spec"]
        ["properties"]["network"]["properties"]["networkDevices"]["items"]["properties"];
    assert_eq!(device["dhcp4"]["type"], "boolean");
    assert_eq!(device["dhcp6"]["type"], "boolean");
    assert!(
        device["name"].get("default").is_none(),
        "names default by position, not to net0"
    );
    let v1 = v3_schemas(Version::V1alpha1);
    assert!(v1[definition_name(Version::V1alpha1, "ProxmoxCluster")]["properties"]["spec"]["properties"]
        .get("controlPlaneEndpointIPPoolRef")
        .is_none());
}

#[test]
fn printer_columns_follow_each_version() {
    let columns = openapi::printer_columns();
    let ready = |version: &str, kind: &str| {
        columns[version][kind]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["name"] == "Ready"))
            .map(|c| c["jsonPath"].clone())
    };
    assert_eq!(
        ready("v1alpha1", "ProxmoxMachine"),
        Some(json!(".status.ready"))
    );
    assert_eq!(
        ready("v1alpha2", "ProxmoxMachine"),
        Some(json!(".status.initialization.provisioned"))
    );
    assert_eq!(
        ready("v1alpha2", "ProxmoxCluster"),
        Some(json!(".status.initialization.provisioned"))
    );
    assert_eq!(columns["v1alpha2"]["ProxmoxMachineTemplate"], json!([]));
    assert_eq!(
        columns["v1alpha2"]["ProxmoxMachine"][4]["jsonPath"],
        r#".metadata.ownerReferences[?(@.kind=="Machine")].name"#
    );
}
