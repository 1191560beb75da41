//! `DeleteOptions` from a request: the body when it has one (kubectl sends
//! `{"propagationPolicy":"Background"}` and `dryRun` there), the query otherwise — never both,
//! as in kube's delete handler — validated with kube's messages.

use serde_json::Value;

use super::admission::Requester;
use super::error::RegistryError;
use super::field_error::{FieldError, FieldPath};
use super::lifecycle::{GcPolicy, Propagation};
use super::request_options::validate_dry_run;

/// `metav1.Preconditions`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preconditions {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

/// Decoded and validated delete options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    pub gc: GcPolicy,
    pub dry_run: bool,
    pub preconditions: Preconditions,
    /// Accepted and ignored: these kinds have no graceful deletion.
    pub grace_period_seconds: Option<i64>,
    /// Who deletes, for the admission chain; `None` is this server itself.
    pub requester: Option<Requester>,
    /// Deleted past the admission chain: the server's own cleanup of a deleted CRD's
    /// objects, which kube's finalizer controller deletes straight from storage.
    pub past_admission: bool,
}

fn bad(message: String) -> RegistryError {
    RegistryError::BadRequest(message)
}

/// The raw fields, before validation.
#[derive(Default)]
struct Raw {
    grace_period_seconds: Option<i64>,
    orphan_dependents: Option<bool>,
    propagation_policy: Option<String>,
    dry_run: Vec<String>,
    preconditions: Preconditions,
}

fn from_body(body: &Value) -> Result<Raw, RegistryError> {
    let Value::Object(map) = body else {
        return Err(bad(
            "the body of a delete must be a DeleteOptions object".to_owned()
        ));
    };
    if let Some(kind) = map.get("kind").and_then(Value::as_str)
        && !kind.is_empty()
        && kind != "DeleteOptions"
    {
        return Err(bad(format!(
            "decoded object cannot be converted to DeleteOptions: kind {kind}"
        )));
    }
    let type_error = |field: &str, expected: &str| {
        bad(format!(
            "unable to decode DeleteOptions: {field} must be {expected}"
        ))
    };
    let mut raw = Raw::default();
    for (key, value) in map {
        if value.is_null() {
            continue;
        }
        match key.as_str() {
            "gracePeriodSeconds" => {
                raw.grace_period_seconds = Some(
                    value
                        .as_i64()
                        .ok_or_else(|| type_error(key, "an integer"))?,
                );
            }
            "orphanDependents" => {
                raw.orphan_dependents = Some(
                    value
                        .as_bool()
                        .ok_or_else(|| type_error(key, "a boolean"))?,
                );
            }
            "propagationPolicy" => {
                raw.propagation_policy = Some(
                    value
                        .as_str()
                        .ok_or_else(|| type_error(key, "a string"))?
                        .to_owned(),
                );
            }
            "dryRun" => {
                raw.dry_run = value
                    .as_array()
                    .and_then(|items| {
                        items
                            .iter()
                            .map(|v| v.as_str().map(str::to_owned))
                            .collect::<Option<Vec<_>>>()
                    })
                    .ok_or_else(|| type_error(key, "a list of strings"))?;
            }
            "preconditions" => {
                let field = |name: &str| -> Result<Option<String>, RegistryError> {
                    match value.get(name) {
                        None | Some(Value::Null) => Ok(None),
                        Some(Value::String(s)) => Ok(Some(s.clone())),
                        Some(_) => Err(type_error(&format!("preconditions.{name}"), "a string")),
                    }
                };
                if !value.is_object() {
                    return Err(type_error(key, "an object"));
                }
                raw.preconditions = Preconditions {
                    uid: field("uid")?,
                    resource_version: field("resourceVersion")?,
                };
            }
            _ => {}
        }
    }
    Ok(raw)
}

fn from_query(query: &[(&str, &str)]) -> Result<Raw, RegistryError> {
    let first = |key: &str| query.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    let mut raw = Raw::default();
    if let Some(v) = first("gracePeriodSeconds") {
        raw.grace_period_seconds = Some(v.parse().map_err(|_| {
            bad(format!(
                "strconv.ParseInt: parsing {}: invalid syntax",
                super::gofmt::quote(v)
            ))
        })?);
    }
    if let Some(v) = first("orphanDependents") {
        raw.orphan_dependents = Some(!(v == "0" || v.eq_ignore_ascii_case("false")));
    }
    raw.propagation_policy = first("propagationPolicy").map(str::to_owned);
    raw.dry_run = query
        .iter()
        .filter(|(k, _)| *k == "dryRun")
        .map(|(_, v)| (*v).to_owned())
        .collect();
    Ok(raw)
}

