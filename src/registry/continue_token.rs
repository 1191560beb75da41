//! List continuation tokens in kube-apiserver's format (apiserver `storage/continue.go`):
//! unpadded URL-safe base64 of `{"v":"meta.k8s.io/v1","rv":<list revision>,"start":"<key>"}`,
//! where `start` is the next storage key relative to the resource's key prefix (the last
//! returned key plus `\0`). A revision of -1 means "continue at the latest revision", which is
//! what the server hands out after the original revision was compacted.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use super::error::RegistryError;

const TOKEN_VERSION: &str = "meta.k8s.io/v1";

#[derive(Serialize, Deserialize)]
struct Token {
    #[serde(rename = "v")]
    version: String,
    #[serde(rename = "rv")]
    resource_version: i64,
    #[serde(rename = "start")]
    start_key: String,
}

/// A decoded token: where the next page starts and at which revision to read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Continue {
    /// The full storage key to start at (inclusive).
    pub start_key: String,
    /// The revision of the original list; `None` means the latest revision (token rv -1).
    pub revision: Option<u64>,
}

/// Encodes the token for a page that ended at `last_key` (a full key under `key_prefix`).
pub fn encode_after(
    last_key: &str,
    key_prefix: &str,
    revision: i64,
) -> Result<String, RegistryError> {
    encode(&format!("{last_key}\u{0}"), key_prefix, revision)
}

/// `EncodeContinue`: `next_key` is the full key the next page starts at.
pub fn encode(next_key: &str, key_prefix: &str, revision: i64) -> Result<String, RegistryError> {
    let Some(relative) = next_key.strip_prefix(key_prefix) else {
        return Err(RegistryError::BadRequest(
            "unable to encode next field: the key and key prefix do not match".to_owned(),
        ));
    };
    let token = Token {
        version: TOKEN_VERSION.to_owned(),
        resource_version: revision,
        start_key: relative.to_owned(),
    };
    let json = serde_json::to_vec(&token)
        .map_err(|e| RegistryError::BadRequest(format!("unable to encode continue token: {e}")))?;
    Ok(URL_SAFE_NO_PAD.encode(json))
}

/// `DecodeContinue`, with the list handler's `invalid continue token: …` wrapping.
pub fn decode(token: &str, key_prefix: &str) -> Result<Continue, RegistryError> {
    let invalid =
        |detail: String| RegistryError::BadRequest(format!("invalid continue token: {detail}"));
    let data = URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|e| invalid(format!("continue key is not valid: {e}")))?;
    let parsed: Token = serde_json::from_slice(&data)
        .map_err(|e| invalid(format!("continue key is not valid: {e}")))?;
    if parsed.version != TOKEN_VERSION {
        return Err(invalid(format!(
            "continue key is not valid: server does not recognize this encoded version {}",
            parsed.version
        )));
    }
    if parsed.resource_version == 0 {
        return Err(invalid(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
                .to_owned(),
        ));
    }
    if parsed.start_key.is_empty() {
        return Err(invalid(
            "continue key is not valid: encoded start key empty (version meta.k8s.io/v1)"
                .to_owned(),
        ));
    }
    // Refuse keys that would climb out of the resource's key space ("../other").
    let key = if parsed.start_key.starts_with('/') {
        parsed.start_key.clone()
    } else {
        format!("/{}", parsed.start_key)
    };
    if clean_path(&key) != key {
        return Err(invalid(format!(
            "continue key is not valid: {}",
            parsed.start_key
        )));
    }
    let revision = match parsed.resource_version {
        r if r < 0 => None,
        r => Some(r.unsigned_abs()),
    };
    Ok(Continue {
        start_key: format!("{key_prefix}{}", &key[1..]),
        revision,
    })
}

/// Go's `path.Clean` for absolute paths.
fn clean_path(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREFIX: &str = "/registry/infrastructure.cluster.x-k8s.io/proxmoxmachines/";

    #[test]
    fn matches_kube_byte_for_byte() {
        let token = encode_after(&format!("{PREFIX}default/m1"), PREFIX, 12).expect("encode");
        let raw = URL_SAFE_NO_PAD.decode(&token).expect("base64");
        assert_eq!(
            String::from_utf8(raw).expect("utf8"),
            r#"{"v":"meta.k8s.io/v1","rv":12,"start":"default/m1\u0000"}"#
        );
        assert!(!token.contains('='), "unpadded");
    }

    #[test]
    fn round_trips() {
        let token = encode_after(&format!("{PREFIX}ns/m2"), PREFIX, 99).expect("encode");
        assert_eq!(
            decode(&token, PREFIX).expect("decode"),
            Continue {
                start_key: format!("{PREFIX}ns/m2\u{0}"),
                revision: Some(99)
            }
        );
        let latest = encode(&format!("{PREFIX}ns/m3"), PREFIX, -1).expect("encode");
        assert_eq!(decode(&latest, PREFIX).expect("decode").revision, None);
    }

    #[test]
    fn rejects_bad_tokens_with_kube_messages() {
        let make = |json: &str| URL_SAFE_NO_PAD.encode(json);
        let cases = [
            (
                make(r#"{"v":"meta.k8s.io/v1","rv":0,"start":"a"}"#),
                "invalid continue token: continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
            ),
            (
                make(r#"{"v":"meta.k8s.io/v1","rv":5,"start":""}"#),
                "invalid continue token: continue key is not valid: encoded start key empty (version meta.k8s.io/v1)",
            ),
            (
                make(r#"{"v":"v2","rv":5,"start":"a"}"#),
                "invalid continue token: continue key is not valid: server does not recognize this encoded version v2",
            ),
            (
                make(r#"{"v":"meta.k8s.io/v1","rv":5,"start":"../secrets/x"}"#),
                "invalid continue token: continue key is not valid: ../secrets/x",
            ),
        ];
        for (token, want) in cases {
            assert_eq!(decode(&token, PREFIX).expect_err(want).to_string(), want);
        }
        for garbage in ["!!!", "e30", &make("not json")] {
            let msg = decode(garbage, PREFIX).expect_err(garbage).to_string();
            assert!(
                msg.starts_with("invalid continue token: continue key is not valid"),
                "{msg}"
            );
        }
        assert!(encode("/other/x", PREFIX, 1).is_err());
    }
}
