//! `dev` and other providers' CRDs: `kubectl apply -f` of a CustomResourceDefinition of our
//! group serves its kind at once, from the CRD, as kube-apiserver serves a CRD (its schema's
//! pruning, defaults and bounds, its CEL rules, status subresource, printer columns,
//! server-side apply), as the cluster's CRDs do in `serve`; one that cannot be served
//! faithfully (stored outside our group-versions, a rule that cannot run) is listed without
//! verbs and answers 503 with the reason, never 404; deleting the CRD forgets the kind.

use std::time::Duration;

use serde_json::{Value, json};

use super::serve_crd;
use crate::auth::eventually;
use crate::rest::kubectl::Kubectl;
use crate::rest::{Api, GROUP};

/// A co-tenant kind written for this test in the style of the providers' (CAPK's machines):
/// bounds, a default, a pattern, a set, a list map, CEL rules (one a transition rule with a
/// message expression, a reason and a field path), status, printer columns, a selectable
/// field, a short name.
const SAMPLE_MACHINES: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: samplemachines.infrastructure.cluster.x-k8s.io
spec:
  group: infrastructure.cluster.x-k8s.io
  names:
    kind: SampleMachine
    listKind: SampleMachineList
    plural: samplemachines
    singular: samplemachine
    shortNames: [smach]
    categories: [cluster-api]
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {status: {}}
    selectableFields:
    - {jsonPath: .spec.image}
    additionalPrinterColumns:
    - {name: Image, type: string, jsonPath: .spec.image}
    - {name: Ready, type: boolean, jsonPath: .status.ready}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata: {type: object}
          spec:
            type: object
            required: [image]
            x-kubernetes-validations:
            - rule: self.cpus <= 4 || self.memoryMiB >= 4096
              message: more than 4 CPUs need at least 4096 MiB
            - rule: self.image == oldSelf.image
              messageExpression: "'image is immutable, was ' + oldSelf.image"
              reason: FieldValueForbidden
              fieldPath: .image
            properties:
              image: {type: string, pattern: '^[a-z0-9./:-]+$'}
              cpus: {type: integer, minimum: 1, maximum: 64, default: 2}
              memoryMiB: {type: integer, default: 2048}
              tags:
                type: array
                x-kubernetes-list-type: set
                items: {type: string}
              disks:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    sizeGiB: {type: integer}
          status:
            type: object
            properties:
              ready: {type: boolean}
"#;

/// Served in v1alpha1 but stored in v1beta1 (as CAPZ's ASO kinds): kube-apiserver keeps
/// its objects, so this server must not serve them from its own storage.
const STORED_ELSEWHERE: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: elsewheres.infrastructure.cluster.x-k8s.io
spec:
  group: infrastructure.cluster.x-k8s.io
  names: {kind: Elsewhere, listKind: ElsewhereList, plural: elsewheres, singular: elsewhere}
  scope: Namespaced
  versions:
  - {name: v1alpha1, served: true, storage: false, schema: {openAPIV3Schema: {type: object}}}
  - {name: v1beta1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
"#;

/// A rule that does not compile: kube refuses such a CRD when it is written; here its kind is
/// not served, with the rule named.
const BROKEN_RULE: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: brokenrules.infrastructure.cluster.x-k8s.io
spec:
  group: infrastructure.cluster.x-k8s.io
  names: {kind: BrokenRule, listKind: BrokenRuleList, plural: brokenrules, singular: brokenrule}
  scope: Namespaced
  versions:
  - name: v1alpha2
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations: [{rule: "self.size >"}]
"#;

/// A pool of machines with the `scale` subresource (the shape of CAPI's MachineDeployment and
/// of the providers' machine pools), its replicas bounded by the schema as well.
const SAMPLE_POOLS: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: samplepools.infrastructure.cluster.x-k8s.io
spec:
  group: infrastructure.cluster.x-k8s.io
  names: {kind: SamplePool, listKind: SamplePoolList, plural: samplepools, singular: samplepool}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas,
              labelSelectorPath: .status.selector}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              replicas: {type: integer, maximum: 10}
          status:
            type: object
            properties:
              replicas: {type: integer}
              selector: {type: string}
