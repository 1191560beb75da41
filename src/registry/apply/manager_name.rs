//! The manager recorded for a write: the `fieldManager` parameter, or the
//! client's User-Agent up to its first `/` (kubectl's
//! `kubectl/v1.33.0 (linux/amd64) kubernetes/…` records `kubectl`).

/// `fieldManager` is limited to this many bytes.
pub const FIELD_MANAGER_MAX_LENGTH: usize = 128;

/// The manager of a write: `field_manager` when given (already validated),
/// else the printable characters of the User-Agent before its first `/`,
/// cut to [`FIELD_MANAGER_MAX_LENGTH`] bytes.
pub fn manager_or_user_agent(field_manager: Option<&str>, user_agent: &str) -> String {
    match field_manager {
        Some(manager) if !manager.is_empty() => manager.to_owned(),
        _ => prefix_from_user_agent(user_agent),
    }
}

fn prefix_from_user_agent(user_agent: &str) -> String {
    let prefix = user_agent.split('/').next().unwrap_or_default();
    let mut out = String::new();
    for c in prefix.chars().filter(|&c| is_go_printable(c)) {
        if out.len() + c.len_utf8() > FIELD_MANAGER_MAX_LENGTH {
            break;
        }
        out.push(c);
    }
    out
}

/// Go's `unicode.IsPrint` for the characters a User-Agent holds: no
/// control, format, private-use or non-character code points, and no space
/// but U+0020.
pub fn is_go_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    let code = u32::from(c);
    let format = matches!(
        code,
        0xAD | 0x600..=0x605
            | 0x61C
            | 0x6DD
            | 0x70F
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0xE0001
            | 0xE0020..=0xE007F
    );
    let private_or_nonchar =
        matches!(code, 0xE000..=0xF8FF | 0xF0000..) || (code & 0xFFFE) == 0xFFFE;
    !(c.is_control() || c.is_whitespace() || format || private_or_nonchar)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_manager_wins_over_user_agent() {
        assert_eq!(manager_or_user_agent(Some("capi"), "kubectl/v1.33"), "capi");
        assert_eq!(manager_or_user_agent(Some(""), "kubectl/v1.33"), "kubectl");
        assert_eq!(
            manager_or_user_agent(None, "kubectl/v1.33.0 (linux/amd64) kubernetes/abc"),
            "kubectl"
        );
        assert_eq!(manager_or_user_agent(None, ""), "");
    }

    #[test]
    fn user_agent_is_cleaned_and_cut() {
        assert_eq!(
            manager_or_user_agent(None, "my\ttool\u{200b} x/1"),
            "mytool x"
        );
        let long = "é".repeat(100);
        let manager = manager_or_user_agent(None, &long);
        assert_eq!(manager.len(), 128);
        assert!(manager.chars().all(|c| c == 'é'));
    }
}
