//! A co-tenant kind whose versions convert through its CRD's conversion webhook (kube's
//! `Webhook` strategy), applied to `dev`: the webhook, served over HTTPS by this test and
//! trusted through the CRD's `caBundle`, is sent a ConversionReview v1 for every read and
//! write in the version that is not stored, and its answer is what clients see; its
//! refusal, and its absence, are errors in kube's words, and nothing is stored.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use base64::Engine as _;
use capmox_apiserver::server::listener::RunningServer;
use capmox_apiserver::server::pki::CertificateAuthority;
use capmox_apiserver::server::tls::{self, ReloadingCertResolver};
use serde_json::{Value, json};

use super::serve_crd;
use crate::auth::eventually;
use crate::auth::fake_kube::serve_on_loopback;
use crate::rest::kubectl::Kubectl;
use crate::rest::{Api, GROUP};

type Reviews = Arc<Mutex<Vec<Value>>>;

/// v1alpha1 keeps a disk's size as a quantity (`"10Gi"`), the stored version as `sizeGiB`; a
/// disk named `refused` cannot be converted.
async fn convert(
    State(reviews): State<Reviews>,
    axum::Json(review): axum::Json<Value>,
) -> axum::Json<Value> {
    reviews.lock().expect("reviews").push(review.clone());
    let request = &review["request"];
    let desired = request["desiredAPIVersion"].as_str().unwrap_or_default();
    let objects = request["objects"].as_array().cloned().unwrap_or_default();
    let refused = objects.iter().any(|o| o["metadata"]["name"] == "refused");
    let converted: Vec<Value> = objects
        .into_iter()
        .map(|mut object| {
            let spec = object["spec"].take();
            object["spec"] = if desired.ends_with("/v1alpha1") {
                json!({"size": format!("{}Gi", spec["sizeGiB"].as_u64().unwrap_or(0))})
            } else {
                let size = spec["size"].as_str().unwrap_or("0Gi");
                json!({"sizeGiB": size.trim_end_matches("Gi").parse::<u64>().unwrap_or(0)})
            };
            object["apiVersion"] = json!(desired);
            object
        })
        .collect();
    let result = if refused {
        json!({"status": "Failure", "message": "refused disks cannot be converted"})
    } else {
        json!({"status": "Success"})
    };
    axum::Json(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "response": {"uid": request["uid"], "result": result, "convertedObjects": converted},
    }))
}

/// The webhook of SampleDisk, served on loopback over HTTPS, with the reviews it was sent.
pub struct Webhook {
    ca: CertificateAuthority,
    reviews: Reviews,
    server: RunningServer,
}

impl Webhook {
    pub async fn start() -> Self {
        let ca = CertificateAuthority::generate("conversion-ca").expect("CA");
        let serving = ca.serving(&["127.0.0.1".to_owned()]).expect("serving");
        let resolver = Arc::new(ReloadingCertResolver::new(
            serving.certified_key().expect("key"),
        ));
        let config = tls::server_config(resolver, None).expect("tls");
        let reviews = Reviews::default();
        let router = Router::new()
            .route("/convert", post(convert))
            .with_state(Arc::clone(&reviews));
        let server = serve_on_loopback(config, router).await;
        Self {
            ca,
            reviews,
            server,
        }
    }

    fn crd(&self) -> String {
        self.crd_stored_in("v1alpha2")
    }