"#;

fn machine(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/v1alpha1"),
        "kind": "SampleMachine",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crd_of_our_group_applied_to_dev_is_served_from_its_schema() {
    let api = Api::start().await;
    let k = Kubectl::new(&api, "1.33").in_namespace("default");
    let path = format!("/apis/{GROUP}/v1alpha1/namespaces/default/samplemachines");
    assert_eq!(api.get(&path).send().await.status, 404, "no CRD yet");

    let file = serve_crd(&api, &k, "samplemachines.yaml", SAMPLE_MACHINES, &path).await;

    // Unknown fields are pruned (with a warning here), defaults filled in.
    let created = api
        .post(&format!("{path}?fieldValidation=Warn"))
        .json(&machine("m1", json!({"image": "debian:13", "bogus": 1})))
        .send()
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
    assert_eq!(created.warnings(), [r#"unknown field "spec.bogus""#]);
    let object = created.json();
    assert_eq!(
        object["spec"],
        json!({"image": "debian:13", "cpus": 2, "memoryMiB": 2048})
    );
    let strict = api
        .post(&format!("{path}?fieldValidation=Strict"))
        .json(&machine("m2", json!({"image": "debian", "bogus": 1})))
        .send()
        .await;
    assert_eq!(strict.status, 400, "{}", strict.text);
    assert_eq!(
        strict.message(),
        r#"strict decoding error: unknown field "spec.bogus""#
    );

    // The schema's bounds and patterns, and the CEL rule, as kube words them.
    let invalid = api
        .post(&path)
        .json(&machine(
            "m3",
            json!({"image": "Debian!", "cpus": 100, "tags": ["a", "a"]}),
        ))
        .send()
        .await;
    assert_eq!(invalid.status, 422, "{}", invalid.text);
    let causes: Vec<String> = invalid.json()["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{} {}",
                c["field"].as_str().unwrap(),
                c["reason"].as_str().unwrap()
            )
        })
        .collect();
    assert!(
        causes.contains(&"spec.image FieldValueInvalid".to_owned()),
        "{causes:?}"
    );
    assert!(
        causes.contains(&"spec.cpus FieldValueInvalid".to_owned()),
        "{causes:?}"
    );
    assert!(
        causes.contains(&"spec.tags[1] FieldValueDuplicate".to_owned()),
        "{causes:?}"
    );
    let rule = api
        .post(&path)
        .json(&machine("m3", json!({"image": "debian", "cpus": 8})))
        .send()
        .await;
    assert_eq!(rule.status, 422, "{}", rule.text);
    assert!(
        rule.message()
            .ends_with(r#"spec: Invalid value: "object": more than 4 CPUs need at least 4096 MiB"#),
        "{}",
        rule.message()
    );

    // The transition rule: its message expression, reason and field path.
    let changed = api
        .patch(&format!("{path}/m1"))
        .merge_patch(&json!({"spec": {"image": "ubuntu"}}))
        .send()
        .await;
    assert_eq!(changed.status, 422, "{}", changed.text);
    assert!(
        changed
            .message()
            .ends_with("spec.image: Forbidden: image is immutable, was debian:13"),
        "{}",
        changed.message()
    );

    // Status through its subresource only; the printer columns in kubectl's table.
    let status = api
        .patch(&format!("{path}/m1/status"))
        .merge_patch(&json!({"status": {"ready": true}, "spec": {"cpus": 3}}))
        .send()
        .await;
    assert_eq!(status.status, 200, "{}", status.text);
    assert_eq!(
        status.json()["spec"]["cpus"],
        2,
        "spec is not written through status"
    );
    let main = api
        .patch(&format!("{path}/m1"))
        .merge_patch(&json!({"status": {"ready": false}}))
        .send()
        .await;
    assert_eq!(main.json()["status"]["ready"], true, "{}", main.text);
    let table = k.ok(&["get", "smach"]).await;
    assert!(
        table.contains("IMAGE") && table.contains("READY") && table.contains("debian:13"),
        "{table}"
    );

    // Server-side apply, typed from the schema: the list map merges by key.
    for (manager, disk, size) in [("one", "root", 20), ("two", "data", 100)] {
        let file = k.manifest(
            &format!("m4-{manager}.yaml"),
            &format!(
                "apiVersion: {GROUP}/v1alpha1\nkind: SampleMachine\nmetadata: {{name: m4}}\n\
                 spec: {{image: debian, disks: [{{name: {disk}, sizeGiB: {size}}}]}}\n"
            ),
        );
        let manager = format!("--field-manager={manager}");
        k.ok(&["apply", "--server-side", &manager, "-f", &file])
            .await;
    }
    let m4 = api.get(&format!("{path}/m4")).send().await.json();
    let disks: Vec<&str> = m4["spec"]["disks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(disks, ["root", "data"], "{m4}");

    // The selectable field selects, in lists as in kubectl; other spec fields are refused.
    let names = |list: Value| -> Vec<String> {
        let items = list["items"].as_array().cloned().unwrap_or_default();
        items
            .iter()
            .map(|i| {
                i["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    };
    let selected = api
        .get(&format!("{path}?fieldSelector=spec.image%3Ddebian"))
        .send()
        .await;
    assert_eq!(names(selected.json()), ["m4"], "{}", selected.text);
    let others = api
        .get(&format!("{path}?fieldSelector=spec.image%21%3Ddebian"))
        .send()
        .await;
    assert!(
        !names(others.json()).contains(&"m4".to_owned()),
        "{}",
        others.text
    );
    let shown = k
        .ok(&[
            "get",
            "smach",
            "--field-selector",
            "spec.image=debian",
            "-o",
            "name",
        ])
        .await;
    assert_eq!(
        shown.trim(),
        "samplemachine.infrastructure.cluster.x-k8s.io/m4"
    );
    let refused = api
        .get(&format!("{path}?fieldSelector=spec.cpus%3D2"))
        .send()
        .await;
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert_eq!(refused.message(), "field label not supported: spec.cpus");

    // Discovery lists it as a served kind.
    let listed = api
        .get(&format!("/apis/{GROUP}/v1alpha1"))
        .send()
        .await
        .json();
    let entry = listed["resources"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == "samplemachines"))
        .unwrap_or_else(|| panic!("samplemachines in discovery: {listed}"));
    assert_eq!(entry["shortNames"], json!(["smach"]));
    assert_eq!(entry["categories"], json!(["cluster-api"]));
    assert!(entry["verbs"].as_array().is_some_and(|v| v.len() == 8));

    // OpenAPI v3 (kubectl explain's default) describes it beside our kinds, from its schema;
    // a document asked for by another hash (the CRDs' own, which kube-aggregator may send
    // here) is answered, not redirected.
    let explained = k.ok(&["explain", "smach.spec.cpus"]).await;
    assert!(
        explained.contains("maximum: 64") || explained.contains("<integer>"),
        "{explained}"
    );
    assert!(explained.contains("FIELD: cpus"), "{explained}");
    let ours = k
        .ok(&[
            "explain",
            "proxmoxclusters.spec",
            "--api-version",
            &format!("{GROUP}/v1alpha1"),
        ])
        .await;
    assert!(ours.contains("controlPlaneEndpoint"), "{ours}");
    let document = api
        .get(&format!("/openapi/v3/apis/{GROUP}/v1alpha1?hash=0123"))
        .send()
        .await;
    assert_eq!(document.status, 200, "{}", document.text);
    let schemas = &document.json()["components"]["schemas"];
    let sample = &schemas["io.x-k8s.cluster.infrastructure.v1alpha1.SampleMachine"];
    assert_eq!(
        sample["properties"]["spec"]["properties"]["cpus"]["maximum"], 64,
        "{sample}"
    );
    assert!(schemas["io.x-k8s.cluster.infrastructure.v1alpha1.SampleMachineList"].is_object());

    k.ok(&["delete", "-f", &file]).await;
    eventually(
        Duration::from_secs(10),
        "SampleMachine forgotten",
        || async { api.get(&path).send().await.status == 404 },
    )
    .await;
    let document = api
        .get(&format!("/openapi/v3/apis/{GROUP}/v1alpha1"))
        .send()
        .await
        .json();
    assert!(
        document["components"]["schemas"]
            .get("io.x-k8s.cluster.infrastructure.v1alpha1.SampleMachine")
            .is_none(),
        "its schema is gone with its CRD"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kind_stored_outside_our_group_versions_is_a_503_with_the_reason() {
    let api = Api::start().await;
    let k = Kubectl::new(&api, "1.33");
    let path = format!("/apis/{GROUP}/v1alpha1/namespaces/default/elsewheres");
    let file = k.manifest("elsewheres.yaml", STORED_ELSEWHERE);
    k.ok(&["apply", "-f", &file]).await;
    eventually(Duration::from_secs(10), "Elsewhere known", || async {
        api.get(&path).send().await.status == 503
    })
    .await;
    let reply = api.get(&path).send().await;
    assert!(
        reply.message().starts_with(
            "Elsewhere is defined by CustomResourceDefinition \"elsewheres.infrastructure.cluster.x-k8s.io\""
        ) && reply.message().contains("v1beta1"),
        "{}",
        reply.text
    );
    let listed = api
        .get(&format!("/apis/{GROUP}/v1alpha1"))
        .send()
        .await
        .json();
    let entry = listed["resources"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == "elsewheres"))
        .unwrap_or_else(|| panic!("elsewheres in discovery: {listed}"));
    assert_eq!(entry["verbs"], json!([]));
    let (ok, _, err) = k.run(&["get", "elsewheres"]).await;
    assert!(!ok);
    assert!(
        err.contains("Error from server (ServiceUnavailable): Elsewhere is defined by"),
        "{err}"
    );

    k.ok(&["apply", "-f", &k.manifest("brokenrules.yaml", BROKEN_RULE)])
        .await;
    let broken = format!("/apis/{GROUP}/v1alpha2/namespaces/default/brokenrules");
    eventually(Duration::from_secs(10), "BrokenRule known", || async {
        api.get(&broken).send().await.status == 503
    })
    .await;
    let message = api.get(&broken).send().await.message();
    assert!(
        message.contains(r#"its schema of v1alpha2 has a rule that cannot run: "self.size >""#),
        "{message}"
    );
}

/// Two versions of one kind, both ours (as Scaleway's), stored in v1alpha2 with kube's `None`
/// conversion: written in one, read in the other with that version's `apiVersion` and defaults.
pub(super) const SAMPLE_NETWORKS: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: samplenetworks.infrastructure.cluster.x-k8s.io
spec:
  group: infrastructure.cluster.x-k8s.io
  names: {kind: SampleNetwork, listKind: SampleNetworkList, plural: samplenetworks, singular: samplenetwork}
  scope: Namespaced
  conversion: {strategy: None}
  versions:
  - name: v1alpha1
    served: true
    storage: false
    deprecated: true
    deprecationWarning: SampleNetwork v1alpha1 goes away; use v1alpha2
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              cidr: {type: string}
  - name: v1alpha2
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              cidr: {type: string}
              mtu: {type: integer, default: 1500}
"#;

#[tokio::test(flavor = "multi_thread")]
async fn versions_convert_as_none_and_a_changed_crd_serves_its_new_schema() {
    let api = Api::start().await;
    let k = Kubectl::new(&api, "1.33");
    let v1 = format!("/apis/{GROUP}/v1alpha1/namespaces/default/samplenetworks");
    let v2 = format!("/apis/{GROUP}/v1alpha2/namespaces/default/samplenetworks");
    let file = k.manifest("samplenetworks.yaml", SAMPLE_NETWORKS);
    k.ok(&["apply", "-f", &file]).await;
    eventually(Duration::from_secs(10), "SampleNetwork served", || async {
        api.get(&v1).send().await.status == 200 && api.get(&v2).send().await.status == 200
    })
    .await;
    let mut events = api.get(&format!("{v1}?watch=true")).watch().await;
    let created = api
        .post(&v1)
        .json(
            &json!({"apiVersion": format!("{GROUP}/v1alpha1"), "kind": "SampleNetwork",
                      "metadata": {"name": "n1"}, "spec": {"cidr": "10.0.0.0/24", "mtu": 9000}}),
        )
        .send()
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
    assert_eq!(
        created.json()["spec"],
        json!({"cidr": "10.0.0.0/24"}),
        "v1alpha1 has no mtu"
    );
    let in_v2 = api.get(&format!("{v2}/n1")).send().await.json();
    assert_eq!(in_v2["apiVersion"], format!("{GROUP}/v1alpha2"));
    assert_eq!(in_v2["spec"], json!({"cidr": "10.0.0.0/24", "mtu": 1500}));
    let event = events.next().await.expect("a watch event");
    assert_eq!(event["type"], "ADDED");
    assert_eq!(event["object"]["apiVersion"], format!("{GROUP}/v1alpha1"));

    // The CRD changes: v1alpha1 gains the field. Lists and reads use the new schema at once,
    // the cached encodings of the old one notwithstanding; what a read shows is the storage
    // version's default (kube defaults stored objects in their storage version, on read).
    let listed = api.get(&v1).send().await.json();
    assert_eq!(listed["items"][0]["spec"], json!({"cidr": "10.0.0.0/24"}));
    let changed = SAMPLE_NETWORKS.replacen(
        "              cidr: {type: string}\n",
        "              cidr: {type: string}\n              mtu: {type: integer, default: 1400}\n",
        1,
    );
    k.ok(&["apply", "-f", &k.manifest("samplenetworks.yaml", &changed)])
        .await;
    eventually(
        Duration::from_secs(10),
        "the new v1alpha1 schema",
        || async { api.get(&v1).send().await.json()["items"][0]["spec"]["mtu"] == 1500 },
    )
    .await;
    let written = api
        .post(&v1)
        .json(
            &json!({"apiVersion": format!("{GROUP}/v1alpha1"), "kind": "SampleNetwork",
                      "metadata": {"name": "n2"}, "spec": {"cidr": "10.0.1.0/24"}}),
        )
        .send()
        .await;
    assert_eq!(
        written.json()["spec"]["mtu"],
        1400,
        "the request version's default"
    );
    assert_eq!(
        api.get(&format!("{v2}/n2")).send().await.json()["spec"]["mtu"],
        1400
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_scale_subresource_reads_and_writes_the_desired_replicas() {
    let api = Api::start().await;
    let k = Kubectl::new(&api, "1.33").in_namespace("default");
    let path = format!("/apis/{GROUP}/v1alpha1/namespaces/default/samplepools");
    serve_crd(&api, &k, "samplepools.yaml", SAMPLE_POOLS, &path).await;
    let pool = |name: &str, spec: Value| {
        json!({"apiVersion": format!("{GROUP}/v1alpha1"), "kind": "SamplePool",
               "metadata": {"name": name, "namespace": "default"}, "spec": spec})
    };

    // kube's replica checks on every write of such a kind, beside the schema's.
    let negative = api
        .post(&path)
        .json(&pool("p0", json!({"replicas": -1})))
        .send()
        .await;
    assert_eq!(negative.status, 422, "{}", negative.text);
    assert!(
        negative
            .message()
            .ends_with(".spec.replicas: Invalid value: -1: should be a non-negative integer"),
        "{}",
        negative.message()
    );

    // Without desired replicas there is no Scale to read, as kube says.
    let created = api.post(&path).json(&pool("p1", json!({}))).send().await;
    assert_eq!(created.status, 201, "{}", created.text);
    let missing = api.get(&format!("{path}/p1/scale")).send().await;
    assert_eq!(missing.status, 500, "{}", missing.text);
    assert_eq!(
        missing.message(),
        r#"Internal error occurred: the spec replicas field ".spec.replicas" does not exist"#
    );

    // kubectl scale finds the subresource through discovery and writes through it.
    api.post(&path)
        .json(&pool("p2", json!({"replicas": 1})))
        .send()
        .await;
    let status = api
        .patch(&format!("{path}/p2/status"))
        .merge_patch(&json!({"status": {"replicas": 1, "selector": "pool=p2"}}))
        .send()
        .await;
    assert_eq!(status.status, 200, "{}", status.text);
    k.ok(&["scale", "samplepool/p2", "--replicas=3"]).await;
    let scale = api.get(&format!("{path}/p2/scale")).send().await;
    assert_eq!(scale.status, 200, "{}", scale.text);
    let scale = scale.json();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["apiVersion"], "autoscaling/v1");
    assert_eq!(scale["spec"], json!({"replicas": 3}));
    assert_eq!(
        scale["status"],
        json!({"replicas": 1, "selector": "pool=p2"})
    );
    let object = api.get(&format!("{path}/p2")).send().await.json();
    assert_eq!(object["spec"]["replicas"], 3);
    assert_eq!(
        object["metadata"]["resourceVersion"],
        scale["metadata"]["resourceVersion"]
    );
    let managers: Vec<(String, String)> = object["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let text = |key: &str| e[key].as_str().unwrap_or_default().to_owned();
            (text("manager"), text("subresource"))
        })
        .collect();
    assert!(
        managers
            .iter()
            .any(|(manager, sub)| manager.starts_with("kubectl") && sub == "scale"),
        "{managers:?}"
    );

    // PUT with the Scale's resourceVersion as a precondition; a stale one conflicts.
    let mut stale = scale.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    stale["spec"]["replicas"] = json!(4);
    let conflict = api
        .put(&format!("{path}/p2/scale"))
        .json(&stale)
        .send()
        .await;
    assert_eq!(conflict.status, 409, "{}", conflict.text);
    let mut fresh = scale.clone();
    fresh["spec"]["replicas"] = json!(5);
    let put = api
        .put(&format!("{path}/p2/scale"))
        .json(&fresh)
        .send()
        .await;
    assert_eq!(put.status, 200, "{}", put.text);
    assert_eq!(put.json()["spec"]["replicas"], 5);

    // Zero replicas (which a Scale omits) are owned by nobody afterwards, as kube decides.
    let owners = |object: &Value| -> Vec<String> {
        object["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["fieldsV1"]["f:spec"].get("f:replicas").is_some())
            .map(|e| format!("{}/{}", e["manager"], e["subresource"]))
            .collect()
    };
    let p3 = api
        .post(&path)
        .json(&pool("p3", json!({"replicas": 4})))
        .send()
        .await
        .json();
    assert_eq!(owners(&p3).len(), 1, "{p3}");
    let zeroed = api
        .patch(&format!("{path}/p3/scale"))
        .merge_patch(&json!({"spec": {"replicas": null}}))
        .send()
        .await;
    assert_eq!(zeroed.status, 200, "{}", zeroed.text);
    let p3 = api.get(&format!("{path}/p3")).send().await.json();
    assert_eq!(p3["spec"]["replicas"], 0);
    assert!(owners(&p3).is_empty(), "{p3}");

    // The schema still holds through the subresource; the object is unchanged when refused.
    let over = api
        .patch(&format!("{path}/p2/scale"))
        .merge_patch(&json!({"spec": {"replicas": 11}}))
        .send()
        .await;
    assert_eq!(over.status, 422, "{}", over.text);
    assert!(
        over.message().contains("spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10"),
        "{}",
        over.message()
    );
    let renamed = api
        .put(&format!("{path}/p2/scale"))
        .json(&json!({"metadata": {"name": "other"}, "spec": {"replicas": 2}}))
        .send()
        .await;
    assert_eq!(renamed.status, 400, "{}", renamed.text);
    let applied = api
        .patch(&format!("{path}/p2/scale"))
        .raw("application/apply-patch+yaml", "spec: {replicas: 2}")
        .send()
        .await;
    assert_eq!(applied.status, 415, "{}", applied.text);
    let object = api.get(&format!("{path}/p2")).send().await.json();
    assert_eq!(object["spec"]["replicas"], 5);

    // Discovery names the subresource as kube does: autoscaling/v1 Scale.
    let listed = api
        .get(&format!("/apis/{GROUP}/v1alpha1"))
        .send()
        .await
        .json();
    let entry = listed["resources"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == "samplepools/scale"))
        .unwrap_or_else(|| panic!("samplepools/scale in discovery: {listed}"));
    assert_eq!(
        (&entry["group"], &entry["version"], &entry["kind"]),
        (&json!("autoscaling"), &json!("v1"), &json!("Scale"))
    );
}

/// A kind whose spec takes anything (as many providers' raw configuration fields do).
const SAMPLE_BLOBS: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: sampleblobs.infrastructure.cluster.x-k8s.io
spec:
  group: infrastructure.cluster.x-k8s.io
  names: {kind: SampleBlob, listKind: SampleBlobList, plural: sampleblobs, singular: sampleblob}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

/// An object is bounded as etcd bounds kube-apiserver's (1.5 MiB, below the 3 MiB body):
/// over it, a 413 naming the bound, as kube answers etcd's refusal, and nothing stored;
/// unless it fits without its managed fields and was not applied, as kube retries.
#[tokio::test(flavor = "multi_thread")]
async fn objects_are_bounded_as_etcd_bounds_kube_s() {
    let api = Api::start().await;
    let k = Kubectl::new(&api, "1.33");
    let path = format!("/apis/{GROUP}/v1alpha1/namespaces/default/sampleblobs");
    serve_crd(&api, &k, "sampleblobs.yaml", SAMPLE_BLOBS, &path).await;
    let blob = |name: &str, bytes: usize| {
        json!({"apiVersion": format!("{GROUP}/v1alpha1"), "kind": "SampleBlob",
               "metadata": {"name": name}, "spec": {"data": "x".repeat(bytes)}})
    };
    let fits = api.post(&path).json(&blob("fits", 1 << 20)).send().await;
    assert_eq!(fits.status, 201, "{}", fits.text.len());
    let over = api.post(&path).json(&blob("over", 2 << 20)).send().await;
    assert_eq!(over.status, 413, "{}", over.text);
    assert_eq!(over.reason(), "RequestEntityTooLarge");
    assert!(
        over.message().ends_with(
            "over the 1572864 etcd stores by default (etcdserver: request is too large)"
        ),
        "{}",
        over.message()
    );
    assert_eq!(api.get(&format!("{path}/over")).send().await.status, 404);
    let grown = api
        .patch(&format!("{path}/fits"))
        .merge_patch(&json!({"spec": {"more": "y".repeat(1 << 20)}}))
        .send()
        .await;
    assert_eq!(grown.status, 413, "{}", grown.text.len());
    let kept = api.get(&format!("{path}/fits")).send().await.json();
    assert!(
        kept["spec"].get("more").is_none(),
        "the refused update changed nothing"
    );

    // Fits only without its managed fields (a field each): stored without them, as kube
    // retries a create, update or patch; not a server-side apply, which owns them.
    let mut wide = blob("wide", 0);
    wide["spec"] = (0..70_000)
        .map(|i| (format!("k{i:05}"), json!(1)))
        .collect();
    let created = api.post(&path).json(&wide).send().await;
    assert_eq!(created.status, 201, "{}", created.text.len());
    assert!(
        created.json()["metadata"].get("managedFields").is_none(),
        "{}",
        created.text.len()
    );
    // (Applied, a schema without apiVersion and kind still types them, as kube's does.)
    let small = api
        .patch(&format!("{path}/small?fieldManager=blobber"))
        .raw("application/apply-patch+yaml", blob("small", 8).to_string())
        .send()
        .await;
    assert_eq!(small.status, 201, "{}", small.text);
    assert_eq!(
        small.json()["metadata"]["managedFields"][0]["manager"],
        "blobber"
    );
    wide["metadata"]["name"] = json!("wide-applied");
    let applied = api
        .patch(&format!("{path}/wide-applied?fieldManager=blobber"))
        .raw("application/apply-patch+yaml", wide.to_string())
        .send()
        .await;
    assert_eq!(applied.status, 413, "{}", applied.text);
}
