//! What a CRD's schema asks beyond types and bounds, checked on its objects as
//! kube-apiserver checks them, in the Status `kubectl` shows: string formats, `allOf`,
//! `oneOf` and `not`, embedded resources, and the CRD's restrictions on `metadata.name`
//! beside the DNS-subdomain rule of every custom resource.

use serde_json::{Value, json};

use super::serve_crd;
use crate::rest::kubectl::Kubectl;
use crate::rest::{Api, GROUP};

const SAMPLE_TEMPLATES: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: sampletemplates.infrastructure.cluster.x-k8s.io
spec:
  group: infrastructure.cluster.x-k8s.io
  names: {kind: SampleTemplate, listKind: SampleTemplateList, plural: sampletemplates, singular: sampletemplate}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata:
            type: object
            properties:
              name: {type: string, maxLength: 20, pattern: '^tpl-'}
          spec:
            type: object
            properties:
              homepage: {type: string, format: uri}
              contact: {type: string, format: email}
              host: {type: string, format: hostname}
              timeout: {type: string, format: duration}
              port:
                type: integer
                allOf: [{minimum: 1}, {maximum: 65535}]
                not: {enum: [22]}
              size:
                type: string
                oneOf: [{pattern: '^[0-9]+Gi$'}, {pattern: '^[0-9]+Mi$'}]
              template:
                type: object
                x-kubernetes-embedded-resource: true
                x-kubernetes-preserve-unknown-fields: true
"#;

fn template(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/v1alpha1"),
        "kind": "SampleTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    })
}

/// The causes of a 422 Invalid Status as `field: message`, sorted: kube-openapi visits an
/// object's properties in Go's map order, so kube itself gives them in no fixed order.
fn causes(status: &Value) -> Vec<String> {
    assert_eq!(status["code"], 422, "{status}");
    assert_eq!(status["reason"], "Invalid", "{status}");
    let mut causes: Vec<String> = status["details"]["causes"]
        .as_array()
        .expect("causes")
        .iter()
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap(),
                c["message"].as_str().unwrap()
            )
        })
        .collect();
    causes.sort();
    causes
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crd_schema_is_checked_as_kube_checks_it() {
    let api = Api::start().await;
    let k = Kubectl::new(&api, "1.33").in_namespace("default");
    let path = format!("/apis/{GROUP}/v1alpha1/namespaces/default/sampletemplates");
    serve_crd(&api, &k, "sampletemplates.yaml", SAMPLE_TEMPLATES, &path).await;

    // Everything as the schema asks; the embedded object keeps its type and ObjectMeta's
    // fields only.
    let created = api
        .post(&path)
        .json(&template(
            "tpl-good",
            json!({
                "homepage": "https://example.com/docs",
                "contact": "Jane Doe <jane@example.com>",
                "host": "node-1.example.com",
                "timeout": "1h30m",
                "port": 443,
                "size": "20Gi",
                "template": {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "Any_Name", "labels": {"app": "x"}, "color": "red"},
                    "data": {"k": "v"}
                }
            }),
        ))
        .send()
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
    assert_eq!(
        created.warnings(),
        [r#"unknown field "spec.template.metadata.color""#]
    );
    assert_eq!(
        created.json()["spec"]["template"],
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "Any_Name", "labels": {"app": "x"}},
            "data": {"k": "v"}
        })
    );

    let invalid = api
        .post(&path)
        .json(&template(
            "tpl-bad",
            json!({
                "homepage": "example.com/docs",
                "contact": "jane@",
                "host": "-node.example.com",
                "timeout": "soon",
                "port": 22,
                "size": "big",
                "template": {"kind": "ConfigMap", "metadata": {"name": "a/b"}}
            }),
        ))
        .send()
        .await;
    assert_eq!(
        causes(&invalid.json()),
        [
            r#"<nil>: Invalid value: "": "spec.port" must not validate the schema (not)"#,
            r#"<nil>: Invalid value: "": "spec.size" must validate one and only one schema (oneOf). Found none valid"#,
            r#"spec.contact: Invalid value: "jane@": spec.contact in body must be of type email: "jane@""#,
            r#"spec.homepage: Invalid value: "example.com/docs": spec.homepage in body must be of type uri: "example.com/docs""#,
            r#"spec.host: Invalid value: "-node.example.com": spec.host in body must be of type hostname: "-node.example.com""#,
            r#"spec.size: Invalid value: "big": spec.size in body should match '^[0-9]+Gi$'"#,
            r#"spec.template.apiVersion: Required value"#,
            r#"spec.template.metadata.name: Invalid value: "a/b": may not contain '/'"#,
            r#"spec.timeout: Invalid value: "soon": spec.timeout in body must be of type duration: "soon""#,
        ]
    );

    // `allOf` reports the branch that fails and itself; the CRD's restrictions on the name
    // come beside the rule every custom resource's name follows.
    let invalid = api
        .post(&path)
        .json(&template("Tpl-bad", json!({"port": 70000})))
        .send()
        .await;
    assert_eq!(
        causes(&invalid.json()),
        [
            r#"<nil>: Invalid value: "": "spec.port" must validate all the schemas (allOf)"#,
            r#"metadata.name: Invalid value: "Tpl-bad": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"#,
            r#"metadata.name: Invalid value: "Tpl-bad": metadata.name in body should match '^tpl-'"#,
            "spec.port: Invalid value: 70000: spec.port in body should be less than or equal to 65535",
        ]
    );
    let long = api
        .post(&path)
        .json(&template("tpl-far-too-long-a-name", json!({})))
        .send()
        .await;
    assert_eq!(
        causes(&long.json()),
        ["metadata.name: Too long: may not be more than 20 bytes"]
    );

    // An embedded object's type fields that are not strings fail the decoding, as in kube.
    let undecodable = api
        .post(&path)
        .json(&template(
            "tpl-undecodable",
            json!({"template": {"apiVersion": 1, "kind": "ConfigMap"}}),
        ))
        .send()
        .await;
    assert_eq!(undecodable.status, 400, "{}", undecodable.text);
    assert_eq!(
        undecodable.message(),
        r#"SampleTemplate in version "v1alpha1" cannot be handled as a SampleTemplate: spec.template.apiVersion: Invalid value: 1: must be a string"#
    );
}
