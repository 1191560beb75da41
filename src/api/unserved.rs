//! The v1alpha1 side of a kind that only v1alpha2 serves (ProxmoxKubernetesRelease).
//!
//! The write and read paths are generic over a kind's two versions. Rather than a second copy
//! of them for one-version kinds, such a kind's v1alpha1 type is [`NotServed`]: no request
//! reaches it (the REST layer routes only the versions the descriptor serves, so a v1alpha1
//! path is a 404 as for any unknown resource), and its conversions refuse with the reason, which
//! is what `capmox-apiserver convert` shows for a v1alpha1 manifest of the kind.

use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use super::conversion::{ConversionError, Spoke};
use super::{ApiObject, Kind, Version};

/// A kind's object in a version that does not serve it; `H` is its v1alpha2 type.
#[derive(Serialize, Deserialize, Debug)]
#[serde(bound = "")]
pub struct NotServed<H> {
    /// Kept so that the type is an object like any other.
    metadata: ObjectMeta,
    #[serde(skip)]
    kind: PhantomData<fn() -> H>,
}

impl<H> Clone for NotServed<H> {
    fn clone(&self) -> Self {
        Self {
            metadata: self.metadata.clone(),
            kind: PhantomData,
        }
    }
}

impl<H> Default for NotServed<H> {
    fn default() -> Self {
        Self {
            metadata: ObjectMeta::default(),
            kind: PhantomData,
        }
    }
}

impl<H> PartialEq for NotServed<H> {
    fn eq(&self, other: &Self) -> bool {
        self.metadata == other.metadata
    }
}

impl<H: ApiObject> ApiObject for NotServed<H> {
    const KIND: Kind = H::KIND;
    const VERSION: Version = Version::V1alpha1;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }

    fn set_type_meta(&mut self) {}
}

impl<H: ApiObject> Spoke for NotServed<H> {
    type Hub = H;

    fn to_hub(self, _: Option<&H>) -> Result<H, ConversionError> {
        Err(ConversionError::NotServed { kind: H::KIND })
    }

    fn from_hub(_: &H) -> Result<Self, ConversionError> {
        Err(ConversionError::NotServed { kind: H::KIND })
    }
}
