//! Bad input gets the right 4xx Status, never a 5xx, and stores nothing; arbitrary bodies on
//! every write endpoint never crash the request path.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::{Api, GROUP, collection, item, machine};

const MACHINES: &str = "proxmoxmachines";

fn machines() -> String {
    collection("v1alpha2", "default", MACHINES)
}

async fn stored(api: &Api) -> usize {
    api.get(&machines()).send().await.json()["items"]
        .as_array()
        .map_or(0, Vec::len)
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_bodies_and_media_types() {
    let api = Api::start().await;
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (
            "application/json",
            b"{\"apiVersion\":".to_vec(),
            400,
            "BadRequest",
        ),
        ("application/json", b"[1,2,3]".to_vec(), 400, "BadRequest"),
        ("application/yaml", b"a: [1, 2".to_vec(), 400, "BadRequest"),
        (
            "application/yaml",
            b"a: 1\n---\nb: 2\n".to_vec(),
            400,
            "BadRequest",
        ),
        ("text/plain", b"hello".to_vec(), 415, "UnsupportedMediaType"),
        (
            "application/vnd.kubernetes.protobuf",
            b"k8s\0".to_vec(),
            415,
            "UnsupportedMediaType",
        ),
        (
            "application/json",
            format!("{}{}", "[".repeat(5000), "]".repeat(5000)).into_bytes(),
            400,
            "BadRequest",
        ),
        (
            "application/json",
            format!("{{\"a\":\"{}\"}}", "x".repeat(3 * 1024 * 1024 + 1)).into_bytes(),
            413,
            "RequestEntityTooLarge",
        ),
    ];
    for (content_type, body, code, reason) in cases {
        let reply = api.post(&machines()).raw(content_type, body).send().await;
        assert_eq!(
            (reply.status, reply.reason().as_str()),
            (code, reason),
            "{content_type}: {}",
            reply.text
        );
        assert_eq!(reply.json()["kind"], "Status");
    }
    assert_eq!(stored(&api).await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn mismatched_identity_and_invalid_objects() {
    let api = Api::start().await;
    let mut wrong_version = machine("m");
    wrong_version["apiVersion"] = json!(format!("{GROUP}/v1alpha1"));
    let reply = api.post(&machines()).json(&wrong_version).send().await;
    assert_eq!(reply.status, 400);
    assert!(
        reply
            .message()
            .contains("does not match the expected API version"),
        "{}",
        reply.text
    );

    let mut wrong_kind = machine("m");
    wrong_kind["kind"] = json!("ProxmoxCluster");
    assert_eq!(
        api.post(&machines()).json(&wrong_kind).send().await.status,
        400
    );
    let mut no_kind = machine("m");
    no_kind.as_object_mut().expect("object").remove("kind");
    assert_eq!(
        api.post(&machines()).json(&no_kind).send().await.status,
        400
    );

    let invalid_name = api
        .post(&machines())
        .json(&machine("Bad_Name"))
        .send()
        .await;
    assert_eq!(invalid_name.status, 422);
    let body = invalid_name.json();
    assert_eq!(body["reason"], "Invalid");
    assert_eq!(body["details"]["kind"], "ProxmoxMachine");
    assert_eq!(body["details"]["causes"][0]["field"], "metadata.name");
    assert_eq!(body["details"]["causes"][0]["reason"], "FieldValueInvalid");

    let mut bad_labels = machine("m");
    bad_labels["metadata"]["labels"] = json!({"bad key!": "v", "ok": 5});
    let labels = api.post(&machines()).json(&bad_labels).send().await;
    assert!(matches!(labels.status, 400 | 422), "{}", labels.text);

    let mut schema = machine("m");
    schema["spec"]["numSockets"] = json!(0);
    schema["spec"]["network"]["networkDevices"][0]["mtu"] = json!(100);
    let reply = api.post(&machines()).json(&schema).send().await;
    assert_eq!(reply.status, 422, "{}", reply.text);
    let fields: Vec<String> = reply.json()["details"]["causes"]
        .as_array()
        .expect("causes")
        .iter()
        .filter_map(|c| c["field"].as_str().map(str::to_owned))
        .collect();
    assert!(fields.contains(&"spec.numSockets".to_owned()), "{fields:?}");

    let mut wrong_type = machine("m");
    wrong_type["spec"]["numSockets"] = json!("two");
    let reply = api.post(&machines()).json(&wrong_type).send().await;
    assert_eq!(reply.status, 422, "{}", reply.text);
    assert_eq!(stored(&api).await, 0);

    // Name and namespace in an update must be the URL's.
    let created = api.create(&machine("real")).await;
    let path = item("v1alpha2", "default", MACHINES, "real");
    let mut renamed = created.clone();
    renamed["metadata"]["name"] = json!("other");
    let reply = api.put(&path).json(&renamed).send().await;
    assert_eq!(reply.status, 400);
    assert_eq!(
        reply.message(),
        "the name of the object (other) does not match the name on the URL (real)"
    );
    let mut moved = created.clone();
    moved["metadata"]["namespace"] = json!("elsewhere");
    assert_eq!(api.put(&path).json(&moved).send().await.status, 400);
    let reply = api
        .post(&format!("{path}/status"))
        .json(&created)
        .send()
        .await;
    assert_eq!(reply.status, 405);
    let unknown = api
        .get(&format!(
            "/apis/{GROUP}/v1alpha2/namespaces/default/widgets"
        ))
        .send()
        .await;
    assert_eq!(unknown.status, 404);
    let template_status = api
        .get(&item(
            "v1alpha2",
            "default",
            "proxmoxmachinetemplates",
            "x/status",
        ))
        .send()
        .await;
    assert_eq!(template_status.status, 404);
    assert_eq!(stored(&api).await, 1);
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "[a-zA-Z0-9./_-]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(
                prop_oneof![
                    Just("apiVersion".to_owned()),
                    Just("kind".to_owned()),
                    Just("metadata".to_owned()),
                    Just("spec".to_owned()),
                    Just("status".to_owned()),
                    Just("name".to_owned()),
                    "[a-z]{1,8}",
                ],
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A body: arbitrary bytes, arbitrary JSON, or a valid machine with arbitrary parts.
fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64),
        json_value().prop_map(|v| v.to_string().into_bytes()),
        (json_value(), json_value(), json_value()).prop_map(|(meta, spec, status)| {
            let mut object = machine("p");
            if meta.is_object() {
                object["metadata"] = meta;
                object["metadata"]["name"] = json!("p");
            }
            object["spec"] = spec;
            object["status"] = status;
            object.to_string().into_bytes()
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::hostile::fuzz::fuzz_cases(96)))]

    /// No body makes any write endpoint answer 5xx.
    #[test]
    fn fuzz_arbitrary_bodies_never_fail_the_server(bodies in prop::collection::vec(body(), 6)) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let api = api_with_object().await;
            let path = item("v1alpha2", "default", MACHINES, "p");
            let calls = [
                api.post(&machines()).raw("application/json", bodies[0].clone()),
                api.put(&path).raw("application/json", bodies[1].clone()),
                api.patch(&path).raw("application/merge-patch+json", bodies[2].clone()),
                api.patch(&path).raw("application/json-patch+json", bodies[3].clone()),
                api.put(&format!("{path}/status")).raw("application/json", bodies[4].clone()),
                api.delete(&path).raw("application/json", bodies[5].clone()),
            ];
            for call in calls {
                let reply = call.send().await;
                prop_assert!(reply.status < 500, "{}: {}", reply.status, reply.text);
            }
            Ok(())
        })?;
    }
}

/// A server with one valid machine `p` (a fresh one per case keeps cases independent).
async fn api_with_object() -> Api {
    let api = Api::start().await;
    api.create(&machine("p")).await;
    api
}
