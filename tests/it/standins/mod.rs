//! The management-cluster stand-ins of `dev` (Cluster, Machine, Secret, IPAM kinds): kube-rs
//! (`DynamicObject` and `Secret`), kubectl 1.33 and 1.27, the Python client and raw requests
//! against a dev server; and their absence when `dev` is told not to serve them.

pub mod conversion_webhook;
mod crd_deletion;
mod crd_validation;
mod crds;
mod kube_rs;
mod kubectl;
mod python;

mod raw;

mod kinds;
pub use kinds::{KINDS, KindCase};

use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::{Value, json};

use std::time::Duration;

use crate::auth::eventually;
use crate::rest::Api;
use crate::rest::kubectl::Kubectl;

pub const CAPI: &str = "cluster.x-k8s.io";
pub const IPAM: &str = "ipam.cluster.x-k8s.io";

/// Applies the CustomResourceDefinition `crd` to the dev server with kubectl (written as
/// `file`) and waits until its kind's `collection` is served; answers the manifest's path.
pub async fn serve_crd(api: &Api, k: &Kubectl, file: &str, crd: &str, collection: &str) -> String {
    let manifest = k.manifest(file, crd);
    k.ok(&["apply", "-f", &manifest]).await;
    eventually(
        Duration::from_secs(10),
        &format!("{collection} served"),
        || async { api.get(collection).send().await.status == 200 },
    )
    .await;
    manifest
}

/// A kube-rs client for the dev server.
pub async fn client(api: &Api) -> kube::Client {
    let kubeconfig = Kubeconfig::read_from(api.dev.kubeconfig()).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config");
    kube::Client::try_from(config).expect("client")
}

impl KindCase {
    /// The collection path in `namespace` (ignored for cluster-scoped kinds).
    pub fn collection(&self, namespace: &str) -> String {
        let prefix = if self.api_version.contains('/') {
            format!("/apis/{}", self.api_version)
        } else {
            format!("/api/{}", self.api_version)
        };
        if self.namespaced {
            format!("{prefix}/namespaces/{namespace}/{}", self.plural)
        } else {
            format!("{prefix}/{}", self.plural)
        }
    }

    pub fn object(&self, name: &str, namespace: &str) -> Value {
        let mut metadata = json!({"name": name});
        if self.namespaced {
            metadata["namespace"] = json!(namespace);
        }
        let mut object = json!({
            "apiVersion": self.api_version,
            "kind": self.kind,
            "metadata": metadata,
        });
        if self.kind == "Secret" {
            object["stringData"] = json!({"token": "s3cret"});
        } else {
            object["spec"] = json!({"anything": {"goes": [1, "two"]}});
        }
        object
    }
}
