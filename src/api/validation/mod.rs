//! Validation. Schema-driven rules (OpenAPI value validations, list-type
//! invariants, CEL-equivalent rules) run on an object's JSON in the request
//! version; upstream's webhook rules run on the typed hub object.

mod combinators;
mod formats;
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
/// too many) was found, which is then said where the schema has rules — the
/// CEL-equivalent rules. `old` is the stored object
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
        ErrorList::new(),
    )
}

/// [`validate_schema`] against any structural schema (a CRD's), its rules run by `engine`.
/// `after_schema` are the errors kube reports after the schema's (a CRD's scale fields, its
/// embedded resources), which, like them, can keep the rules from running.
pub fn validate_structural(
    schema: &Structural,
    engine: &dyn rules::RuleEngine,
    object: &Value,
    old: Option<&Value>,
    after_schema: ErrorList,
) -> Verdict {
    let root = Path::root();
    let at = ratchet::Correlation::root(object, old, schema);
    let mut verdict = Verdict::default();
    openapi::validate(object, schema, at, &root, &mut verdict.errors);
    // kube-openapi reports a message once, however many validators found it (an `allOf`
    // branch repeating a check of its schema).
    let mut seen = ErrorList::new();
    verdict.errors.retain(|e| {
        let first = !seen.contains(e);
        if first {
            seen.push(e.clone());
        }
        first
    });
    verdict.errors.extend(after_schema);
    let mut list_errors = ErrorList::new();
    list_type::validate(object, schema, &root, &mut list_errors);
    // kube-apiserver ratchets the list invariants per object rather than per
    // value: none is reported while the stored object already breaks one.
    if !list_errors.is_empty() && !old.is_some_and(|old| list_type::is_broken(old, schema)) {
        verdict.errors.extend(list_errors);
    }
    if verdict.errors.iter().any(|e| e.type_.blocks_rules()) {
        // kube-apiserver has no rule validator for a schema without rules, so nothing to say
        // was skipped.
        if schema.has_rules() {
            verdict
                .errors
                .push(Error::invalid(root, Value::Null, RULES_NOT_CHECKED));
        }
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

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// A CRD-like schema: an int-or-string quantity as controller-gen writes it, a nullable
    /// object, an enum, a uuid; with a rule on `spec` when `with_rule`.
    fn schema(with_rule: bool) -> Structural {
        let mut spec = json!({
            "type": "object",
            "properties": {
                "guest": {
                    "anyOf": [{"type": "integer"}, {"type": "string"}],
                    "x-kubernetes-int-or-string": true,
                    "pattern": "^[0-9]+(Gi|Mi)?$"
                },
                "metadata": {"type": "object", "nullable": true},
                "strategy": {"type": "string", "enum": ["none", "ssh"]},
                "id": {"type": "string", "format": "uuid"}
            }
        });
        if with_rule {
            spec["x-kubernetes-validations"] = json!([{"rule": "true", "message": "m"}]);
        }
        Structural::from_json(&json!({"type": "object", "properties": {"spec": spec}}))
            .expect("schema")
    }

    fn errors(spec: Value, with_rule: bool) -> Vec<String> {
        let verdict = validate_structural(
            &schema(with_rule),
            &rules::RustEquivalents,
            &json!({ "spec": spec }),
            None,
            ErrorList::new(),
        );
        verdict.errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn an_int_or_string_takes_integers_and_strings_and_names_both_types() {
        assert!(errors(json!({"guest": 4}), false).is_empty());
        assert!(errors(json!({"guest": "4Gi"}), false).is_empty());
        // The pattern holds for strings only, as kube-openapi's string validator.
        assert_eq!(errors(json!({"guest": "4 GiB"}), false).len(), 1);
        assert_eq!(
            errors(json!({"guest": 1.5}), false),
            [
                r#"spec.guest: Invalid value: "number": spec.guest in body must be of type integer,string: "number""#,
                r#"<nil>: Invalid value: "": "spec.guest" must validate at least one schema (anyOf)"#,
                r#"spec.guest: Invalid value: "number": spec.guest in body must be of type integer: "number""#,
            ]
        );
    }

    #[test]
    fn a_wrong_type_is_also_checked_against_the_enum() {
        assert_eq!(
            errors(json!({"strategy": true}), false),
            [
                r#"spec.strategy: Invalid value: "boolean": spec.strategy in body must be of type string: "boolean""#,
                r#"spec.strategy: Unsupported value: true: supported values: "none", "ssh""#,
            ]
        );
    }

    #[test]
    fn null_is_a_value_of_a_nullable_field() {
        assert!(errors(json!({"metadata": null}), false).is_empty());
        assert_eq!(errors(json!({"strategy": null}), false).len(), 2);
    }

    #[test]
    fn formats_kube_checks_are_checked() {
        assert_eq!(
            errors(json!({"id": "not-formatted"}), false),
            [
                r#"spec.id: Invalid value: "not-formatted": spec.id in body must be of type uuid: "not-formatted""#
            ]
        );
    }

    /// The errors of `value` at `spec.v` against the value validations `v`.
    fn errors_of(v: Value, value: Value) -> Vec<String> {
        let schema = Structural::from_json(&json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"v": v}}
        }}))
        .expect("schema");
        let object = json!({"spec": {"v": value}});
        let verdict = validate_structural(
            &schema,
            &rules::RustEquivalents,
            &object,
            None,
            ErrorList::new(),
        );
        verdict.errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn all_of_reports_every_branch_then_itself() {
        let all_of = json!({"type": "string", "allOf": [{"minLength": 3}, {"pattern": "^a"}]});
        assert!(errors_of(all_of.clone(), json!("abc")).is_empty());
        assert_eq!(
            errors_of(all_of.clone(), json!("bcd")),
            [
                r#"spec.v: Invalid value: "bcd": spec.v in body should match '^a'"#,
                r#"<nil>: Invalid value: "": "spec.v" must validate all the schemas (allOf)"#,
            ]
        );
        assert_eq!(
            errors_of(all_of, json!("b")),
            [
                r#"spec.v: Invalid value: "b": spec.v in body should be at least 3 chars long"#,
                r#"spec.v: Invalid value: "b": spec.v in body should match '^a'"#,
                r#"<nil>: Invalid value: "": "spec.v" must validate all the schemas (allOf). None validated"#,
            ]
        );
    }

    #[test]
    fn a_message_found_twice_is_reported_once() {
        let schema = json!({"type": "object", "required": ["a"], "allOf": [{"required": ["a"]}]});
        assert_eq!(
            errors_of(schema, json!({})),
            [
                "spec.v.a: Required value",
                r#"<nil>: Invalid value: "": "spec.v" must validate all the schemas (allOf). None validated"#,
            ]
        );
    }

    #[test]
    fn one_of_needs_exactly_one_branch() {
        let one_of = json!({"type": "integer", "oneOf": [{"minimum": 10}, {"maximum": 5}]});
        assert!(errors_of(one_of.clone(), json!(12)).is_empty());
        assert_eq!(
            errors_of(one_of, json!(7)),
            [
                r#"<nil>: Invalid value: "": "spec.v" must validate one and only one schema (oneOf). Found none valid"#,
                "spec.v: Invalid value: 7: spec.v in body should be greater than or equal to 10",
            ]
        );
        let both = json!({"type": "integer", "oneOf": [{"minimum": 1}, {"maximum": 5}]});
        assert_eq!(
            errors_of(both, json!(3)),
            [
                r#"<nil>: Invalid value: "": "spec.v" must validate one and only one schema (oneOf). Found 2 valid alternatives"#
            ]
        );
    }

    #[test]
    fn a_failing_branch_is_chosen_by_what_it_checked() {
        // The second branch checks the property `a` too, so kube-openapi reports its errors
        // though they are as many as the first branch's.
        let one_of = json!({"type": "object", "properties": {"a": {"type": "string"}},
            "oneOf": [{"required": ["b"]}, {"properties": {"a": {"pattern": "^x"}}}]});
        assert_eq!(
            errors_of(one_of, json!({"a": "y"})),
            [
                r#"<nil>: Invalid value: "": "spec.v" must validate one and only one schema (oneOf). Found none valid"#,
                r#"spec.v.a: Invalid value: "y": spec.v.a in body should match '^x'"#,
            ]
        );
    }

    #[test]
    fn not_refuses_what_its_schema_takes() {
        let not = json!({"type": "string", "not": {"enum": ["none"]}});
        assert!(errors_of(not.clone(), json!("some")).is_empty());
        assert_eq!(
            errors_of(not, json!("none")),
            [r#"<nil>: Invalid value: "": "spec.v" must not validate the schema (not)"#]
        );
    }

    #[test]
    fn skipped_rules_are_said_only_where_the_schema_has_rules() {
        let wrong = json!({"strategy": 5});
        assert!(
            !errors(wrong.clone(), false)
                .iter()
                .any(|e| e.contains(RULES_NOT_CHECKED))
        );
        assert!(
            errors(wrong, true)
                .iter()
                .any(|e| e.contains(RULES_NOT_CHECKED))
        );
    }
}
