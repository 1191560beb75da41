//! Discovery and OpenAPI as clients read them: legacy lists, aggregated discovery negotiated
//! strictly by `Accept`, deterministic ETags, and kube-openapi's hash caching.

use serde_json::Value;

use super::{Api, GROUP};

const V2: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
const V2BETA1: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

fn resource<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["resources"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == name))
        .unwrap_or_else(|| panic!("{name} missing in {list}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn resource_lists_describe_every_kind_per_version() {
    let api = Api::start().await;
    let v2 = api.get(&format!("/apis/{GROUP}/v1alpha2")).send().await;
    let v1 = api.get(&format!("/apis/{GROUP}/v1alpha1")).send().await;
    assert_eq!((v2.status, v1.status), (200, 200));
    let (v2, v1) = (v2.json(), v1.json());
    assert_eq!(v2["kind"], "APIResourceList");
    assert_eq!(v2["groupVersion"], format!("{GROUP}/v1alpha2"));
    let machines = resource(&v2, "proxmoxmachines");
    assert_eq!(machines["singularName"], "proxmoxmachine");
    assert_eq!(machines["kind"], "ProxmoxMachine");
    assert_eq!(machines["namespaced"], true);
    assert_eq!(machines["shortNames"], serde_json::json!(["moxm"]));
    assert_eq!(
        machines["categories"],
        serde_json::json!(["cluster-api", "proxmox"])
    );
    let mut verbs: Vec<&str> = machines["verbs"]
        .as_array()
        .expect("verbs")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    verbs.sort_unstable();
    assert_eq!(
        verbs,
        [
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch"
        ]
    );
    assert_eq!(
        resource(&v2, "proxmoxmachinetemplates")["shortNames"][0],
        "pmt"
    );
    assert_eq!(
        resource(&v2, "proxmoxclustertemplates")["shortNames"][0],
        "pct"
    );
    // The storage version hash is the same in both versions.
    for kind in [
        "proxmoxclusters",
        "proxmoxclustertemplates",
        "proxmoxmachines",
        "proxmoxmachinetemplates",
    ] {
        let hash = &resource(&v2, kind)["storageVersionHash"];
        assert!(hash.as_str().is_some_and(|h| h.len() == 12), "{hash}");
        assert_eq!(hash, &resource(&v1, kind)["storageVersionHash"]);
    }
    // Subresources follow each version: ProxmoxClusterTemplate has status in v1alpha1 only.
    assert_eq!(
        resource(&v1, "proxmoxclustertemplates/status")["verbs"],
        serde_json::json!(["get", "patch", "update"])
    );
    assert!(
        !v2["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .any(|r| r["name"] == "proxmoxclustertemplates/status")
    );
    resource(&v2, "proxmoxmachines/status");
    assert!(
        !v2["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .any(|r| r["name"] == "proxmoxmachinetemplates/status")
    );
    let missing = api.get(&format!("/apis/{GROUP}/v1beta1")).send().await;
    assert_eq!(missing.status, 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn apis_is_negotiated_strictly_with_etags() {
    let api = Api::start().await;
    let v2 = api.get("/apis").accept(V2).send().await;
    assert_eq!(v2.status, 200);
    assert_eq!(
        v2.header("content-type"),
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    let body = v2.json();
    assert_eq!(body["apiVersion"], "apidiscovery.k8s.io/v2");
    let group = &body["items"][0];
    assert_eq!(group["metadata"]["name"], GROUP);
    let versions: Vec<&str> = group["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .filter_map(|v| v["version"].as_str())
        .collect();
    assert_eq!(versions, ["v1alpha2", "v1alpha1"], "preferred first");
    let machines = group["versions"][0]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["resource"] == "proxmoxmachines")
        .expect("machines");
    assert_eq!(machines["responseKind"]["kind"], "ProxmoxMachine");
    assert_eq!(machines["scope"], "Namespaced");
    assert_eq!(machines["subresources"][0]["subresource"], "status");

    // kubectl 1.27/1.28 ask for v2beta1 and get it, not v2.
    let beta = api.get("/apis").accept(V2BETA1).send().await;
    assert_eq!(
        beta.header("content-type"),
        "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
    );
    assert_eq!(beta.json()["apiVersion"], "apidiscovery.k8s.io/v2beta1");

    let legacy = api.get("/apis").accept("application/json").send().await;
    assert_eq!(legacy.header("content-type"), "application/json");
    let legacy = legacy.json();
    assert_eq!(legacy["kind"], "APIGroupList");
    assert_eq!(
        legacy["groups"][0]["preferredVersion"]["version"],
        "v1alpha2"
    );
    let group = api.get(&format!("/apis/{GROUP}")).send().await.json();
    assert_eq!(group["kind"], "APIGroup");
    let aggregated_group = api
        .get(&format!("/apis/{GROUP}"))
        .accept("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscovery")
        .send()
        .await;
    assert_eq!(
        aggregated_group.header("content-type"),
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscovery"
    );
    let aggregated_group = aggregated_group.json();
    assert_eq!(aggregated_group["kind"], "APIGroupDiscovery");
    assert_eq!(aggregated_group["versions"][0]["version"], "v1alpha2");
    assert_eq!(
        group["preferredVersion"]["groupVersion"],
        format!("{GROUP}/v1alpha2")
    );

    let refused = api
        .get("/apis")
        .accept("application/vnd.kubernetes.protobuf")
        .send()
        .await;
    assert_eq!(
        (refused.status, refused.reason().as_str()),
        (406, "NotAcceptable")
    );

    // ETags: deterministic, and a matching If-None-Match gets a 304.
    let again = api.get("/apis").accept(V2).send().await;
    let etag = v2.header("etag").to_owned();
    assert!(etag.starts_with('"') && etag.len() > 100, "{etag}");
    assert_eq!(again.header("etag"), etag);
    assert_ne!(beta.header("etag"), etag);
    let cached = api
        .get("/apis")
        .accept(V2)
        .header("if-none-match", &etag)
        .send()
        .await;
    assert_eq!(cached.status, 304);
    assert!(cached.text.is_empty());
    assert_eq!(v2.header("vary"), "Accept");
    // Another server process computes the same ETag.
    let other = Api::start().await;
    let other = other.get("/apis").accept(V2).send().await;
    assert_eq!(other.header("etag"), etag);
}

#[tokio::test(flavor = "multi_thread")]
async fn openapi_v3_hash_caching_and_v2() {
    let api = Api::start().await;
    let index = api.get("/openapi/v3").send().await;
    assert_eq!(index.status, 200);
    let index = index.json();
    let paths = index["paths"].as_object().expect("paths");
    assert_eq!(paths.len(), 2, "only our group-versions: {index}");
    let url = paths[&format!("apis/{GROUP}/v1alpha2")]["serverRelativeURL"]
        .as_str()
        .expect("url")
        .to_owned();
    let hash = url.split("hash=").nth(1).expect("hash").to_owned();
    assert_eq!(hash.len(), 128);
    assert!(
        hash.chars()
            .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
    );

    let document = api.get(&url).accept("application/json").send().await;
    assert_eq!(document.status, 200);
    assert_eq!(document.header("cache-control"), "public, immutable");
    assert!(!document.header("expires").is_empty());
    assert_eq!(document.header("etag"), format!("\"{hash}\""));
    let body = document.json();
    let patch = &body["paths"]
        [format!("/apis/{GROUP}/v1alpha2/namespaces/{{namespace}}/proxmoxmachines/{{name}}")]["patch"];
    assert_eq!(patch["x-kubernetes-action"], "patch");
    let params: Vec<&str> = patch["parameters"]
        .as_array()
        .expect("params")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(params.contains(&"fieldValidation"), "{params:?}");

    let stale = api
        .get(&format!("/openapi/v3/apis/{GROUP}/v1alpha2?hash=0123"))
        .send()
        .await;
    // Another hash gets the current document, not cached as immutable: kube-aggregator may
    // proxy the hash of the CRDs' document of the same group-version here, and refuses a
    // redirect.
    assert_eq!(stale.status, 200);
    assert_eq!(stale.header("etag"), format!("\"{hash}\""));
    assert_ne!(stale.header("cache-control"), "public, immutable");
    let plain = api
        .get(&format!("/openapi/v3/apis/{GROUP}/v1alpha2"))
        .send()
        .await;
    assert_eq!(plain.status, 200);
    assert_ne!(plain.header("cache-control"), "public, immutable");
    let not_modified = api
        .get(&url)
        .header("if-none-match", &format!("\"{hash}\""))
        .send()
        .await;
    assert_eq!(not_modified.status, 304);
    let protobuf = api
        .get(&url)
        .accept("application/com.github.proto-openapi.spec.v3.v1.0+protobuf")
        .send()
        .await;
    assert_eq!(protobuf.status, 406);
    assert_eq!(
        api.get("/openapi/v3/apis/other.group/v1")
            .send()
            .await
            .status,
        404
    );

    let v2 = api
        .get("/openapi/v2")
        .accept("application/json")
        .send()
        .await;
    assert_eq!(v2.status, 200);
    let etag = v2.header("etag").to_owned();
    let v2 = v2.json();
    assert_eq!(v2["swagger"], "2.0");
    assert!(
        v2["definitions"]
            .as_object()
            .expect("definitions")
            .contains_key("io.x-k8s.cluster.infrastructure.v1alpha1.ProxmoxMachine")
    );
    let consumes = &v2["paths"]
        [format!("/apis/{GROUP}/v1alpha1/namespaces/{{namespace}}/proxmoxmachines/{{name}}")]["patch"]
        ["consumes"];
    assert!(!consumes.to_string().contains("strategic"), "{consumes}");
    let cached = api
        .get("/openapi/v2")
        .header("if-none-match", &etag)
        .send()
        .await;
    assert_eq!(cached.status, 304);
}
