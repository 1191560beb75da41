//! JSON patch (RFC 6902) and JSON merge patch (RFC 7386) on an object in the request's
//! version, with kube's error classes: a patch that does not parse is a 400, one that cannot
//! be applied (a failed `test`, a missing path) a 422.

use serde_json::Value;

use super::error::RegistryError;

/// The patch formats the registry applies itself (server-side apply is separate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Json,
    Merge,
}

/// A parsed patch, ready to be applied to each attempt's current object.
#[derive(Debug, Clone)]
pub enum Patch {
    Json(json_patch::Patch),
    Merge(Value),
}

impl Patch {
    /// Parses a patch body.
    pub fn parse(kind: PatchKind, body: &[u8]) -> Result<Self, RegistryError> {
        match kind {
            PatchKind::Json => serde_json::from_slice::<json_patch::Patch>(body)
                .map(Patch::Json)
                .map_err(|e| RegistryError::BadRequest(format!("invalid JSON patch: {e}"))),
            PatchKind::Merge => serde_json::from_slice::<Value>(body)
                .map(Patch::Merge)
                .map_err(|e| RegistryError::BadRequest(format!("invalid JSON merge patch: {e}"))),
        }
    }

    /// The patched object.
    pub fn apply(&self, current: &Value) -> Result<Value, RegistryError> {
        let mut doc = current.clone();
        match self {
            Patch::Json(patch) => json_patch::patch(&mut doc, patch)
                .map_err(|e| RegistryError::Unprocessable(e.to_string()))?,
            Patch::Merge(patch) => json_patch::merge(&mut doc, patch),
        }
        Ok(doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_and_merge_patches() {
        let current = json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"n": 1}});
        let json_patch = Patch::parse(
            PatchKind::Json,
            br#"[{"op":"test","path":"/spec/n","value":1},{"op":"replace","path":"/spec/n","value":2}]"#,
        )
        .expect("parse");
        assert_eq!(json_patch.apply(&current).expect("apply")["spec"]["n"], 2);
        let merge = Patch::parse(
            PatchKind::Merge,
            br#"{"metadata":{"labels":{"x":null,"y":"2"}}}"#,
        )
        .expect("parse");
        assert_eq!(
            merge.apply(&current).expect("apply")["metadata"]["labels"],
            json!({"y": "2"})
        );
    }

    #[test]
    fn errors_are_400_or_422() {
        for (kind, body) in [
            (PatchKind::Json, &b"{}"[..]),
            (PatchKind::Json, b"[{\"op\":\"jump\"}]"),
            (PatchKind::Merge, b"{"),
        ] {
            assert!(matches!(
                Patch::parse(kind, body),
                Err(RegistryError::BadRequest(_))
            ));
        }
        let failing = Patch::parse(
            PatchKind::Json,
            br#"[{"op":"test","path":"/spec/n","value":5}]"#,
        )
        .expect("parse");
        assert!(matches!(
            failing.apply(&json!({"spec": {"n": 1}})),
            Err(RegistryError::Unprocessable(_))
        ));
        let missing =
            Patch::parse(PatchKind::Json, br#"[{"op":"remove","path":"/nope"}]"#).expect("parse");
        assert!(matches!(
            missing.apply(&json!({})),
            Err(RegistryError::Unprocessable(_))
        ));
    }
}
