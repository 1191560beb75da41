//! The `x-kubernetes-validations` (CEL) rules of a structural schema. The walk, the error
//! paths, reasons and messages, and the evaluation-error semantics follow apiextensions' CEL
//! validator: an unset optional field read by a rule is a `no such key` error, transition
//! rules (`oldSelf`) run only on updates where the old value exists (unless `optionalOldSelf`),
//! and the other rules ratchet on updates.
//!
//! What evaluates a rule is a [`RuleEngine`]: this server's own kinds use [`RustEquivalents`],
//! hand-written Rust looked up by the rule's text (`||`/`&&` absorb errors like CEL does);
//! kinds defined by CRDs get a CEL engine from the layer that has one (the server's).

use serde_json::Value;

use super::Verdict;
use super::ratchet::Correlation;
use crate::api::field::{Error, Path};
use crate::api::schema::{Rule, Structural};

/// The result of a rule: holds, does not hold, or cannot be evaluated.
type Outcome = Result<bool, String>;

/// A rule's Rust equivalent: `self` and, for transition rules, `oldSelf`.
type RuleFn = fn(&Value, Option<&Value>) -> Outcome;

/// A known rule: its Rust equivalent and whether it reads `oldSelf`.
struct Known {
    eval: RuleFn,
    transition: bool,
}

/// The Rust equivalent of a rule, by its CEL text.
fn known(rule: &str) -> Option<Known> {
    let plain = |eval: RuleFn| {
        Some(Known {
            eval,
            transition: false,
        })
    };
    match rule {
        "self.ipv4PoolRef != null || self.ipv6PoolRef != null" => {
            plain(|s, _| or(not_null(s, "ipv4PoolRef"), || not_null(s, "ipv6PoolRef")))
        }
        "self.port > 0 && self.port < 65536" => plain(|s, _| {
            and(int_field(s, "port").map(|p| p > 0), || {
                int_field(s, "port").map(|p| p < 65536)
            })
        }),
        "self.addresses.size() > 0" => plain(|s, _| size(field(s, "addresses")?).map(|n| n > 0)),
        "[has(self.sourceNode), has(self.templateSelector)].exists_one(c, c)" => {
            plain(|s, _| Ok(has(s, "sourceNode") != has(s, "templateSelector")))
        }
        "[has(self.templateID), has(self.templateSelector)].exists_one(c, c)" => {
            plain(|s, _| Ok(has(s, "templateID") != has(s, "templateSelector")))
        }
        "has(self.kubernetesRelease) || [has(self.sourceNode), has(self.templateSelector)].exists_one(c, c)" => {
            plain(|s, _| {
                Ok(has(s, "kubernetesRelease")
                    || has(s, "sourceNode") != has(s, "templateSelector"))
            })
        }
        "has(self.kubernetesRelease) || [has(self.templateID), has(self.templateSelector)].exists_one(c, c)" => {
            plain(|s, _| {
                Ok(has(s, "kubernetesRelease")
                    || has(s, "templateID") != has(s, "templateSelector"))
            })
        }
        "has(self.kubernetesRelease) || has(self.templateSelector) || (has(self.templateID) && has(self.sourceNode))" => {
            plain(|s, _| {
                Ok(has(s, "kubernetesRelease")
                    || has(s, "templateSelector")
                    || (has(s, "templateID") && has(s, "sourceNode")))
            })
        }
        "!has(self.kubernetesRelease) || !(has(self.sourceNode) || has(self.templateID) || has(self.templateSelector))" => {
            plain(|s, _| {
                Ok(!has(s, "kubernetesRelease")
                    || !(has(s, "sourceNode")
                        || has(s, "templateID")
                        || has(s, "templateSelector")))
            })
        }
        "has(self.templateSelector) ? !has(self.sourceNode) && !has(self.templateID) : has(self.sourceNode) && has(self.templateID)" => {
            plain(|s, _| {
                Ok(if has(s, "templateSelector") {
                    !has(s, "sourceNode") && !has(s, "templateID")
                } else {
                    has(s, "sourceNode") && has(s, "templateID")
                })
            })
        }
        "self.full || !has(self.format)" => {
            plain(|s, _| or(bool_field(s, "full"), || Ok(!has(s, "format"))))
        }
        "self.full || !has(self.storage)" => {
            plain(|s, _| or(bool_field(s, "full"), || Ok(!has(s, "storage"))))
        }
        "self.slot <= (self.bus == 'scsi' ? 30 : self.bus == 'sata' ? 5 : 3)" => plain(|s, _| {
            let last = match field(s, "bus")?.as_str() {
                Some("scsi") => 30,
                Some("sata") => 5,
                _ => 3,
            };
            Ok(int_field(s, "slot")? <= last)
        }),
        "self.end >= self.start" => {
            plain(|s, _| Ok(int_field(s, "end")? >= int_field(s, "start")?))
        }
        "self == oldSelf" => Some(Known {
            eval: |s, old| Ok(old.is_none_or(|old| s == old)),
            transition: true,
        }),
        "self == 1 || (self >= 576 && self <= 65520)"
        | "self == 1 || ( self >= 576 && self <= 65520)" => plain(|s, _| {
            let v = int(s)?;
            Ok(v == 1 || (576..=65520).contains(&v))
        }),
        "(self > 0 && self < 32765) || (self > 32766)" => plain(|s, _| {
            let v = int(s)?;
            Ok((v > 0 && v < 32765) || v > 32766)
        }),
        "(self > 0 && self < 254) || (self > 255)" => plain(|s, _| {
            let v = int(s)?;
            Ok((v > 0 && v < 254) || v > 255)
        }),
        "self.apiGroup == 'ipam.cluster.x-k8s.io'" => {
            plain(|s, _| Ok(field(s, "apiGroup")? == "ipam.cluster.x-k8s.io"))
        }
        "self.kind == 'InClusterIPPool' || self.kind == 'GlobalInClusterIPPool'" => {
            plain(|s, _| {
                or(field(s, "kind").map(|k| k == "InClusterIPPool"), || {
                    field(s, "kind").map(|k| k == "GlobalInClusterIPPool")
                })
            })
        }
        "self != 'net0'" => plain(|s, _| Ok(s != "net0")),
        "has(self.mapping) != has(self.deviceIDs)" => {
            plain(|s, _| Ok(has(s, "mapping") != has(s, "deviceIDs")))
        }
        "self.filter(d, has(d.primaryGPU) && d.primaryGPU).size() <= 1" => plain(|s, _| {
            let items = s.as_array().ok_or("no such overload")?;
            let primary = items
                .iter()
                .filter(|d| d.get("primaryGPU") == Some(&Value::Bool(true)))
                .count();
            Ok(primary <= 1)
        }),
        _ => None,
    }
}

