//! `dev` mode: everything on 127.0.0.1 with a generated CA, serving certificate and admin
//! kubeconfig in a directory, the embedded store in its `data/` subdirectory, client
//! certificates verified against that CA (requests without one are anonymous), and every
//! authenticated or anonymous request allowed.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use capmox_storage::Store;

use axum::extract::Path as UrlPath;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

use crate::management::standins;
use crate::registry::catalog;
use crate::registry::catalog::Catalog;
use crate::registry::cotenant::CoTenants;
use crate::registry::rest::RestConfig;
use crate::registry::validation;

use super::GroupResource;
use super::app::{Server, ServerConfig, StartError, TlsSource};
use super::assembly;
use super::authn::Authentication;
use super::authn::trust::{Trust, TrustStore};
use super::authn::x509::{CaBundle, ClientCertificateAuthenticator};
use super::authz::AlwaysAllow;
use super::cotenants;
use super::error::ApiError;
use super::negotiation::Negotiated;
use super::pki::DevPki;
use super::response;
use super::router::{ApiRouter, ServerState};
use super::serve::StorageConfig;
use super::tls::TlsError;

/// The default directory for dev material, relative to the working directory.
pub const DEFAULT_DIR: &str = ".capmox-dev";
/// The default port of `dev`.
pub const DEFAULT_PORT: u16 = 8443;

/// The store's directory below the dev directory.
pub const DATA_DIR: &str = "data";

#[derive(Debug, Clone)]
pub struct DevOptions {
    pub dir: PathBuf,
    /// 0 picks a free port.
    pub port: u16,
    /// Tunables of the REST layer (tests shorten the bookmark interval).
    pub rest: RestConfig,
    /// Serve the management-cluster stand-ins (Cluster, Machine, Secret, IPAM kinds) the
    /// built-in controller reads.
    pub stand_ins: bool,
}

impl Default for DevOptions {
    fn default() -> Self {
        Self {
            dir: PathBuf::from(DEFAULT_DIR),
            port: DEFAULT_PORT,
            rest: RestConfig::default(),
            stand_ins: true,
        }
    }
}

/// A running dev server and the kubeconfig to reach it.
pub struct DevServer {
    pub server: Server,
    /// Whether the management-cluster stand-ins are served.
    pub stand_ins: bool,
    pub kubeconfig: PathBuf,
    pub pki: DevPki,
    /// The embedded store in `<dir>/data`.
    pub store: Store,
    /// The served kinds (what the built-in controller runs on).
    pub catalog: Arc<Catalog>,
}

