//! The variables every cluster template uses are the ones docs/deploy.md lists for it (its row
//! of the flavors table, else the common list), with the documented defaults; every variable
//! a row lists is used by its flavors; the test's values cover every variable without a
//! default, and nothing more.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::envsubst::expressions;
use super::templates::{templates, test_values};

/// Documented variables: name → default (`None`: the user must give a value).
type Documented = BTreeMap<String, Option<String>>;

/// The backticked variable names of `text`, each with a `(=default)` right after it.
fn documented_variables(text: &str) -> Documented {
    // Splitting at backticks alternates prose and code: the odd parts are code, each followed
    // by the prose that may hold its default.
    let parts: Vec<&str> = text.split('`').collect();
    let mut found = Documented::new();
    for pair in parts[1..].chunks(2) {
        let (code, after) = (pair[0], pair.get(1).copied().unwrap_or_default());
        let is_variable = code.starts_with(|c: char| c.is_ascii_uppercase())
            && code
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if is_variable {
            let default = after
                .trim_start()
                .strip_prefix("(=")
                .and_then(|d| d.split_once(')'))
                .map(|(d, _)| d.to_owned());
            found.insert(code.to_owned(), default);
        }
    }
    found
}

/// The flavors table (file name → the variables of its row) and the common variables.
fn deploy_doc() -> (BTreeMap<String, Documented>, Documented) {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/deploy.md"))
        .expect("docs/deploy.md");
    let section = doc
        .split_once("### Cluster templates (flavors)")
        .expect("flavors section")
        .1;
    let mut rows = BTreeMap::new();
    for line in section
        .lines()
        .take_while(|l| !l.starts_with("Common variables:"))
    {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // `| flavor | what it adds | extra variables |`: five parts with the outer bars.
        if cells.len() != 5 || cells[1] == "flavor" || cells[1].starts_with("---") {
            continue;
        }
        let variables = documented_variables(cells[3]);
        let files: Vec<String> = if cells[1] == "(default)" {
            vec!["cluster-template.yaml".to_owned()]
        } else {
            cells[1]
                .split(',')
                .map(|f| format!("cluster-template-{}.yaml", f.trim().trim_matches('`')))
                .collect()
        };
        for file in files {
            rows.insert(file, variables.clone());
        }
    }
    let common = section
        .split_once("Common variables:")
        .expect("common variables")
        .1
        .split("\n\n")
        .next()
        .unwrap_or_default();
    (rows, documented_variables(common))
}

#[test]
fn template_variables_are_documented_in_deploy_md() {
    let (rows, common) = deploy_doc();
    let templates = templates();
    let shipped: BTreeSet<&str> = templates.iter().map(|(n, _)| n.as_str()).collect();
    let documented: BTreeSet<&str> = rows.keys().map(String::as_str).collect();
    assert_eq!(shipped, documented, "docs/deploy.md has a row per flavor");
    let values = test_values();
    let mut used_anywhere = BTreeSet::new();
    for (name, text) in &templates {
        let row = &rows[name];
        let mut used = BTreeSet::new();
        for e in expressions(text).unwrap_or_else(|e| panic!("{name}: {e}")) {
            let default = row
                .get(e.name)
                .or_else(|| common.get(e.name))
                .unwrap_or_else(|| {
                    panic!(
                        "{name}: ${{{}}} is not documented in docs/deploy.md",
                        e.name
                    )
                });
            assert_eq!(
                e.default,
                default.as_deref(),
                "{name}: the default of {} differs from docs/deploy.md",
                e.name
            );
            assert!(
                e.default.is_some() || values.contains_key(e.name),
                "{name}: {} has neither a default nor a test value",
                e.name
            );
            used.insert(e.name);
            used_anywhere.insert(e.name);
        }
        for listed in row.keys() {
            assert!(
                used.contains(listed.as_str()),
                "{name}: docs/deploy.md lists {listed}, which it does not use"
            );
        }
    }
    for variable in common.keys() {
        assert!(
            used_anywhere.contains(variable.as_str()),
            "common variable {variable} is used by no template"
        );
    }
    for variable in values.keys() {
        assert!(
            used_anywhere.contains(variable),
            "test value for {variable}, which no template uses"
        );
    }
}

#[test]
fn documented_variables_read_defaults() {
    let found = documented_variables("`A`, `B_2` (=[]), `lower`, `C` (=\"\"), `$$`, `D`(=x)");
    let summary: Vec<(&str, Option<&str>)> = found
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_deref()))
        .collect();
    assert_eq!(
        summary,
        [
            ("A", None),
            ("B_2", Some("[]")),
            ("C", Some("\"\"")),
            ("D", Some("x"))
        ]
    );
}
