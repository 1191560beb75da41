//! Field selectors as custom resources support them: `metadata.name`, (for namespaced kinds)
//! `metadata.namespace` and the fields a CRD declares selectable (`spec.color`), with `=`, `==`
//! and `!=`, comma for AND and `\` escapes in values. Parsing and messages follow apimachinery
//! `fields.ParseSelector`; the supported-field check follows apiextensions'
//! `ConvertFieldLabel` (`field label not supported: <field>`).

use std::fmt;

use serde_json::Value;

/// One term: `field=value` or `field!=value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldTerm {
    pub field: String,
    pub value: String,
    pub negated: bool,
}

/// A parsed field selector (the AND of its terms).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

/// A selector that failed to parse or names an unsupported field; the message is kube's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FieldSelectorError(pub String);

/// The fields custom resources can be selected by.
pub const NAME_FIELD: &str = "metadata.name";
pub const NAMESPACE_FIELD: &str = "metadata.namespace";

impl FieldSelector {
    /// `fields.ParseSelector`: syntax only, any field name.
    pub fn parse(selector: &str) -> Result<Self, FieldSelectorError> {
        let mut parts = split_terms(selector);
        parts.sort_unstable();
        let mut terms = Vec::new();
        for part in parts.into_iter().filter(|p| !p.is_empty()) {
            let Some((lhs, op, rhs)) = split_term(part) else {
                return Err(FieldSelectorError(format!(
                    "invalid selector: '{selector}'; can't understand '{part}'"
                )));
            };
            terms.push(FieldTerm {
                field: lhs.to_owned(),
                value: unescape_value(rhs)?,
                negated: op == "!=",
            });
        }
        Ok(Self { terms })
    }

    /// Parses and checks that every field is selectable on a custom resource.
    pub fn parse_for_resource(
        selector: &str,
        namespaced: bool,
    ) -> Result<Self, FieldSelectorError> {
        let parsed = Self::parse(selector)?;
        parsed.ensure_selectable(namespaced, &[])?;
        Ok(parsed)
    }

    /// apiextensions' `ConvertFieldLabel`: `metadata.name`, for namespaced kinds
    /// `metadata.namespace`, and the kind's `selectable` fields.
    pub fn ensure_selectable(
        &self,
        namespaced: bool,
        selectable: &[String],
    ) -> Result<(), FieldSelectorError> {
        for term in &self.terms {
            let supported = term.field == NAME_FIELD
                || (namespaced && term.field == NAMESPACE_FIELD)
                || selectable.contains(&term.field);
            if !supported {
                return Err(FieldSelectorError(format!(
                    "field label not supported: {}",
                    term.field
                )));
            }
        }
        Ok(())
    }

    pub fn everything() -> Self {
        Self::default()
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    pub fn terms(&self) -> &[FieldTerm] {
        &self.terms
    }

    /// The value a field must equal, if the selector pins it (`RequiresExactMatch`): used for
    /// single-object watches and authorization attributes.
    pub fn requires_exact_match(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|t| t.field == field && !t.negated)
            .map(|t| t.value.as_str())
    }

    /// Matches against a field lookup; unknown fields read as the empty string, like
    /// `fields.Set`.
    pub fn matches_with(&self, lookup: impl Fn(&str) -> Option<String>) -> bool {
        self.terms.iter().all(|t| {
            let actual = lookup(&t.field).unwrap_or_default();
            (actual == t.value) != t.negated
        })
    }

    /// Matches an object through the fields its terms name (checked selectable when parsed):
    /// strings as they are, integers and booleans as Go formats them, anything else or nothing
    /// as the empty string.
    pub fn matches_object(&self, object: &Value) -> bool {
        self.matches_with(|field| {
            // Walked key by key: no path is built for every object a list filters.
            match field.split('.').try_fold(object, |at, key| at.get(key))? {
                Value::String(s) => Some(s.clone()),
                value @ (Value::Bool(_) | Value::Number(_)) => Some(value.to_string()),
                _ => None,
            }
        })
    }
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let op = if t.negated { "!=" } else { "=" };
            write!(f, "{}{op}{}", t.field, escape_value(&t.value))?;
        }
        Ok(())
    }
}

/// Splits on unescaped commas (a backslash escapes the next character).
fn split_terms(selector: &str) -> Vec<&str> {
    if selector.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in selector.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&selector[start..i]);
            start = i + 1;
        }
    }
    terms.push(&selector[start..]);
    terms
}

