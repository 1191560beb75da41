//! The error of the conversion layer, and the field paths it names.

use std::fmt;

use super::annotation::UPSTREAM_CONVERSION_DATA;

/// Why an object could not be converted between API versions.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConversionError {
    /// An integer does not fit the type the other version gives the field
    /// (for example a negative `mtu` read as v1alpha1, where it is unsigned).
    /// Conversion never wraps or clamps.
    #[error("{path}: {value} is out of range for this API version ({min} to {max})")]
    OutOfRange {
        /// The field, in the terms of the version converted from.
        path: String,
        /// The value that does not fit.
        value: i128,
        /// The smallest value the target field holds.
        min: i128,
        /// The largest value the target field holds.
        max: i128,
    },

    /// An object handed to conversion does not decode as its version's type
    /// (its JSON form was built outside the typed path, e.g. by a patch).
    #[error("reading the object as {version}: {reason}")]
    Unreadable {
        /// The version the object was read as.
        version: String,
        /// What the JSON decoder reported.
        reason: String,
    },

    /// The kind does not exist in the version converted to or from
    /// (ProxmoxKubernetesRelease in v1alpha1).
    #[error("{kind} is not served in v1alpha1: it is new in v1alpha2")]
    NotServed {
        /// The kind.
        kind: crate::api::Kind,
    },

    /// The upstream `cluster.x-k8s.io/conversion-data` annotation does not
    /// hold the object in v1alpha2 form.
    #[error("metadata.annotations[{UPSTREAM_CONVERSION_DATA}]: not a v1alpha2 object: {reason}")]
    InvalidConversionData {
        /// What the JSON decoder reported.
        reason: String,
    },
}

/// A field path such as `spec.network.networkDevices[1].mtu`, built on the
/// stack while converting and only rendered when an error names it.
#[derive(Clone, Copy)]
pub(crate) struct FieldPath<'a> {
    parent: Option<&'a FieldPath<'a>>,
    segment: Segment,
}

#[derive(Clone, Copy)]
enum Segment {
    Root,
    Field(&'static str),
    Index(usize),
}

impl<'a> FieldPath<'a> {
    /// The object itself.
    pub(crate) const ROOT: FieldPath<'static> = FieldPath {
        parent: None,
        segment: Segment::Root,
    };

    /// The named field of this value.
    pub(crate) fn field(&'a self, name: &'static str) -> FieldPath<'a> {
        self.child(Segment::Field(name))
    }

    /// The element at `index` of this list.
    pub(crate) fn index(&'a self, index: usize) -> FieldPath<'a> {
        self.child(Segment::Index(index))
    }

    fn child(&'a self, segment: Segment) -> FieldPath<'a> {
        FieldPath {
            parent: Some(self),
            segment,
        }
    }
}

impl fmt::Display for FieldPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parent_is_root = match self.parent {
            Some(parent) => {
                parent.fmt(f)?;
                matches!(parent.segment, Segment::Root)
            }
            None => true,
        };
        match self.segment {
            Segment::Root => Ok(()),
            Segment::Field(name) if parent_is_root => f.write_str(name),
            Segment::Field(name) => write!(f, ".{name}"),
            Segment::Index(index) => write!(f, "[{index}]"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_fields_indices_and_keys() {
        let root = FieldPath::ROOT;
        let spec = root.field("spec");
        let network = spec.field("network");
        let devices = network.field("networkDevices");
        let second = devices.index(1);
        assert_eq!(
            second.field("mtu").to_string(),
            "spec.network.networkDevices[1].mtu"
        );
        assert_eq!(root.index(3).field("spec").to_string(), "[3].spec");
        assert_eq!(root.to_string(), "");
    }
}
