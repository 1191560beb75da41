//! The management-cluster kinds `dev` serves itself so that the built-in controller has
//! something to read on a machine without a cluster: Cluster API `Cluster` and `Machine`,
//! core `Secret`, IPAM `IPAddressClaim`/`IPAddress` and the in-cluster provider's pools; and
//! `CustomResourceDefinition`, so that a co-tenant's CRD applied to `dev` makes its kinds known
//! as in `serve` (`server::cotenants`).
//! They are schemaless stand-ins (`registry::schemaless`): any fields are kept, only
//! metadata and, for Secrets, `data`/`stringData`/`type` are checked. No controller of their
//! own runs on them. `serve` never serves them (the real management cluster does).

use std::sync::Arc;

use base64::Engine as _;
use serde_json::{Map, Value};

use super::secret_protobuf::decode_secret;
use crate::api::field::{Error, ErrorList, Path};
use crate::registry::descriptor::{GroupVersion, ResourceDescriptor, VersionInfo};
use crate::registry::schemaless::{ObjectRules, SchemalessStrategy};
use crate::registry::strategy::Strategy;
use crate::registry::table::PrinterColumn;

pub const CLUSTER_V1BETA2: GroupVersion = GroupVersion::new("cluster.x-k8s.io", "v1beta2");
pub const CORE_V1: GroupVersion = GroupVersion::new("", "v1");
pub const IPAM_V1BETA2: GroupVersion = GroupVersion::new("ipam.cluster.x-k8s.io", "v1beta2");
pub const IN_CLUSTER_IPAM_V1ALPHA2: GroupVersion =
    GroupVersion::new("ipam.cluster.x-k8s.io", "v1alpha2");
pub const APIEXTENSIONS_V1: GroupVersion = GroupVersion::new("apiextensions.k8s.io", "v1");

/// Names and scope of one stand-in kind.
struct StandIn {
    version: GroupVersion,
    kind: &'static str,
    list_kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
    namespaced: bool,
    status: bool,
}

const CLUSTER_API: &[&str] = &["cluster-api"];

const STAND_INS: [StandIn; 8] = [
    StandIn {
        version: CLUSTER_V1BETA2,
        kind: "Cluster",
        list_kind: "ClusterList",
        plural: "clusters",
        singular: "cluster",
        short_names: &["cl"],
        categories: CLUSTER_API,
        namespaced: true,
        status: true,
    },
    StandIn {
        version: CLUSTER_V1BETA2,
        kind: "Machine",
        list_kind: "MachineList",
        plural: "machines",
        singular: "machine",
        short_names: &["ma"],
        categories: CLUSTER_API,
        namespaced: true,
        status: true,
    },
    StandIn {
        version: CORE_V1,
        kind: "Secret",
        list_kind: "SecretList",
        plural: "secrets",
        singular: "secret",
        short_names: &[],
        categories: &[],
        namespaced: true,
        status: false,
    },
    StandIn {
        version: IPAM_V1BETA2,
        kind: "IPAddressClaim",
        list_kind: "IPAddressClaimList",
        plural: "ipaddressclaims",
        singular: "ipaddressclaim",
        short_names: &[],
        categories: CLUSTER_API,
        namespaced: true,
        status: true,
    },
    StandIn {
        version: IPAM_V1BETA2,
        kind: "IPAddress",
        list_kind: "IPAddressList",
        plural: "ipaddresses",
        singular: "ipaddress",
        short_names: &[],
        categories: CLUSTER_API,
        namespaced: true,
        status: false,
    },
    StandIn {
        version: IN_CLUSTER_IPAM_V1ALPHA2,
        kind: "InClusterIPPool",
        list_kind: "InClusterIPPoolList",
        plural: "inclusterippools",
        singular: "inclusterippool",
        short_names: &[],
        categories: CLUSTER_API,
        namespaced: true,
        status: true,
    },
    StandIn {
        version: IN_CLUSTER_IPAM_V1ALPHA2,
        kind: "GlobalInClusterIPPool",
        list_kind: "GlobalInClusterIPPoolList",
        plural: "globalinclusterippools",
        singular: "globalinclusterippool",
        short_names: &[],
        categories: CLUSTER_API,
        namespaced: false,
        status: true,
    },
    StandIn {
        version: APIEXTENSIONS_V1,
        kind: "CustomResourceDefinition",
        list_kind: "CustomResourceDefinitionList",
        plural: "customresourcedefinitions",
        singular: "customresourcedefinition",
        short_names: &["crd", "crds"],
        categories: &["api-extensions"],
        namespaced: false,
        status: true,
    },
];

impl StandIn {
    fn descriptor(&self) -> ResourceDescriptor {
        ResourceDescriptor {
            group: self.version.group,
            kind: self.kind,
            list_kind: self.list_kind,
            plural: self.plural,
            singular: self.singular,
            short_names: self.short_names,
            categories: self.categories,
            namespaced: self.namespaced,
            versions: vec![VersionInfo {
                version: self.version,
                storage: true,
                deprecated: false,
                deprecation_warning: None,
                status_subresource: self.status,
                scale: None,
                // No printer columns: Name and Age, as kube shows CRDs without columns.
                printer_columns: Vec::<PrinterColumn>::new(),
                selectable_fields: Vec::new(),
            }],
        }
    }

    fn strategy(&self) -> SchemalessStrategy {
        let strategy = SchemalessStrategy::new(self.descriptor());
        if self.version == CORE_V1 && self.kind == "Secret" {
            // kubectl sends strategic merge patches, typed Go clients protobuf bodies.
            strategy
                .with_strategic_merge_as_merge()
                .with_rules(Arc::new(SecretRules))
                .with_protobuf(|body| decode_secret(body).map_err(|e| e.to_string()))
        } else {
            strategy
        }
    }
}