/// Finds the first operator (`!=`, `==`, `=` tried in that order at each position).
fn split_term(term: &str) -> Option<(&str, &'static str, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for op in ["!=", "==", "="] {
            if rest.starts_with(op) {
                return Some((&term[..i], op, &term[i + op.len()..]));
            }
        }
    }
    None
}

fn unescape_value(s: &str) -> Result<String, FieldSelectorError> {
    if !s.contains(['\\', ',', '=']) {
        return Ok(s.to_owned());
    }
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(FieldSelectorError(format!(
                    "invalid field selector: invalid escape sequence: \\{c}"
                )));
            }
            out.push(c);
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            // Go prints the rune with %v, i.e. its code point number.
            ',' | '=' => {
                return Err(FieldSelectorError(format!(
                    "invalid field selector: unescaped character in value: {}",
                    c as u32
                )));
            }
            c => out.push(c),
        }
    }
    if in_slash {
        return Err(FieldSelectorError(
            "invalid field selector: invalid escape sequence: \\".to_owned(),
        ));
    }
    Ok(out)
}

fn escape_value(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace(',', "\\,")
        .replace('=', "\\=")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_terms() {
        let sel = FieldSelector::parse("metadata.name=m1,metadata.namespace!=kube-system")
            .expect("parse");
        assert_eq!(
            sel.terms(),
            &[
                FieldTerm {
                    field: "metadata.name".into(),
                    value: "m1".into(),
                    negated: false
                },
                FieldTerm {
                    field: "metadata.namespace".into(),
                    value: "kube-system".into(),
                    negated: true
                },
            ]
        );
        assert_eq!(
            FieldSelector::parse("metadata.name==a\\,b")
                .expect("parse")
                .terms()[0]
                .value,
            "a,b"
        );
        assert!(FieldSelector::parse("").expect("parse").is_empty());
        assert!(FieldSelector::parse(",,").expect("parse").is_empty());
    }

    #[test]
    fn rejects_with_kube_messages() {
        let cases = [
            (
                "metadata.name",
                "invalid selector: 'metadata.name'; can't understand 'metadata.name'",
            ),
            ("a=b,c", "invalid selector: 'a=b,c'; can't understand 'c'"),
            (
                "a=b\\x",
                "invalid field selector: invalid escape sequence: \\x",
            ),
            (
                "a=b\\",
                "invalid field selector: invalid escape sequence: \\",
            ),
            (
                "a=b=c",
                "invalid field selector: unescaped character in value: 61",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(
                FieldSelector::parse(input).expect_err(input).to_string(),
                want
            );
        }
    }

    #[test]
    fn only_metadata_fields_on_resources() {
        assert!(FieldSelector::parse_for_resource("metadata.name=a", true).is_ok());
        assert!(FieldSelector::parse_for_resource("metadata.namespace=a", true).is_ok());
        assert_eq!(
            FieldSelector::parse_for_resource("spec.foo=1", true)
                .expect_err("spec")
                .to_string(),
            "field label not supported: spec.foo"
        );
        assert_eq!(
            FieldSelector::parse_for_resource("metadata.namespace=a", false)
                .expect_err("cluster scoped")
                .to_string(),
            "field label not supported: metadata.namespace"
        );
    }

    #[test]
    fn matches_objects() {
        let obj = json!({"metadata": {"name": "m1", "namespace": "default"}});
        let cases = [
            ("", true),
            ("metadata.name=m1", true),
            ("metadata.name=m2", false),
            ("metadata.name!=m2", true),
            ("metadata.name=m1,metadata.namespace=default", true),
            ("metadata.name=m1,metadata.namespace=other", false),
        ];
        for (input, want) in cases {
            let sel = FieldSelector::parse(input).expect(input);
            assert_eq!(sel.matches_object(&obj), want, "{input}");
        }
    }

    #[test]
    fn exact_match_and_display() {
        let sel = FieldSelector::parse("metadata.name=a\\=b").expect("parse");
        assert_eq!(sel.requires_exact_match(NAME_FIELD), Some("a=b"));
        assert_eq!(sel.to_string(), "metadata.name=a\\=b");
        let neg = FieldSelector::parse("metadata.name!=a").expect("parse");
        assert_eq!(neg.requires_exact_match(NAME_FIELD), None);
    }
}