    /// The CRD of SampleDisk, served in v1alpha1 and in `stored`, its storage version, and
    /// converted by this webhook.
    pub fn crd_stored_in(&self, stored: &str) -> String {
        let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&self.ca.pair.cert_pem);
        let url = format!(
            "https://127.0.0.1:{}/convert",
            self.server.local_addr().port()
        );
        format!(
            r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: sampledisks.infrastructure.cluster.x-k8s.io
spec:
  group: infrastructure.cluster.x-k8s.io
  names: {{kind: SampleDisk, listKind: SampleDiskList, plural: sampledisks, singular: sampledisk}}
  scope: Namespaced
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig: {{url: "{url}", caBundle: {ca_bundle}}}
  versions:
  - name: v1alpha1
    served: true
    storage: false
    subresources: {{status: {{}}}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {{type: object, properties: {{size: {{type: string}}}}}}
          status: {{type: object, properties: {{ready: {{type: boolean}}}}}}
  - name: {stored}
    served: true
    storage: true
    subresources: {{status: {{}}}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {{type: object, properties: {{sizeGiB: {{type: integer, maximum: 100}}}}}}
          status: {{type: object, properties: {{ready: {{type: boolean}}}}}}
"#
        )
    }

    pub fn reviews(&self) -> Vec<Value> {
        self.reviews.lock().expect("reviews").clone()
    }
}

fn disk(name: &str, size: &str) -> Value {
    json!({"apiVersion": format!("{GROUP}/v1alpha1"), "kind": "SampleDisk",
           "metadata": {"name": name, "namespace": "default", "labels": {"tier": "fast"}},
           "spec": {"size": size}})
}

#[tokio::test(flavor = "multi_thread")]
async fn versions_convert_through_the_crd_s_webhook() {
    let webhook = Webhook::start().await;
    let api = Api::start().await;
    let k = Kubectl::new(&api, "1.33").in_namespace("default");
    let v1 = format!("/apis/{GROUP}/v1alpha1/namespaces/default/sampledisks");
    let v2 = format!("/apis/{GROUP}/v1alpha2/namespaces/default/sampledisks");
    serve_crd(&api, &k, "sampledisks.yaml", &webhook.crd(), &v1).await;
    let mut events = api.get(&format!("{v1}?watch=true")).watch().await;

    // Written in v1alpha1 (and validated in it, as kube does), stored in v1alpha2 as the
    // webhook converts it.
    let created = api.post(&v1).json(&disk("d1", "10Gi")).send().await;
    assert_eq!(created.status, 201, "{}", created.text);
    let created = created.json();
    assert_eq!(created["spec"], json!({"size": "10Gi"}));
    let stored = api.get(&format!("{v2}/d1")).send().await.json();
    assert_eq!(stored["spec"], json!({"sizeGiB": 10}));
    assert_eq!(stored["metadata"]["uid"], created["metadata"]["uid"]);
    assert_eq!(stored["metadata"]["labels"], json!({"tier": "fast"}));
    let review = webhook.reviews().into_iter().next().expect("a review");
    assert_eq!(review["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(review["kind"], "ConversionReview");
    assert_eq!(
        review["request"]["desiredAPIVersion"],
        format!("{GROUP}/v1alpha2")
    );

    // Read back in v1alpha1: GET, list, watch and kubectl.
    let read = api.get(&format!("{v1}/d1")).send().await.json();
    assert_eq!(read["spec"], json!({"size": "10Gi"}));
    assert_eq!(read["apiVersion"], format!("{GROUP}/v1alpha1"));
    let listed = api.get(&v1).send().await.json();
    assert_eq!(listed["items"][0]["spec"], json!({"size": "10Gi"}));
    let event = events.next().await.expect("a watch event");
    assert_eq!(event["type"], "ADDED");
    assert_eq!(event["object"]["spec"], json!({"size": "10Gi"}));
    let shown = k
        .ok(&[
            "get",
            &format!("sampledisks.v1alpha1.{GROUP}/d1"),
            "-o",
            "jsonpath={.spec.size}",
        ])
        .await;
    assert_eq!(shown, "10Gi");

    // The webhook's refusal: nothing stored, kube's words.
    let refused = api.post(&v1).json(&disk("refused", "1Gi")).send().await;
    assert_eq!(refused.status, 500, "{}", refused.text);
    assert!(
        refused.message().contains(&format!(
            "conversion webhook for {GROUP}/v1alpha1, Kind=SampleDisk failed: refused disks \
             cannot be converted"
        )),
        "{}",
        refused.message()
    );
    assert_eq!(api.get(&format!("{v2}/refused")).send().await.status, 404);

    // The CRD moves its webhook where nothing listens: reads in the stored version still
    // work, the other fails, naming the request.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let closed_port = closed.local_addr().expect("address").port();
    drop(closed);
    let moved = webhook.crd().replace(
        &format!("127.0.0.1:{}/", webhook.server.local_addr().port()),
        &format!("127.0.0.1:{closed_port}/"),
    );
    k.ok(&["apply", "-f", &k.manifest("sampledisks.yaml", &moved)])
        .await;
    eventually(
        Duration::from_secs(10),
        "the moved webhook called",
        || async { api.get(&format!("{v1}/d1")).send().await.status == 500 },
    )
    .await;
    assert_eq!(api.get(&format!("{v2}/d1")).send().await.status, 200);
    let unreachable = api.get(&format!("{v1}/d1")).send().await;
    assert!(
        unreachable.message().contains(&format!(
            "conversion webhook for {GROUP}/v1alpha2, Kind=SampleDisk failed: Post \
             \"https://127.0.0.1:{closed_port}/convert\""
        )),
        "{}",
        unreachable.message()
    );
}
