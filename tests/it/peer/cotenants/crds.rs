//! The co-tenants' CRDs the pair installed on both sides (`COTENANT_CRDS`, the directories
//! tests/e2e/peer.sh took from the providers' Go modules, and tests/e2e/cotenant-crds), and
//! the objects of ours group-versions their modules' cluster templates hold.

use std::path::{Path, PathBuf};

use regex::Regex;
use serde_json::Value;

use crate::rest::GROUP;

/// One kind of a CRD in one of our group-versions.
pub struct CrdKind {
    pub kind: String,
    pub plural: String,
    pub version: String,
    /// The version's `openAPIV3Schema`.
    pub schema: Value,
    pub status: bool,
    /// Whether the version has the `scale` subresource.
    pub scale: bool,
}

impl CrdKind {
    /// The path of the kind's collection in a namespace, or of one object.
    pub fn path(&self, namespace: &str, name: Option<&str>) -> String {
        let collection = format!(
            "/apis/{GROUP}/{}/namespaces/{namespace}/{}",
            self.version, self.plural
        );
        match name {
            Some(name) => format!("{collection}/{name}"),
            None => collection,
        }
    }
}

/// The directories of `COTENANT_CRDS`.
pub fn directories() -> Vec<PathBuf> {
    let dirs = std::env::var("COTENANT_CRDS").unwrap_or_else(|_| {
        panic!("COTENANT_CRDS is not set: run the differential with `tests/e2e/run differential`")
    });
    dirs.split_whitespace().map(PathBuf::from).collect()
}

fn yaml_files(dir: &Path) -> Vec<(PathBuf, Vec<Value>)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("read");
            let text = substituted(&text);
            let documents = serde_saphyr::from_multiple::<Value>(&text).unwrap_or_default();
            (path, documents)
        })
        .collect()
}

/// A cluster template with clusterctl's variables filled in: a variable's default where it
/// has one (`${NAME:=default}`), else a value any string field takes.
fn substituted(text: &str) -> String {
    let variable = Regex::new(r"\$\{([A-Za-z0-9_]+)(?::?[=-]([^}]*))?\}").expect("regex");
    variable
        .replace_all(text, |c: &regex::Captures| {
            c.get(2).map_or("x1".to_owned(), |d| d.as_str().to_owned())
        })
        .into_owned()
}

/// Every kind served in our group-versions, each of our versions it is served in once (a
/// kind kube-apiserver keeps, because it is also served in another version, is served by ours
/// through kube-apiserver in our versions).
pub fn kinds(dirs: &[PathBuf]) -> Vec<CrdKind> {
    let ours = |v: &str| v == "v1alpha1" || v == "v1alpha2";
    let mut kinds = Vec::new();
    for dir in dirs {
        for (_, documents) in yaml_files(dir) {
            for crd in documents {
                let spec = &crd["spec"];
                let versions = spec["versions"].as_array().cloned().unwrap_or_default();
                let served: Vec<&Value> = versions.iter().filter(|v| v["served"] == true).collect();
                if spec["group"] != GROUP || spec["scope"] != "Namespaced" {
                    continue;
                }
                for version in served
                    .into_iter()
                    .filter(|v| ours(v["name"].as_str().unwrap_or_default()))
                {
                    kinds.push(CrdKind {
                        kind: spec["names"]["kind"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                        plural: spec["names"]["plural"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                        version: version["name"].as_str().unwrap_or_default().to_owned(),
                        schema: version["schema"]["openAPIV3Schema"].clone(),
                        status: version["subresources"].get("status").is_some(),
                        scale: version["subresources"].get("scale").is_some(),
                    });
                }
            }
        }
    }
    kinds
}

/// The objects of these kinds in the cluster templates next to the CRDs (a module's
/// `templates/`), with the file each comes from.
pub fn template_objects(dirs: &[PathBuf], kinds: &[CrdKind]) -> Vec<(String, Value)> {
    let mut found = Vec::new();
    for dir in dirs {
        let Some(module) = dir.ancestors().nth(3) else {
            continue;
        };
        let templates = module.join("templates");
        if !templates.is_dir() {
            continue;
        }
        for (path, documents) in yaml_files(&templates) {
            let source = path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            for object in documents {
                let matches = kinds.iter().any(|k| {
                    object["kind"] == k.kind.as_str()
                        && object["apiVersion"] == format!("{GROUP}/{}", k.version).as_str()
                });
                if matches {
                    found.push((source.clone(), object));
                }
            }
        }
    }
    found
}
