//! Variable substitution as clusterctl does it (drone/envsubst): `${VAR}`, `${VAR:=default}`,
//! `${VAR=default}`, `${VAR:-default}`, `${VAR-default}`, and `$$` for a literal `$`. A bare
//! `$NAME` would be substituted too, so templates must not contain one: it is an error here.

use std::collections::HashMap;

/// Substitutes `values` into `text`; errors name the variables without value or default.
pub fn substitute(text: &str, values: &HashMap<&str, &str>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut missing = Vec::new();
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
            let expression = &body[..end];
            out.push_str(&expand(expression, values, &mut missing)?);
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

fn expand(
    expression: &str,
    values: &HashMap<&str, &str>,
    missing: &mut Vec<String>,
) -> Result<String, String> {
    let expression = expression.trim();
    let name_end = expression
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(expression.len());
    let (name, operator) = expression.split_at(name_end);
    if name.is_empty() {
        return Err(format!("not a variable: ${{{expression}}}"));
    }
    let value = values.get(name).copied();
    let (default, empty_counts_as_unset) = match operator {
        "" => (None, false),
        _ if operator.starts_with(":=") || operator.starts_with(":-") => {
            (Some(&operator[2..]), true)
        }
        _ if operator.starts_with('=') || operator.starts_with('-') => {
            (Some(&operator[1..]), false)
        }
        _ => return Err(format!("unsupported expression ${{{expression}}}")),
    };
    match (value, default) {
        (Some(v), Some(d)) if v.is_empty() && empty_counts_as_unset => Ok(d.to_owned()),
        (Some(v), _) => Ok(v.to_owned()),
        (None, Some(d)) => Ok(d.to_owned()),
        (None, None) => {
            missing.push(name.to_owned());
            Ok(String::new())
        }
    }
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
