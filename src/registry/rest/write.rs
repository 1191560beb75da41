//! Create, update and patch: the request in its version → (patch) → status/spec reset for
//! the endpoint → decode, default, convert to the hub, validate (`Strategy::admit`, plus the
//! metadata rules) → system fields and generation → compare-and-swap on the revision that was
//! read, retried on storage conflicts unless the client named a resourceVersion.

use serde_json::Value;

use crate::registry::admission::AdmissionOperation;
use crate::registry::apply;
use crate::registry::descriptor::GroupVersion;
use crate::registry::error::RegistryError;
use crate::registry::field_error::FieldError;
use crate::registry::lifecycle::{
    self, copy_status, edit_metadata, keep_identity_fields, meta_str, prepare_for_create,
    prepare_for_update, set_managed_fields, should_delete_during_update, status_update,
};
use crate::registry::object_meta::{self, generate_name};
use crate::registry::object_store::{Stored, WriteConflict};
use crate::registry::patch::Patch;
use crate::registry::request_options::{FieldValidation, WriteOptions};
use crate::registry::strategy::{FieldRequest, Operation, Rejection};

use super::admission::Write;
use super::{Failure, Outcome, ResourceRest, Subresource};

/// A patch to apply to the current object, and the fields its body repeated (a merge patch's,
/// checked against `fieldValidation` like a request body's).
#[derive(Debug, Clone)]
pub struct PatchRequest {
    pub patch: Patch,
    pub duplicates: Vec<String>,
}

/// Whether a write records its manager as an Update (`FieldManager::update`) or already
/// carries the managed fields of an apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tracking {
    Update,
    Applied,
}

/// The field manager's view of a write.
pub(super) fn field_request<'a>(
    version: GroupVersion,
    options: &'a WriteOptions,
    subresource: Subresource,
) -> FieldRequest<'a> {
    FieldRequest {
        version,
        manager: &options.manager,
        subresource: match subresource {
            Subresource::Main => apply::Subresource::Main,
            Subresource::Status => apply::Subresource::Status,
            Subresource::Scale => apply::Subresource::Scale,
        },
        now: jiff::Timestamp::now(),
    }
}

/// Attempts at a fresh name when `generateName` collides (kube's `RetryGenerateName`).
const GENERATE_NAME_ATTEMPTS: usize = 8;

/// The current object of one update attempt.
pub(super) struct Current {
    pub stored: Stored,
    /// The hub JSON, with its resourceVersion.
    pub hub: Value,
}

/// What one attempt decided.
pub(super) enum Plan {
    /// Nothing changes: answer with the current object.
    Keep,
    /// Store this hub object.
    Write(Value),
    /// Remove the object; this is its last state.
    Remove(Value),
}

/// What was committed.
pub(super) struct Committed {
    pub hub: Value,
    pub revision: capmox_storage::Revision,
}

/// The state of an update's attempts (see `ResourceRest::attempts`).
pub(super) struct Attempts {
    key: String,
    /// The object a conflict answered with: the next attempt's, without another read.
    cached: Option<Stored>,
    left: usize,
    /// Whether a write too large to store is tried once more without its managed fields.
    bare_if_too_large: bool,
}

/// `object` without `metadata.managedFields`, when it has them. kube's create, update and
/// (non-apply) patch handlers retry a write etcd refuses as too large without them: "it is
/// safe to remove managedFields (which can be large) and try again".
fn without_managed_fields(object: &Value) -> Option<Value> {
    object.pointer("/metadata/managedFields")?;
    let mut bare = object.clone();
    edit_metadata(&mut bare, |m| {
        m.remove("managedFields");
    });
    Some(bare)
}

fn too_large(conflict: &WriteConflict) -> bool {
    matches!(conflict, WriteConflict::Failed(RegistryError::TooLarge(_)))
}

pub(super) fn not_an_object() -> Failure {
    RegistryError::BadRequest("the object is not a JSON object".to_owned()).into()
}

