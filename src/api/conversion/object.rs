//! Whole objects and lists: the public [`Spoke`] trait, the upstream
//! annotation, and type metadata.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;

use super::annotation::{decode_upstream, take_upstream};
use super::error::{ConversionError, FieldPath};
use super::leaf::Result;
use super::prior::{Origin, Prior};
use crate::api::{Version, v1alpha1 as v1, v1alpha2 as v2};

/// A v1alpha1 object (or list) and its conversions to and from the hub
/// version, v1alpha2.
pub trait Spoke: Sized {
    /// The same kind in v1alpha2.
    type Hub;

    /// Converts to v1alpha2. `stored` is the object as it is stored now
    /// (`None` on create): what v1alpha1 cannot express is taken from it, and
    /// a v1alpha1 field equal to what the stored object shows in v1alpha1
    /// keeps the stored value exactly. Without a stored object, upstream's
    /// `cluster.x-k8s.io/conversion-data` annotation plays that part. The
    /// annotation is removed either way.
    fn to_hub(self, stored: Option<&Self::Hub>) -> std::result::Result<Self::Hub, ConversionError>;

    /// Converts a v1alpha2 object to v1alpha1. It carries no conversion
    /// annotation.
    fn from_hub(hub: &Self::Hub) -> std::result::Result<Self, ConversionError>;
}

/// The per-kind conversion, without the object-level plumbing.
pub(crate) trait Kind: Sized {
    type Hub: DeserializeOwned;
    const KIND: &'static str;
    fn metadata_mut(&mut self) -> &mut ObjectMeta;
    fn up(self, prior: Prior<'_, Self::Hub>, path: &FieldPath) -> Result<Self::Hub>;
    fn down(hub: &Self::Hub, origin: Origin, path: &FieldPath) -> Result<Self>;
}

pub(crate) fn hub_api_version() -> String {
    Version::V1alpha2.api_version().to_string()
}

pub(crate) fn spoke_api_version() -> String {
    Version::V1alpha1.api_version().to_string()
}

/// Implements [`Kind`] for a kind with `spec` and `status`, given the
/// conversions of both.
macro_rules! object_kind {
    ($kind:ident, spec: $up_spec:path, $down_spec:path, status: $up_status:path, $down_status:path $(,)?) => {
        impl $crate::api::conversion::object::Kind for v1::$kind {
            type Hub = v2::$kind;
            const KIND: &'static str = stringify!($kind);

            fn metadata_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }

            fn up(self, prior: Prior<'_, Self::Hub>, path: &FieldPath) -> Result<Self::Hub> {
                let v1::$kind {
                    api_version: _,
                    kind: _,
                    metadata,
                    spec,
                    status,
                } = self;
                Ok(v2::$kind {
                    api_version: $crate::api::conversion::object::hub_api_version(),
                    kind: Self::KIND.into(),
                    metadata,
                    spec: $up_spec(spec, prior.field(|o| &o.spec), &path.field("spec"))?,
                    status: $up_status(status, prior.field(|o| &o.status), &path.field("status"))?,
                })
            }

            fn down(hub: &Self::Hub, origin: Origin, path: &FieldPath) -> Result<Self> {
                let v2::$kind {
                    api_version: _,
                    kind: _,
                    metadata,
                    spec,
                    status,
                } = hub;
                Ok(v1::$kind {
                    api_version: $crate::api::conversion::object::spoke_api_version(),
                    kind: Self::KIND.into(),
                    metadata: metadata.clone(),
                    spec: $down_spec(spec, origin, &path.field("spec"))?,
                    status: $down_status(status, origin, &path.field("status"))?,
                })
            }
        }
    };
}

