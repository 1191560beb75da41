//! A small, defensive ISO 9660 reader: the volume descriptors, the root directory, and
//! file names from Rock Ridge (`NM`), Joliet, or plain ISO 9660 — in that order of
//! preference. Every offset is bounds-checked; malformed input is an error, never a panic.
//!
//! Only the root directory is read: a NoCloud seed keeps its files there.

use std::collections::BTreeMap;

use super::IsoError;

const SECTOR: usize = 2048;
/// Volume descriptors start at sector 16; real images have a handful.
const FIRST_DESCRIPTOR: usize = 16;
const MAX_DESCRIPTORS: usize = 64;
/// Rock Ridge continuation areas may chain; real names need one or two.
const MAX_CONTINUATIONS: usize = 16;
/// A continuation area lives within one sector (SUSP).
const MAX_CONTINUATION_BYTES: usize = SECTOR;
/// Longer names than any file system allows are not names.
const MAX_NAME_BYTES: usize = 1024;

/// What [`read_iso`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IsoImage {
    /// The primary volume identifier (trailing spaces removed).
    pub volume_id: String,
    /// Volume size in bytes (sectors × 2048).
    pub volume_bytes: usize,
    /// Whether Rock Ridge names were found.
    pub rock_ridge: bool,
    /// Whether a Joliet supplementary descriptor exists.
    pub joliet: bool,
    /// Regular files in the root directory, by name.
    pub files: BTreeMap<String, Vec<u8>>,
}

fn malformed(what: impl Into<String>) -> IsoError {
    IsoError::Malformed(what.into())
}

fn slice(image: &[u8], start: usize, len: usize) -> Result<&[u8], IsoError> {
    start
        .checked_add(len)
        .and_then(|end| image.get(start..end))
        .ok_or_else(|| malformed(format!("range {start}+{len} lies outside the image")))
}

fn le_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at + 4)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn sector_offset(lba: u32) -> Result<usize, IsoError> {
    usize::try_from(lba)
        .ok()
        .and_then(|l| l.checked_mul(SECTOR))
        .ok_or_else(|| malformed("sector number overflows"))
}

/// The volume size the primary descriptor records, in bytes.
pub(super) fn volume_space_bytes(image: &[u8]) -> Result<usize, IsoError> {
    let pvd = descriptors(image)?
        .primary
        .ok_or_else(|| malformed("no primary volume descriptor"))?;
    let sectors = le_u32(pvd, 80).ok_or_else(|| malformed("short primary descriptor"))?;
    sector_offset(sectors)
}

struct Descriptors<'a> {
    primary: Option<&'a [u8]>,
    joliet: Option<&'a [u8]>,
}

fn descriptors(image: &[u8]) -> Result<Descriptors<'_>, IsoError> {
    let mut found = Descriptors {
        primary: None,
        joliet: None,
    };
    for index in FIRST_DESCRIPTOR..FIRST_DESCRIPTOR + MAX_DESCRIPTORS {
        let d = slice(image, index * SECTOR, SECTOR)?;
        if &d[1..6] != b"CD001" {
            return Err(malformed("missing CD001 standard identifier"));
        }
        match d[0] {
            1 if found.primary.is_none() => found.primary = Some(d),
            // Joliet: a supplementary descriptor whose escape sequence is %/@, %/C or %/E.
            2 if d[88] == b'%' && d[89] == b'/' && matches!(d[90], b'@' | b'C' | b'E') => {
                found.joliet = Some(d);
            }
            255 => return Ok(found),
            _ => {}
        }
    }
    Err(malformed("no volume descriptor set terminator"))
}

/// One parsed directory record.
struct Record<'a> {
    extent: u32,
    size: u32,
    flags: u8,
    name: &'a [u8],
    system_use: &'a [u8],
}

impl Record<'_> {
    fn is_dir(&self) -> bool {
        self.flags & 0x02 != 0
    }
    fn continues(&self) -> bool {
        self.flags & 0x80 != 0
    }
    /// `.` and `..` are stored as the single bytes 0 and 1.
    fn is_self_or_parent(&self) -> bool {
        self.name == [0] || self.name == [1]
    }
}

