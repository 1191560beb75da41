//! kube-openapi's `schemaPropsValidator`: `anyOf`, `oneOf`, `allOf` and `not`, which a
//! structural schema may hold value validations in. A failure is one pathless error naming
//! the value's path (apiextensions makes it `<nil>: Invalid value: ""`), joined, for `anyOf`
//! and `oneOf` with no branch holding, by the errors of the branch kube-openapi found closest
//! (the one that counted most, the first of equals), and for `allOf` by every branch's errors.

use serde_json::Value;

use super::openapi::validate_node;
use super::ratchet::Correlation;
use crate::api::field::{Error, ErrorList, Path, go_quote};
use crate::api::schema::Structural;

/// One branch's outcome.
struct Outcome {
    errors: ErrorList,
    count: usize,
}

impl Outcome {
    fn of<'a>(value: &'a Value, branch: &'a Structural, at: Correlation<'a>, path: &Path) -> Self {
        let mut errors = ErrorList::new();
        let count = validate_node(value, branch, at, path, &mut errors);
        Outcome { errors, count }
    }

    fn holds(&self) -> bool {
        self.errors.is_empty()
    }
}

/// Keeps `candidate` as the closest failing branch if it counted more than the one kept.
fn closer(best: Option<Outcome>, candidate: Outcome) -> Option<Outcome> {
    match best {
        Some(best) if best.count >= candidate.count => Some(best),
        _ => Some(candidate),
    }
}

fn failure(path: &Path, message: &str) -> Error {
    let detail = format!("{} {message}", go_quote(path.as_str()));
    Error::invalid(Path::root(), "", detail)
}

/// Checks the combinators of `schema` on `value` (not null), in kube-openapi's order; the
/// match count they add.
pub fn validate<'a>(
    value: &'a Value,
    schema: &'a Structural,
    at: Correlation<'a>,
    path: &Path,
    errors: &mut ErrorList,
) -> usize {
    let mut count = 0;
    let mut take = |outcome: Outcome, errors: &mut ErrorList| {
        count += outcome.count;
        errors.extend(outcome.errors);
    };
    if !schema.any_of.is_empty() {
        let mut best = None;
        let mut success = None;
        for branch in &schema.any_of {
            let outcome = Outcome::of(value, branch, at, path);
            if outcome.holds() {
                success = Some(outcome);
                break;
            }
            best = closer(best, outcome);
        }
        if success.is_none() {
            errors.push(failure(path, "must validate at least one schema (anyOf)"));
        }
        if let Some(outcome) = success.or(best) {
            take(outcome, errors);
        }
    }
    if !schema.one_of.is_empty() {
        let mut best = None;
        let mut first_success = None;
        let mut holding = 0;
        for branch in &schema.one_of {
            let outcome = Outcome::of(value, branch, at, path);
            if outcome.holds() {
                holding += 1;
                first_success.get_or_insert(outcome);
            } else if holding == 0 {
                best = closer(best, outcome);
            }
        }
        match holding {
            1 => take(first_success.expect("the branch that holds"), errors),
            0 => {
                errors.push(failure(
                    path,
                    "must validate one and only one schema (oneOf). Found none valid",
                ));
                if let Some(outcome) = best {
                    take(outcome, errors);
                }
            }
            n => errors.push(failure(
                path,
                &format!(
                    "must validate one and only one schema (oneOf). Found {n} valid alternatives"
                ),
            )),
        }
    }
    if !schema.all_of.is_empty() {
        let mut holding = 0;
        for branch in &schema.all_of {
            let outcome = Outcome::of(value, branch, at, path);
            holding += usize::from(outcome.holds());
            take(outcome, errors);
        }
        if holding < schema.all_of.len() {
            let none = if holding == 0 { ". None validated" } else { "" };
            errors.push(failure(
                path,
                &format!("must validate all the schemas (allOf){none}"),
            ));
        }
    }
    if let Some(not) = &schema.not
        && Outcome::of(value, not, at, path).holds()
    {
        errors.push(failure(path, "must not validate the schema (not)"));
    }
    count
}
