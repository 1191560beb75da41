//! A CRD's `Webhook` conversion, as kube's CRD handler calls it: a `ConversionReview` (the
//! first of the CRD's `conversionReviewVersions` kube knows, v1 or v1beta1) with the object
//! and the desired `apiVersion`, the answer checked (its kind and uid for v1, its result, one
//! object back in the desired group-version and the same kind), and the object's metadata
//! restored but for labels and annotations, which a webhook may change. Errors read as
//! kube's (`conversion webhook for <gvk> failed: …`).
//!
//! The call itself is the server's ([`ConversionCaller`]: HTTPS to the CRD's `clientConfig`,
//! verified against its `caBundle`); it blocks, because the registry converts inside its
//! synchronous reads.

use std::sync::Arc;

use serde_json::{Map, Value, json};

/// Calls a conversion webhook.
pub trait ConversionCaller: Send + Sync {
    /// POSTs `review` to the webhook `client_config` (a CRD's
    /// `spec.conversion.webhook.clientConfig`) names and answers the response body, or why
    /// there is none (Go's wording: `Post "<url>": …`).
    fn call(&self, client_config: &Value, review: &Value) -> Result<Vec<u8>, String>;
}

/// The ConversionReview versions kube sends, by preference of the CRD's list.
const REVIEW_VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// A CRD's conversion webhook.
#[derive(Clone)]
pub struct WebhookConversion {
    client_config: Value,
    review_version: &'static str,
    caller: Arc<dyn ConversionCaller>,
}

impl std::fmt::Debug for WebhookConversion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookConversion")
            .field("client_config", &self.client_config)
            .field("review_version", &self.review_version)
            .finish_non_exhaustive()
    }
}

impl WebhookConversion {
    /// The webhook of a CRD's `spec.conversion` when its strategy is `Webhook`; `None` for
    /// kube's `None` strategy (only `apiVersion` changes).
    pub fn from_crd(
        conversion: &Value,
        caller: Arc<dyn ConversionCaller>,
    ) -> Result<Option<Self>, String> {
        match conversion.get("strategy").and_then(Value::as_str) {
            Some("Webhook") => Self::read(conversion, caller).map(Some),
            _ => Ok(None),
        }
    }