/// `unknown field "spec.x"`, `duplicate field "spec.x"`: kube's strict decoding problems.
pub(super) fn quoted_field(what: &str, path: &str) -> String {
    format!("{what} {}", crate::registry::gofmt::quote(path))
}

/// Under Warn, one warning per duplicate field.
fn duplicate_warnings(duplicates: &[String], mode: FieldValidation) -> Vec<String> {
    match mode {
        FieldValidation::Warn => duplicates
            .iter()
            .map(|p| quoted_field("duplicate field", p))
            .collect(),
        FieldValidation::Ignore | FieldValidation::Strict => Vec::new(),
    }
}

fn without_resource_version(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
    object
}

impl ResourceRest {
    /// Warnings (Warn) or a strict decoding error (Strict) for duplicate fields of the body.
    fn check_duplicates(
        &self,
        version: GroupVersion,
        body: &Value,
        duplicates: &[String],
        mode: FieldValidation,
    ) -> Result<Vec<String>, Failure> {
        self.refuse_duplicates(version, body, duplicates, mode)?;
        Ok(duplicate_warnings(duplicates, mode))
    }

    /// Under Strict, duplicate fields are a 400 that also names the unknown fields of `body`
    /// (the object as it will be decoded), as kube's strict decoder does.
    fn refuse_duplicates(
        &self,
        version: GroupVersion,
        body: &Value,
        duplicates: &[String],
        mode: FieldValidation,
    ) -> Result<(), Failure> {
        if mode != FieldValidation::Strict || duplicates.is_empty() {
            return Ok(());
        }
        let mut problems: Vec<String> = self
            .strategy
            .unknown_fields(version, body)
            .iter()
            .map(|p| quoted_field("unknown field", p))
            .collect();
        problems.extend(
            duplicates
                .iter()
                .map(|p| quoted_field("duplicate field", p)),
        );
        Err(
            RegistryError::BadRequest(format!("strict decoding error: {}", problems.join(", ")))
                .into(),
        )
    }

