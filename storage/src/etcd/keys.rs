//! Where the store's keys live in etcd: below a prefix, as kube-apiserver lays them out.

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::types::KeyValue;

#[derive(Clone)]
pub(super) struct Keys {
    /// Without a trailing `/`; keys start with one.
    prefix: std::sync::Arc<str>,
}

impl Keys {
    pub(super) fn new(prefix: &str) -> Self {
        Self {
            prefix: prefix.trim_end_matches('/').into(),
        }
    }

    /// The etcd key of a store key.
    pub(super) fn full(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// The first etcd key after the store key `key`.
    pub(super) fn after(&self, key: &str) -> String {
        format!("{}{key}\0", self.prefix)
    }

    /// The store key of an etcd key.
    pub(super) fn relative(&self, full: &[u8]) -> Result<String> {
        let relative = full.strip_prefix(self.prefix.as_bytes()).ok_or_else(|| {
            Error::Internal(format!("etcd returned a key outside {:?}", self.prefix))
        })?;
        String::from_utf8(relative.to_vec())
            .map_err(|_| Error::Internal("etcd returned a key that is not UTF-8".into()))
    }

    /// Converts an etcd key-value into a store key-value.
    pub(super) fn key_value(&self, kv: etcd_client::KeyValue) -> Result<KeyValue> {
        let (revision, create_revision) = (kv.mod_revision(), kv.create_revision());
        let (key, value) = kv.into_key_value();
        Ok(KeyValue {
            key: self.relative(&key)?,
            value: Bytes::from(value),
            revision,
            create_revision,
        })
    }
}

/// The end of the key range holding every key that starts with `prefix` (exclusive), as etcd's
/// `WithPrefix` computes it.
pub(super) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // Every byte was 0xff: the range runs to the end of the keyspace.
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_increments_the_last_byte_that_can_be() {
        assert_eq!(prefix_end(b"/registry/a/"), b"/registry/a0".to_vec());
        assert_eq!(prefix_end(b"a\xff\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff"), vec![0]);
    }

    #[test]
    fn keys_round_trip_below_the_prefix() {
        let keys = Keys::new("/registry/");
        assert_eq!(keys.full("/g/p/ns/n"), "/registry/g/p/ns/n");
        assert_eq!(
            keys.relative(b"/registry/g/p/ns/n").ok().as_deref(),
            Some("/g/p/ns/n")
        );
        assert!(keys.relative(b"/other/g").is_err());
        assert!(keys.relative(b"/registry/\xff").is_err());
    }
}
