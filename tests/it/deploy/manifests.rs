//! The kustomize overlays render into installations whose parts fit together, and the
//! checked-in clusterctl components files are the renderings of the clusterctl overlays, with
//! the same variables, and install what those overlays do.

use capmox_apiserver::api::Kind;
use capmox_apiserver::cli::{Cli, Command};
use clap::Parser;
use serde_json::{Value, json};

use super::envsubst::{expressions, substitute};
use super::{deploy_dir, documents, of_kind, release_dir};
use crate::server::{kubectl, run};

const GROUP: &str = "infrastructure.cluster.x-k8s.io";

async fn render(overlay: &str) -> Vec<Value> {
    let dir = deploy_dir().join("overlays").join(overlay);
    let (ok, out, err) = run(
        &kubectl("1.33"),
        &["kustomize", dir.to_str().expect("utf8 path")],
    )
    .await;
    assert!(ok, "kubectl kustomize {overlay}: {err}");
    documents(&out)
}

fn named<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

/// The APIServices point at the rendered Service, with v1alpha2 preferred, and are marked as
/// not kube-aggregator's to manage.
fn check_apiservices(docs: &[Value]) {
    let services = of_kind(docs, "APIService");
    assert_eq!(services.len(), 2);
    let mut priorities = Vec::new();
    for service in services {
        let spec = &service["spec"];
        let version = spec["version"].as_str().expect("version");
        assert_eq!(service["metadata"]["name"], format!("{version}.{GROUP}"));
        assert_eq!(spec["group"], GROUP);
        assert_eq!(spec["groupPriorityMinimum"], 1000);
        // "false": kube-aggregator's autoregister controller leaves it alone, also where
        // another provider's CRD made an automanaged APIService of this name first.
        assert_eq!(
            service["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"],
            "false"
        );
        let target = named(
            docs,
            "Service",
            spec["service"]["name"].as_str().expect("service"),
        );
        assert_eq!(
            target["metadata"]["namespace"],
            spec["service"]["namespace"]
        );
        assert_eq!(spec["service"]["port"], 443);
        assert_eq!(target["spec"]["ports"][0]["port"], 443);
        priorities.push((
            version.to_owned(),
            spec["versionPriority"].as_i64().expect("priority"),
        ));
    }
    priorities.sort_by_key(|(_, p)| -p);
    assert_eq!(priorities[0].0, "v1alpha2", "v1alpha2 is preferred");
    assert!(
        priorities.iter().all(|(_, p)| *p < 100),
        "below CRD versions"
    );
}

/// One shadow CRD per kind: names from the API, nothing served, storage v1alpha2, contract
/// and clusterctl labels (and clusterctl's move label for releases, which no Cluster owns).
fn check_shadow_crds(docs: &[Value]) {
    let crds = of_kind(docs, "CustomResourceDefinition");
    assert_eq!(crds.len(), Kind::ALL.len());
    for kind in Kind::ALL {
        let d = kind.descriptor();
        let crd = named(
            docs,
            "CustomResourceDefinition",
            &format!("{}.{GROUP}", d.plural),
        );
        let names = &crd["spec"]["names"];
        assert_eq!(names["kind"], d.kind);
        assert_eq!(names["listKind"], d.list_kind);
        assert_eq!(names["singular"], d.singular);
        assert_eq!(
            names["shortNames"].as_array().map_or(0, Vec::len),
            d.short_names.len()
        );
        assert_eq!(names["categories"], json!(d.categories));
        assert_eq!(crd["spec"]["scope"], "Namespaced");
        let labels = &crd["metadata"]["labels"];
        assert_eq!(labels["cluster.x-k8s.io/v1beta1"], "v1alpha2");
        assert_eq!(labels["cluster.x-k8s.io/v1beta2"], "v1alpha2");
        assert_eq!(labels["clusterctl.cluster.x-k8s.io"], "");
        // Objects that no Cluster owns move only with this label on their CRD.
        let moves_all = kind == Kind::ProxmoxKubernetesRelease;
        assert_eq!(
            labels.get("clusterctl.cluster.x-k8s.io/move").is_some(),
            moves_all,
            "{kind}: clusterctl moves all of them"
        );
        assert_eq!(
            labels["cluster.x-k8s.io/provider"],
            "infrastructure-proxmox"
        );
        let versions = crd["spec"]["versions"].as_array().expect("versions");
        let summary: Vec<_> = versions
            .iter()
            .map(|v| (v["name"].clone(), v["served"].clone(), v["storage"].clone()))
            .collect();
        assert_eq!(
            summary,
            [
                (json!("v1alpha1"), json!(false), json!(false)),
                (json!("v1alpha2"), json!(false), json!(true)),
            ]
        );
    }
}

