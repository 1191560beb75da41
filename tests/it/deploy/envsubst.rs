//! Variable substitution as clusterctl does it (drone/envsubst): `${VAR}`, `${VAR:=default}`,
//! `${VAR=default}`, `${VAR:-default}`, `${VAR-default}`, and `$$` for a literal `$`. A bare
//! `$NAME` would be substituted too, so templates must not contain one: it is an error here.

use std::collections::HashMap;

/// One `${…}` expression: the variable and its default, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expression<'t> {
    pub name: &'t str,
    pub default: Option<&'t str>,
    /// `:=`/`:-`: an empty value takes the default too.
    empty_takes_default: bool,
}

impl<'t> Expression<'t> {
    fn parse(expression: &'t str) -> Result<Self, String> {
        let trimmed = expression.trim();
        let name_end = trimmed
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(trimmed.len());
        let (name, operator) = trimmed.split_at(name_end);
        if name.is_empty() {
            return Err(format!("not a variable: ${{{expression}}}"));
        }
        let (default, empty_takes_default) = match operator {
            "" => (None, false),
            _ if operator.starts_with(":=") || operator.starts_with(":-") => {
                (Some(&operator[2..]), true)
            }
            _ if operator.starts_with('=') || operator.starts_with('-') => {
                (Some(&operator[1..]), false)
            }
            _ => return Err(format!("unsupported expression ${{{expression}}}")),
        };
        Ok(Self {
            name,
            default,
            empty_takes_default,
        })
    }

    /// The value, or `None` when the variable has neither a value nor a default.
    fn value<'v>(&self, values: &HashMap<&str, &'v str>) -> Option<&'v str>
    where
        't: 'v,
    {
        match (values.get(self.name).copied(), self.default) {
            (Some(v), Some(d)) if v.is_empty() && self.empty_takes_default => Some(d),
            (Some(v), _) => Some(v),
            (None, default) => default,
        }
    }
}

/// Walks `text` like clusterctl, replacing every `${…}` by what `expand` returns.
fn walk<'t>(
    text: &'t str,
    mut expand: impl FnMut(Expression<'t>) -> String,
) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('{') {
            let end = body
                .find('}')
                .ok_or_else(|| format!("unterminated ${{ in {:?}", &rest[..rest.len().min(40)]))?;
            out.push_str(&expand(Expression::parse(&body[..end])?));
            rest = &body[end + 1..];
        } else if after.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            return Err(format!(
                "bare ${} would be substituted by clusterctl; write $$ for a literal $",
                after
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or_default()
            ));
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Substitutes `values` into `text`; errors name the variables without value or default.
pub fn substitute(text: &str, values: &HashMap<&str, &str>) -> Result<String, String> {
    let mut missing = Vec::new();
    let out = walk(text, |e| match e.value(values) {
        Some(v) => v.to_owned(),
        None => {
            missing.push(e.name.to_owned());
            String::new()
        }
    })?;
    if missing.is_empty() {
        Ok(out)
    } else {
        missing.sort();
        missing.dedup();
        Err(format!(
            "value for variables [{}] is not set",
            missing.join(", ")
        ))
    }
}

/// Every `${…}` expression of `text` in order (escaped `$${…}` excluded), as `clusterctl
/// generate cluster --list-variables` sees them.
pub fn expressions(text: &str) -> Result<Vec<Expression<'_>>, String> {
    let mut found = Vec::new();
    walk(text, |e| {
        found.push(e);
        String::new()
    })?;
    Ok(found)
}

#[test]
fn substitution_follows_clusterctl() {
    let values = HashMap::from([("A", "1"), ("EMPTY", "")]);
    let sub = |t: &str| substitute(t, &values);
    assert_eq!(sub("x ${A} ${ A }").as_deref(), Ok("x 1 1"));
    assert_eq!(
        sub("${B:=2} ${B=3} ${B:-4} ${B-5}").as_deref(),
        Ok("2 3 4 5")
    );
    assert_eq!(sub("${EMPTY:=d}|${EMPTY=d}").as_deref(), Ok("d|"));
    assert_eq!(sub("${V=\"\"}").as_deref(), Ok("\"\""));
    assert_eq!(sub("$$(cmd) $${X} 5$ $").as_deref(), Ok("$(cmd) ${X} 5$ $"));
    assert_eq!(
        sub("${B} ${C}"),
        Err("value for variables [B, C] is not set".into())
    );
    assert!(sub("echo $HOME").expect_err("bare").contains("bare $HOME"));
}

#[test]
fn expressions_skip_escapes() {
    let found = expressions("${A} $${ESCAPED} ${B:=x} $$ ${C=\"\"}").expect("scan");
    let summary: Vec<_> = found.iter().map(|e| (e.name, e.default)).collect();
    assert_eq!(
        summary,
        [("A", None), ("B", Some("x")), ("C", Some("\"\""))]
    );
}
