//! The valid objects the requests start from: every object of ours in examples/, in the
//! clusterctl templates (rendered as `clusterctl generate cluster` renders them), in the YAML
//! of docs/, and in the tests' fixtures (upstream's own flavors among them).

use std::path::Path;

use capmox_apiserver::api::{Kind, Version};
use serde_json::Value;

use crate::api::support;
use crate::deploy::templates::{render_with_classes, templates};
use crate::rest::GROUP;

/// One object and where it comes from.
pub struct Seed {
    pub source: String,
    pub object: Value,
}

impl Seed {
    pub fn kind(&self) -> Kind {
        Kind::from_name(self.object["kind"].as_str().unwrap_or_default()).expect("a kind of ours")
    }
}

/// An object of ours that upstream serves too: its kinds are the ones v1alpha1 (upstream's
/// API) serves, so a ProxmoxKubernetesRelease is no seed.
fn ours(object: &Value) -> bool {
    object["apiVersion"]
        .as_str()
        .is_some_and(|v| v.starts_with(&format!("{GROUP}/")))
        && object["kind"]
            .as_str()
            .and_then(Kind::from_name)
            .is_some_and(|k| k.descriptor().serves(Version::V1alpha1))
}

fn yaml_documents(text: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(text).unwrap_or_default()
}

fn repo(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn files(dir: &str, extension: &str) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = std::fs::read_dir(repo(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == extension))
        .map(|p| {
            let name = format!(
                "{dir}/{}",
                p.file_name().unwrap_or_default().to_string_lossy()
            );
            (name, std::fs::read_to_string(&p).expect("read"))
        })
        .collect();
    found.sort();
    found
}

/// The ```yaml blocks of a Markdown text.
fn yaml_blocks(markdown: &str) -> Vec<String> {
    markdown
        .split("```yaml\n")
        .skip(1)
        .filter_map(|rest| rest.split_once("```").map(|(block, _)| block.to_owned()))
        .collect()
}

/// Every seed, deduplicated (the same kind, version and spec once).
pub fn seeds() -> Vec<Seed> {
    let mut all = Vec::new();
    for (source, text) in files("examples/dev", "yaml") {
        all.extend(
            yaml_documents(&text)
                .into_iter()
                .map(|o| (source.clone(), o)),
        );
    }
    for (name, text) in templates() {
        all.extend(
            render_with_classes(&name, &text)
                .into_iter()
                .map(|o| (format!("deploy/clusterctl {name}"), o)),
        );
    }
    for (source, text) in files("docs", "md") {
        for block in yaml_blocks(&text) {
            all.extend(
                yaml_documents(&block)
                    .into_iter()
                    .map(|o| (source.clone(), o)),
            );
        }
    }
    let flavors = support::fixture("upstream_flavors.json");
    for entry in flavors["objects"].as_array().into_iter().flatten() {
        let source = format!(
            "upstream flavor {}",
            entry["flavor"].as_str().unwrap_or_default()
        );
        all.push((source, entry["object"].clone()));
    }
    for (name, build) in [
        ("cluster_v1", support::cluster_v1 as fn() -> Value),
        ("cluster_v2", support::cluster_v2),
        ("cluster_template_v1", support::cluster_template_v1),
        ("cluster_template_v2", support::cluster_template_v2),
        ("machine_v1", support::machine_v1),
        ("machine_v2", support::machine_v2),
        ("machine_template_v1", support::machine_template_v1),
        ("machine_template_v2", support::machine_template_v2),
    ] {
        all.push((format!("fixture support::{name}"), build()));
    }
    let mut seen = std::collections::HashSet::new();
    all.into_iter()
        .filter(|(_, object)| ours(object))
        .filter(|(_, o)| seen.insert(format!("{} {} {}", o["apiVersion"], o["kind"], o["spec"])))
        .map(|(source, object)| Seed { source, object })
        .collect()
}
