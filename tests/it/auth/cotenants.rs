//! Other providers' kinds in our group-versions (`serve`): a CRD of the management cluster
//! that defines a kind in `infrastructure.cluster.x-k8s.io/v1alpha1` or `/v1alpha2` is served
//! from the CRD within seconds, listed by discovery with its verbs and named by readyz; one
//! kube-apiserver keeps (also served in another version) is served through it, and while kube
//! does not serve that version, answers 503 with a Retry-After. A kind this server cannot
//! serve faithfully (stored in a version nobody serves) is listed without verbs and every
//! request for it answers 503 with the kind and the reason, never 404; our own CRDs (shadow or
//! upstream CAPMOX's) and other group-versions define nothing; a deleted CRD takes its kind
//! away again. (Requests through kube-apiserver to a kind it keeps: `peer::cotenants`.)

use std::time::Duration;

use serde_json::{Value, json};

use super::front_proxy::ProxiedUser;
use super::kubectl::kubectl_at;
use super::{Setup, allow_users, eventually};

const GROUP: &str = "infrastructure.cluster.x-k8s.io";

fn crd(plural: &str, kind: &str, versions: Value) -> Value {
    let short_names = match plural {
        // `moxm` is our ProxmoxMachine's: not taken from us.
        "openstackservers" => json!(["oss", "moxm"]),
        _ => json!([]),
    };
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{GROUP}")},
        "spec": {
            "group": GROUP,
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind,
                      "listKind": format!("{kind}List"), "shortNames": short_names},
            "scope": "Namespaced",
            "versions": versions,
        }
    })
}

fn version(name: &str, served: bool, storage: bool) -> Value {
    json!({"name": name, "served": served, "storage": storage,
           "schema": {"openAPIV3Schema": {"type": "object"}}})
}

/// CAPO's OpenStackServer, in v1alpha1 only.
fn openstack_servers() -> Value {
    crd(
        "openstackservers",
        "OpenStackServer",
        json!([version("v1alpha1", true, true)]),
    )
}

async fn answer(request: reqwest::RequestBuilder) -> (u16, Option<String>, Value) {
    let response = request.send().await.expect("request");
    let code = response.status().as_u16();
    let retry = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().expect("ascii").to_owned());
    (code, retry, response.json().await.unwrap_or(Value::Null))
}

