//! `kube-system/extension-apiserver-authentication`: the CAs and header names kube-apiserver
//! publishes for extension API servers. Parsed into a [`Trust`] and watched, so rotated CAs
//! take effect without a restart.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};

use super::request_header::RequestHeaderConfig;
use super::trust::{Trust, TrustStore};
use super::x509::CaBundle;

pub const NAMESPACE: &str = "kube-system";
pub const NAME: &str = "extension-apiserver-authentication";

pub const CLIENT_CA: &str = "client-ca-file";
pub const REQUEST_HEADER_CA: &str = "requestheader-client-ca-file";
pub const ALLOWED_NAMES: &str = "requestheader-allowed-names";
pub const USERNAME_HEADERS: &str = "requestheader-username-headers";
pub const UID_HEADERS: &str = "requestheader-uid-headers";
pub const GROUP_HEADERS: &str = "requestheader-group-headers";
pub const EXTRA_HEADER_PREFIXES: &str = "requestheader-extra-headers-prefix";

/// A value of the ConfigMap that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{NAMESPACE}/{NAME} key {key}: {message}")]
pub struct ConfigMapError {
    pub key: &'static str,
    pub message: String,
}

fn bundle(
    data: &BTreeMap<String, String>,
    key: &'static str,
) -> Result<Option<CaBundle>, ConfigMapError> {
    match data
        .get(key)
        .map(|pem| pem.trim())
        .filter(|pem| !pem.is_empty())
    {
        None => Ok(None),
        Some(pem) => CaBundle::from_pem(pem.as_bytes())
            .map(Some)
            .map_err(|e| ConfigMapError {
                key,
                message: e.to_string(),
            }),
    }
}

/// A JSON array of strings; absent or empty means none.
fn string_list(
    data: &BTreeMap<String, String>,
    key: &'static str,
) -> Result<Vec<String>, ConfigMapError> {
    match data.get(key).map(|v| v.trim()).filter(|v| !v.is_empty()) {
        None => Ok(Vec::new()),
        Some(json) => serde_json::from_str::<Option<Vec<String>>>(json)
            .map(Option::unwrap_or_default)
            .map_err(|e| ConfigMapError {
                key,
                message: format!("not a JSON array of strings: {e}"),
            }),
    }
}

/// The trust the ConfigMap's data describes. `client_ca_override` (`--client-ca-file`) takes
/// the place of its `client-ca-file`, as in kube's delegating authentication.
pub fn trust_from_data(
    data: &BTreeMap<String, String>,
    client_ca_override: Option<&CaBundle>,
) -> Result<Trust, ConfigMapError> {
    let client_ca = match client_ca_override {
        Some(ca) => Some(ca.clone()),
        None => bundle(data, CLIENT_CA)?,
    };
    let request_header = match bundle(data, REQUEST_HEADER_CA)? {
        None => None,
        Some(ca) => Some(RequestHeaderConfig {
            ca,
            allowed_names: string_list(data, ALLOWED_NAMES)?,
            username_headers: string_list(data, USERNAME_HEADERS)?,
            uid_headers: string_list(data, UID_HEADERS)?,
            group_headers: string_list(data, GROUP_HEADERS)?,
            extra_header_prefixes: string_list(data, EXTRA_HEADER_PREFIXES)?,
        }),
    };
    Ok(Trust::new(client_ca, request_header))
}

/// The authentication configuration could not be read at start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unable to load {NAMESPACE}/{NAME} within {waited:?} (does the service account have the \
     extension-apiserver-authentication-reader role?): {last_error}"
)]
pub struct InitialLoadError {
    pub waited: Duration,
    pub last_error: String,
}

/// Keeps the store in line with the ConfigMap until dropped.
pub type ConfigMapWatch = crate::task::TaskGuard;

struct ConfigMapSync {
    store: Arc<TrustStore>,
    client_ca_override: Option<CaBundle>,
    synced: tokio::sync::watch::Sender<bool>,
    last_error: Mutex<String>,
}

impl ConfigMapSync {
    fn record_error(&self, error: String) {
        tracing::warn!(%error, "authentication configuration");
        if let Ok(mut last) = self.last_error.lock() {
            *last = error;
        }
    }

    fn apply(&self, data: &BTreeMap<String, String>) {
        match trust_from_data(data, self.client_ca_override.as_ref()) {
            Ok(trust) => {
                let summary = format!("{trust:?}");
                if self.store.replace(trust) {
                    tracing::info!(trust = %summary, "loaded {NAMESPACE}/{NAME}");
                }
                self.synced.send_replace(true);
            }
            Err(e) => self.record_error(format!("{e}; keeping the previous configuration")),
        }
    }
}

