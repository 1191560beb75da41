//! Admission of ProxmoxKubernetesReleases (a version, template sources of one kind each, one
//! template per node and domain) and of the machines that name one (a release excludes the
//! machine's own template source).

use serde_json::{Value, json};

use super::support::Edit::{Remove, Set};
use super::support::{NOT_CHECKED, case, machine_template_v2, machine_v2, run_create_cases};

fn release() -> Value {
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
        "kind": "ProxmoxKubernetesRelease",
        "metadata": {"name": "kubernetes-v1.34.8", "namespace": "default"},
        "spec": {
            "version": "v1.34.8",
            "templates": [
                {"templateSelector": {"matchTags": ["ubuntu", "v1.34.8"]}},
                {"sourceNode": "pve3", "templateID": 9103, "failureDomains": ["rack-c"]}
            ]
        }
    })
}

fn machine_from_release() -> Value {
    let mut machine = machine_v2();
    let spec = machine["spec"].as_object_mut().expect("spec");
    spec.remove("sourceNode");
    spec.remove("templateID");
    spec.insert("kubernetesRelease".into(), json!({}));
    machine
}

fn template_from_release() -> Value {
    let mut template = machine_template_v2();
    let spec = template["spec"]["template"]["spec"]
        .as_object_mut()
        .expect("spec");
    spec.remove("sourceNode");
    spec.remove("templateID");
    spec.insert(
        "kubernetesRelease".into(),
        json!({"name": "kubernetes-v1.34.8"}),
    );
    template
}

#[test]
fn releases_have_a_version_and_sources_of_one_kind_each() {
    run_create_cases(vec![
        case("tags, and a VMID for one domain", release, vec![], vec![]),
        case(
            "a version without the v",
            release,
            vec![Set("/spec/version", json!("1.34.8"))],
            vec![],
        ),
        case(
            "a pre-release",
            release,
            vec![Set("/spec/version", json!("v1.35.0-rc.1"))],
            vec![],
        ),
        case(
            "not a version",
            release,
            vec![Set("/spec/version", json!("1.34"))],
            vec![
                r#"spec.version: Invalid value: "1.34": spec.version in body should match '^v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$'"#,
            ],
        ),
        case(
            "no version",
            release,
            vec![Remove("/spec/version")],
            vec![r#"spec.version: Required value"#, NOT_CHECKED],
        ),
        case(
            "no templates",
            release,
            vec![Set("/spec/templates", json!([]))],
            vec![
                r#"spec.templates: Invalid value: 0: spec.templates in body should have at least 1 items"#,
            ],
        ),
        case(
            "a VMID without its node",
            release,
            vec![Remove("/spec/templates/1/sourceNode")],
            vec![
                r#"spec.templates[1]: Invalid value: "object": must define either a sourceNode with a templateID or a templateSelector"#,
            ],
        ),
        case(
            "tags and a VMID in one source",
            release,
            vec![Set("/spec/templates/0/templateID", json!(9100))],
            vec![
                r#"spec.templates[0]: Invalid value: "object": must define either a sourceNode with a templateID or a templateSelector"#,
            ],
        ),
        case(
            "a VMID Proxmox cannot have",
            release,
            vec![Set("/spec/templates/1/templateID", json!(99))],
            vec![
                r#"spec.templates[1].templateID: Invalid value: 99: spec.templates[1].templateID in body should be greater than or equal to 100"#,
            ],
        ),
        case(
            "two templates on one node for the same domain",
            release,
            vec![Set(
                "/spec/templates/0",
                json!({"sourceNode": "pve3", "templateID": 9100, "failureDomains": ["rack-b", "rack-c"]}),
            )],
            vec![
                r#"spec.templates[1].sourceNode: Invalid value: "pve3": spec.templates[0] already names a template on pve3 for the same failure domains: a machine must find one template per node"#,
            ],
        ),
        case(
            "one node, a template per domain",
            release,
            vec![Set(
                "/spec/templates/0",
                json!({"sourceNode": "pve3", "templateID": 9100, "failureDomains": ["rack-b"]}),
            )],
            vec![],
        ),
    ]);
}

#[test]
fn a_release_replaces_the_machines_template_source() {
    run_create_cases(vec![
        case(
            "the release of the Machine's version",
            machine_from_release,
            vec![],
            vec![],
        ),
        case("a release by name", template_from_release, vec![], vec![]),
        case(
            "a release and a VMID",
            machine_from_release,
            vec![
                Set("/spec/sourceNode", json!("pve1")),
                Set("/spec/templateID", json!(100)),
            ],
            vec![
                r#"spec: Invalid value: "object": kubernetesRelease names the template: sourceNode, templateID and templateSelector must not be set with it"#,
            ],
        ),
        case(
            "a release and tags, on a template",
            template_from_release,
            vec![Set(
                "/spec/template/spec/templateSelector",
                json!({"matchTags": ["ubuntu"]}),
            )],
            vec![
                r#"spec.template.spec: Invalid value: "object": kubernetesRelease names the template: sourceNode, templateID and templateSelector must not be set with it"#,
            ],
        ),
        case(
            "no template source at all",
            machine_from_release,
            vec![Remove("/spec/kubernetesRelease")],
            vec![
                r#"spec: Invalid value: "object": must define either a SourceNode with a TemplateID or a TemplateSelector"#,
                r#"spec: Invalid value: "object": must define either a SourceNode with a TemplateID or a TemplateSelector"#,
                r#"spec: Invalid value: "object": Must specify either templateID or templateSelector"#,
            ],
        ),
    ]);
}