/// The strategies of every stand-in kind, in discovery order.
pub fn strategies() -> Vec<Arc<dyn Strategy>> {
    STAND_INS
        .iter()
        .map(|s| Arc::new(s.strategy()) as Arc<dyn Strategy>)
        .collect()
}

/// The core Secret's rules as kube-apiserver applies them: `stringData` is merged into
/// `data` (base64-encoded, winning over `data`) and dropped, `data` values must be base64
/// and keys valid config keys, `type` defaults to `Opaque` and cannot change.
struct SecretRules;

const SECRET_TYPE_DEFAULT: &str = "Opaque";
const CONFIG_KEY_MESSAGE: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' \
     (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// kube's `IsConfigMapKey`.
fn config_key_errors(key: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if key.len() > 253 {
        errors.push("must be no more than 253 characters".to_owned());
    }
    if key.is_empty()
        || !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        errors.push(CONFIG_KEY_MESSAGE.to_owned());
    }
    match key {
        "." => errors.push("must not be '.'".to_owned()),
        ".." => errors.push("must not be '..'".to_owned()),
        k if k.starts_with("..") => errors.push("must not start with '..'".to_owned()),
        _ => {}
    }
    errors
}

impl SecretRules {
    /// Moves `stringData` into `data`; errors for non-string values.
    fn merge_string_data(object: &mut Map<String, Value>, errors: &mut ErrorList) {
        let Some(string_data) = object.remove("stringData") else {
            return;
        };
        let path = Path::new(&["stringData"]);
        let Value::Object(string_data) = string_data else {
            if !string_data.is_null() {
                errors.push(Error::type_invalid(path, string_data, "must be an object"));
            }
            return;
        };
        let data = object
            .entry("data")
            .or_insert_with(|| Value::Object(Map::new()));
        if data.is_null() {
            *data = Value::Object(Map::new());
        }
        let Value::Object(data) = data else {
            return;
        };
        for (key, value) in string_data {
            match value {
                Value::String(text) => {
                    let encoded = base64::engine::general_purpose::STANDARD.encode(text);
                    data.insert(key, Value::String(encoded));
                }
                other => errors.push(Error::type_invalid(
                    path.key(&key),
                    other,
                    "must be a string",
                )),
            }
        }
    }

    fn validate_data(object: &Map<String, Value>, errors: &mut ErrorList) {
        let path = Path::new(&["data"]);
        let data = match object.get("data") {
            None | Some(Value::Null) => return,
            Some(Value::Object(data)) => data,
            Some(other) => {
                errors.push(Error::type_invalid(
                    path,
                    other.clone(),
                    "must be an object",
                ));
                return;
            }
        };
        for (key, value) in data {
            for message in config_key_errors(key) {
                errors.push(Error::invalid(path.key(key), key.clone(), message));
            }
            let valid = value.as_str().is_some_and(|text| {
                base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .is_ok()
            });
            if !valid {
                errors.push(Error::invalid(
                    path.key(key),
                    value.clone(),
                    "must be a base64-encoded string",
                ));
            }
        }
    }
}

impl ObjectRules for SecretRules {
    fn admit(&self, object: &mut Value, old: Option<&Value>) -> ErrorList {
        let mut errors = ErrorList::new();
        let Value::Object(map) = object else {
            return errors;
        };
        Self::merge_string_data(map, &mut errors);
        Self::validate_data(map, &mut errors);
        let secret_type = map
            .entry("type")
            .or_insert_with(|| Value::String(SECRET_TYPE_DEFAULT.to_owned()));
        if secret_type.as_str().is_none_or(str::is_empty) {
            *secret_type = Value::String(SECRET_TYPE_DEFAULT.to_owned());
        }
        if let Some(old_type) = old.and_then(|o| o.get("type"))
            && Some(&*secret_type) != Some(old_type)
        {
            errors.push(Error::invalid(
                Path::new(&["type"]),
                secret_type.clone(),
                "field is immutable",
            ));
        }
        errors
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn string_data_is_merged_into_data_and_dropped() {
        let mut secret = json!({
            "data": {"a": "b2xk", "b": "Yg=="},
            "stringData": {"a": "new", "c": "x"},
        });
        let errors = SecretRules.admit(&mut secret, None);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            secret,
            json!({"data": {"a": "bmV3", "b": "Yg==", "c": "eA=="}, "type": "Opaque"})
        );
    }

    #[test]
    fn bad_data_is_refused_with_a_cause_per_field() {
        let mut secret = json!({"data": {"ok": "eA==", "bad": "not base64!", "a/b": "eA=="}});
        let errors = SecretRules.admit(&mut secret, None);
        let mut fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        fields.sort_unstable();
        assert_eq!(fields, ["data[a/b]", "data[bad]"]);
    }

    #[test]
    fn type_is_immutable() {
        let old = json!({"type": "Opaque"});
        let mut secret = json!({"type": "kubernetes.io/tls"});
        let errors = SecretRules.admit(&mut secret, Some(&old));
        assert_eq!(errors.len(), 1);
        let mut same = json!({});
        assert!(SecretRules.admit(&mut same, Some(&old)).is_empty());
        assert_eq!(same["type"], "Opaque");
    }

    #[test]
    fn every_stand_in_has_one_stored_version() {
        let strategies = strategies();
        assert_eq!(strategies.len(), 8);
        for s in &strategies {
            let d = s.descriptor();
            assert_eq!(d.versions.len(), 1);
            assert_eq!(d.storage_version(), d.versions[0].version);
        }
    }
}
