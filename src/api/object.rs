//! The top-level objects of each version and what is common to them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{Kind, Version, v1alpha1, v1alpha2};

/// A top-level object of one kind in one version.
pub trait ApiObject:
    Serialize + DeserializeOwned + Clone + std::fmt::Debug + PartialEq + Default + Send + Sync + 'static
{
    /// The object's kind.
    const KIND: Kind;
    /// The version the type belongs to.
    const VERSION: Version;

    /// The object's metadata.
    fn metadata(&self) -> &ObjectMeta;

    /// The object's metadata, mutably.
    fn metadata_mut(&mut self) -> &mut ObjectMeta;

    /// Sets `apiVersion` and `kind` to this type's values.
    fn set_type_meta(&mut self);
}

macro_rules! api_object {
    ($ty:ty, $kind:ident, $version:ident) => {
        impl ApiObject for $ty {
            const KIND: Kind = Kind::$kind;
            const VERSION: Version = Version::$version;

            fn metadata(&self) -> &ObjectMeta {
                &self.metadata
            }

            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }

            fn set_type_meta(&mut self) {
                self.api_version = Version::$version.api_version().to_owned();
                self.kind = Kind::$kind.as_str().to_owned();
            }
        }
    };
}

api_object!(v1alpha1::ProxmoxCluster, ProxmoxCluster, V1alpha1);
api_object!(
    v1alpha1::ProxmoxClusterTemplate,
    ProxmoxClusterTemplate,
    V1alpha1
);
api_object!(v1alpha1::ProxmoxMachine, ProxmoxMachine, V1alpha1);
api_object!(
    v1alpha1::ProxmoxMachineTemplate,
    ProxmoxMachineTemplate,
    V1alpha1
);
api_object!(v1alpha2::ProxmoxCluster, ProxmoxCluster, V1alpha2);
api_object!(
    v1alpha2::ProxmoxClusterTemplate,
    ProxmoxClusterTemplate,
    V1alpha2
);
api_object!(v1alpha2::ProxmoxMachine, ProxmoxMachine, V1alpha2);
api_object!(
    v1alpha2::ProxmoxKubernetesRelease,
    ProxmoxKubernetesRelease,
    V1alpha2
);
api_object!(
    v1alpha2::ProxmoxMachineTemplate,
    ProxmoxMachineTemplate,
    V1alpha2
);

/// Serializes an object to JSON with its `apiVersion` and `kind` set.
pub fn to_value<T: ApiObject>(object: &T) -> Value {
    let mut object = object.clone();
    object.set_type_meta();
    // The types serialize to JSON objects by construction (string keys, no
    // non-finite floats), so this cannot fail.
    serde_json::to_value(&object).unwrap_or(Value::Null)
}