/// The names `/apis/<group>/<version>` lists, with their verbs.
async fn discovered(
    client: &reqwest::Client,
    setup: &Setup,
    version: &str,
) -> Vec<(String, Value)> {
    let url = format!("{}/apis/{GROUP}/{version}", setup.base());
    let (code, _, list) = answer(client.get(url)).await;
    assert_eq!(code, 200, "{list}");
    list["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|r| {
            (
                r["name"].as_str().expect("name").to_owned(),
                r["verbs"].clone(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn co_tenant_kinds_are_served_or_answer_503_never_404() {
    let setup = Setup::start(|_| {}).await;
    // CAPO's OpenStackServer (v1alpha1), a CAPZ ASO kind (v1alpha1 beside storage v1beta1),
    // a kind stored in a version nobody serves, upstream CAPMOX's own CRD for our kind, and a
    // kind only in v1beta1.
    setup
        .kube
        .set_crd("openstackservers", GROUP, Some(openstack_servers()));
    setup.kube.set_crd(
        "azureasomanagedclusters",
        GROUP,
        Some(crd(
            "azureasomanagedclusters",
            "AzureASOManagedCluster",
            json!([
                version("v1alpha1", true, false),
                version("v1beta1", true, true)
            ]),
        )),
    );
    setup.kube.set_crd(
        "legacywidgets",
        GROUP,
        Some(crd(
            "legacywidgets",
            "LegacyWidget",
            json!([
                version("v1alpha1", true, false),
                version("v1beta1", false, true)
            ]),
        )),
    );
    setup.kube.set_crd(
        "proxmoxmachines",
        GROUP,
        Some(crd(
            "proxmoxmachines",
            "ProxmoxMachine",
            json!([version("v1alpha2", true, true)]),
        )),
    );
    setup.kube.set_crd(
        "openstackclusters",
        GROUP,
        Some(crd(
            "openstackclusters",
            "OpenStackCluster",
            json!([version("v1beta1", true, true)]),
        )),
    );
    let client = setup.admin("admin");
    let servers = format!(
        "{}/apis/{GROUP}/v1alpha1/namespaces/default/openstackservers",
        setup.base()
    );
    eventually(
        Duration::from_secs(10),
        "OpenStackServer served",
        || async { answer(client.get(&servers)).await.0 == 200 },
    )
    .await;

    // Served from its CRD: created through the admission chain, read back, listed.
    let object = json!({"apiVersion": format!("{GROUP}/v1alpha1"), "kind": "OpenStackServer",
                        "metadata": {"name": "s1"}, "spec": {"flavor": "m1.small"}});
    let (code, _, created) = answer(client.post(&servers).json(&object)).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["metadata"]["uid"].as_str().map(str::len), Some(36));
    assert_eq!(
        created.get("spec"),
        None,
        "a schema of `type: object` prunes the rest"
    );
    let (code, _, list) = answer(client.get(&servers)).await;
    assert_eq!(code, 200);
    assert_eq!(list["kind"], "OpenStackServerList");
    assert_eq!(list["items"][0]["metadata"]["name"], "s1");

    // Every verb and path of the kind stored where nobody serves it: 503, the kind and the
    // reason, no retry hint (asking again will not help).
    let widgets = format!(
        "{}/apis/{GROUP}/v1alpha1/namespaces/default/legacywidgets",
        setup.base()
    );
    for (method, url) in [
        (reqwest::Method::GET, widgets.clone()),
        (reqwest::Method::GET, format!("{widgets}/w1")),
        (reqwest::Method::GET, format!("{widgets}/w1/status")),
        (reqwest::Method::POST, widgets.clone()),
        (reqwest::Method::DELETE, format!("{widgets}/w1")),
        (
            reqwest::Method::GET,
            format!("{}/apis/{GROUP}/v1alpha1/legacywidgets", setup.base()),
        ),
    ] {
        let (code, retry, status) =
            answer(client.request(method.clone(), &url).json(&json!({}))).await;
        assert_eq!(code, 503, "{method} {url}: {status}");
        assert_eq!(status["reason"], "ServiceUnavailable", "{status}");
        assert_eq!(status["details"]["group"], GROUP, "{status}");
        assert!(retry.is_none(), "{method} {url}: Retry-After {retry:?}");
        let message = status["message"].as_str().expect("message");
        assert!(
            message.contains("is defined by CustomResourceDefinition")
                && message.contains("unavailable, not gone"),
            "{message}"
        );
    }
    let (_, _, status) = answer(client.get(&widgets)).await;
    let message = status["message"].as_str().expect("message");
    assert!(
        message.starts_with("LegacyWidget is defined by CustomResourceDefinition \"legacywidgets.infrastructure.cluster.x-k8s.io\"")
            && message.contains("storage version v1beta1"),
        "{status}"
    );
    assert_eq!(status["details"]["kind"], "legacywidgets");

    // The kind kube-apiserver keeps is asked of it; this stand-in serves no custom
    // resources, as kube-apiserver before the CRD is established: a 503 to retry, not a 404.
    let aso = format!(
        "{}/apis/{GROUP}/v1alpha1/namespaces/default/azureasomanagedclusters",
        setup.base()
    );
    for url in [aso.clone(), format!("{aso}/a1")] {
        let (code, retry, status) = answer(client.get(&url)).await;
        assert_eq!(code, 503, "{url}: {status}");
        assert_eq!(retry.as_deref(), Some("1"), "{url}: {status}");
        assert!(
            status["message"].as_str().is_some_and(|m| m.contains(
                "kube-apiserver keeps the objects of AzureASOManagedCluster and does not serve \
                 its version v1beta1 now"
            )),
            "{status}"
        );
    }

    // Where no CRD serves it, a 404 as before: the wrong version, an unknown resource, a
    // kind only in v1beta1.
    for path in [
        "v1alpha2/namespaces/default/openstackservers",
        "v1alpha1/namespaces/default/widgets",
        "v1alpha1/namespaces/default/openstackclusters",
    ] {
        let url = format!("{}/apis/{GROUP}/{path}", setup.base());
        assert_eq!(answer(client.get(&url)).await.0, 404, "{path}");
    }
    // Our kinds are ours, whoever's CRD names them.
    let machines = format!(
        "{}/apis/{GROUP}/v1alpha2/namespaces/default/proxmoxmachines",
        setup.base()
    );
    assert_eq!(answer(client.get(&machines)).await.0, 200);

    // Discovery lists the served co-tenant with its verbs, the other without, in their
    // versions only.
    let v1alpha1 = discovered(&client, &setup, "v1alpha1").await;
    let verbs_of = |list: &[(String, Value)], name: &str| {
        list.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
    };
    assert_eq!(
        verbs_of(&v1alpha1, "openstackservers"),
        verbs_of(&v1alpha1, "proxmoxmachines")
    );
    assert_eq!(
        verbs_of(&v1alpha1, "azureasomanagedclusters"),
        verbs_of(&v1alpha1, "proxmoxmachines")
    );
    assert_eq!(verbs_of(&v1alpha1, "legacywidgets"), Some(json!([])));
    assert_eq!(verbs_of(&v1alpha1, "openstackclusters"), None);
    assert_eq!(
        v1alpha1
            .iter()
            .filter(|(n, _)| n == "proxmoxmachines")
            .count(),
        1,
        "our kind once, with our verbs"
    );
    assert!(verbs_of(&v1alpha1, "proxmoxmachines").expect("ours")[0].is_string());
    let v1alpha2 = discovered(&client, &setup, "v1alpha2").await;
    assert_eq!(verbs_of(&v1alpha2, "openstackservers"), None);
    let aggregated = client
        .get(format!("{}/apis", setup.base()))
        .header(
            "accept",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        )
        .send()
        .await
        .expect("aggregated discovery")
        .json::<Value>()
        .await
        .expect("json");
    let resources = &aggregated["items"][0]["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .find(|v| v["version"] == "v1alpha1")
        .expect("v1alpha1")["resources"];
    let server = resources
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["resource"] == "openstackservers")
        .expect("openstackservers in aggregated discovery");
    assert_eq!(server["verbs"].as_array().map(Vec::len), Some(8));
    assert_eq!(server["responseKind"]["kind"], "OpenStackServer");
    assert_eq!(server["scope"], "Namespaced");
    assert_eq!(server["shortNames"], json!(["oss"]));

    // readyz names them, and stays ready.
    let (code, text) = setup.readyz_verbose().await;
    assert_eq!(code, 200);
    assert!(
        text.contains(
            "[+]informer-sync-customresourcedefinitions ok: co-tenant kinds: AzureASOManagedCluster \
             (azureasomanagedclusters.infrastructure.cluster.x-k8s.io) in v1alpha1 (served through \
             kube-apiserver's v1beta1); LegacyWidget (legacywidgets.infrastructure.cluster.x-k8s.io) \
             in v1alpha1 (not served); OpenStackServer \
             (openstackservers.infrastructure.cluster.x-k8s.io) in v1alpha1 (served)\n"
        ),
        "{text}"
    );

    // A user of kubectl sees the reason, through discovery and the aggregator stand-in.
    setup.kube.set_policy(allow_users(&["alice"]));
    let alice = setup
        .aggregator(ProxiedUser::named("alice", &["system:authenticated"]))
        .await;
    let (ok, out, err) = kubectl_at(&setup, &alice.url, &["get", "oss", "-n", "default"]).await;
    assert!(ok && out.contains("s1"), "{out}{err}");
    let (ok, _, err) = kubectl_at(
        &setup,
        &alice.url,
        &["get", "legacywidgets", "-n", "default"],
    )
    .await;
    assert!(!ok);
    assert!(
        err.contains("Error from server (ServiceUnavailable): LegacyWidget is defined by CustomResourceDefinition"),
        "{err}"
    );

    // Its CRD being deleted (kube's finalizer at work): creates are refused as kube refuses
    // them, and its objects are deleted.
    let mut terminating = crd(
        "openstackservers",
        "OpenStackServer",
        json!([version("v1alpha1", true, true)]),
    );
    terminating["metadata"]["deletionTimestamp"] = json!("2026-12-06T00:00:00Z");
    setup
        .kube
        .set_crd("openstackservers", GROUP, Some(terminating));
    let late = json!({"apiVersion": format!("{GROUP}/v1alpha1"), "kind": "OpenStackServer",
                      "metadata": {"name": "s2"}, "spec": {"flavor": "m1.small"}});
    eventually(Duration::from_secs(10), "creates refused", || async {
        answer(client.post(&servers).json(&late)).await.0 == 405
    })
    .await;
    eventually(Duration::from_secs(10), "s1 deleted", || async {
        answer(client.get(format!("{servers}/s1"))).await.0 == 404
    })
    .await;

    // The CRD gone: its kind is gone, a 404 again, and out of discovery.
    setup.kube.set_crd("openstackservers", GROUP, None);
    eventually(Duration::from_secs(10), "OpenStackServer gone", || async {
        answer(client.get(&servers)).await.0 == 404
    })
    .await;
    let v1alpha1 = discovered(&client, &setup, "v1alpha1").await;
    assert_eq!(verbs_of(&v1alpha1, "openstackservers"), None);
}

/// Until the CRDs are listed, discovery of our group answers 503 with a Retry-After rather
/// than a document without the other providers' kinds: kube-aggregator keeps a document for a
/// minute but asks again at once after an error, so kubectl never misses a co-tenant kind
/// because this server had just started.
#[tokio::test(flavor = "multi_thread")]
async fn discovery_waits_for_the_crds_to_be_listed() {
    let setup = Setup::start_after(|kube| {
        kube.withhold("customresourcedefinitions", true);
        kube.set_crd("openstackservers", GROUP, Some(openstack_servers()));
    })
    .await;
    let client = setup.admin("admin");
    let base = setup.base();
    for path in [
        "/apis".to_owned(),
        format!("/apis/{GROUP}"),
        format!("/apis/{GROUP}/v1alpha1"),
        format!("/apis/{GROUP}/v1alpha2"),
    ] {
        let (code, retry, status) = answer(client.get(format!("{base}{path}"))).await;
        assert_eq!(code, 503, "{path}: {status}");
        assert_eq!(retry.as_deref(), Some("1"), "{path}: {status}");
        let message = status["message"].as_str().unwrap_or_default();
        assert!(message.contains("not listed yet"), "{path}: {status}");
    }
    // A version that is not ours is no co-tenant's either.
    let (code, _, status) = answer(client.get(format!("{base}/apis/{GROUP}/v1beta1"))).await;
    assert_eq!(code, 404, "{status}");
    assert_eq!(setup.readyz_verbose().await.0, 500);

    setup.kube.withhold("customresourcedefinitions", false);
    let url = format!("{base}/apis/{GROUP}/v1alpha1");
    let first = loop {
        let (code, _, document) = answer(client.get(&url)).await;
        if code == 200 {
            break document;
        }
        assert_eq!(code, 503, "{document}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let names: Vec<&str> = first["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert!(
        names.contains(&"openstackservers") && names.contains(&"proxmoxclusters"),
        "the first document lists both the co-tenant kind and ours: {names:?}"
    );
}