fn parse_record(rec: &[u8]) -> Result<Record<'_>, IsoError> {
    if rec.len() < 34 {
        return Err(malformed("directory record too short"));
    }
    let name_len = usize::from(rec[32]);
    let name_end = 33 + name_len;
    let name = rec
        .get(33..name_end)
        .ok_or_else(|| malformed("directory record name overruns the record"))?;
    // A padding byte follows names of even length.
    let su_start = name_end + usize::from(name_len % 2 == 0);
    Ok(Record {
        extent: le_u32(rec, 2).unwrap_or(0),
        size: le_u32(rec, 10).unwrap_or(0),
        flags: rec[25],
        name,
        system_use: rec.get(su_start..).unwrap_or(&[]),
    })
}

/// The records of a directory extent (records never cross sector boundaries; a zero
/// length byte means "continue at the next sector").
fn directory_records<'a>(image: &'a [u8], dir: &Record<'_>) -> Result<Vec<Record<'a>>, IsoError> {
    let start = sector_offset(dir.extent)?;
    let data = slice(image, start, dir.size as usize)?;
    let mut records = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        let len = usize::from(data[pos]);
        if len == 0 {
            pos = (pos / SECTOR + 1) * SECTOR;
            continue;
        }
        let rec = data
            .get(pos..pos + len)
            .ok_or_else(|| malformed("directory record overruns its directory"))?;
        records.push(parse_record(rec)?);
        pos += len;
    }
    Ok(records)
}

/// The Rock Ridge name in a system-use area, following `CE` continuation areas.
fn rock_ridge_name(image: &[u8], system_use: &[u8], skip: usize) -> Option<String> {
    let mut name: Vec<u8> = Vec::new();
    let mut found = false;
    let mut area = system_use.get(skip..)?.to_vec();
    for _ in 0..MAX_CONTINUATIONS {
        let mut next: Option<Vec<u8>> = None;
        let mut pos = 0;
        while pos + 4 <= area.len() {
            let sig = &area[pos..pos + 2];
            let len = usize::from(area[pos + 2]);
            if len < 4 || pos + len > area.len() {
                break;
            }
            let data = &area[pos + 4..pos + len];
            match sig {
                // NM flags 0x02/0x04 mark `.`/`..`, which are not file names.
                b"NM" if !data.is_empty() && data[0] & 0x06 == 0 => {
                    name.extend_from_slice(&data[1..]);
                    found = true;
                    if name.len() > MAX_NAME_BYTES {
                        return None;
                    }
                }
                b"CE" => {
                    let block = le_u32(data, 0)?;
                    let offset = le_u32(data, 8)? as usize;
                    let length = le_u32(data, 16)? as usize;
                    if length > MAX_CONTINUATION_BYTES {
                        return None;
                    }
                    let start = sector_offset(block).ok()?.checked_add(offset)?;
                    next = Some(slice(image, start, length).ok()?.to_vec());
                }
                b"ST" => break,
                _ => {}
            }
            pos += len;
        }
        match next {
            Some(more) => area = more,
            None => break,
        }
    }
    found.then(|| String::from_utf8_lossy(&name).into_owned())
}

