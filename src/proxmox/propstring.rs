//! PVE property strings (`virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1`) and the
//! typed views the client and simulator need: network devices, drives and disk sizes.
//!
//! PVE re-prints property strings canonically: the leading ("default key") item first,
//! then the remaining keys sorted. [`PropertyString::to_canonical`] does the same, so a
//! value read, changed and written back looks exactly as PVE would store it.

use std::collections::BTreeMap;
use std::fmt;

/// A parsed property string: an optional leading item (`virtio=MAC`, a volume id, the
/// `enabled` flag of `agent`...) followed by `key=value` options.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PropertyString {
    /// The first item as written (`"virtio=BC:24:11:00:00:01"`, `"local-lvm:vm-1-disk-0"`).
    pub leading: Option<String>,
    /// The remaining `key=value` options, sorted by key.
    pub options: BTreeMap<String, String>,
}

impl PropertyString {
    /// Parses `s`. When `default_key` is given, a first item without `=` is the value of
    /// that key (e.g. `agent: 1` means `enabled=1`); otherwise the first item is kept
    /// verbatim as [`Self::leading`] (net model, drive volume).
    pub fn parse(s: &str, default_key: Option<&str>) -> Self {
        let mut out = Self::default();
        for (i, item) in s.split(',').enumerate() {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            if i == 0 {
                match (default_key, item.split_once('=')) {
                    (Some(key), None) => {
                        out.options.insert(key.to_string(), item.to_string());
                    }
                    (Some(_), Some((k, v))) => {
                        out.options.insert(k.to_string(), v.to_string());
                    }
                    (None, _) => out.leading = Some(item.to_string()),
                }
                continue;
            }
            match item.split_once('=') {
                Some((k, v)) => out.options.insert(k.to_string(), v.to_string()),
                None => out.options.insert(item.to_string(), String::new()),
            };
        }
        out
    }

    /// An option's value.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.options.get(key).map(String::as_str)
    }

    /// Prints the leading item, then the options sorted by key.
    pub fn to_canonical(&self) -> String {
        let mut parts: Vec<String> = self.leading.iter().cloned().collect();
        parts.extend(self.options.iter().map(|(k, v)| {
            if v.is_empty() {
                k.clone()
            } else {
                format!("{k}={v}")
            }
        }));
        parts.join(",")
    }
}

impl fmt::Display for PropertyString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_canonical())
    }
}

/// NIC models PVE accepts as the leading item of `netN`.
pub const NET_MODELS: &[&str] = &[
    "virtio",
    "e1000",
    "e1000e",
    "e1000-82540em",
    "e1000-82544gc",
    "e1000-82545em",
    "vmxnet3",
    "rtl8139",
    "i82551",
    "i82557b",
    "i82559er",
    "ne2k_isa",
    "ne2k_pci",
    "pcnet",
];

/// A `netN` value: `<model>[=<MAC>],bridge=<br>[,firewall=..][,tag=..]...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetDevice {
    /// `virtio`, `e1000`, ...
    pub model: String,
    /// Upper-case MAC, when assigned.
    pub mac: Option<String>,
    /// All other options (`bridge`, `firewall`, `tag`, `mtu`, `queues`...), sorted.
    pub options: BTreeMap<String, String>,
}

impl NetDevice {
    /// Parses a `netN` value; `None` when the model is not one PVE knows. The legacy
    /// `model=virtio,macaddr=...` spelling is accepted too.
    pub fn parse(s: &str) -> Option<Self> {
        let mut ps = PropertyString::parse(s, None);
        let (model, mac) = match ps.leading.as_deref().map(|l| l.split_once('=')) {
            Some(Some(("model", m))) => (m.to_string(), ps.options.remove("macaddr")),
            Some(Some((m, mac))) => (m.to_string(), Some(mac.to_string())),
            Some(None) => (ps.leading.clone().unwrap_or_default(), None),
            None => return None,
        };
        let model = model.to_ascii_lowercase();
        if !NET_MODELS.contains(&model.as_str()) {
            return None;
        }
        let mac = match mac {
            Some(m) if is_valid_mac(&m) => Some(m.to_ascii_uppercase()),
            Some(_) => return None,
            None => ps.options.remove("macaddr").map(|m| m.to_ascii_uppercase()),
        };
        Some(Self {
            model,
            mac,
            options: ps.options,
        })
    }

    /// The bridge the NIC is attached to.
    pub fn bridge(&self) -> Option<&str> {
        self.options.get("bridge").map(String::as_str)
    }