/// Whether a rule has a Rust equivalent (every rule in the schemas must).
pub fn is_implemented(rule: &str) -> bool {
    known(rule).is_some()
}

/// Why a rule gave no verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuleError {
    /// Evaluating it failed on this value (`no such key: x`): the value is invalid.
    Evaluation(String),
    /// The rule cannot be run at all (no equivalent, does not compile): a server fault.
    Unavailable(String),
}

/// Evaluates `x-kubernetes-validations` rules.
pub trait RuleEngine: Send + Sync {
    /// Whether the rule reads `oldSelf`.
    fn is_transition(&self, rule: &Rule) -> bool;

    /// Why the rule (or its `messageExpression`) can never run, if so: checked when a schema
    /// is taken into use, as kube checks a CRD's rules when it is written.
    fn check(&self, _rule: &Rule) -> Result<(), String> {
        Ok(())
    }

    /// The rule's value with `self` = `value` and `oldSelf` = `old` (absent on creates, and
    /// where the value is new, for rules with `optionalOldSelf`).
    fn evaluate(&self, rule: &Rule, value: &Value, old: Option<&Value>) -> Result<bool, RuleError>;

    /// The rule's `messageExpression` value, where it has one that yields a non-empty line.
    fn message(&self, _rule: &Rule, _value: &Value, _old: Option<&Value>) -> Option<String> {
        None
    }
}

/// The rules of this server's own kinds, by their hand-written Rust equivalents.
pub struct RustEquivalents;

impl RuleEngine for RustEquivalents {
    fn is_transition(&self, rule: &Rule) -> bool {
        known(&rule.rule).is_some_and(|k| k.transition)
    }

    fn evaluate(&self, rule: &Rule, value: &Value, old: Option<&Value>) -> Result<bool, RuleError> {
        let known = known(&rule.rule).ok_or_else(|| {
            RuleError::Unavailable(format!(
                "validation rule has no implementation: {}",
                rule.rule
            ))
        })?;
        (known.eval)(value, old).map_err(RuleError::Evaluation)
    }
}

fn field<'a>(object: &'a Value, name: &str) -> Result<&'a Value, String> {
    object
        .get(name)
        .ok_or_else(|| format!("no such key: {name}"))
}

fn has(object: &Value, name: &str) -> bool {
    object.get(name).is_some()
}

fn not_null(object: &Value, name: &str) -> Outcome {
    field(object, name).map(|v| !v.is_null())
}

fn int(value: &Value) -> Result<i64, String> {
    value.as_i64().ok_or_else(|| "no such overload".to_owned())
}

fn int_field(object: &Value, name: &str) -> Result<i64, String> {
    int(field(object, name)?)
}

fn bool_field(object: &Value, name: &str) -> Outcome {
    field(object, name)?
        .as_bool()
        .ok_or_else(|| "no such overload".to_owned())
}

fn size(value: &Value) -> Result<usize, String> {
    match value {
        Value::Array(items) => Ok(items.len()),
        Value::Object(map) => Ok(map.len()),
        Value::String(s) => Ok(s.chars().count()),
        _ => Err("no such overload".to_owned()),
    }
}

/// CEL's `||`: true if either side is true, else the first error, else false.
fn or(left: Outcome, right: impl FnOnce() -> Outcome) -> Outcome {
    if left == Ok(true) {
        return Ok(true);
    }
    let right = right();
    if right == Ok(true) {
        return Ok(true);
    }
    left.and(right)
}

