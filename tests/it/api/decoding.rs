//! Decoding request bodies: unknown fields under each `fieldValidation`
//! mode, type and range errors with paths, and the type fields.

use capmox_apiserver::api::decode::{DecodeError, FieldValidation, decode};
use capmox_apiserver::api::{object, v1alpha1, v1alpha2};
use serde_json::{Value, json};

use super::support::Edit::Set;
use super::support::{
    cluster_template_v2, cluster_v2, edited, machine_template_v2, machine_v1, machine_v2,
};

fn with_unknown_fields() -> Value {
    edited(
        machine_v2(),
        &[
            Set("/spec/foo", json!(1)),
            Set("/spec/network/networkDevices/0/bar", json!("x")),
            Set("/metadata/colour", json!("blue")),
            Set("/extra", json!({})),
        ],
    )
}

#[test]
fn strict_names_every_unknown_field() {
    let error = decode::<v1alpha2::ProxmoxMachine>(with_unknown_fields(), FieldValidation::Strict)
        .expect_err("unknown fields");
    assert!(matches!(error, DecodeError::UnknownFields(_)));
    assert_eq!(
        error.to_string(),
        r#"strict decoding error: unknown field "extra", unknown field "metadata.colour", unknown field "spec.foo", unknown field "spec.network.networkDevices[0].bar""#
    );
}

#[test]
fn warn_drops_unknown_fields_and_warns() {
    let decoded = decode::<v1alpha2::ProxmoxMachine>(with_unknown_fields(), FieldValidation::Warn)
        .expect("decodes");
    assert_eq!(
        decoded.warnings,
        [
            r#"unknown field "extra""#,
            r#"unknown field "metadata.colour""#,
            r#"unknown field "spec.foo""#,
            r#"unknown field "spec.network.networkDevices[0].bar""#,
        ]
    );
    assert!(decoded.value["spec"].get("foo").is_none());
    assert!(
        decoded.value["spec"]["network"]["networkDevices"][0]
            .get("bar")
            .is_none()
    );
}

#[test]
fn ignore_drops_unknown_fields_silently() {
    let decoded =
        decode::<v1alpha2::ProxmoxMachine>(with_unknown_fields(), FieldValidation::Ignore)
            .expect("decodes");
    assert!(decoded.warnings.is_empty());
    assert!(decoded.value.get("extra").is_none());
}

#[test]
fn status_is_unknown_where_the_kind_has_none() {
    for (body, strict_error) in [
        (
            cluster_template_v2(),
            r#"strict decoding error: unknown field "status""#,
        ),
        (
            machine_template_v2(),
            r#"strict decoding error: unknown field "status""#,
        ),
    ] {
        let body = edited(body, &[Set("/status", json!({ "ready": true }))]);
        let error = match body["kind"].as_str() {
            Some("ProxmoxClusterTemplate") => {
                decode::<v1alpha2::ProxmoxClusterTemplate>(body, FieldValidation::Strict)
                    .map(|_| ())
            }
            _ => decode::<v1alpha2::ProxmoxMachineTemplate>(body, FieldValidation::Strict)
                .map(|_| ()),
        }
        .expect_err("status is unknown");
        assert_eq!(error.to_string(), strict_error);
    }
    assert!(
        decode::<v1alpha2::ProxmoxCluster>(
            edited(
                cluster_v2(),
                &[Set(
                    "/status",
                    json!({ "initialization": { "provisioned": true } })
                )]
            ),
            FieldValidation::Strict
        )
        .is_ok()
    );
}

#[test]
fn field_validation_modes_parse() {
    assert_eq!(
        "Strict".parse::<FieldValidation>().ok(),
        Some(FieldValidation::Strict)
    );
    assert_eq!(
        "Warn".parse::<FieldValidation>().ok(),
        Some(FieldValidation::Warn)
    );
    assert_eq!(
        "Ignore".parse::<FieldValidation>().ok(),
        Some(FieldValidation::Ignore)
    );
    assert_eq!(
        "".parse::<FieldValidation>().ok(),
        Some(FieldValidation::Warn)
    );
    assert_eq!(
        "strict"
            .parse::<FieldValidation>()
            .map_err(|e| e.to_string()),
        Err(
            r#"fieldValidation must be one of "Ignore", "Warn", or "Strict", got "strict""#
                .to_owned()
        )
    );
}

