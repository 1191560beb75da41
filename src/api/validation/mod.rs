//! Validation. Schema-driven rules (OpenAPI value validations, list-type
//! invariants, CEL-equivalent rules) run on an object's JSON in the request
//! version; upstream's webhook rules run on the typed hub object.

pub mod list_type;
pub mod openapi;
pub mod ratchet;
pub mod rules;
pub mod webhook;

use serde_json::Value;

use super::field::{Error, ErrorList, Path};
use super::schema::Structural;
use super::{Kind, Version, schema};

/// The detail kube-apiserver adds when schema errors keep the CEL rules
/// from running.
pub const RULES_NOT_CHECKED: &str = "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

/// Validates an object's JSON against the schema of `kind` in `version`:
/// OpenAPI validations, set/map list invariants, then — unless a blocking
/// error (wrong type, missing required field, unsupported value, too long,
/// too many) was found — the CEL-equivalent rules. `old` is the stored object
/// on updates, in the same version: transition rules compare with it, and
/// errors at values unchanged from it are ratcheted (see [`ratchet`]; the
/// warnings are the ratcheted rule failures, as kube-apiserver sends them).
pub fn validate_schema(
    version: Version,
    kind: Kind,
    object: &Value,
    old: Option<&Value>,
) -> Verdict {
    validate_structural(
        schema::structural(version, kind),
        &rules::RustEquivalents,
        object,
        old,
    )
}

/// [`validate_schema`] against any structural schema (a CRD's), its rules run by `engine`.
pub fn validate_structural(
    schema: &Structural,
    engine: &dyn rules::RuleEngine,
    object: &Value,
    old: Option<&Value>,
) -> Verdict {
    let root = Path::root();
    let at = ratchet::Correlation::root(object, old, schema);
    let mut verdict = Verdict::default();
    openapi::validate(object, schema, at, &root, &mut verdict.errors);
    let mut list_errors = ErrorList::new();
    list_type::validate(object, schema, &root, &mut list_errors);
    // kube-apiserver ratchets the list invariants per object rather than per
    // value: none is reported while the stored object already breaks one.
    if !list_errors.is_empty() && !old.is_some_and(|old| list_type::is_broken(old, schema)) {
        verdict.errors.extend(list_errors);
    }
    if verdict.errors.iter().any(|e| e.type_.blocks_rules()) {
        verdict
            .errors
            .push(Error::invalid(root, Value::Null, RULES_NOT_CHECKED));
    } else {
        rules::validate(engine, object, schema, at, &root, &mut verdict);
    }
    verdict
}

/// The outcome of a validation (the schema's, or upstream's webhook rules):
/// errors (empty when the object is accepted) and warnings for the client.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Verdict {
    /// Field errors; the request is rejected when there are any.
    pub errors: ErrorList,
    /// Warnings returned to the client, also on rejection.
    pub warnings: Vec<String>,
}

impl Verdict {
    /// A verdict from errors, adding `warning` when there are any (upstream
    /// warns `cannot create proxmox machine NAME` alongside its errors).
    pub fn rejecting_with(errors: ErrorList, warning: impl FnOnce() -> String) -> Verdict {
        let warnings = if errors.is_empty() {
            Vec::new()
        } else {
            vec![warning()]
        };
        Verdict { errors, warnings }
    }

    /// Whether the object is accepted.
    pub fn is_accepted(&self) -> bool {
        self.errors.is_empty()
    }
}