impl DevServer {
    /// Starts the dev server with the API over the embedded store; `routes` adds endpoints.
    pub async fn start(
        options: &DevOptions,
        routes: impl FnOnce(ApiRouter) -> ApiRouter,
    ) -> Result<Self, StartError> {
        let pki = DevPki::ensure(&options.dir, &[])?;
        let client_ca = CaBundle::from_certificates(pki.client_ca()?)
            .map_err(|e| TlsError::Config(format!("dev CA: {e}")))?;
        let trust = TrustStore::new(Trust::new(Some(client_ca), None));
        let store = assembly::open_store(&StorageConfig::Embedded {
            data_dir: options.dir.join(DATA_DIR),
        })
        .await?;
        let state = ServerState::new(
            Authentication::new(
                vec![Arc::new(ClientCertificateAuthenticator::new(Arc::clone(
                    &trust,
                )))],
                true,
            ),
            Arc::new(AlwaysAllow),
        );
        let mut kinds = catalog::strategies();
        // With the stand-ins comes a CRD stand-in: other providers' CRDs of our group make
        // their kinds known, as the cluster's CRDs do in `serve`.
        let cotenants = options.stand_ins.then(|| {
            Arc::new(CoTenants::for_group(
                crate::api::GROUP,
                kinds.iter().map(|s| s.descriptor()),
            ))
        });
        let state = match &cotenants {
            Some(cotenants) => state.with_cotenants(Arc::clone(cotenants)),
            None => state,
        };
        if options.stand_ins {
            kinds.extend(standins::strategies());
        }
        let (mut api, catalog) =
            assembly::install_catalog(ApiRouter::new(state.clone()), &store, &options.rest, kinds)?;
        if options.stand_ins {
            api = api
                .merge(axum::Router::new().route("/api/v1/namespaces/{name}", get(any_namespace)));
        }
        let router = routes(api).build();
        let mut config = ServerConfig::new(
            SocketAddr::from((Ipv4Addr::LOCALHOST, options.port)),
            TlsSource::Key(pki.serving_key()?),
        );
        config.client_verifier = Some(trust.handshake_verifier());
        let mut server = Server::start(config, state, router).await?;
        if let Some(cotenants) = cotenants
            && let Some(crds) = catalog.resource(
                standins::APIEXTENSIONS_V1.group,
                "customresourcedefinitions",
            )
        {
            server.keep_alive(cotenants::follow_registry(
                Arc::clone(crds),
                Arc::clone(&cotenants),
            ));
            server.keep_alive(cotenants::start_cleanup(Arc::clone(&cotenants), &catalog));
            // Discovery is a 503 until the CRDs are listed (the embedded store lists them in
            // milliseconds): the server is ready, and said to be, only after that.
            cotenants.listed().await;
        }
        let closing = store.clone();
        server.on_shutdown(move || closing.close());
        let kubeconfig = pki.write_kubeconfig(&format!("https://{}", server.local_addr()))?;
        Ok(Self {
            server,
            stand_ins: options.stand_ins,
            kubeconfig,
            pki,
            store,
            catalog,
        })
    }

    /// What to tell the user after start.
    pub fn instructions(&self) -> String {
        let path = absolute(&self.kubeconfig);
        format!(
            "capmox-apiserver dev server listening on https://{addr}\n\
             Admin kubeconfig (user capmox-admin, group system:masters): {path}\n\
             \n\
             Use it with:\n\
             \x20 export KUBECONFIG={path}\n\
             \x20 kubectl get --raw /readyz?verbose\n\
             \x20 kubectl api-resources --api-group=infrastructure.cluster.x-k8s.io\n\
             \x20 kubectl get proxmoxmachines -A\n\
             or:\n\
             \x20 kubectl --kubeconfig {path} version\n\
             \n\
             Objects are stored in {data}.\n\
             {stand_ins}\
             Every request is allowed in dev mode (no authorization), and namespaces are not\n\
             checked (any valid namespace name is accepted). Stop with Ctrl-C.",
            addr = self.server.local_addr(),
            path = path.display(),
            data = absolute(&self.kubeconfig.with_file_name(DATA_DIR)).display(),
            stand_ins = if self.stand_ins { STAND_INS_NOTE } else { "" },
        )
    }
}

/// `GET /api/v1/namespaces/<name>`: dev does not keep namespaces (any valid name is
/// accepted), so every valid name is an active namespace. kubectl asks when a `get` in a
/// namespace finds nothing, and would otherwise report the route instead of the object.
async fn any_namespace(UrlPath(name): UrlPath<String>) -> Response {
    if !validation::is_dns1123_label(&name).is_empty() {
        return ApiError::not_found(&GroupResource::new("", "namespaces"), &name).into_response();
    }
    let namespace = json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    });
    response::object(StatusCode::OK, &Negotiated::JSON, &namespace)
}

/// What the user must know about the stand-ins (`instructions`).
const STAND_INS_NOTE: &str = "\
This is NOT a management cluster. Cluster and Machine (cluster.x-k8s.io/v1beta2), Secret (v1),\n\
the IPAM kinds (IPAddressClaim, IPAddress, InClusterIPPool, GlobalInClusterIPPool) and\n\
CustomResourceDefinition (other providers' CRDs of our group make their kinds known) are\n\
stand-ins served by this process only so that the built-in controller has them to read\n\
(schemaless storage, no real Cluster API or IPAM controllers). List them with:\n\
\x20 kubectl api-resources --categories=cluster-api\n\
\x20 kubectl get clusters,machines,ipaddressclaims,secrets -A\n\
\n";

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}
