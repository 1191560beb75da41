//! Validation of write options (`dryRun`, `fieldValidation`, `fieldManager`, `force`) with
//! kube's messages (apimachinery `meta/v1/validation`). Callers wrap the errors with
//! `RegistryError::invalid_options("CreateOptions" | "UpdateOptions" | "PatchOptions", …)`.

use super::admission::Requester;
use super::apply::manager_or_user_agent;
use super::error::RegistryError;
use super::field_error::{FieldError, FieldPath};
use super::object_meta::validate_field_manager;

/// `fieldValidation`: what to do about unknown or duplicate fields.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    /// The server default.
    #[default]
    Warn,
    Strict,
}

impl FieldValidation {
    /// Parses the directive; the empty string is the default (Warn).
    pub fn parse(value: &str) -> Result<Self, FieldError> {
        match value {
            "" | "Warn" => Ok(Self::Warn),
            "Ignore" => Ok(Self::Ignore),
            "Strict" => Ok(Self::Strict),
            other => Err(FieldError::not_supported(
                &FieldPath::new("fieldValidation"),
                other,
                &["", "Ignore", "Strict", "Warn"],
            )),
        }
    }
}

/// `ValidateDryRun`: only `All` is allowed.
pub fn validate_dry_run(values: &[String]) -> Vec<FieldError> {
    if values.iter().all(|v| v == "All") {
        return Vec::new();
    }
    vec![FieldError::not_supported(
        &FieldPath::new("dryRun"),
        serde_json::Value::from(values.to_vec()),
        &["All"],
    )]
}

/// `ValidatePatchOptions`: apply needs a field manager; `force` only applies to apply.
pub fn validate_patch_options(
    is_apply: bool,
    field_manager: &str,
    force_given: bool,
    dry_run: &[String],
    field_validation: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if is_apply {
        if field_manager.is_empty() {
            errs.push(FieldError::required(
                &FieldPath::new("fieldManager"),
                "is required for apply patch",
            ));
        }
    } else if force_given {
        errs.push(FieldError::forbidden(
            &FieldPath::new("force"),
            "may not be specified for non-apply patch",
        ));
    }
    errs.extend(validate_write_options(
        field_manager,
        dry_run,
        field_validation,
    ));
    errs
}

/// `ValidateCreateOptions` / `ValidateUpdateOptions`.
pub fn validate_write_options(
    field_manager: &str,
    dry_run: &[String],
    field_validation: &str,
) -> Vec<FieldError> {
    let mut errs = validate_field_manager(field_manager, &FieldPath::new("fieldManager"));
    errs.extend(validate_dry_run(dry_run));
    if let Err(e) = FieldValidation::parse(field_validation) {
        errs.push(e);
    }
    errs
}

/// Which write the options belong to (it names the options kind in errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    Create,
    Update,
    /// A patch; `apply` for server-side apply.
    Patch {
        apply: bool,
    },
}

impl WriteKind {
    fn options_kind(self) -> &'static str {
        match self {
            Self::Create => "CreateOptions",
            Self::Update => "UpdateOptions",
            Self::Patch { .. } => "PatchOptions",
        }
    }
}

/// Decoded, validated options of a create, update or patch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteOptions {
    pub dry_run: bool,
    pub field_validation: FieldValidation,
    pub field_manager: String,
    pub force: bool,
    /// The manager the write is recorded for: `fieldManager`, else derived from the client's
    /// User-Agent (see [`WriteOptions::for_user_agent`]).
    pub manager: String,
    /// Who writes, for the admission chain; `None` is this server itself.
    pub requester: Option<Requester>,
}

impl WriteOptions {
    /// From the query (`dryRun` may repeat; other parameters count once), validated like
    /// kube: `<Kind>Options.meta.k8s.io "" is invalid: …` (422).
    pub fn from_query(kind: WriteKind, query: &[(&str, &str)]) -> Result<Self, RegistryError> {
        let first = |key: &str| query.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
        let dry_run: Vec<String> = query
            .iter()
            .filter(|(k, _)| *k == "dryRun")
            .map(|(_, v)| (*v).to_owned())
            .collect();
        let field_manager = first("fieldManager").unwrap_or_default();
        let field_validation = first("fieldValidation").unwrap_or_default();
        let force = first("force");
        let errs = match kind {
            WriteKind::Patch { apply } => validate_patch_options(
                apply,
                field_manager,
                force.is_some(),
                &dry_run,
                field_validation,
            ),
            WriteKind::Create | WriteKind::Update => {
                validate_write_options(field_manager, &dry_run, field_validation)
            }
        };
        if !errs.is_empty() {
            return Err(RegistryError::invalid_options(kind.options_kind(), errs));
        }
        Ok(Self {
            dry_run: !dry_run.is_empty(),
            field_validation: FieldValidation::parse(field_validation).unwrap_or_default(),
            field_manager: field_manager.to_owned(),
            force: force.is_some_and(|v| !(v == "0" || v.eq_ignore_ascii_case("false"))),
            manager: field_manager.to_owned(),
            requester: None,
        })
    }

    /// The options with the manager derived from `user_agent` when `fieldManager` is absent.
    pub fn for_user_agent(mut self, user_agent: &str) -> Self {
        self.manager = manager_or_user_agent(Some(&self.field_manager), user_agent);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::error::RegistryError;

    #[test]
    fn patch_option_messages() {
        let apply = RegistryError::invalid_options(
            "PatchOptions",
            validate_patch_options(true, "", false, &[], ""),
        );
        assert_eq!(
            apply.to_string(),
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
        );
        let force = validate_patch_options(false, "kubectl", true, &[], "");
        assert_eq!(
            force[0].to_string(),
            "force: Forbidden: may not be specified for non-apply patch"
        );
        assert!(
            validate_patch_options(true, "kubectl", true, &["All".into()], "Strict").is_empty()
        );
    }

    #[test]
    fn write_options_from_query() {
        let opts = WriteOptions::from_query(
            WriteKind::Create,
            &[
                ("dryRun", "All"),
                ("fieldValidation", "Strict"),
                ("fieldManager", "kubectl-create"),
            ],
        )
        .expect("valid");
        assert!(opts.dry_run);
        assert_eq!(opts.field_validation, FieldValidation::Strict);
        let err = WriteOptions::from_query(WriteKind::Update, &[("fieldValidation", "Loud")])
            .expect_err("bad directive");
        assert!(
            err.to_string().starts_with(
                "UpdateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value"
            ),
            "{err}"
        );
        let force =
            WriteOptions::from_query(WriteKind::Patch { apply: false }, &[("force", "true")])
                .expect_err("force without apply");
        assert!(
            force.to_string().starts_with("PatchOptions.meta.k8s.io"),
            "{force}"
        );
    }

    #[test]
    fn dry_run_and_field_validation() {
        assert_eq!(
            validate_dry_run(&["Some".into()])[0].to_string(),
            "dryRun: Unsupported value: [\"Some\"]: supported values: \"All\""
        );
        assert_eq!(FieldValidation::parse(""), Ok(FieldValidation::Warn));
        assert_eq!(
            FieldValidation::parse("Strict"),
            Ok(FieldValidation::Strict)
        );
        assert_eq!(
            FieldValidation::parse("strict")
                .expect_err("case")
                .to_string(),
            "fieldValidation: Unsupported value: \"strict\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
        );
    }
}