impl DeleteOptions {
    /// Options from the body when it is non-empty, else from the query.
    pub fn from_request(
        body: Option<&Value>,
        query: &[(&str, &str)],
    ) -> Result<Self, RegistryError> {
        let raw = match body {
            Some(body) => from_body(body)?,
            None => from_query(query)?,
        };
        raw.validate()
    }
}

impl Raw {
    /// `ValidateDeleteOptions`.
    fn validate(self) -> Result<DeleteOptions, RegistryError> {
        let mut errs = Vec::new();
        let policy_path = FieldPath::new("propagationPolicy");
        if self.orphan_dependents.is_some()
            && let Some(policy) = &self.propagation_policy
        {
            errs.push(FieldError::invalid(
                &policy_path,
                policy.as_str(),
                "orphanDependents and deletionPropagation cannot be both set",
            ));
        }
        let propagation = match self.propagation_policy.as_deref() {
            None => None,
            Some(policy) => match Propagation::parse(policy) {
                Some(p) => Some(p),
                None => {
                    errs.push(FieldError::not_supported(
                        &policy_path,
                        policy,
                        &["Foreground", "Background", "Orphan", "nil"],
                    ));
                    None
                }
            },
        };
        errs.extend(validate_dry_run(&self.dry_run));
        if !errs.is_empty() {
            return Err(RegistryError::invalid_options("DeleteOptions", errs));
        }
        Ok(DeleteOptions {
            gc: GcPolicy {
                orphan_dependents: self.orphan_dependents,
                propagation,
            },
            dry_run: !self.dry_run.is_empty(),
            preconditions: self.preconditions,
            grace_period_seconds: self.grace_period_seconds,
            requester: None,
            past_admission: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn body_wins_over_query() {
        let body = json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1",
            "propagationPolicy": "Foreground", "dryRun": ["All"],
            "preconditions": {"uid": "u", "resourceVersion": "5"}});
        let opts = DeleteOptions::from_request(Some(&body), &[("propagationPolicy", "Orphan")])
            .expect("valid");
        assert_eq!(opts.gc.propagation, Some(Propagation::Foreground));
        assert!(opts.dry_run);
        assert_eq!(opts.preconditions.uid.as_deref(), Some("u"));
        let query = DeleteOptions::from_request(
            None,
            &[("propagationPolicy", "Orphan"), ("dryRun", "All")],
        )
        .expect("valid");
        assert_eq!(query.gc.propagation, Some(Propagation::Orphan));
        assert!(query.dry_run);
    }

    #[test]
    fn invalid_options_are_422_with_kube_messages() {
        let err = DeleteOptions::from_request(Some(&json!({"propagationPolicy": "Sideways"})), &[])
            .expect_err("bad policy");
        assert_eq!(
            err.to_string(),
            "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
        );
        let both = DeleteOptions::from_request(
            Some(&json!({"propagationPolicy": "Orphan", "orphanDependents": true})),
            &[],
        )
        .expect_err("both");
        assert!(
            both.to_string()
                .contains("orphanDependents and deletionPropagation cannot be both set")
        );
        let dry = DeleteOptions::from_request(None, &[("dryRun", "Some")]).expect_err("dry run");
        assert!(matches!(dry, RegistryError::Invalid { .. }));
    }

    #[test]
    fn malformed_bodies_are_bad_requests() {
        for body in [
            json!([]),
            json!({"kind": "Pod"}),
            json!({"gracePeriodSeconds": "x"}),
            json!({"dryRun": "All"}),
            json!({"preconditions": {"uid": 5}}),
        ] {
            let err = DeleteOptions::from_request(Some(&body), &[]).expect_err("malformed");
            assert!(
                matches!(err, RegistryError::BadRequest(_)),
                "{body}: {err:?}"
            );
        }
    }
}
