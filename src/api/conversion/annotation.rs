//! Upstream's `cluster.x-k8s.io/conversion-data` annotation.
//!
//! Upstream's conversion webhook is stateless, so when it serves an object as
//! v1alpha1 it stows the whole v1alpha2 object (without metadata) as JSON in
//! this annotation and reads it back on the way up. This server keeps the
//! stored object instead and never writes the annotation; it only reads it
//! from objects brought over from an upstream install.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;

use super::error::ConversionError;
use super::leaf::Result;

/// The annotation key upstream (Cluster API's `utilconversion`) uses.
pub const UPSTREAM_CONVERSION_DATA: &str = "cluster.x-k8s.io/conversion-data";

/// Removes the annotation from `metadata` (dropping an annotation map that
/// is left empty) and returns its data.
pub(crate) fn take_upstream(metadata: &mut ObjectMeta) -> Option<String> {
    let annotations = metadata.annotations.as_mut()?;
    let data = annotations.remove(UPSTREAM_CONVERSION_DATA)?;
    if annotations.is_empty() {
        metadata.annotations = None;
    }
    Some(data)
}

/// Decodes the hub object upstream stowed in the annotation.
pub(crate) fn decode_upstream<H: DeserializeOwned>(data: &str) -> Result<H> {
    serde_json::from_str(data).map_err(|e| ConversionError::InvalidConversionData {
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::api::v1alpha2;

    fn meta_with(annotations: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn decodes_and_removes_the_annotation() {
        let mut meta = meta_with(&[
            (
                UPSTREAM_CONVERSION_DATA,
                r#"{"spec":{"network":{"zone":"a"}}}"#,
            ),
            ("keep", "me"),
        ]);
        let data = take_upstream(&mut meta).unwrap();
        let hub: v1alpha2::ProxmoxMachine = decode_upstream(&data).unwrap();
        let zone = hub.spec.network.and_then(|n| n.zone);
        assert_eq!(zone.as_deref(), Some("a"));
        assert_eq!(
            meta.annotations,
            Some(BTreeMap::from([("keep".to_string(), "me".to_string())]))
        );
    }

    #[test]
    fn an_annotation_map_left_empty_is_dropped() {
        let mut meta = meta_with(&[(UPSTREAM_CONVERSION_DATA, "{}")]);
        assert_eq!(take_upstream(&mut meta).as_deref(), Some("{}"));
        assert_eq!(meta.annotations, None);
    }

    #[test]
    fn malformed_data_is_an_error() {
        let err = decode_upstream::<v1alpha2::ProxmoxCluster>("{not json").unwrap_err();
        assert!(
            err.to_string().starts_with(
                "metadata.annotations[cluster.x-k8s.io/conversion-data]: not a v1alpha2 object"
            ),
            "{err}"
        );
    }

    #[test]
    fn objects_without_the_annotation_are_untouched() {
        let mut meta = meta_with(&[("a", "b")]);
        let before = meta.clone();
        assert_eq!(take_upstream(&mut meta), None);
        assert_eq!(meta, before);
        let mut bare = ObjectMeta::default();
        assert_eq!(take_upstream(&mut bare), None);
    }
}
