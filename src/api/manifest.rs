//! One object of a manifest converted to another served version, outside any server
//! (`capmox-apiserver convert`): the typed conversion the server runs on every read and
//! write (`api::conversion`), with the stored hub object, when given, as its context.
//!
//! Unlike a write, the object is taken as written: unknown fields are dropped with a
//! warning, but no schema default is added, so the output says what the input said.

use serde_json::Value;

use super::conversion::ConversionError;
use super::decode::{self, DecodeError, FieldValidation};
use super::defaults;
use super::object::to_value;
use super::resource::{
    ClusterKind, ClusterTemplateKind, HubConversion, KubernetesReleaseKind, MachineKind,
    MachineTemplateKind,
};
use super::{Kind, Version};

/// A converted object and what the user should know about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Converted {
    /// The object in the requested version.
    pub object: Value,
    /// Dropped unknown fields; fields the requested version cannot show.
    pub warnings: Vec<String>,
}

/// Why an object cannot be converted.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The object is not a valid object of its kind and version.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A value has no place in the requested version.
    #[error(transparent)]
    Conversion(#[from] ConversionError),
    /// The stored object given as context is not a v1alpha2 object of the kind.
    #[error("the stored object given as context: {0}")]
    Context(DecodeError),
}

/// Converts `object` (of `kind`, in `from`) to `to`. `stored` is the object as the server
/// stores it (v1alpha2 JSON, as `kubectl get` shows it), so that a v1alpha1 object converts
/// up without losing what only v1alpha2 holds.
pub fn convert(
    kind: Kind,
    from: Version,
    object: Value,
    to: Version,
    stored: Option<&Value>,
) -> Result<Converted, ManifestError> {
    match kind {
        Kind::ProxmoxCluster => convert_as::<ClusterKind>(from, object, to, stored),
        Kind::ProxmoxClusterTemplate => convert_as::<ClusterTemplateKind>(from, object, to, stored),
        Kind::ProxmoxKubernetesRelease => {
            convert_as::<KubernetesReleaseKind>(from, object, to, stored)
        }
        Kind::ProxmoxMachine => convert_as::<MachineKind>(from, object, to, stored),
        Kind::ProxmoxMachineTemplate => convert_as::<MachineTemplateKind>(from, object, to, stored),
    }
}

fn convert_as<R: HubConversion>(
    from: Version,
    object: Value,
    to: Version,
    stored: Option<&Value>,
) -> Result<Converted, ManifestError> {
    let stored = stored
        .map(|value| {
            decode::decode_as_written::<R::Hub>(value.clone(), FieldValidation::Ignore)
                .map(|decoded| decoded.object)
                .map_err(ManifestError::Context)
        })
        .transpose()?;
    let (hub, warnings) = match from {
        Version::V1alpha1 => {
            let decoded = decode::decode_as_written::<R::V1alpha1>(object, FieldValidation::Warn)?;
            (
                R::to_hub(decoded.object, stored.as_ref())?,
                decoded.warnings,
            )
        }
        Version::V1alpha2 => {
            let decoded = decode::decode_as_written::<R::Hub>(object, FieldValidation::Warn)?;
            (decoded.object, decoded.warnings)
        }
    };
    let mut warnings = warnings;
    let object = match to {
        Version::V1alpha2 => to_value(&hub),
        Version::V1alpha1 => {
            let spoke = R::from_hub(&hub)?;
            if as_stored::<R>(R::to_hub(spoke.clone(), None)?) != as_stored::<R>(hub) {
                warnings.push(
                    "v1alpha1 cannot show every field of this object; to convert it back \
                     without loss, give the v1alpha2 object as context"
                        .to_owned(),
                );
            }
            to_value(&spoke)
        }
    };
    Ok(Converted { object, warnings })
}

/// The object as the server would store it: with the schema defaults and upstream's
/// defaulting webhook applied, so that a field v1alpha1 cannot tell from its default (net0's
/// `defaultIPv4`) does not count as lost.
fn as_stored<R: HubConversion>(hub: R::Hub) -> R::Hub {
    let mut value = to_value(&hub);
    defaults::apply(Version::V1alpha2, R::KIND, &mut value);
    let mut defaulted = serde_json::from_value(value).unwrap_or(hub);
    R::default_hub(&mut defaulted);
    defaulted
}
