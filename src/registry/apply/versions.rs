//! The seam between the field manager and a kind's versions: the schema of
//! each version and conversion between them. Ownership is recorded in the
//! version of the request that wrote it, so comparing an object for a
//! manager of another version, or pruning what an applier of another
//! version stopped applying, needs the object in that version.

use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::Version;
use crate::api::defaults::v1alpha2::{has_unnamed_devices, name_devices_by_position};
use crate::api::resource::{ConversionError, HubConversion, Versioned, from_hub, to_hub};
use crate::api::schema::{self, Structural};

/// The served versions of one kind, as the field manager needs them: this server's kinds
/// ([`HubVersions`]) and kinds defined by CRDs (`registry::crd`).
pub trait KindVersions {
    /// The kind's name (`ProxmoxMachine`).
    fn kind_name(&self) -> &str;

    /// The structural schema of the kind in `version` (schemas live as long
    /// as the program, so paths can borrow their field names).
    fn schema(&self, version: Version) -> &'static Structural;

    /// Whether the kind is served in `version` (a managedFields entry may name a version
    /// the kind is not served in: ProxmoxKubernetesRelease has no v1alpha1).
    fn serves(&self, version: Version) -> bool;

    /// Whether `version` has a `status` subresource (whose fields then are
    /// not written through the main resource).
    fn has_status(&self, version: Version) -> bool;

    /// Converts `object`, the JSON of an object in version `from`, to
    /// version `to`. Called only with `from != to`.
    fn convert(&self, object: &Value, from: Version, to: Version)
    -> Result<Value, ConversionError>;

    /// The apply configuration `config` in `version` with the list-map keys
    /// filled in that the version defaults in code rather than in its
    /// schema, so that items have their keys before they are merged (as
    /// schema defaults of key fields do). `None` when nothing is missing.
    fn default_keys(&self, _config: &Value, _version: Version) -> Option<Value> {
        None
    }
}

/// The versions of kind `R`, converted with its [`HubConversion`] in the
/// context of the object as stored (`None` on create), so that what one
/// version cannot express survives the round trip.
pub struct HubVersions<'a, R: HubConversion> {
    stored: Option<&'a R::Hub>,
    kind: PhantomData<R>,
}

impl<'a, R: HubConversion> HubVersions<'a, R> {
    /// The versions of `R` around the stored object.
    pub fn new(stored: Option<&'a R::Hub>) -> Self {
        HubVersions {
            stored,
            kind: PhantomData,
        }
    }
}

fn typed<T: DeserializeOwned>(object: &Value, version: Version) -> Result<T, ConversionError> {
    serde_json::from_value(object.clone()).map_err(|e| ConversionError::Unreadable {
        version: version.to_string(),
        reason: e.to_string(),
    })
}

impl<R: HubConversion> KindVersions for HubVersions<'_, R> {
    fn kind_name(&self) -> &str {
        R::KIND.as_str()
    }

    fn schema(&self, version: Version) -> &'static Structural {
        schema::structural(version, R::KIND)
    }

    fn serves(&self, version: Version) -> bool {
        R::KIND.descriptor().serves(version)
    }

    fn has_status(&self, version: Version) -> bool {
        R::KIND.descriptor().version(version).status_subresource
    }

    /// v1alpha2 names unnamed network devices by position in code.
    fn default_keys(&self, config: &Value, version: Version) -> Option<Value> {
        if version != Version::V1alpha2 || !has_unnamed_devices(R::KIND, config) {
            return None;
        }
        let mut named = config.clone();
        name_devices_by_position(R::KIND, &mut named);
        Some(named)
    }

    fn convert(
        &self,
        object: &Value,
        from: Version,
        to: Version,
    ) -> Result<Value, ConversionError> {
        let versioned: Versioned<R> = match from {
            Version::V1alpha1 => Versioned::V1alpha1(typed(object, from)?),
            Version::V1alpha2 => Versioned::V1alpha2(typed(object, from)?),
        };
        let hub = to_hub::<R>(versioned, self.stored)?;
        Ok(from_hub::<R>(to, &hub)?.to_value())
    }
}
