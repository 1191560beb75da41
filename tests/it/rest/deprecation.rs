//! A version marked deprecated in its kind's descriptor warns on every request in it, as a
//! CRD's `deprecationWarning` does; the other version does not. (No served version is
//! deprecated today, so the test serves ProxmoxMachine with v1alpha1 marked.)

use std::sync::Arc;

use capmox_apiserver::api::resource::MachineKind;
use capmox_apiserver::api::{Kind, Version};
use capmox_apiserver::registry::descriptor::{GroupVersion, ResourceDescriptor};
use capmox_apiserver::registry::request_options::FieldValidation;
use capmox_apiserver::registry::rest::RestConfig;
use capmox_apiserver::registry::strategy::{
    Admitted, FieldRequest, KindStrategy, Operation, ReadError, Rejection, Strategy,
};
use capmox_apiserver::server::app::{Server, ServerConfig, TlsSource};
use capmox_apiserver::server::assembly;
use capmox_apiserver::server::authn::Authentication;
use capmox_apiserver::server::authz::AlwaysAllow;
use capmox_apiserver::server::pki::DevPki;
use capmox_apiserver::server::{ApiRouter, ServerState, tls};
use capmox_storage::{EmbeddedConfig, Store};
use serde_json::Value;
use serde_json::value::RawValue;

use super::{GROUP, collection, machine_v1};

/// The machine strategy with ProxmoxMachine's descriptor, v1alpha1 marked deprecated.
struct DeprecatedMachines(KindStrategy<MachineKind>, ResourceDescriptor);

impl DeprecatedMachines {
    fn new() -> Self {
        let mut descriptor = ResourceDescriptor::from_kind(Kind::ProxmoxMachine.descriptor());
        for v in &mut descriptor.versions {
            v.deprecated = v.version == GroupVersion::from(Version::V1alpha1);
        }
        Self(KindStrategy::new(), descriptor)
    }
}

impl Strategy for DeprecatedMachines {
    fn descriptor(&self) -> &ResourceDescriptor {
        &self.1
    }

    fn admit(
        &self,
        version: GroupVersion,
        body: Value,
        mode: FieldValidation,
        operation: Operation<'_>,
    ) -> Result<Admitted, Rejection> {
        self.0.admit(version, body, mode, operation)
    }

    fn unknown_fields(&self, version: GroupVersion, body: &Value) -> Vec<String> {
        self.0.unknown_fields(version, body)
    }

    fn read(&self, version: GroupVersion, stored: &[u8]) -> Result<Value, ReadError> {
        self.0.read(version, stored)
    }

    fn read_json(
        &self,
        version: GroupVersion,
        stored: &[u8],
        revision: i64,
    ) -> Result<Box<RawValue>, ReadError> {
        self.0.read_json(version, stored, revision)
    }

    fn encode(&self, version: GroupVersion, hub: Value) -> Result<Value, ReadError> {
        self.0.encode(version, hub)
    }

    fn apply_schema_defaults(&self, version: GroupVersion, object: &mut Value) {
        self.0.apply_schema_defaults(version, object);
    }

    fn merge_configuration(
        &self,
        version: GroupVersion,
        object: &Value,
        config: &Value,
    ) -> Result<Value, String> {
        self.0.merge_configuration(version, object, config)
    }

    fn convert(
        &self,
        object: &Value,
        from: GroupVersion,
        to: GroupVersion,
    ) -> Result<Value, ReadError> {
        self.0.convert(object, from, to)
    }

    fn prune_unknown(&self, version: GroupVersion, body: &mut Value) -> Vec<String> {
        self.0.prune_unknown(version, body)
    }

    fn track_update(
        &self,
        stored: Option<&Value>,
        new: &mut Value,
        request: &FieldRequest<'_>,
    ) -> Result<(), ReadError> {
        self.0.track_update(stored, new, request)
    }

    fn apply(
        &self,
        stored: Option<&Value>,
        config: &Value,
        request: &FieldRequest<'_>,
        force: bool,
    ) -> Result<Value, Rejection> {
        self.0.apply(stored, config, request, force)
    }
}

fn warnings(response: &reqwest::Response) -> Vec<String> {
    response
        .headers()
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn deprecated_versions_warn() {
    tls::install_default_provider();
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = DevPki::ensure(dir.path(), &[]).expect("pki");
    let store = Store::open(EmbeddedConfig::new(dir.path().join("data")))
        .await
        .expect("store");
    let state = ServerState::new(Authentication::new(Vec::new(), true), Arc::new(AlwaysAllow));
    let strategies: Vec<Arc<dyn Strategy>> = vec![Arc::new(DeprecatedMachines::new())];
    let router = assembly::install_kinds(
        ApiRouter::new(state.clone()),
        &store,
        &RestConfig::default(),
        strategies,
    )
    .expect("api")
    .build();
    let config = ServerConfig::new(
        ([127, 0, 0, 1], 0).into(),
        TlsSource::Key(pki.serving_key().expect("key")),
    );
    let server = Server::start(config, state, router).await.expect("server");
    let ca = reqwest::Certificate::from_pem(pki.ca.cert_pem.as_bytes()).expect("ca");
    let client = reqwest::Client::builder()
        .tls_certs_only([ca])
        .build()
        .expect("client");
    let url = |path: &str| format!("https://{}{path}", server.local_addr());

    let created = client
        .post(url(&collection("v1alpha1", "default", "proxmoxmachines")))
        .json(&machine_v1("old"))
        .send()
        .await
        .expect("create");
    assert_eq!(created.status(), 201);
    assert_eq!(
        warnings(&created),
        [format!(
            "299 - \"{GROUP}/v1alpha1 ProxmoxMachine is deprecated\""
        )]
    );
    let listed = client
        .get(url(&collection("v1alpha1", "default", "proxmoxmachines")))
        .send()
        .await
        .expect("list");
    assert_eq!(warnings(&listed).len(), 1);
    let current = client
        .get(url(&collection("v1alpha2", "default", "proxmoxmachines")))
        .send()
        .await
        .expect("list v1alpha2");
    assert!(warnings(&current).is_empty());
    server.shutdown().await;
    store.close().await;
}