/// CEL's `&&`: false if either side is false, else the first error, else true.
fn and(left: Outcome, right: impl FnOnce() -> Outcome) -> Outcome {
    if left == Ok(false) {
        return Ok(false);
    }
    let right = right();
    if right == Ok(false) {
        return Ok(false);
    }
    left.and(right)
}

/// Evaluates every rule in `value` (and below) against `schema`. `at` is
/// where the value stands against the stored object on updates: it gives
/// transition rules their `oldSelf`, and a rule without `oldSelf` that fails
/// at an unchanged value is ratcheted — a warning rather than an error (see
/// [`super::ratchet`]).
pub fn validate<'a>(
    engine: &dyn RuleEngine,
    value: &'a Value,
    schema: &'a Structural,
    at: Correlation<'a>,
    path: &Path,
    verdict: &mut Verdict,
) {
    for rule in &schema.rules {
        check(engine, rule, value, schema, at, path, verdict);
    }
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if let Some(sub) = schema.property(key) {
                    validate(
                        engine,
                        child,
                        sub,
                        at.child(key, child, sub),
                        &path.child(key),
                        verdict,
                    );
                } else if let Some(values) = schema.additional_properties.as_deref() {
                    validate(
                        engine,
                        child,
                        values,
                        at.child(key, child, values),
                        &path.key(key),
                        verdict,
                    );
                }
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = &schema.items else {
                return;
            };
            for (i, item) in items.iter().enumerate() {
                validate(
                    engine,
                    item,
                    item_schema,
                    at.item(schema, item),
                    &path.index(i),
                    verdict,
                );
            }
        }
        _ => {}
    }
}

fn check(
    engine: &dyn RuleEngine,
    rule: &Rule,
    value: &Value,
    schema: &Structural,
    at: Correlation<'_>,
    path: &Path,
    verdict: &mut Verdict,
) {
    let type_name = schema.type_.map_or("object", |t| t.as_str());
    let transition = engine.is_transition(rule);
    if transition && at.old().is_none() && !rule.optional_old_self {
        return;
    }
    let outcome = engine.evaluate(rule, value, at.old());
    if outcome == Ok(true) {
        return;
    }
    let message = || {
        engine
            .message(rule, value, at.old())
            .unwrap_or_else(|| static_message(rule))
    };
    let at_path = rule
        .field_path
        .as_deref()
        .and_then(|relative| below(path, relative))
        .unwrap_or_else(|| path.clone());
    let error = match outcome {
        Ok(_) => error_for_reason(rule.reason.as_deref(), at_path, type_name, message()),
        // kube-apiserver gives the schema's type as the bad value of a failed rule, scalars
        // included (`Invalid value: "string": …`), as the live peer shows.
        Err(RuleError::Evaluation(reason)) => Error::invalid(
            path.clone(),
            type_name,
            format!("{reason} evaluating rule: {}", static_message(rule)),
        ),
        Err(RuleError::Unavailable(reason)) => {
            verdict.errors.push(Error::internal(path.clone(), reason));
            return;
        }
    };
    // kube-apiserver warns instead of failing for a rule that is false at an
    // unchanged value. It ratchets only `false`, though, and still fails on an
    // evaluation error such as `no such key`; ratcheting those too is a
    // deliberate difference: that is how a v1alpha2-only shape (a device
    // without pools) reads through a v1alpha1 rule, and refusing it would keep
    // every v1alpha1 client from writing the object back (docs/api.md).
    if !transition && at.unchanged() {
        verdict.warnings.push(error.to_string());
    } else {
        verdict.errors.push(error);
    }
}

/// The rule's `message`, or kube's default naming the rule.
fn static_message(rule: &Rule) -> String {
    if rule.message.trim().is_empty() {
        format!("failed rule: {}", rule.rule.trim())
    } else {
        rule.message.trim().to_owned()
    }
}

/// The error a false rule reports, by its `reason` (apiextensions' `fieldErrorForReason`).
fn error_for_reason(reason: Option<&str>, path: Path, type_name: &str, message: String) -> Error {
    match reason {
        Some("FieldValueForbidden") => Error::forbidden(path, message),
        Some("FieldValueRequired") => Error::required(path, message),
        Some("FieldValueDuplicate") => Error::duplicate(path, type_name),
        _ => Error::invalid(path, type_name, message),
    }
}

/// `path` extended by a rule's `fieldPath` (`.spec.name`, `['a.b']`, `[2]`); `None` if it
/// cannot be read (the CRD's validation refuses such a path).
fn below(path: &Path, relative: &str) -> Option<Path> {
    let mut at = path.clone();
    let mut rest = relative;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            if end == 0 {
                return None;
            }
            at = at.child(&after[..end]);
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix("['") {
            let end = after.find("']")?;
            at = at.key(&after[..end]);
            rest = &after[end + 2..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            at = at.index(after[..end].parse().ok()?);
            rest = &after[end + 1..];
        } else {
            return None;
        }
    }
    Some(at)
}