/// The server's arguments are flags our binary accepts, and they point at the mounted
/// certificate and, for the embedded store, the mounted volume.
fn check_server(docs: &[Value], replicas: i64, embedded: bool) {
    let set = named(docs, "StatefulSet", "capmox-apiserver");
    assert_eq!(set["spec"]["replicas"], replicas);
    let pod = &set["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(container["name"], "manager");
    let args: Vec<&str> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("string arg"))
        .collect();
    let cli = Cli::try_parse_from(std::iter::once("capmox-apiserver").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let Command::Serve(serve) = cli.command else {
        panic!("the workload runs serve");
    };
    let mounts = container["volumeMounts"].as_array().expect("mounts");
    let mounted = |path: &std::path::Path| {
        mounts.iter().any(|m| {
            m["mountPath"]
                .as_str()
                .is_some_and(|mp| path.starts_with(mp))
        })
    };
    for file in [&serve.tls_cert_file, &serve.tls_private_key_file] {
        assert!(file.as_deref().is_some_and(mounted), "{file:?} is mounted");
    }
    assert_eq!(serve.storage.etcd_servers.is_empty(), embedded);
    let secrets = secret_volumes(pod);
    if embedded {
        assert!(
            mounted(&serve.storage.data_dir),
            "the data directory is a volume"
        );
        assert!(set["spec"]["volumeClaimTemplates"].is_array());
        assert_eq!(secrets, ["capmox-apiserver-tls"]);
    } else {
        let storage = &serve.storage;
        for url in &storage.etcd_servers {
            assert!(
                url.starts_with("https://"),
                "etcd is reached over TLS: {url}"
            );
        }
        for file in [
            &storage.etcd_cafile,
            &storage.etcd_certfile,
            &storage.etcd_keyfile,
        ] {
            assert!(file.as_deref().is_some_and(mounted), "{file:?} is mounted");
        }
        assert_eq!(secrets, ["capmox-apiserver-tls", "capmox-etcd-client-tls"]);
    }
    let port = container["ports"][0]["containerPort"]
        .as_i64()
        .expect("port");
    assert_eq!(i64::from(serve.secure_port), port);
}

/// The Secrets a pod mounts, in order.
fn secret_volumes(pod: &Value) -> Vec<&str> {
    pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .filter_map(|v| v["secret"]["secretName"].as_str())
        .collect()
}

/// etcd's members speak mutual TLS only, to clients and peers, with the Secret mounted where
/// their flags point, and answer their probes on the plain metrics port.
fn check_etcd(docs: &[Value]) {
    let set = named(docs, "StatefulSet", "capmox-etcd");
    assert_eq!(set["spec"]["replicas"], 3);
    let pod = &set["spec"]["template"]["spec"];
    assert_eq!(secret_volumes(pod), ["capmox-etcd-member-tls"]);
    let container = &pod["containers"][0];
    let args: Vec<&str> = container["command"]
        .as_array()
        .expect("command")
        .iter()
        .map(|a| a.as_str().expect("string"))
        .collect();
    let mount = container["volumeMounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .find(|m| m["name"] == "tls")
        .and_then(|m| m["mountPath"].as_str())
        .expect("TLS mount");
    for flag in ["--client-cert-auth", "--peer-client-cert-auth"] {
        assert!(args.contains(&flag), "{flag}");
    }
    for (flag, file) in [
        ("--cert-file", "tls.crt"),
        ("--key-file", "tls.key"),
        ("--trusted-ca-file", "ca.crt"),
        ("--peer-cert-file", "tls.crt"),
        ("--peer-key-file", "tls.key"),
        ("--peer-trusted-ca-file", "ca.crt"),
    ] {
        let expected = format!("{flag}={mount}/{file}");
        assert!(args.contains(&expected.as_str()), "{expected}");
    }
    for arg in &args {
        if arg.starts_with("--listen-metrics-urls") {
            continue;
        }
        assert!(!arg.contains("http://"), "plain HTTP in {arg}");
    }
    for probe in ["readinessProbe", "livenessProbe"] {
        assert_eq!(container[probe]["httpGet"]["port"], "metrics", "{probe}");
    }
}

/// cert-manager issues the Secrets etcd and the server mount for etcd, from etcd's own CA.
fn check_etcd_cert_manager(docs: &[Value]) {
    for (name, secret, usage) in [
        (
            "capmox-etcd-member",
            "capmox-etcd-member-tls",
            "server auth",
        ),
        (
            "capmox-etcd-client",
            "capmox-etcd-client-tls",
            "client auth",
        ),
    ] {
        let certificate = named(docs, "Certificate", name);
        assert_eq!(certificate["spec"]["secretName"], secret);
        assert_eq!(certificate["spec"]["issuerRef"]["name"], "capmox-etcd-ca");
        assert!(
            certificate["spec"]["usages"]
                .as_array()
                .expect("usages")
                .contains(&json!(usage))
        );
    }
}

/// cert-manager issues the serving Secret the pod mounts, for the Service's DNS name, and
/// injects its CA into both APIServices.
fn check_cert_manager(docs: &[Value]) {
    let certificate = named(docs, "Certificate", "capmox-apiserver-serving-cert");
    assert_eq!(certificate["spec"]["secretName"], "capmox-apiserver-tls");
    let service = named(docs, "Service", "capmox-apiserver");
    let dns = format!(
        "{}.{}.svc",
        service["metadata"]["name"].as_str().expect("name"),
        service["metadata"]["namespace"]
            .as_str()
            .expect("namespace")
    );
    assert!(
        certificate["spec"]["dnsNames"]
            .as_array()
            .expect("dnsNames")
            .contains(&json!(dns)),
        "serving certificate covers {dns}"
    );
    let reference = format!(
        "{}/capmox-apiserver-serving-cert",
        certificate["metadata"]["namespace"].as_str().expect("ns")
    );
    for api in of_kind(docs, "APIService") {
        assert_eq!(
            api["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            reference.as_str()
        );
    }
}

fn check_delegation_rbac(docs: &[Value], via_cluster_role: bool) {
    let delegator = docs.iter().find(|d| {
        d["kind"] == "ClusterRoleBinding" && d["roleRef"]["name"] == "system:auth-delegator"
    });
    assert!(
        delegator.is_some(),
        "TokenReview/SubjectAccessReview rights"
    );
    let reader_binding = docs.iter().find(|d| {
        d["kind"] == "RoleBinding"
            && d["roleRef"]["name"] == "extension-apiserver-authentication-reader"
    });
    let reader_role = docs.iter().find(|d| {
        d["kind"] == "ClusterRole"
            && d["rules"][0]["resourceNames"] == json!(["extension-apiserver-authentication"])
    });
    if via_cluster_role {
        assert!(reader_binding.is_none() && reader_role.is_some());
    } else {
        assert_eq!(
            reader_binding.expect("reader binding")["metadata"]["namespace"],
            "kube-system"
        );
    }
}

/// What an overlay installs: server replicas, the embedded store (else etcd), certificates
/// from cert-manager, clusterctl's RBAC (a ClusterRole for the authentication reader).
struct Install {
    replicas: i64,
    embedded: bool,
    cert_manager: bool,
    clusterctl: bool,
}

/// Every overlay and what it installs.
static OVERLAYS: [(&str, Install); 6] = [
    ("default", Install::new(1, true, true, false)),
    ("ha", Install::new(3, false, true, false)),
    ("manual-certs", Install::new(1, true, false, false)),
    ("ha-manual-certs", Install::new(3, false, false, false)),
    ("clusterctl", Install::new(1, true, true, true)),
    ("clusterctl-ha", Install::new(3, false, true, true)),
];

/// The clusterctl components files of the release and the overlay each is rendered from.
const COMPONENTS: [(&str, &str); 2] = [
    ("infrastructure-components.yaml", "clusterctl"),
    ("infrastructure-components-ha.yaml", "clusterctl-ha"),
];

impl Install {
    const fn new(replicas: i64, embedded: bool, cert_manager: bool, clusterctl: bool) -> Self {
        Self {
            replicas,
            embedded,
            cert_manager,
            clusterctl,
        }
    }

    fn of(overlay: &str) -> &'static Self {
        &OVERLAYS
            .iter()
            .find(|(name, _)| *name == overlay)
            .unwrap_or_else(|| panic!("no overlay {overlay}"))
            .1
    }

    /// The parts of `docs` fit together as this installation's.
    fn check(&self, docs: &[Value]) {
        check_apiservices(docs);
        check_shadow_crds(docs);
        check_server(docs, self.replicas, self.embedded);
        check_delegation_rbac(docs, self.clusterctl);
        if self.cert_manager {
            check_cert_manager(docs);
        } else {
            assert!(of_kind(docs, "Certificate").is_empty());
        }
        assert!(
            of_kind(docs, "Deployment").is_empty(),
            "clusterctl upgrade scales Deployments to zero"
        );
        if self.replicas > 1 {
            check_etcd(docs);
            if self.cert_manager {
                check_etcd_cert_manager(docs);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn overlays_render_consistent_installations() {
    for (overlay, install) in &OVERLAYS {
        install.check(&render(overlay).await);
    }
}

/// The `${…}` expressions of a components file as (name, default), sorted, duplicates dropped.
fn variables(text: &str) -> Vec<(String, Option<String>)> {
    let mut found: Vec<_> = expressions(text)
        .expect("clusterctl's variable syntax")
        .into_iter()
        .map(|e| (e.name.to_owned(), e.default.map(str::to_owned)))
        .collect();
    found.sort();
    found.dedup();
    found
}

#[tokio::test(flavor = "multi_thread")]
async fn clusterctl_components_follow_clusterctl_rules() {
    let default_variables = variables(
        &std::fs::read_to_string(release_dir().join(COMPONENTS[0].0)).expect("components"),
    );
    for (file, overlay) in COMPONENTS {
        let text = std::fs::read_to_string(release_dir().join(file)).expect("components");
        let docs = documents(&text);
        let namespaces = of_kind(&docs, "Namespace");
        assert_eq!(namespaces.len(), 1, "{file}: exactly one Namespace");
        let namespace = &namespaces[0]["metadata"]["name"];
        for doc in &docs {
            if let Some(ns) = doc["metadata"].get("namespace") {
                assert_eq!(
                    ns, namespace,
                    "{file}: {} {} is in the provider namespace",
                    doc["kind"], doc["metadata"]["name"]
                );
            }
            assert_eq!(
                doc["metadata"]["labels"]["cluster.x-k8s.io/provider"],
                "infrastructure-proxmox"
            );
        }
        for variable in [
            "${PROXMOX_URL=\"\"}",
            "${PROXMOX_TOKEN=\"\"}",
            "${PROXMOX_SECRET=\"\"}",
            "${CAPMOX_IMAGE:=",
        ] {
            assert!(text.contains(variable), "{file}: {variable}");
        }
        // A user switching files sets the same variables, with the same defaults.
        assert_eq!(variables(&text), default_variables, "{file}");
        // What clusterctl applies when no variable is set is the overlay's installation.
        let applied = substitute(&text, &Default::default()).expect("every variable has a default");
        Install::of(overlay).check(&documents(&applied));
    }
    let metadata =
        documents(&std::fs::read_to_string(release_dir().join("metadata.yaml")).expect("metadata"));
    let number = |part: &str| part.parse::<u64>().expect("numeric version");
    let (major, minor) = (
        number(env!("CARGO_PKG_VERSION_MAJOR")),
        number(env!("CARGO_PKG_VERSION_MINOR")),
    );
    assert_eq!(
        metadata[0]["apiVersion"],
        "clusterctl.cluster.x-k8s.io/v1alpha3"
    );
    assert_eq!(metadata[0]["kind"], "Metadata");
    let series = metadata[0]["releaseSeries"].as_array().expect("series");
    assert!(series.iter().any(|s| {
        s["major"].as_u64() == Some(major)
            && s["minor"].as_u64() == Some(minor)
            && s["contract"] == "v1beta2"
    }));
}

#[tokio::test(flavor = "multi_thread")]
async fn clusterctl_components_are_up_to_date() {
    let script = deploy_dir().join("render-clusterctl");
    let output = tokio::process::Command::new(&script)
        .arg("--check")
        .env("KUBECTL", kubectl("1.33"))
        .output()
        .await
        .expect("run deploy/render-clusterctl");
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
