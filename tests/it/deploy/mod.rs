//! The deploy manifests: every kustomize overlay renders into a consistent installation, the
//! clusterctl components files are what their kustomizations render, and every cluster template,
//! rendered the way `clusterctl generate cluster` does, is well formed, documented, and holds
//! Proxmox objects our API admits — checked in-process and applied to a live server; the
//! container image builds without a daemon and runs from its own root filesystem; the
//! Grafana dashboard queries what the server exposes.

mod dashboard;
pub(crate) mod envsubst;
mod flavors;
mod image;
mod live;
mod manifests;
pub(crate) mod templates;
mod variables;

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The repository's `deploy/` directory.
pub fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy")
}

/// The clusterctl provider repository of this version.
pub fn release_dir() -> PathBuf {
    deploy_dir().join(format!(
        "clusterctl/infrastructure-proxmox/v{}",
        env!("CARGO_PKG_VERSION")
    ))
}

/// The documents of a multi-document YAML text (empty documents dropped).
pub fn documents(yaml: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(yaml)
        .unwrap_or_else(|e| panic!("invalid YAML: {e}\n{yaml}"))
        .into_iter()
        .filter(|doc| !doc.is_null())
        .collect()
}

/// Documents of `kind`.
pub fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}