#[test]
fn type_fields_must_match_the_request() {
    let cases = [
        (
            edited(
                machine_v2(),
                &[Set(
                    "/apiVersion",
                    json!("infrastructure.cluster.x-k8s.io/v1alpha1"),
                )],
            ),
            "the API version in the data (infrastructure.cluster.x-k8s.io/v1alpha1) does not match the expected API version (infrastructure.cluster.x-k8s.io/v1alpha2)",
        ),
        (
            edited(machine_v2(), &[Set("/kind", json!("ProxmoxCluster"))]),
            "the kind in the data (ProxmoxCluster) does not match the expected kind (ProxmoxMachine)",
        ),
        (
            edited(machine_v2(), &[Set("/kind", json!(null))]),
            "Object 'kind' is missing in the body",
        ),
        (json!([1, 2]), "the object is not a JSON object"),
    ];
    for (body, message) in cases {
        let error =
            decode::<v1alpha2::ProxmoxMachine>(body, FieldValidation::Strict).expect_err(message);
        assert_eq!(error.to_string(), message);
    }
}

#[test]
fn integers_out_of_their_field_range_are_field_errors() {
    let error = decode::<v1alpha2::ProxmoxMachine>(
        edited(
            machine_v2(),
            &[Set("/spec/templateID", json!(99_999_999_999_i64))],
        ),
        FieldValidation::Strict,
    )
    .expect_err("out of range");
    assert_eq!(
        error.to_string(),
        "spec.templateID: Invalid value: 99999999999: invalid value: integer `99999999999`, expected i32"
    );
    let error = decode::<v1alpha1::ProxmoxMachine>(
        edited(
            machine_v1(),
            &[Set("/spec/network/default/vlan", json!(70_000))],
        ),
        FieldValidation::Strict,
    )
    .expect_err("out of range");
    assert_eq!(
        error.to_string(),
        "spec.network.default.vlan: Invalid value: 70000: spec.network.default.vlan in body should be less than or equal to 4094"
    );
}

#[test]
fn several_errors_read_as_a_list() {
    let error = decode::<v1alpha2::ProxmoxMachine>(
        edited(
            machine_v2(),
            &[
                Set("/spec/numCores", json!("four")),
                Set("/spec/numSockets", json!("two")),
            ],
        ),
        FieldValidation::Strict,
    )
    .expect_err("wrong types");
    assert_eq!(
        error.to_string(),
        r#"[spec.numCores: Invalid value: "string": spec.numCores in body must be of type integer: "string", spec.numSockets: Invalid value: "string": spec.numSockets in body must be of type integer: "string", <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]"#
    );
}

#[test]
fn metadata_of_the_wrong_shape_is_a_field_error() {
    let error = decode::<v1alpha2::ProxmoxMachine>(
        edited(machine_v2(), &[Set("/metadata/labels", json!("x"))]),
        FieldValidation::Strict,
    )
    .expect_err("labels are a map");
    assert!(
        error
            .to_string()
            .starts_with(r#"metadata.labels: Invalid value: "x": "#),
        "{error}"
    );
}

#[test]
fn the_typed_form_keeps_what_was_decoded() {
    fn round_trip<T: capmox_apiserver::api::ApiObject>(body: Value) {
        let decoded = decode::<T>(body, FieldValidation::Strict).expect("decodes");
        assert_eq!(object::to_value(&decoded.object), decoded.value);
    }
    round_trip::<v1alpha2::ProxmoxMachine>(machine_v2());
    round_trip::<v1alpha2::ProxmoxCluster>(cluster_v2());
    round_trip::<v1alpha2::ProxmoxMachineTemplate>(machine_template_v2());
    round_trip::<v1alpha2::ProxmoxClusterTemplate>(cluster_template_v2());
    // v1alpha1's status has a non-omitempty `ready`, so Go always writes it.
    round_trip::<v1alpha1::ProxmoxMachine>(edited(
        machine_v1(),
        &[Set("/status", json!({ "ready": false }))],
    ));
}