/// Implements [`Kind`] for a template kind (`spec.template.{metadata,spec}`,
/// no status), given the conversions of the templated spec.
macro_rules! template_kind {
    ($kind:ident, $spec:ident, $resource:ident, up: $up_spec:path, down: $down_spec:path $(,)?) => {
        impl $crate::api::conversion::object::Kind for v1::$kind {
            type Hub = v2::$kind;
            const KIND: &'static str = stringify!($kind);

            fn metadata_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }

            fn up(self, prior: Prior<'_, Self::Hub>, path: &FieldPath) -> Result<Self::Hub> {
                let v1::$kind {
                    api_version: _,
                    kind: _,
                    metadata,
                    spec:
                        v1::$spec {
                            template:
                                v1::$resource {
                                    metadata: template_metadata,
                                    spec,
                                },
                        },
                } = self;
                let spec_path = path.field("spec");
                let template_path = spec_path.field("template");
                let prior_spec = prior.field(|t| &t.spec.template.spec);
                Ok(v2::$kind {
                    api_version: $crate::api::conversion::object::hub_api_version(),
                    kind: Self::KIND.into(),
                    metadata,
                    spec: v2::$spec {
                        template: v2::$resource {
                            metadata: template_metadata,
                            spec: $up_spec(spec, prior_spec, &template_path.field("spec"))?,
                        },
                    },
                })
            }

            fn down(hub: &Self::Hub, origin: Origin, path: &FieldPath) -> Result<Self> {
                let v2::$kind {
                    api_version: _,
                    kind: _,
                    metadata,
                    spec:
                        v2::$spec {
                            template:
                                v2::$resource {
                                    metadata: template_metadata,
                                    spec,
                                },
                        },
                } = hub;
                let spec_path = path.field("spec");
                let template_path = spec_path.field("template");
                Ok(v1::$kind {
                    api_version: $crate::api::conversion::object::spoke_api_version(),
                    kind: Self::KIND.into(),
                    metadata: metadata.clone(),
                    spec: v1::$spec {
                        template: v1::$resource {
                            metadata: template_metadata.clone(),
                            spec: $down_spec(spec, origin, &template_path.field("spec"))?,
                        },
                    },
                })
            }
        }
    };
}

pub(crate) use {object_kind, template_kind};

/// Converts up with the stored object as context or, when nothing is stored,
/// upstream's annotation (only then is it decoded); the annotation is dropped
/// either way.
fn to_hub_at<K: Kind>(mut spoke: K, stored: Option<&K::Hub>, path: &FieldPath) -> Result<K::Hub> {
    let upstream_data = take_upstream(spoke.metadata_mut());
    let upstream = match (stored, upstream_data) {
        (None, Some(data)) => Some(decode_upstream::<K::Hub>(&data)?),
        _ => None,
    };
    spoke.up(Prior::resolve(stored, upstream.as_ref()), path)
}

macro_rules! spoke_kind {
    ($kind:ident, $list:ident) => {
        impl Spoke for v1::$kind {
            type Hub = v2::$kind;

            fn to_hub(self, stored: Option<&Self::Hub>) -> Result<Self::Hub> {
                to_hub_at(self, stored, &FieldPath::ROOT)
            }

            fn from_hub(hub: &Self::Hub) -> Result<Self> {
                <Self as Kind>::down(hub, Origin::Stored, &FieldPath::ROOT)
            }
        }

        /// Items are converted one by one; on the way up each is given the
        /// stored item of the same namespace and name.
        impl Spoke for v1::$list {
            type Hub = v2::$list;

            fn to_hub(self, stored: Option<&Self::Hub>) -> Result<Self::Hub> {
                let v1::$list {
                    api_version: _,
                    kind: _,
                    metadata,
                    items,
                } = self;
                let stored_items = stored.map_or(&[][..], |s| s.items.as_slice());
                let items_path = FieldPath::ROOT.field("items");
                let items = items
                    .into_iter()
                    .enumerate()
                    .map(|(i, item)| {
                        let old = stored_items
                            .iter()
                            .find(|old| same_object(&old.metadata, &item.metadata));
                        to_hub_at(item, old, &items_path.index(i))
                    })
                    .collect::<Result<_>>()?;
                Ok(v2::$list {
                    api_version: hub_api_version(),
                    kind: stringify!($list).into(),
                    metadata,
                    items,
                })
            }

            fn from_hub(hub: &Self::Hub) -> Result<Self> {
                let v2::$list {
                    api_version: _,
                    kind: _,
                    metadata,
                    items,
                } = hub;
                let items_path = FieldPath::ROOT.field("items");
                let items = items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| {
                        <v1::$kind as Kind>::down(item, Origin::Stored, &items_path.index(i))
                    })
                    .collect::<Result<_>>()?;
                Ok(v1::$list {
                    api_version: spoke_api_version(),
                    kind: stringify!($list).into(),
                    metadata: metadata.clone(),
                    items,
                })
            }
        }
    };
}

spoke_kind!(ProxmoxCluster, ProxmoxClusterList);
spoke_kind!(ProxmoxClusterTemplate, ProxmoxClusterTemplateList);
spoke_kind!(ProxmoxMachine, ProxmoxMachineList);
spoke_kind!(ProxmoxMachineTemplate, ProxmoxMachineTemplateList);

fn same_object(a: &ObjectMeta, b: &ObjectMeta) -> bool {
    a.namespace == b.namespace && a.name == b.name
}
