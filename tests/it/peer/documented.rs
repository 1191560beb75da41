//! The divergences from upstream CAPMOX that docs/api.md lists as deliberate: the first
//! column of the table under "Differences from upstream CAPMOX", one signature pattern per row
//! in backticks, `*` matching any text.

const DOC: &str = include_str!("../../../docs/api.md");
const SECTION: &str = "## Differences from upstream CAPMOX";

/// The listed signature patterns.
pub struct Documented {
    patterns: Vec<String>,
}

pub fn load() -> Documented {
    let section = DOC
        .split_once(SECTION)
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("docs/api.md has no section {SECTION:?}"));
    let section = section.split("\n## ").next().unwrap_or_default();
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