    /// Canonical PVE spelling (`virtio=MAC,bridge=...,tag=...`).
    pub fn to_canonical(&self) -> String {
        let leading = match &self.mac {
            Some(mac) => format!("{}={mac}", self.model),
            None => self.model.clone(),
        };
        PropertyString {
            leading: Some(leading),
            options: self.options.clone(),
        }
        .to_canonical()
    }
}

/// `XX:XX:XX:XX:XX:XX` with hex digits, unicast (PVE rejects multicast MACs).
pub fn is_valid_mac(s: &str) -> bool {
    let parts: Vec<&str> = s.split(':').collect();
    parts.len() == 6
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit()))
        && u8::from_str_radix(parts[0], 16).is_ok_and(|first| first & 1 == 0)
}

/// A drive value (`scsi0`, `ide2`, ...): `<volume>[,media=cdrom][,size=32G][,...]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriveSpec {
    /// `local-lvm:vm-101-disk-0`, `local:iso/x.iso`, or `none`.
    pub volume: String,
    /// Options such as `media`, `size`, `iothread`, sorted.
    pub options: BTreeMap<String, String>,
}

impl DriveSpec {
    /// Parses a drive value; `None` when there is no volume part. The explicit
    /// `file=<volume>` spelling is accepted.
    pub fn parse(s: &str) -> Option<Self> {
        let mut ps = PropertyString::parse(s, None);
        let volume = match ps.leading.take() {
            Some(l) => match l.split_once('=') {
                Some(("file", v)) => v.to_string(),
                Some((k, v)) => {
                    ps.options.insert(k.to_string(), v.to_string());
                    ps.options.remove("file")?
                }
                None => l,
            },
            None => return None,
        };
        (!volume.is_empty()).then_some(Self {
            volume,
            options: ps.options,
        })
    }

    /// True for CD-ROM drives.
    pub fn is_cdrom(&self) -> bool {
        self.options.get("media").is_some_and(|m| m == "cdrom") || self.volume == "cdrom"
    }

    /// `storage` and `volname` of a `storage:volname` volume id.
    pub fn storage_volume(&self) -> Option<(&str, &str)> {
        self.volume.split_once(':')
    }

    /// The `size=` option in bytes.
    pub fn size_bytes(&self) -> Option<u64> {
        self.options.get("size").and_then(|s| parse_size(s))
    }

    /// Canonical spelling.
    pub fn to_canonical(&self) -> String {
        PropertyString {
            leading: Some(self.volume.clone()),
            options: self.options.clone(),
        }
        .to_canonical()
    }
}

/// True for config keys naming a drive (`ideN`, `sataN`, `scsiN`, `virtioN`, `efidisk0`,
/// `tpmstate0`) with an index in PVE's range.
pub fn is_drive_key(key: &str) -> bool {
    let ranges: [(&str, u32); 6] = [
        ("ide", 3),
        ("sata", 5),
        ("scsi", 30),
        ("virtio", 15),
        ("efidisk", 0),
        ("tpmstate", 0),
    ];
    ranges.iter().any(|(prefix, max)| {
        key.strip_prefix(prefix)
            .and_then(indexed)
            .is_some_and(|n| n <= *max)
    })
}

/// The index of `netN` (0–31).
pub fn net_index(key: &str) -> Option<u32> {
    key.strip_prefix("net")
        .and_then(indexed)
        .filter(|n| *n <= 31)
}

/// A decimal index without sign or leading zeros.
fn indexed(s: &str) -> Option<u32> {
    if s.is_empty() || (s.len() > 1 && s.starts_with('0')) || !s.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    s.parse().ok()
}

const UNITS: [(char, u64); 4] = [
    ('T', 1 << 40),
    ('G', 1 << 30),
    ('M', 1 << 20),
    ('K', 1 << 10),
];

/// Parses PVE disk sizes: `32G`, `512M`, `1.5T`, `100` (bytes). Returns bytes.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (number, factor) = match s.chars().last()? {
        c if c.is_ascii_alphabetic() => {
            let unit = c.to_ascii_uppercase();
            let factor = UNITS.iter().find(|(u, _)| *u == unit)?.1;
            (&s[..s.len() - 1], factor)
        }
        _ => (s, 1),
    };
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let value: f64 = number.parse().ok()?;
    let bytes = value * factor as f64;
    (bytes.is_finite() && bytes >= 0.0 && bytes < u64::MAX as f64).then_some(bytes as u64)
}

