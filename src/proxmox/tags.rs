//! VM tags: PVE stores them `;`-joined, lower-cased, de-duplicated and sorted.

/// One tag: `[a-z0-9_][a-z0-9_+.-]*` (PVE compares case-insensitively).
pub fn is_valid_tag(tag: &str) -> bool {
    let mut bytes = tag.bytes();
    match bytes.next() {
        Some(first) if first.is_ascii_alphanumeric() || first == b'_' => {}
        _ => return false,
    }
    bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'+' | b'.' | b'-'))
}

/// Splits a tag list on `;`, `,` and whitespace, dropping empty elements.
pub fn split(list: &str) -> Vec<String> {
    list.split(|c: char| c == ';' || c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// PVE's normalisation: split, lower-case, de-duplicate, sort, join with `;`.
/// Returns the offending tag when one is invalid.
pub fn normalize(list: &str) -> Result<String, String> {
    let mut tags: Vec<String> = split(list)
        .into_iter()
        .map(|t| t.to_ascii_lowercase())
        .collect();
    if let Some(bad) = tags.iter().find(|t| !is_valid_tag(t)) {
        return Err(bad.clone());
    }
    tags.sort();
    tags.dedup();
    Ok(tags.join(";"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn normalises_like_pve() {
        assert_eq!(
            normalize(";Capmox, go-proxmox+cloud-init;capmox ip_net0_10.0.0.21").as_deref(),
            Ok("capmox;go-proxmox+cloud-init;ip_net0_10.0.0.21")
        );
        assert_eq!(normalize("").as_deref(), Ok(""));
        assert_eq!(normalize("ok;-bad"), Err("-bad".to_string()));
        assert_eq!(normalize("a:b"), Err("a:b".to_string()));
    }

    proptest! {
        #[test]
        fn normalising_is_idempotent(s in "[a-zA-Z0-9_+.; ,-]{0,40}") {
            if let Ok(once) = normalize(&s) {
                prop_assert_eq!(normalize(&once), Ok(once.clone()));
            }
        }
    }
}
