//! SHA-256 without another dependency: rustls' ring provider already ships one (its
//! TLS 1.3 suites hash with it). Used for certificate fingerprints and config digests.

use rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256;

/// The SHA-256 digest of `data`.
pub fn digest(data: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    if let Some(suite) = TLS13_AES_128_GCM_SHA256.tls13() {
        let hash = suite.common.hash_provider.hash(data);
        let bytes = hash.as_ref();
        if bytes.len() == out.len() {
            out.copy_from_slice(bytes);
        }
    }
    out
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// PVE's fingerprint notation: upper-case hex pairs joined by `:`.
pub fn fingerprint(der: &[u8]) -> String {
    digest(der)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_standard_test_vector() {
        assert_eq!(
            hex(&digest(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(fingerprint(b"abc").starts_with("BA:78:16:BF:"));
    }
}
