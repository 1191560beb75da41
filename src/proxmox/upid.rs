//! Unique process ids of PVE tasks:
//! `UPID:<node>:<pid 8 hex>:<pstart 8-9 hex>:<starttime 8 hex>:<type>:<id>:<user>:`.
//!
//! The node inside the UPID is where the task runs and where it must be polled; it can
//! differ from the node in the request path (uploads run on the receiving node).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A parsed task id. Displays as the original string; cheap to clone.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Upid(Arc<Fields>);

#[derive(Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Fields {
    raw: String,
    node: String,
    pid: u32,
    pstart: u64,
    starttime: i64,
    task_type: String,
    id: String,
    user: String,
}

/// Why a string is not a UPID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unable to parse worker upid '{0}'")]
pub struct UpidParseError(pub String);

/// PVE node names: `[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?`.
pub fn is_valid_node_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
        }
        _ => false,
    }
}

fn hex_field(s: &str, min: usize, max: usize) -> Option<u64> {
    if s.len() < min || s.len() > max || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(s, 16).ok()
}

/// The `type`, `id` and `user` fields: no `:`, no `/`, no whitespace.
fn plain_field(s: &str) -> bool {
    !s.chars().any(|c| c == ':' || c == '/' || c.is_whitespace())
}

impl Upid {
    /// Builds a UPID the way PVE's `PVE::Tools::upid_encode` prints it.
    pub fn new(
        node: &str,
        pid: u32,
        pstart: u64,
        starttime: i64,
        task_type: &str,
        id: &str,
        user: &str,
    ) -> Result<Self, UpidParseError> {
        let raw = format!(
            "UPID:{node}:{pid:08X}:{pstart:08X}:{:08X}:{task_type}:{id}:{user}:",
            starttime.clamp(0, i64::from(u32::MAX))
        );
        raw.parse()
    }

    /// The node the task runs on (poll it there).
    pub fn node(&self) -> &str {
        &self.0.node
    }
    /// The worker's process id.
    pub fn pid(&self) -> u32 {
        self.0.pid
    }
    /// The worker's start time in clock ticks since boot.
    pub fn pstart(&self) -> u64 {
        self.0.pstart
    }
    /// Unix time the task started.
    pub fn starttime(&self) -> i64 {
        self.0.starttime
    }
    /// Worker type, e.g. `qmclone`.
    pub fn task_type(&self) -> &str {
        &self.0.task_type
    }
    /// The task's object id (a vmid for VM tasks; empty for uploads).
    pub fn id(&self) -> &str {
        &self.0.id
    }
    /// `user@realm` or `user@realm!token`.
    pub fn user(&self) -> &str {
        &self.0.user
    }
    /// The UPID as PVE printed it.
    pub fn as_str(&self) -> &str {
        &self.0.raw
    }
}

impl FromStr for Upid {
    type Err = UpidParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || UpidParseError(s.to_string());
        let parts: Vec<&str> = s.split(':').collect();
        let [
            "UPID",
            node,
            pid,
            pstart,
            starttime,
            task_type,
            id,
            user,
            "",
        ] = parts.as_slice()
        else {
            return Err(err());
        };
        if !is_valid_node_name(node)
            || task_type.is_empty()
            || user.is_empty()
            || ![*task_type, *id, *user].iter().all(|f| plain_field(f))
        {
            return Err(err());
        }
        let pid = hex_field(pid, 8, 8).and_then(|v| u32::try_from(v).ok());
        let pstart = hex_field(pstart, 8, 9);
        let starttime = hex_field(starttime, 8, 8).and_then(|v| i64::try_from(v).ok());
        let (Some(pid), Some(pstart), Some(starttime)) = (pid, pstart, starttime) else {
            return Err(err());
        };
        Ok(Self(Arc::new(Fields {
            raw: s.to_string(),
            node: node.to_string(),
            pid,
            pstart,
            starttime,
            task_type: task_type.to_string(),
            id: id.to_string(),
            user: user.to_string(),
        })))
    }
}

impl fmt::Display for Upid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.raw)
    }
}

impl Serialize for Upid {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.raw)
    }
}

impl<'de> Deserialize<'de> for Upid {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_the_reference_example() {
        let u: Upid = "UPID:pve1:0003A1B2:01C2D3E4:66F0A1B2:qmclone:9000:capmox@pve!capi:"
            .parse()
            .expect("valid upid");
        assert_eq!(u.node(), "pve1");
        assert_eq!(u.pid(), 0x3A1B2);
        assert_eq!(u.pstart(), 0x01C2D3E4);
        assert_eq!(u.starttime(), 0x66F0A1B2);
        assert_eq!(u.task_type(), "qmclone");
        assert_eq!(u.id(), "9000");
        assert_eq!(u.user(), "capmox@pve!capi");
    }

    #[test]
    fn accepts_empty_id_and_nine_digit_pstart() {
        let u: Upid = "UPID:pve2:00000001:123456789:66F0A1B2:imgcopy::root@pam:"
            .parse()
            .expect("valid upid");
        assert_eq!(u.id(), "");
        assert_eq!(u.pstart(), 0x123456789);
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "",
            "UPID:pve1:1:2:3:qmclone:9000:root@pam:",
            "UPID:pve1:0003A1B2:01C2D3E4:66F0A1B2:qmclone:9000:root@pam",
            "UPID:-pve:0003A1B2:01C2D3E4:66F0A1B2:qmclone:9000:root@pam:",
            "UPID:pve1:0003A1B2:01C2D3E4:66F0A1B2::9000:root@pam:",
            "UPID:pve1:0003A1B2:01C2D3E4:66F0A1B2:qm clone:9000:root@pam:",
        ] {
            assert!(bad.parse::<Upid>().is_err(), "{bad}");
        }
    }

    #[test]
    fn new_round_trips() {
        let u =
            Upid::new("pve1", 42, 7, 1_700_000_000, "qmstart", "101", "a@pve!t").expect("valid");
        assert_eq!(u.to_string().parse::<Upid>(), Ok(u));
    }

    proptest! {
        #[test]
        fn never_panics(s in any::<String>()) {
            let _ = s.parse::<Upid>();
        }

        #[test]
        fn round_trips(node in "[a-z][a-z0-9]{0,8}", pid: u32, pstart in 0u64..0xF_FFFF_FFFF,
                       start in 0i64..0xFFFF_FFFF, ty in "[a-z]{1,10}", id in "[0-9]{0,5}") {
            let u = Upid::new(&node, pid, pstart, start, &ty, &id, "root@pam").expect("valid");
            prop_assert_eq!(u.node(), node.as_str());
            prop_assert_eq!(u.pid(), pid);
            prop_assert_eq!(u.pstart(), pstart);
            prop_assert_eq!(u.starttime(), start);
        }
    }
}