    /// `Strategy::admit` with the metadata errors folded into one 422; the admitted hub and
    /// every warning so far.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn admit(
        &self,
        version: GroupVersion,
        body: Value,
        mode: FieldValidation,
        operation: Operation<'_>,
        name: &str,
        meta_errors: Vec<FieldError>,
        mut warnings: Vec<String>,
    ) -> Result<(Value, Vec<String>), Failure> {
        match self.strategy.admit(version, body, mode, operation) {
            Ok(admitted) if meta_errors.is_empty() => {
                warnings.extend(admitted.warnings);
                Ok((admitted.hub, warnings))
            }
            Ok(admitted) => {
                warnings.extend(admitted.warnings);
                Err(Failure::new(self.invalid(name, meta_errors), warnings))
            }
            Err(rejection) => Err(self.rejected(name, rejection, meta_errors, warnings)),
        }
    }

    /// The failure of a write the kind's rules (or server-side apply) refused; `meta_errors`
    /// join its field errors.
    pub(super) fn rejected(
        &self,
        name: &str,
        rejection: Rejection,
        meta_errors: Vec<FieldError>,
        mut warnings: Vec<String>,
    ) -> Failure {
        let error = match rejection {
            Rejection::Invalid {
                errors,
                warnings: more,
            } => {
                warnings.extend(more);
                let mut all = meta_errors;
                all.extend(errors.iter().map(FieldError::from));
                self.invalid(name, all)
            }
            Rejection::BadRequest(message) | Rejection::Conversion(message) => {
                RegistryError::BadRequest(message)
            }
            Rejection::Conflicts(conflicts) => RegistryError::ApplyConflict {
                message: conflicts.message(),
                causes: conflicts.causes(),
            },
            Rejection::Internal(message) => RegistryError::Internal(message),
        };
        Failure::new(error, warnings)
    }

    /// POST: a new object in `namespace`.
    pub async fn create(
        &self,
        version: GroupVersion,
        namespace: &str,
        body: Value,
        duplicates: &[String],
        options: &WriteOptions,
    ) -> Result<Outcome, Failure> {
        let warnings =
            self.check_duplicates(version, &body, duplicates, options.field_validation)?;
        self.create_object(
            version,
            namespace,
            body,
            options,
            Tracking::Update,
            warnings,
        )
        .await
    }

    /// Creates `body`; `tracking` says whether the write is recorded as an Update of the
    /// request's manager or already carries its managed fields (an apply).
    pub(super) async fn create_object(
        &self,
        version: GroupVersion,
        namespace: &str,
        mut body: Value,
        options: &WriteOptions,
        tracking: Tracking,
        warnings: Vec<String>,
    ) -> Result<Outcome, Failure> {
        if !body.is_object() {
            return Err(not_an_object());
        }
        match meta_str(&body, "namespace") {
            // A cluster-scoped kind's objects have no namespace (validation names one sent).
            "" if !namespace.is_empty() => edit_metadata(&mut body, |m| {
                m.insert("namespace".to_owned(), Value::String(namespace.to_owned()));
            }),
            ns if !namespace.is_empty() && ns != namespace => {
                return Err(RegistryError::BadRequest(
                    "the namespace of the provided object does not match the namespace sent on the request"
                        .to_owned(),
                )
                .into());
            }
            _ => {}
        }
        if !meta_str(&body, "resourceVersion").is_empty() {
            return Err(RegistryError::BadRequest(
                "resourceVersion should not be set on objects to be created".to_owned(),
            )
            .into());
        }
        if self.has_status(version)
            && let Value::Object(map) = &mut body
        {
            map.remove("status");
        }
        let requested_name = meta_str(&body, "name").to_owned();
        let mutation = Write {
            version,
            subresource: Subresource::Main,
            operation: AdmissionOperation::Create,
            namespace,
            name: &requested_name,
            requester: &options.requester,
            dry_run: options.dry_run,
            field_manager: &options.field_manager,
        };
        let (mut body, warnings) = self.mutate(&mutation, body, None, warnings).await?;
        let prefix = meta_str(&body, "generateName").to_owned();
        let generated = meta_str(&body, "name").is_empty() && !prefix.is_empty();
        if generated {
            let name = generate_name(&prefix);
            edit_metadata(&mut body, |m| {
                m.insert("name".to_owned(), Value::String(name));
            });
        }
        let mode = options.field_validation;
        let name = meta_str(&body, "name").to_owned();
        let meta_errors =
            object_meta::validate_create(body.get("metadata"), self.descriptor().namespaced);
        let (mut hub, warnings) = self.admit(
            version,
            body,
            mode,
            Operation::Create,
            &name,
            meta_errors,
            warnings,
        )?;
        prepare_for_create(
            &mut hub,
            &uuid::Uuid::new_v4().to_string(),
            &lifecycle::now(),
        );
        let validation = Write {
            name: &name,
            ..mutation
        };
        let warnings = self
            .validate(&validation, Some(&hub), None, warnings)
            .await?;
        let fail = |error: RegistryError| Failure::new(error, warnings.clone());
        if tracking == Tracking::Update {
            self.strategy
                .track_update(
                    None,
                    &mut hub,
                    &field_request(version, options, Subresource::Main),
                )
                .map_err(|e| fail(RegistryError::Internal(e.0)))?;
        }
        let mut name = name;
        let mut attempts = 0;
        let revision = loop {
            let key = self.key(namespace, &name).map_err(fail)?;
            if options.dry_run {
                // Like kube: a dry-run create of an existing object is a conflict too.
                if self.store.get(&key).await.map_err(fail)?.is_some() {
                    return Err(fail(self.already_exists(&name, false)));
                }
                break None;
            }
            match self.store.create(&key, &hub).await {
                Ok(revision) => break Some(revision),
                Err(conflict) if too_large(&conflict) && tracking == Tracking::Update => {
                    match without_managed_fields(&hub) {
                        Some(bare) => hub = bare,
                        None => return Err(fail(self.write_conflict(conflict, &name))),
                    }
                }
                Err(WriteConflict::AlreadyExists) if generated => {
                    attempts += 1;
                    if attempts >= GENERATE_NAME_ATTEMPTS {
                        return Err(fail(self.already_exists(&name, true)));
                    }
                    name = generate_name(&prefix);
                    edit_metadata(&mut hub, |m| {
                        m.insert("name".to_owned(), Value::String(name.clone()));
                    });
                }
                Err(conflict) => return Err(fail(self.write_conflict(conflict, &name))),
            }
        };
        let object = self.encode(version, hub, revision).map_err(fail)?;
        Ok(Outcome { object, warnings })
    }

    pub(super) fn already_exists(&self, name: &str, generated: bool) -> RegistryError {
        RegistryError::AlreadyExists {
            group: self.group(),
            resource: self.resource(),
            name: name.to_owned(),
            generated,
        }
    }

    pub(super) fn write_conflict(&self, conflict: WriteConflict, name: &str) -> RegistryError {
        match conflict {
            WriteConflict::NotFound => self.not_found(name),
            WriteConflict::AlreadyExists => self.already_exists(name, false),
            WriteConflict::Modified(_) => self.conflict_modified(name),
            WriteConflict::Failed(e) => e,
        }
    }

    /// The attempts of an update: each reads the current object, plans on it and commits
    /// ([`Self::commit`]); a storage conflict re-reads and plans again (the plan itself rejects
    /// a stale resourceVersion the client asked for), up to the configured number of retries.
    /// A loop at the call site rather than a closure: planning awaits admission.
    pub(super) fn attempts(&self, namespace: &str, name: &str) -> Result<Attempts, Failure> {
        Ok(Attempts {
            key: self.key(namespace, name)?,
            cached: None,
            left: self.config.max_conflict_retries + 1,
            bare_if_too_large: false,
        })
    }

    /// The current object of the next attempt; a 409 once the retries are spent.
    pub(super) async fn next_attempt(
        &self,
        attempts: &mut Attempts,
        name: &str,
    ) -> Result<Current, Failure> {
        if attempts.left == 0 {
            return Err(self.conflict_modified(name).into());
        }
        attempts.left -= 1;
        let stored = match attempts.cached.take() {
            Some(stored) => stored,
            None => self
                .store
                .get(&attempts.key)
                .await?
                .ok_or_else(|| self.not_found(name))?,
        };
        let hub = self.read_hub(&stored)?;
        Ok(Current { stored, hub })
    }

    /// Stores what `plan` decided on `current`: `None` when the object changed meanwhile and
    /// the caller must plan again.
    pub(super) async fn commit(
        &self,
        attempts: &mut Attempts,
        current: Current,
        plan: Plan,
        dry_run: bool,
        name: &str,
    ) -> Result<Option<Committed>, Failure> {
        let revision = current.stored.revision;
        let result = match plan {
            Plan::Keep => {
                return Ok(Some(Committed {
                    hub: current.hub,
                    revision,
                }));
            }
            Plan::Write(hub) | Plan::Remove(hub) if dry_run => {
                return Ok(Some(Committed { hub, revision }));
            }
            Plan::Write(mut hub) => {
                let mut written = self.store.update(&attempts.key, &hub, revision).await;
                if attempts.bare_if_too_large
                    && written.as_ref().is_err_and(too_large)
                    && let Some(bare) = without_managed_fields(&hub)
                {
                    hub = bare;
                    written = self.store.update(&attempts.key, &hub, revision).await;
                }
                written.map(|revision| Committed { hub, revision })
            }
            Plan::Remove(hub) => self
                .store
                .delete(&attempts.key, revision)
                .await
                .map(|deleted| Committed {
                    hub,
                    revision: deleted.revision,
                }),
        };
        match result {
            Ok(committed) => Ok(Some(committed)),
            Err(WriteConflict::Modified(current)) => {
                attempts.cached = current.map(|c| *c);
                Ok(None)
            }
            Err(conflict) => Err(self.write_conflict(conflict, name).into()),
        }
    }

    /// PUT: replaces the object (main resource or `status`); `metadata.resourceVersion` is
    /// required and must be current.
    #[allow(clippy::too_many_arguments)]
    pub async fn update(
        &self,
        version: GroupVersion,
        namespace: &str,
        name: &str,
        body: Value,
        duplicates: &[String],
        options: &WriteOptions,
        subresource: Subresource,
    ) -> Result<Outcome, Failure> {
        if !body.is_object() {
            return Err(not_an_object());
        }
        let warnings =
            self.check_duplicates(version, &body, duplicates, options.field_validation)?;
        let requested_rv = meta_str(&body, "resourceVersion").to_owned();
        self.write_existing(
            version,
            namespace,
            name,
            options,
            subresource,
            Tracking::Update,
            warnings,
            |current| {
                if requested_rv.is_empty() {
                    return Err(self
                        .invalid(
                            name,
                            vec![FieldError::invalid(
                                &crate::registry::FieldPath::new("metadata")
                                    .child("resourceVersion"),
                                0i64,
                                "must be specified for an update",
                            )],
                        )
                        .into());
                }
                if requested_rv != current.stored.revision.to_string() {
                    return Err(self.conflict_modified(name).into());
                }
                Ok(body.clone())
            },
        )
        .await
    }

    /// PATCH (JSON patch or merge patch) of the main resource or `status`. A
    /// `metadata.resourceVersion` in the patched object is a precondition; without one the
    /// patch applies to whatever is current.
    pub async fn patch(
        &self,
        version: GroupVersion,
        namespace: &str,
        name: &str,
        request: &PatchRequest,
        options: &WriteOptions,
        subresource: Subresource,
    ) -> Result<Outcome, Failure> {
        self.write_existing(
            version,
            namespace,
            name,
            options,
            subresource,
            Tracking::Update,
            duplicate_warnings(&request.duplicates, options.field_validation),
            |current| {
                let current_in_version = self.read_in(version, &current.stored)?;
                let mut patched = request.patch.apply(&current_in_version)?;
                if !patched.is_object() {
                    // kube cannot decode such a result into the kind: 422, not 400.
                    return Err(RegistryError::Unprocessable(
                        "the patched object is not a JSON object".to_owned(),
                    )
                    .into());
                }
                self.refuse_duplicates(
                    version,
                    &patched,
                    &request.duplicates,
                    options.field_validation,
                )?;
                let current_rv = current.stored.revision.to_string();
                match meta_str(&patched, "resourceVersion") {
                    "" => edit_metadata(&mut patched, |m| {
                        m.insert("resourceVersion".to_owned(), Value::String(current_rv));
                    }),
                    rv if rv != current_rv => return Err(self.conflict_modified(name).into()),
                    _ => {}
                }
                Ok(patched)
            },
        )
        .await
    }

    /// The shared update path: `request` builds the new object in `version` from the current
    /// one (checking preconditions), then the endpoint's reset rules, admission, system fields.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn write_existing(
        &self,
        version: GroupVersion,
        namespace: &str,
        name: &str,
        options: &WriteOptions,
        subresource: Subresource,
        tracking: Tracking,
        warnings: Vec<String>,
        request: impl Fn(&Current) -> Result<Value, Failure>,
    ) -> Result<Outcome, Failure> {
        let status_in_version = self.has_status(version);
        let status_in_storage = self.has_status(self.descriptor().storage_version());
        let write = Write {
            version,
            subresource,
            operation: AdmissionOperation::Update,
            namespace,
            name,
            requester: &options.requester,
            dry_run: options.dry_run,
            field_manager: &options.field_manager,
        };
        let mut attempts = self.attempts(namespace, name)?;
        attempts.bare_if_too_large = tracking == Tracking::Update;
        let (committed, warnings) = loop {
            let current = self.next_attempt(&mut attempts, name).await?;
            let mut body = request(&current)?;
            check_identity(&mut body, namespace, name)?;
            let current_in_version = self.read_in(version, &current.stored)?;
            let body = match subresource {
                Subresource::Main | Subresource::Scale => {
                    if status_in_version {
                        copy_status(&mut body, &current_in_version);
                    }
                    body
                }
                Subresource::Status => status_update(&current_in_version, &body),
            };
            let (mut body, warnings) = self
                .mutate(&write, body, Some(&current_in_version), warnings.clone())
                .await?;
            keep_identity_fields(&mut body, &current_in_version);
            let meta_errors = object_meta::validate_update(
                body.get("metadata"),
                current_in_version.get("metadata"),
            );
            let operation = match subresource {
                Subresource::Main | Subresource::Scale if options.dry_run => {
                    Operation::DryRunUpdate(&current.hub)
                }
                Subresource::Main | Subresource::Scale => Operation::Update(&current.hub),
                Subresource::Status => Operation::UpdateStatus(&current.hub),
            };
            let (admitted, warnings) = self.admit(
                version,
                body,
                options.field_validation,
                operation,
                name,
                meta_errors,
                warnings,
            )?;
            // What the client sent: `prepare_for_update` keeps the stored entries for an
            // empty list, which the field manager reads as a reset.
            let sent_managed = admitted.pointer("/metadata/managedFields").cloned();
            // The reset rules once more on the hub, so nothing is lost to a lossy version.
            let mut hub = match subresource {
                Subresource::Main | Subresource::Scale if status_in_version => {
                    let mut hub = admitted;
                    copy_status(&mut hub, &current.hub);
                    hub
                }
                Subresource::Main | Subresource::Scale => admitted,
                Subresource::Status => status_update(&current.hub, &admitted),
            };
            prepare_for_update(&mut hub, &current.hub, status_in_storage);
            if tracking == Tracking::Update {
                set_managed_fields(&mut hub, sent_managed.clone());
                self.strategy
                    .track_update(
                        Some(&current.hub),
                        &mut hub,
                        &field_request(version, options, subresource),
                    )
                    .map_err(|e| Failure::new(RegistryError::Internal(e.0), warnings.clone()))?;
            }
            let hub = without_resource_version(&hub);
            let warnings = self
                .validate(&write, Some(&hub), Some(&current.hub), warnings)
                .await?;
            let plan = if should_delete_during_update(&hub) {
                Plan::Remove(hub)
            } else if hub == without_resource_version(&current.hub) {
                Plan::Keep
            } else {
                Plan::Write(hub)
            };
            let committed = self
                .commit(&mut attempts, current, plan, options.dry_run, name)
                .await
                .map_err(|f| Failure::new(*f.error, warnings.clone()))?;
            if let Some(committed) = committed {
                break (committed, warnings);
            }
        };
        let object = self
            .encode(version, committed.hub, Some(committed.revision))
            .map_err(|error| Failure::new(error, warnings.clone()))?;
        Ok(Outcome { object, warnings })
    }
}

/// `checkName`: the object's name must be the URL's; its namespace, when set, too.
pub(super) fn check_identity(body: &mut Value, namespace: &str, name: &str) -> Result<(), Failure> {
    let body_name = meta_str(body, "name");
    if body_name != name {
        return Err(RegistryError::BadRequest(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        ))
        .into());
    }
    match meta_str(body, "namespace") {
        "" if !namespace.is_empty() => edit_metadata(body, |m| {
            m.insert("namespace".to_owned(), Value::String(namespace.to_owned()));
        }),
        ns if !namespace.is_empty() && ns != namespace => {
            return Err(RegistryError::BadRequest(format!(
                "the namespace of the object ({ns}) does not match the namespace on the URL ({namespace})"
            ))
            .into());
        }
        _ => {}
    }
    Ok(())
}