/// Joliet names are UCS-2 big-endian; the `;1` version suffix is dropped.
fn joliet_name(raw: &[u8]) -> String {
    let units: Vec<u16> = raw
        .chunks_exact(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .collect();
    let name: String = char::decode_utf16(units)
        .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
        .collect();
    strip_version(&name)
}

/// Plain ISO 9660 names: `NAME.EXT;1` → `NAME.EXT`, a bare trailing dot removed.
fn strip_version(name: &str) -> String {
    let base = name.split(';').next().unwrap_or(name);
    base.strip_suffix('.').unwrap_or(base).to_string()
}

/// The `SP` entry of the root's `.` record says how many bytes to skip before the
/// Rock Ridge entries of every record.
fn susp_skip(dot: &Record<'_>) -> Option<usize> {
    let su = dot.system_use;
    (su.len() >= 7 && &su[0..2] == b"SP" && su[4] == 0xBE && su[5] == 0xEF)
        .then(|| usize::from(su[6]))
}

/// Collects the regular files of a directory (given with their names), joining
/// multi-extent files.
fn collect_files(
    image: &[u8],
    named: Vec<(String, &Record<'_>)>,
) -> Result<BTreeMap<String, Vec<u8>>, IsoError> {
    let mut files = BTreeMap::new();
    let mut pending: Option<(String, Vec<u8>)> = None;
    // Files of a real image never overlap, so their sizes add up to less than the image;
    // crafted records pointing at the same bytes over and over must not blow up memory.
    let mut total = 0usize;
    for (name, rec) in named
        .into_iter()
        .filter(|(_, r)| !r.is_self_or_parent() && !r.is_dir())
    {
        let data = slice(image, sector_offset(rec.extent)?, rec.size as usize)?;
        total = total.saturating_add(data.len());
        if total > image.len() {
            return Err(malformed("file extents overlap"));
        }
        let (name, mut content) = pending.take().unwrap_or((name, Vec::new()));
        content.extend_from_slice(data);
        if rec.continues() {
            pending = Some((name, content));
        } else {
            files.insert(name, content);
        }
    }
    if let Some((name, content)) = pending {
        files.insert(name, content);
    }
    Ok(files)
}

fn plain_name(rec: &Record<'_>) -> String {
    strip_version(&String::from_utf8_lossy(rec.name))
}

/// Reads the volume label and the root directory's files.
pub fn read_iso(image: &[u8]) -> Result<IsoImage, IsoError> {
    let found = descriptors(image)?;
    let pvd = found
        .primary
        .ok_or_else(|| malformed("no primary volume descriptor"))?;
    let volume_id = String::from_utf8_lossy(&pvd[40..72])
        .trim_end_matches([' ', '\0'])
        .to_string();
    let volume_bytes = sector_offset(le_u32(pvd, 80).unwrap_or(0))?;
    let root = parse_record(&pvd[156..190])?;
    let records = directory_records(image, &root)?;

    let skip = records.first().and_then(susp_skip).unwrap_or(0);
    let rr_names: Vec<Option<String>> = records
        .iter()
        .map(|r| rock_ridge_name(image, r.system_use, skip))
        .collect();
    let rock_ridge = rr_names.iter().any(Option::is_some);

    let files = if rock_ridge {
        let named = records
            .iter()
            .zip(rr_names)
            .map(|(r, rr)| (rr.unwrap_or_else(|| plain_name(r)), r))
            .collect();
        collect_files(image, named)?
    } else if let Some(svd) = found.joliet {
        let jroot = parse_record(&svd[156..190])?;
        let jrecords = directory_records(image, &jroot)?;
        collect_files(
            image,
            jrecords.iter().map(|r| (joliet_name(r.name), r)).collect(),
        )?
    } else {
        collect_files(image, records.iter().map(|r| (plain_name(r), r)).collect())?
    };
    Ok(IsoImage {
        volume_id,
        volume_bytes,
        rock_ridge,
        joliet: found.joliet.is_some(),
        files,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxmox::nocloud::{NoCloud, write_iso};
    use proptest::prelude::*;

    fn sample() -> Vec<u8> {
        write_iso(
            &NoCloud::new("#cloud-config\nhostname: a\n", "instance-id: x\n")
                .with_network_config("network:\n  version: 2\n"),
        )
        .expect("writes")
    }

    #[test]
    fn reads_what_the_writer_wrote() {
        let image = sample();
        let iso = read_iso(&image).expect("reads");
        assert_eq!(iso.volume_id, "cidata");
        assert_eq!(iso.volume_bytes, image.len());
        assert!(iso.rock_ridge && iso.joliet);
        assert_eq!(
            iso.files.keys().collect::<Vec<_>>(),
            ["meta-data", "network-config", "user-data"]
        );
        assert_eq!(iso.files["user-data"], b"#cloud-config\nhostname: a\n");
    }

    #[test]
    fn rejects_garbage() {
        assert!(read_iso(b"").is_err());
        assert!(read_iso(&vec![0u8; 40 * SECTOR]).is_err());
        let mut image = sample();
        image.truncate(17 * SECTOR);
        assert!(read_iso(&image).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..(40 * SECTOR))) {
            let _ = read_iso(&bytes);
            let _ = NoCloud::from_iso(&bytes);
        }

        #[test]
        fn corrupted_images_never_panic(flips in proptest::collection::vec((0usize..(24 * SECTOR), any::<u8>()), 1..64)) {
            let mut image = sample();
            for (at, byte) in flips {
                if let Some(b) = image.get_mut(at) {
                    *b = byte;
                }
            }
            let _ = read_iso(&image);
            let _ = NoCloud::from_iso(&image);
        }
    }
}
