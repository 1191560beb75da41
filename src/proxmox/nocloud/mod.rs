//! The cloud-init NoCloud seed image: an ISO 9660 volume labelled `cidata` holding
//! `user-data`, `meta-data` and optionally `network-config` and `vendor-data` at its root.
//!
//! [`write_iso`] builds one with hadris-iso (Rock Ridge + Joliet, like `genisoimage -J -R`);
//! [`read_iso`] is our own small reader of what the simulator needs (ISO 9660 directory
//! records with Rock Ridge `NM` names, or Joliet names) and rejects garbage with an error.
//! Neither touches HTTP.

mod reader;
mod writer;

pub use reader::{IsoImage, read_iso};
pub use writer::write_iso;

/// The volume label cloud-init's NoCloud datasource looks for.
pub const VOLUME_LABEL: &str = "cidata";

/// The files of a NoCloud seed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NoCloud {
    /// `user-data`: cloud-config, a script, or Ignition JSON.
    pub user_data: Vec<u8>,
    /// `meta-data`: `instance-id`, `local-hostname`...
    pub meta_data: Vec<u8>,
    /// `network-config` (netplan v2 or v1); written only when non-empty.
    pub network_config: Option<Vec<u8>>,
    /// `vendor-data`; written only when non-empty.
    pub vendor_data: Option<Vec<u8>>,
}

/// Errors writing or reading a NoCloud ISO.
#[derive(Debug, thiserror::Error)]
pub enum IsoError {
    /// hadris-iso failed to produce the image.
    #[error("writing the ISO image failed: {0}")]
    Write(String),
    /// The bytes are not a readable ISO 9660 image.
    #[error("not a readable ISO 9660 image: {0}")]
    Malformed(String),
    /// The image is ISO 9660 but not a NoCloud seed.
    #[error("not a NoCloud seed: {0}")]
    NotNoCloud(String),
}

impl NoCloud {
    /// A seed with user-data and meta-data only.
    pub fn new(user_data: impl Into<Vec<u8>>, meta_data: impl Into<Vec<u8>>) -> Self {
        Self {
            user_data: user_data.into(),
            meta_data: meta_data.into(),
            network_config: None,
            vendor_data: None,
        }
    }

    /// Adds a `network-config`.
    pub fn with_network_config(mut self, config: impl Into<Vec<u8>>) -> Self {
        self.network_config = Some(config.into());
        self
    }

    /// Adds `vendor-data`.
    pub fn with_vendor_data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.vendor_data = Some(data.into());
        self
    }

    /// The files to write, in name order; optional files only when non-empty.
    pub fn files(&self) -> Vec<(&'static str, &[u8])> {
        let mut files = vec![
            ("meta-data", self.meta_data.as_slice()),
            ("user-data", self.user_data.as_slice()),
        ];
        for (name, data) in [
            ("network-config", &self.network_config),
            ("vendor-data", &self.vendor_data),
        ] {
            if let Some(data) = data.as_deref().filter(|d| !d.is_empty()) {
                files.push((name, data));
            }
        }
        files.sort_by_key(|(name, _)| *name);
        files
    }

    /// Reads a seed back from an ISO: the label must be `cidata` and `user-data` and
    /// `meta-data` must exist.
    pub fn from_iso(image: &[u8]) -> Result<Self, IsoError> {
        let iso = read_iso(image)?;
        if !iso.volume_id.eq_ignore_ascii_case(VOLUME_LABEL) {
            return Err(IsoError::NotNoCloud(format!(
                "volume label is {:?}, expected {VOLUME_LABEL:?}",
                iso.volume_id
            )));
        }
        let mut files = iso.files;
        let mut take = |name: &str| files.remove(name);
        let (Some(user_data), Some(meta_data)) = (take("user-data"), take("meta-data")) else {
            return Err(IsoError::NotNoCloud(
                "user-data or meta-data is missing".into(),
            ));
        };
        Ok(Self {
            user_data,
            meta_data,
            network_config: take("network-config"),
            vendor_data: take("vendor-data"),
        })
    }
}
