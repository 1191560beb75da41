//! Validation of write options (`dryRun`, `fieldValidation`, `fieldManager`, `force`) with
//! kube's messages (apimachinery `meta/v1/validation`). Callers wrap the errors with
//! `RegistryError::invalid_options("CreateOptions" | "UpdateOptions" | "PatchOptions", …)`.

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
