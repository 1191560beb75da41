//! Server-side apply (PATCH `application/apply-patch+yaml`): the configuration is checked
//! against `fieldValidation`, merged onto the stored object by the field manager, then
//! admitted like a PUT body — or created when nothing is stored (see `docs/ssa.md`).

use serde_json::Value;

use crate::registry::descriptor::GroupVersion;
use crate::registry::error::RegistryError;
use crate::registry::lifecycle::{edit_metadata, meta_str};
use crate::registry::request_options::{FieldValidation, WriteOptions};

use super::write::{Tracking, check_identity, field_request, not_an_object, quoted_field};
use super::{Failure, Outcome, ResourceRest, Subresource};

/// Times an apply switches between its create and update forms when the object appears or
/// disappears under it.
const CREATE_OR_UPDATE_ATTEMPTS: usize = 3;

/// A successful apply, and whether it created the object (201).
pub struct Applied {
    pub outcome: Outcome,
    pub created: bool,
}

impl ResourceRest {
    /// Applies `config` (the decoded body, in `version`) to the object `name` or its status.
    #[allow(clippy::too_many_arguments)]
    pub async fn apply(
        &self,
        version: GroupVersion,
        namespace: &str,
        name: &str,
        mut config: Value,
        duplicates: &[String],
        options: &WriteOptions,
        subresource: Subresource,
    ) -> Result<Applied, Failure> {
        if !config.is_object() {
            return Err(not_an_object());
        }
        let warnings =
            self.field_problems(version, &mut config, duplicates, options.field_validation)?;
        let key = self.key(namespace, name)?;
        let mut last = None;
        for _ in 0..CREATE_OR_UPDATE_ATTEMPTS {
            let exists = self.store.get(&key).await?.is_some();
            let result = if exists {
                self.apply_existing(version, namespace, name, &config, options, subresource)
                    .await
                    .map(|outcome| Applied {
                        outcome,
                        created: false,
                    })
            } else if subresource == Subresource::Status {
                return Err(self.not_found(name).into());
            } else {
                self.apply_create(version, namespace, name, &config, options)
                    .await
                    .map(|outcome| Applied {
                        outcome,
                        created: true,
                    })
            };
            match result {
                Err(failure) if raced(&failure, exists) => last = Some(failure),
                result => {
                    return result.map(|mut applied| {
                        let mut all = warnings.clone();
                        all.append(&mut applied.outcome.warnings);
                        applied.outcome.warnings = all;
                        applied
                    });
                }
            }
        }
        Err(last.unwrap_or_else(|| self.conflict_modified(name).into()))
    }

    /// Unknown and duplicate fields of the configuration per `fieldValidation`: a strict
    /// decoding error (400), warnings, or ignored; unknown fields never reach the field
    /// manager.
    fn field_problems(
        &self,
        version: GroupVersion,
        config: &mut Value,
        duplicates: &[String],
        mode: FieldValidation,
    ) -> Result<Vec<String>, Failure> {
        let problems: Vec<String> = self
            .strategy
            .prune_unknown(version, config)
            .iter()
            .map(|p| quoted_field("unknown field", p))
            .chain(
                duplicates
                    .iter()
                    .map(|p| quoted_field("duplicate field", p)),
            )
            .collect();
        match mode {
            FieldValidation::Ignore => Ok(Vec::new()),
            FieldValidation::Warn => Ok(problems),
            FieldValidation::Strict if problems.is_empty() => Ok(Vec::new()),
            FieldValidation::Strict => Err(RegistryError::BadRequest(format!(
                "strict decoding error: {}",
                problems.join(", ")
            ))
            .into()),
        }
    }

    /// The field manager's merge of `config` onto `stored` (a hub object, `None` when
    /// nothing is stored), in `version`.
    fn merge(
        &self,
        version: GroupVersion,
        name: &str,
        stored: Option<&Value>,
        config: &Value,
        options: &WriteOptions,
        subresource: Subresource,
    ) -> Result<Value, Failure> {
        let request = field_request(version, options, subresource);
        self.strategy
            .apply(stored, config, &request, options.force)
            .map_err(|r| self.rejected(name, r, Vec::new(), Vec::new()))
    }

    /// Nothing is stored: the configuration merged onto nothing is created.
    async fn apply_create(
        &self,
        version: GroupVersion,
        namespace: &str,
        name: &str,
        config: &Value,
        options: &WriteOptions,
    ) -> Result<Outcome, Failure> {
        let mut merged = self.merge(version, name, None, config, options, Subresource::Main)?;
        check_identity(&mut merged, namespace, name)?;
        self.create_object(
            version,
            namespace,
            merged,
            options,
            Tracking::Applied,
            Vec::new(),
        )
        .await
    }

    /// The configuration merged onto the stored object, written like a PUT; its
    /// `metadata.resourceVersion`, when set, is a precondition.
    async fn apply_existing(
        &self,
        version: GroupVersion,
        namespace: &str,
        name: &str,
        config: &Value,
        options: &WriteOptions,
        subresource: Subresource,
    ) -> Result<Outcome, Failure> {
        let requested_rv = meta_str(config, "resourceVersion").to_owned();
        self.write_existing(
            version,
            namespace,
            name,
            options,
            subresource,
            Tracking::Applied,
            Vec::new(),
            |current| {
                let current_rv = current.stored.revision.to_string();
                if !requested_rv.is_empty() && requested_rv != current_rv {
                    return Err(self.conflict_modified(name).into());
                }
                let mut merged = self.merge(
                    version,
                    name,
                    Some(&current.hub),
                    config,
                    options,
                    subresource,
                )?;
                edit_metadata(&mut merged, |m| {
                    m.insert("resourceVersion".to_owned(), Value::String(current_rv));
                });
                Ok(merged)
            },
        )
        .await
    }
}

/// Whether the object appeared (create) or vanished (update) between the read and the write,
/// so the apply should run in its other form.
fn raced(failure: &Failure, existed: bool) -> bool {
    match failure.error.as_ref() {
        RegistryError::AlreadyExists { .. } => !existed,
        RegistryError::NotFound { .. } => existed,
        _ => false,
    }
}
