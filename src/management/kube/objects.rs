//! JSON-level access to the kinds of [`Kind`] through one `kube::Client`.
//!
//! Objects travel as `serde_json::Value` with `apiVersion` and `kind`, so a writer that
//! edits a few fields keeps every field it does not know (the typed management structs are
//! reduced to what the controller reads). Every write carries the `resourceVersion` of the
//! object it was computed from, so a concurrent change answers `Conflict` instead of being
//! overwritten.

use kube::api::{DeleteParams, DynamicObject, ListParams, PostParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::error::{is_not_found, management_error};
use super::kinds::Kind;
use crate::controller::seams::ManagementError;

/// Reads and writes objects of any [`Kind`]; cheap to clone.
#[derive(Clone)]
pub struct Objects {
    client: kube::Client,
}

/// The namespace and name of an object as JSON.
pub fn key_of(object: &Value) -> (String, String) {
    let field = |f: &str| {
        object["metadata"][f]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    (field("namespace"), field("name"))
}

/// A typed management object as JSON with its type metadata.
pub fn encode<T: Serialize>(kind: Kind, object: &T) -> Result<Value, ManagementError> {
    let mut value = serde_json::to_value(object)
        .map_err(|e| ManagementError::Invalid(format!("encoding {}: {e}", kind.name())))?;
    if let Some(map) = value.as_object_mut() {
        map.insert("apiVersion".into(), kind.api_version().into());
        map.insert("kind".into(), kind.name().into());
    }
    Ok(value)
}

/// JSON as a typed management object.
pub fn decode<T: DeserializeOwned>(kind: Kind, value: Value) -> Result<T, ManagementError> {
    serde_json::from_value(value)
        .map_err(|e| ManagementError::Unavailable(format!("decoding {}: {e}", kind.name())))
}

fn to_dynamic(kind: Kind, value: &Value) -> Result<DynamicObject, ManagementError> {
    serde_json::from_value(value.clone())
        .map_err(|e| ManagementError::Invalid(format!("{} is not an object: {e}", kind.name())))
}

fn from_dynamic(kind: Kind, object: DynamicObject) -> Result<Value, ManagementError> {
    serde_json::to_value(object)
        .map_err(|e| ManagementError::Unavailable(format!("decoding {}: {e}", kind.name())))
}

/// `k=v,k2=v2` from a label map.
pub fn label_selector<'a>(labels: impl IntoIterator<Item = (&'a String, &'a String)>) -> String {
    labels
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

impl Objects {
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    /// The client (for watches).
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// One object; `None` when absent.
    pub async fn get(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, ManagementError> {
        match kind.api(&self.client, namespace).get_opt(name).await {
            Ok(found) => found.map(|o| from_dynamic(kind, o)).transpose(),
            Err(e) => Err(management_error(e, &kind.describe(namespace, name))),
        }
    }

    /// One typed object; `None` when absent.
    pub async fn get_typed<T: DeserializeOwned>(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
    ) -> Result<Option<T>, ManagementError> {
        self.get(kind, namespace, name)
            .await?
            .map(|v| decode(kind, v))
            .transpose()
    }

    /// The objects of one namespace (`None`: all namespaces, or a cluster-scoped kind)
    /// matching a label selector (empty: all); none when the kind is not served.
    pub async fn list(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        selector: &str,
    ) -> Result<Vec<Value>, ManagementError> {
        let api = match namespace {
            Some(ns) => kind.api(&self.client, ns),
            None => kind.api_all(&self.client),
        };
        let mut params = ListParams::default();
        if !selector.is_empty() {
            params = params.labels(selector);
        }
        let list = match api.list(&params).await {
            Ok(list) => list,
            // The kind is not served (no CRD): nothing of it exists.
            Err(e) if is_not_found(&e) => return Ok(Vec::new()),
            Err(e) => return Err(management_error(e, &format!("{} list", kind.name()))),
        };
        list.items
            .into_iter()
            .map(|o| from_dynamic(kind, o))
            .collect()
    }

    /// Creates an object (`AlreadyExists` when the name is taken).
    pub async fn create(&self, kind: Kind, object: &Value) -> Result<Value, ManagementError> {
        let (namespace, name) = key_of(object);
        let created = kind
            .api(&self.client, &namespace)
            .create(&PostParams::default(), &to_dynamic(kind, object)?)
            .await
            .map_err(|e| {
                let what = kind.describe(&namespace, &name);
                if is_not_found(&e) {
                    // The kind is not served (no CRD yet): retried with back-off.
                    return ManagementError::Unavailable(format!(
                        "{what}: {} is not served",
                        kind.api_version()
                    ));
                }
                management_error(e, &what)
            })?;
        from_dynamic(kind, created)
    }

    /// Replaces metadata and spec (PUT); the object's `resourceVersion` is the precondition.
    pub async fn replace(&self, kind: Kind, object: &Value) -> Result<Value, ManagementError> {
        self.put(kind, object, false).await
    }

    /// Replaces the status (PUT `/status`); the `resourceVersion` is the precondition.
    pub async fn replace_status(
        &self,
        kind: Kind,
        object: &Value,
    ) -> Result<Value, ManagementError> {
        self.put(kind, object, true).await
    }

    async fn put(
        &self,
        kind: Kind,
        object: &Value,
        status: bool,
    ) -> Result<Value, ManagementError> {
        let (namespace, name) = key_of(object);
        let what = kind.describe(&namespace, &name);
        if object["metadata"]["resourceVersion"]
            .as_str()
            .is_none_or(str::is_empty)
        {
            // Without a precondition a PUT would overwrite concurrent changes.
            return Err(ManagementError::Invalid(format!(
                "{what}: a write needs the resourceVersion it was computed from"
            )));
        }
        let api = kind.api(&self.client, &namespace);
        let dynamic = to_dynamic(kind, object)?;
        let params = PostParams::default();
        let written = if status {
            api.replace_status(&name, &params, &dynamic).await
        } else {
            api.replace(&name, &params, &dynamic).await
        };
        from_dynamic(kind, written.map_err(|e| management_error(e, &what))?)
    }

    /// Deletes an object (absent is fine). `uid`, when given, is a precondition: a newer
    /// object of the same name is left alone.
    pub async fn delete(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
    ) -> Result<(), ManagementError> {
        let mut params = DeleteParams::default();
        if let Some(uid) = uid {
            params = params.preconditions(kube::api::Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            });
        }
        match kind
            .api(&self.client, namespace)
            .delete(name, &params)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(management_error(e, &kind.describe(namespace, name))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::management::types::{IpAddressClaim, IpAddressClaimSpec, PoolRef};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::collections::BTreeMap;

    #[test]
    fn typed_objects_gain_type_metadata_and_read_back() {
        let claim = IpAddressClaim {
            metadata: ObjectMeta {
                name: Some("c".into()),
                namespace: Some("ns".into()),
                ..ObjectMeta::default()
            },
            spec: IpAddressClaimSpec {
                pool_ref: PoolRef {
                    api_group: "ipam.cluster.x-k8s.io".into(),
                    kind: "InClusterIPPool".into(),
                    name: "p".into(),
                },
                cluster_name: None,
            },
            ..IpAddressClaim::default()
        };
        let value = encode(Kind::IpAddressClaim, &claim).expect("encodes");
        assert_eq!(value["apiVersion"], "ipam.cluster.x-k8s.io/v1beta2");
        assert_eq!(value["kind"], "IPAddressClaim");
        assert_eq!(key_of(&value), ("ns".to_string(), "c".to_string()));
        let dynamic = to_dynamic(Kind::IpAddressClaim, &value).expect("dynamic");
        let back: IpAddressClaim = decode(
            Kind::IpAddressClaim,
            from_dynamic(Kind::IpAddressClaim, dynamic).expect("json"),
        )
        .expect("typed");
        assert_eq!(back, claim);
    }

    #[test]
    fn selectors_join_labels() {
        let labels = BTreeMap::from([
            ("a".to_string(), "1".to_string()),
            ("b/c".to_string(), "2".to_string()),
        ]);
        assert_eq!(label_selector(&labels), "a=1,b/c=2");
        assert_eq!(label_selector(&BTreeMap::new()), "");
    }
}