/// Prints bytes in the largest unit that divides them exactly (`100G`, `1536M`, `37K`);
/// sizes that are no whole number of KiB are printed as plain bytes.
pub fn format_size(bytes: u64) -> String {
    for (unit, factor) in UNITS {
        if bytes >= factor && bytes.is_multiple_of(factor) {
            return format!("{}{unit}", bytes / factor);
        }
    }
    bytes.to_string()
}

/// A resize request: `+2G` grows by, `32G` sets the absolute size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeChange {
    /// Grow by this many bytes.
    Grow(u64),
    /// Set to this many bytes.
    Absolute(u64),
}

impl SizeChange {
    /// Parses `\+?\d+(\.\d+)?[KMGT]?`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.strip_prefix('+') {
            Some(rest) => parse_size(rest).map(Self::Grow),
            None => parse_size(s).map(Self::Absolute),
        }
    }

    /// The resulting size for a disk of `current` bytes.
    pub fn apply(self, current: u64) -> u64 {
        match self {
            Self::Grow(by) => current.saturating_add(by),
            Self::Absolute(to) => to,
        }
    }
}

impl fmt::Display for SizeChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Grow(b) => write!(f, "+{}", format_size(*b)),
            Self::Absolute(b) => f.write_str(&format_size(*b)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn net_round_trip_is_canonical() {
        let n = NetDevice::parse("virtio=bc:24:11:3a:5f:01,tag=100,bridge=vmbr0,firewall=1")
            .expect("valid");
        assert_eq!(n.model, "virtio");
        assert_eq!(n.mac.as_deref(), Some("BC:24:11:3A:5F:01"));
        assert_eq!(n.bridge(), Some("vmbr0"));
        assert_eq!(
            n.to_canonical(),
            "virtio=BC:24:11:3A:5F:01,bridge=vmbr0,firewall=1,tag=100"
        );
        let no_mac = NetDevice::parse("virtio,bridge=vmbr1").expect("valid");
        assert_eq!(no_mac.mac, None);
        assert!(NetDevice::parse("bogus,bridge=vmbr0").is_none());
        assert!(NetDevice::parse("virtio=01:00:00:00:00:00,bridge=vmbr0").is_none());
        let legacy =
            NetDevice::parse("model=e1000,macaddr=BC:24:11:00:00:02,bridge=x").expect("valid");
        assert_eq!(legacy.to_canonical(), "e1000=BC:24:11:00:00:02,bridge=x");
    }

    #[test]
    fn drives() {
        let d = DriveSpec::parse("local-lvm:vm-101-disk-0,iothread=1,size=100G").expect("valid");
        assert_eq!(d.storage_volume(), Some(("local-lvm", "vm-101-disk-0")));
        assert_eq!(d.size_bytes(), Some(100 << 30));
        assert!(!d.is_cdrom());
        let cd = DriveSpec::parse("none,media=cdrom").expect("valid");
        assert!(cd.is_cdrom());
        let f = DriveSpec::parse("media=cdrom,file=local:iso/a.iso").expect("valid");
        assert_eq!(f.volume, "local:iso/a.iso");
        assert!(is_drive_key("scsi30") && !is_drive_key("scsi31") && !is_drive_key("ide01"));
        assert_eq!(net_index("net7"), Some(7));
        assert_eq!(net_index("net32"), None);
    }

    #[test]
    fn agent_default_key() {
        let a = PropertyString::parse("1,fstrim_cloned_disks=1", Some("enabled"));
        assert_eq!(a.get("enabled"), Some("1"));
        assert_eq!(a.to_canonical(), "enabled=1,fstrim_cloned_disks=1");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1.5T"), Some(3 << 39));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("12X"), None);
        assert_eq!(parse_size("-1G"), None);
        assert_eq!(format_size(100 << 30), "100G");
        assert_eq!(format_size(1536 << 20), "1536M");
        assert_eq!(format_size(1000), "1000");
        assert_eq!(SizeChange::parse("+2G"), Some(SizeChange::Grow(2 << 30)));
        assert_eq!(
            SizeChange::parse("+2G").map(|c| c.apply(1 << 30)),
            Some(3 << 30)
        );
    }

    proptest! {
        #[test]
        fn parsers_never_panic(s in any::<String>()) {
            let _ = PropertyString::parse(&s, Some("enabled")).to_canonical();
            let _ = NetDevice::parse(&s).map(|n| n.to_canonical());
            let _ = DriveSpec::parse(&s).map(|d| d.to_canonical());
            let _ = parse_size(&s);
            let _ = SizeChange::parse(&s);
        }

        #[test]
        fn size_round_trip(n in 0u64..(1 << 50)) {
            prop_assert_eq!(parse_size(&format_size(n)), Some(n));
        }
    }
}
