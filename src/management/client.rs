//! Kubernetes clients for the management cluster: from a kubeconfig file when the server runs
//! outside the cluster, else from the pod's service account (in-cluster configuration).

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};

/// Connecting to the cluster API must not hang startup.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("reading kubeconfig {path}: {source}")]
    Kubeconfig {
        path: PathBuf,
        source: kube::config::KubeconfigError,
    },
    #[error(
        "no kubeconfig given and not running in a cluster ({0}); pass --authentication-kubeconfig \
         and --authorization-kubeconfig"
    )]
    InCluster(kube::config::InClusterError),
    #[error("building the Kubernetes client: {0}")]
    Client(kube::Error),
}

/// A client for `kubeconfig`'s current context, or the in-cluster configuration without one.
pub async fn client(kubeconfig: Option<&Path>) -> Result<kube::Client, ClientError> {
    kube::Client::try_from(config(kubeconfig).await?).map_err(ClientError::Client)
}

/// A client as [`client`], without a read timeout: the requests it forwards end when their
/// callers' do (a watch may be quiet for longer than any fixed timeout).
pub async fn forwarding_client(kubeconfig: Option<&Path>) -> Result<kube::Client, ClientError> {
    let mut config = config(kubeconfig).await?;
    config.read_timeout = None;
    kube::Client::try_from(config).map_err(ClientError::Client)
}

async fn config(kubeconfig: Option<&Path>) -> Result<kube::Config, ClientError> {
    let mut config = match kubeconfig {
        Some(path) => {
            let error = |source| ClientError::Kubeconfig {
                path: path.to_owned(),
                source,
            };
            let file = Kubeconfig::read_from(path).map_err(error)?;
            kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(error)?
        }
        None => kube::Config::incluster().map_err(ClientError::InCluster)?,
    };
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn kubeconfig_errors_name_the_file() {
        crate::server::tls::install_default_provider();
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("missing");
        let Err(err) = client(Some(&missing)).await else {
            panic!("a missing kubeconfig must fail");
        };
        assert!(
            err.to_string()
                .starts_with(&format!("reading kubeconfig {}", missing.display()))
        );

        let file = dir.path().join("kubeconfig");
        std::fs::write(
            &file,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n\
             users:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n\
             current-context: x\n",
        )
        .expect("write");
        let client = client(Some(&file)).await.expect("client");
        assert_eq!(client.default_namespace(), "default");
    }
}
