//! The divergences that docs/api.md lists as deliberate: the first column of the table under a
//! section's heading, one signature pattern per row in backticks, `*` matching any text.

const DOC: &str = include_str!("../../../docs/api.md");

/// The section of the divergences from upstream CAPMOX.
pub const FROM_UPSTREAM: &str = "## Differences from upstream CAPMOX";
/// The section of the divergences from kube-apiserver's CRD handler, on other providers' kinds.
pub const FROM_KUBE_CRDS: &str = "### Differences from kube-apiserver's CRD handler";

/// The listed signature patterns.
pub struct Documented {
    patterns: Vec<String>,
}

/// The patterns of the section whose heading starts with `heading`.
pub fn load(heading: &str) -> Documented {
    let section = DOC
        .split_once(heading)
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("docs/api.md has no section {heading:?}"));
    let section = section.split("\n#").next().unwrap_or_default();
    let patterns = section
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| {
            rest.split_once("` |")
                .map(|(pattern, _)| pattern.to_owned())
        })
        .collect();
    Documented { patterns }
}

impl Documented {
    /// Whether a divergence with this signature is listed.
    pub fn covers(&self, signature: &str) -> bool {
        self.patterns.iter().any(|p| glob(p, signature))
    }
}

/// Whether `text` matches `pattern`, where `*` matches any run of characters.
fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[test]
fn stars_match_any_text() {
    assert!(glob(
        "create * v1alpha1: object spec.*",
        "create ProxmoxMachine v1alpha1: object spec.a.b"
    ));
    assert!(!glob(
        "create * v1alpha1: object spec",
        "create ProxmoxMachine v1alpha1: object spec.a"
    ));
    assert!(glob("a*", "a"));
    assert!(!glob("a*bc*bc", "abc"));
}
