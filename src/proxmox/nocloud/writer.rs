//! Writing the NoCloud ISO with hadris-iso.

use std::io::Cursor;
use std::sync::Arc;

use hadris_iso::read::PathSeparator;
use hadris_iso::write::options::{CreationFeatures, IsoFormatOptions};
use hadris_iso::write::{File as IsoFile, InputFiles, IsoImageWriter};

use super::reader::volume_space_bytes;
use super::{IsoError, NoCloud, VOLUME_LABEL};

/// Builds the seed image: label `cidata`, Rock Ridge and Joliet names, 2048-byte
/// sectors, trimmed to exactly the volume size the primary descriptor records.
pub fn write_iso(seed: &NoCloud) -> Result<Vec<u8>, IsoError> {
    let files = InputFiles {
        path_separator: PathSeparator::ForwardSlash,
        files: seed
            .files()
            .into_iter()
            .map(|(name, data)| IsoFile::File {
                name: Arc::new(name.to_string()),
                contents: data.to_vec(),
            })
            .collect(),
    };
    let options = IsoFormatOptions {
        volume_name: VOLUME_LABEL.to_string(),
        system_id: None,
        volume_set_id: None,
        publisher_id: None,
        preparer_id: None,
        application_id: Some("capmox-apiserver".to_string()),
        sector_size: 2048,
        path_separator: PathSeparator::ForwardSlash,
        features: CreationFeatures::extensions(),
        strict_charset: false,
    };
    let cursor = IsoImageWriter::create(Cursor::new(Vec::new()), files, options)
        .map_err(|e| IsoError::Write(e.to_string()))?;
    let mut bytes = cursor.into_inner();
    // The writer may leave slack behind (or not pad the last sector): the image is exactly
    // the volume the primary descriptor describes.
    let size = volume_space_bytes(&bytes)?;
    bytes.resize(size, 0);
    Ok(bytes)
}