    /// The webhook a CRD's `spec.conversion` names; why it cannot be called.
    pub fn read(conversion: &Value, caller: Arc<dyn ConversionCaller>) -> Result<Self, String> {
        let webhook = conversion
            .get("webhook")
            .ok_or("its Webhook conversion names no webhook")?;
        let client_config = webhook
            .get("clientConfig")
            .filter(|c| c.is_object())
            .ok_or("its conversion webhook has no clientConfig")?
            .clone();
        let listed: Vec<&str> = webhook
            .get("conversionReviewVersions")
            .and_then(Value::as_array)
            .map(|versions| versions.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let review_version = listed
            .iter()
            .find_map(|v| REVIEW_VERSIONS.into_iter().find(|known| known == v))
            .ok_or_else(|| {
                format!(
                    "its conversion webhook takes ConversionReview {listed:?}, none of which \
                     kube sends (v1, v1beta1)"
                )
            })?;
        Ok(Self {
            client_config,
            review_version,
            caller,
        })
    }

    /// `object` converted to `desired` (an `apiVersion`) by the webhook.
    pub fn convert(&self, object: Value, desired: &str) -> Result<Value, String> {
        let gvk = gvk_text(&object);
        let uid = uuid::Uuid::new_v4().to_string();
        let review = json!({
            "apiVersion": format!("apiextensions.k8s.io/{}", self.review_version),
            "kind": "ConversionReview",
            "request": {"uid": uid, "desiredAPIVersion": desired, "objects": [&object]},
        });
        let failed = |e: String| format!("conversion webhook for {gvk} failed: {e}");
        let body = self
            .caller
            .call(&self.client_config, &review)
            .map_err(failed)?;
        let answer: Value = serde_json::from_slice(&body).map_err(|e| failed(e.to_string()))?;
        let mut converted = self.converted_objects(answer, &uid).map_err(failed)?;
        if converted.len() != 1 {
            return Err(format!(
                "conversion for {gvk} returned {} objects, expected 1",
                converted.len()
            ));
        }
        let converted = converted.remove(0);
        checked(&object, converted, desired).map_err(|e| {
            format!("conversion for {gvk} returned invalid converted object at index 0: {e}")
        })
    }

    /// `getConvertedObjectsFromResponse`.
    fn converted_objects(&self, answer: Value, uid: &str) -> Result<Vec<Value>, String> {
        if self.review_version == "v1" {
            let expected = "apiextensions.k8s.io/v1, Kind=ConversionReview";
            let got = format!(
                "{}, Kind={}",
                text(&answer, "apiVersion"),
                text(&answer, "kind")
            );
            if got != expected {
                return Err(format!(
                    "expected webhook response of {expected}, got {got}"
                ));
            }
        }
        let Some(Value::Object(mut response)) = answer.get("response").cloned() else {
            return Err("no response provided".to_owned());
        };
        if self.review_version == "v1" {
            let got = text(&Value::Object(response.clone()), "uid");
            if got != uid {
                return Err(format!("expected response.uid={uid:?}, got {got:?}"));
            }
        }
        let result = response.remove("result").unwrap_or_default();
        if text(&result, "status") != "Success" {
            let message = text(&result, "message");
            return Err(if message.is_empty() {
                format!(
                    "response.result.status was '{}', not 'Success'",
                    text(&result, "status")
                )
            } else {
                message
            });
        }
        match response.remove("convertedObjects") {
            Some(Value::Array(objects)) => Ok(objects),
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(_) => Err("response.convertedObjects is not a list".to_owned()),
        }
    }
}

/// The string at `key` of `value`, empty where there is none.
fn text(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// `group/version, Kind=Kind`, as Go prints a GroupVersionKind.
fn gvk_text(object: &Value) -> String {
    let text = |key: &str| object.get(key).and_then(Value::as_str).unwrap_or_default();
    format!("{}, Kind={}", text("apiVersion"), text("kind"))
}

/// The converted object, checked against the original and with the original's metadata but
/// for labels and annotations (kube's `validateConvertedObject` and `restoreObjectMeta`).
fn checked(original: &Value, mut converted: Value, desired: &str) -> Result<Value, String> {
    if !converted.is_object() {
        return Err("the converted object is not an object".to_owned());
    }
    let got = text(&converted, "apiVersion");
    if got != desired {
        return Err(format!(
            "invalid groupVersion (expected {desired}, received {got})"
        ));
    }
    let (expected, got) = (text(original, "kind"), text(&converted, "kind"));
    if got != expected {
        return Err(format!(
            "invalid kind (expected {expected}, received {got})"
        ));
    }
    let mut metadata = original
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let returned = converted.get("metadata").cloned().unwrap_or(Value::Null);
    if !returned.is_null() && !returned.is_object() {
        return Err("invalid metadata: not an object".to_owned());
    }
    for key in ["labels", "annotations"] {
        match returned.get(key) {
            None | Some(Value::Null) => {
                metadata.remove(key);
            }
            Some(Value::Object(map)) if map.values().all(Value::is_string) => {
                metadata.insert(key.to_owned(), Value::Object(map.clone()));
            }
            Some(_) => {
                return Err(format!("invalid metadata.{key}: must be a map of strings"));
            }
        }
    }
    if let Value::Object(map) = &mut converted {
        map.insert(
            "metadata".to_owned(),
            Value::Object(Map::from_iter(metadata)),
        );
    }
    Ok(converted)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Answers what a closure makes of the review, and keeps the reviews.
    struct Scripted {
        answer: fn(&Value) -> Value,
        reviews: Mutex<Vec<Value>>,
    }

    impl ConversionCaller for Scripted {
        fn call(&self, _config: &Value, review: &Value) -> Result<Vec<u8>, String> {
            self.reviews.lock().expect("reviews").push(review.clone());
            Ok((self.answer)(review).to_string().into_bytes())
        }
    }

    fn webhook(answer: fn(&Value) -> Value, versions: Value) -> (WebhookConversion, Arc<Scripted>) {
        let caller = Arc::new(Scripted {
            answer,
            reviews: Mutex::default(),
        });
        let conversion = json!({"strategy": "Webhook", "webhook": {
            "clientConfig": {"url": "https://hook.test/convert"},
            "conversionReviewVersions": versions,
        }});
        let hook = WebhookConversion::read(&conversion, Arc::clone(&caller) as _).expect("hook");
        (hook, caller)
    }

    fn object() -> Value {
        json!({"apiVersion": "g/v1alpha1", "kind": "Thing",
               "metadata": {"name": "a", "uid": "u1", "labels": {"x": "1"}},
               "spec": {"size": 1}})
    }

    /// Moves `spec.size` to `spec.sizeGiB`, relabels, and tries to rename the object.
    fn renaming(review: &Value) -> Value {
        let request = &review["request"];
        let mut converted = request["objects"][0].clone();
        converted["apiVersion"] = request["desiredAPIVersion"].clone();
        converted["spec"] = json!({"sizeGiB": converted["spec"]["size"]});
        converted["metadata"]["name"] = json!("renamed");
        converted["metadata"]["labels"] = json!({"x": "2"});
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
               "response": {"uid": request["uid"], "result": {"status": "Success"},
                            "convertedObjects": [converted]}})
    }

