//! systemd-networkd units as data. A unit is a list of sections, each a list of `Key=value`
//! settings; both repeat (one `[Route]` per route, one `DNS=` per server), so they are lists,
//! not maps. `Display` writes them as networkd reads them, a blank line between sections.
//!
//! networkd has no quoting: a line break inside a value would start a setting or section
//! of its own, so values that carry one are refused when they are set, not written.

use std::fmt;

use super::RenderError;

/// One `[Name]` section and its settings, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    name: &'static str,
    settings: Vec<(&'static str, String)>,
}

impl Section {
    /// An empty `[name]` section.
    pub fn new(name: &'static str) -> Self {
        Self {
            name,
            settings: Vec::new(),
        }
    }

    /// Adds `key=value`.
    pub fn set(mut self, key: &'static str, value: impl fmt::Display) -> Result<Self, RenderError> {
        let value = value.to_string();
        if value.chars().any(char::is_control) {
            return Err(RenderError::Network(super::network::NetworkError(format!(
                "{key} value {value:?} contains a control character"
            ))));
        }
        self.settings.push((key, value));
        Ok(self)
    }

    /// Adds `key=value` when there is a value.
    pub fn set_some(
        self,
        key: &'static str,
        value: Option<impl fmt::Display>,
    ) -> Result<Self, RenderError> {
        match value {
            Some(value) => self.set(key, value),
            None => Ok(self),
        }
    }

    /// Adds `key=value` for each value.
    pub fn set_each<V: fmt::Display>(
        self,
        key: &'static str,
        values: impl IntoIterator<Item = V>,
    ) -> Result<Self, RenderError> {
        values
            .into_iter()
            .try_fold(self, |section, value| section.set(key, value))
    }
}

/// A networkd `.network` or `.netdev` file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unit {
    sections: Vec<Section>,
}

impl Unit {
    /// Appends a section.
    pub fn push(&mut self, section: Section) {
        self.sections.push(section);
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, section) in self.sections.iter().enumerate() {
            if n > 0 {
                f.write_str("\n")?;
            }
            writeln!(f, "[{}]", section.name)?;
            for (key, value) in &section.settings {
                writeln!(f, "{key}={value}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_and_keys_repeat_in_order() {
        let mut unit = Unit::default();
        unit.push(
            Section::new("Network")
                .set_each("DNS", ["1.1.1.1", "9.9.9.9"])
                .unwrap(),
        );
        unit.push(Section::new("Route").set("Destination", "::/0").unwrap());
        unit.push(
            Section::new("Route")
                .set("Destination", "0.0.0.0/0")
                .and_then(|s| s.set_some("Metric", None::<i64>))
                .unwrap(),
        );
        assert_eq!(
            unit.to_string(),
            "[Network]\nDNS=1.1.1.1\nDNS=9.9.9.9\n\n[Route]\nDestination=::/0\n\n[Route]\nDestination=0.0.0.0/0\n"
        );
    }

    #[test]
    fn a_line_break_cannot_smuggle_a_section_in() {
        let err = Section::new("Route")
            .set("Destination", "10.0.0.0/8\n[Network]\nDHCP=yes")
            .expect_err("refused");
        assert!(err.to_string().contains("Destination"), "{err}");
    }
}