/// Loads the ConfigMap into `store`, waiting up to `initial_timeout` for the first load, and
/// keeps watching it. A missing ConfigMap means no CAs (tokens and anonymous only) until it
/// appears; an unreadable one keeps the previous configuration.
pub async fn watch(
    client: kube::Client,
    store: Arc<TrustStore>,
    client_ca_override: Option<CaBundle>,
    initial_timeout: Duration,
) -> Result<ConfigMapWatch, InitialLoadError> {
    let (synced, mut synced_rx) = tokio::sync::watch::channel(false);
    let sync = Arc::new(ConfigMapSync {
        store,
        client_ca_override,
        synced,
        last_error: Mutex::new("no answer yet".to_owned()),
    });
    let api: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
    let config = watcher::Config::default().fields(&format!("metadata.name={NAME}"));
    let task_sync = Arc::clone(&sync);
    let task = tokio::spawn(async move {
        let sync = task_sync;
        let mut events = watcher(api, config).default_backoff().boxed();
        let mut seen = false;
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Init) => seen = false,
                Ok(watcher::Event::InitApply(cm) | watcher::Event::Apply(cm)) => {
                    seen = true;
                    sync.apply(&cm.data.unwrap_or_default());
                }
                Ok(watcher::Event::InitDone) => {
                    if !seen {
                        tracing::warn!(
                            "{NAMESPACE}/{NAME} does not exist: client certificates and front-proxy \
                             headers are not trusted until it does"
                        );
                        sync.apply(&BTreeMap::new());
                    }
                }
                Ok(watcher::Event::Delete(_)) => {
                    tracing::warn!("{NAMESPACE}/{NAME} was deleted; keeping the last configuration")
                }
                Err(e) => sync.record_error(e.to_string()),
            }
        }
    });
    let guard = ConfigMapWatch::new(task);
    match tokio::time::timeout(initial_timeout, synced_rx.wait_for(|done| *done)).await {
        Ok(Ok(_)) => Ok(guard),
        _ => Err(InitialLoadError {
            waited: initial_timeout,
            last_error: sync
                .last_error
                .lock()
                .map(|e| e.clone())
                .unwrap_or_default(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::authn::test_support::{authority, bundle};

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn parses_kubeadm_style_data() {
        let client = authority("kubernetes");
        let proxy = authority("front-proxy-ca");
        let trust = trust_from_data(
            &data(&[
                (CLIENT_CA, &client.pair.cert_pem),
                (REQUEST_HEADER_CA, &proxy.pair.cert_pem),
                (ALLOWED_NAMES, r#"["front-proxy-client"]"#),
                (USERNAME_HEADERS, r#"["X-Remote-User"]"#),
                (GROUP_HEADERS, r#"["X-Remote-Group"]"#),
                (EXTRA_HEADER_PREFIXES, r#"["X-Remote-Extra-"]"#),
            ]),
            None,
        )
        .expect("trust");
        assert_eq!(trust.client_ca(), Some(&bundle(&client)));
        let rh = trust.request_header().expect("request header");
        assert_eq!(rh.ca, bundle(&proxy));
        assert_eq!(rh.allowed_names, ["front-proxy-client"]);
        assert_eq!(rh.username_headers, ["X-Remote-User"]);
        assert!(rh.uid_headers.is_empty(), "absent key: no UID headers");
        assert_eq!(rh.group_headers, ["X-Remote-Group"]);
        assert_eq!(rh.extra_header_prefixes, ["X-Remote-Extra-"]);
    }

    #[test]
    fn optional_parts_and_override() {
        let client = authority("kubernetes");
        let override_ca = authority("override");
        assert_eq!(trust_from_data(&data(&[]), None), Ok(Trust::default()));
        // `null` and an empty array both mean "any name".
        let proxy = authority("front-proxy-ca");
        for allowed in ["null", "[]", ""] {
            let trust = trust_from_data(
                &data(&[
                    (REQUEST_HEADER_CA, &proxy.pair.cert_pem),
                    (ALLOWED_NAMES, allowed),
                ]),
                None,
            )
            .expect("trust");
            assert!(trust.request_header().expect("rh").allowed_names.is_empty());
        }
        let trust = trust_from_data(
            &data(&[(CLIENT_CA, &client.pair.cert_pem)]),
            Some(&bundle(&override_ca)),
        )
        .expect("trust");
        assert_eq!(trust.client_ca(), Some(&bundle(&override_ca)));
        assert!(trust.request_header().is_none());
    }

    #[test]
    fn malformed_values_name_their_key() {
        let proxy = authority("front-proxy-ca");
        let err = trust_from_data(&data(&[(CLIENT_CA, "garbage")]), None).expect_err("pem");
        assert_eq!(err.key, CLIENT_CA);
        let err = trust_from_data(
            &data(&[
                (REQUEST_HEADER_CA, &proxy.pair.cert_pem),
                (ALLOWED_NAMES, "front-proxy"),
            ]),
            None,
        )
        .expect_err("json");
        assert_eq!(err.key, ALLOWED_NAMES);
        assert!(err.to_string().starts_with(
            "kube-system/extension-apiserver-authentication key requestheader-allowed-names: not a JSON array"
        ));
    }
}