    #[test]
    fn a_converted_object_keeps_its_metadata_but_labels_and_annotations() {
        let (hook, caller) = webhook(renaming, json!(["v2", "v1"]));
        let converted = hook.convert(object(), "g/v1alpha2").expect("converted");
        assert_eq!(
            converted,
            json!({"apiVersion": "g/v1alpha2", "kind": "Thing",
                   "metadata": {"name": "a", "uid": "u1", "labels": {"x": "2"}},
                   "spec": {"sizeGiB": 1}})
        );
        let review = &caller.reviews.lock().expect("reviews")[0];
        assert_eq!(review["apiVersion"], "apiextensions.k8s.io/v1");
        assert_eq!(review["request"]["desiredAPIVersion"], "g/v1alpha2");
    }

    #[test]
    fn webhook_faults_read_as_kube_s() {
        let refusing = |review: &Value| {
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                   "response": {"uid": review["request"]["uid"],
                                "result": {"status": "Failure", "message": "size too large"}}})
        };
        let (hook, _) = webhook(refusing, json!(["v1"]));
        assert_eq!(
            hook.convert(object(), "g/v1alpha2"),
            Err("conversion webhook for g/v1alpha1, Kind=Thing failed: size too large".to_owned())
        );
        let wrong_uid = |_: &Value| {
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                   "response": {"uid": "other", "result": {"status": "Success"}}})
        };
        let (hook, _) = webhook(wrong_uid, json!(["v1"]));
        let error = hook.convert(object(), "g/v1alpha2").expect_err("refused");
        assert!(error.contains("expected response.uid="), "{error}");
        let unconverted = |review: &Value| {
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                   "response": {"uid": review["request"]["uid"], "result": {"status": "Success"},
                                "convertedObjects": review["request"]["objects"]}})
        };
        let (hook, _) = webhook(unconverted, json!(["v1"]));
        assert_eq!(
            hook.convert(object(), "g/v1alpha2"),
            Err(
                "conversion for g/v1alpha1, Kind=Thing returned invalid converted object at \
                 index 0: invalid groupVersion (expected g/v1alpha2, received g/v1alpha1)"
                    .to_owned()
            )
        );
        let none = WebhookConversion::read(
            &json!({"webhook": {"clientConfig": {}, "conversionReviewVersions": ["v2"]}}),
            Arc::new(Scripted {
                answer: renaming,
                reviews: Mutex::default(),
            }),
        );
        assert!(none.is_err());
    }
}
