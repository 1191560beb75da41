//! The field manager every write goes through (kube-apiserver's
//! `FieldManager` and its layers): it reads `managedFields`, records the
//! write's manager, and writes `managedFields` back. Pure: it neither
//! reads nor stores objects, so dry runs need nothing special.

use jiff::Timestamp;
use serde_json::{Map, Value};

use super::conflicts::Conflicts;
use super::error::ApplyError;
use super::housekeeping::{MAX_UPDATE_MANAGERS, cap_update_managers, strip_meta};
use super::last_applied::{self, KUBECTL};
use super::managed::{self, Managed, ManagerId, Operation, Sent};
use super::typed::validate_config;
use super::updater::{Subresource, Updater};
use super::versions::KindVersions;
use crate::api::Version;

/// The Update manager that takes ownership of an object's existing fields
/// on its first apply, when no one owned anything yet.
pub const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// The manager recorded when a request names none.
/// The manager of a write that names none.
pub const UNKNOWN_MANAGER: &str = "unknown";

/// One write, as the field manager sees it.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// The version of the request: objects passed in and out are in it,
    /// and the fields it owns are recorded in it.
    pub version: Version,
    /// The manager (see [`super::manager_or_user_agent`]).
    pub manager: &'a str,
    /// The endpoint.
    pub subresource: Subresource,
    /// The time recorded when the manager's fields change.
    pub now: Timestamp,
}

impl Request<'_> {
    fn manager_id(&self, manager: &str, operation: Operation) -> ManagerId {
        let manager = if manager.is_empty() {
            UNKNOWN_MANAGER
        } else {
            manager
        };
        ManagerId::new(
            manager,
            operation,
            self.version.api_version(),
            self.subresource.as_str(),
        )
    }
}

/// The field manager of one kind.
pub struct FieldManager<'a> {
    versions: &'a dyn KindVersions,
}

/// Go's `schema.ParseGroupVersion` then `GroupVersionKind.String()`.
fn gvk_string(api_version: &str, kind: &str) -> String {
    let (group, version) = match api_version.split('/').collect::<Vec<_>>().as_slice() {
        [version] => ("", *version),
        [group, version] => (*group, *version),
        _ => ("", ""),
    };
    format!("{group}/{version}, Kind={kind}")
}

impl<'a> FieldManager<'a> {
    /// The field manager of the kind `versions` describes.
    pub fn new(versions: &'a dyn KindVersions) -> Self {
        FieldManager { versions }
    }

    fn updater(&self, subresource: Subresource) -> Updater<'a> {
        Updater {
            versions: self.versions,
            subresource,
        }
    }

    /// Records a create (`live` is `None`), update or patch: `new` is the
    /// object about to be stored, in the request's version, with the
    /// `managedFields` the client sent (if any). Returns it with
    /// `managedFields` set.
    ///
    /// Sent `managedFields` replace the stored ones when they can be read
    /// and are not empty (`[]` and `[{}]` clear them); otherwise the stored
    /// ones are kept. Through a subresource they are ignored. An object
    /// stored without managed fields stays untracked until applied to. Like
    /// kube-apiserver, this never fails the write: on an internal error the
    /// stored `managedFields` are kept.
    pub fn update(&self, live: Option<Value>, mut new: Value, request: &Request) -> Value {
        let (old, stored_entries) = match live {
            Some(mut live) => {
                let entries = managed::take_from(&mut live);
                (Some(live), entries)
            }
            None => (None, None),
        };
        let stored = || {
            stored_entries
                .as_ref()
                .and_then(|e| Managed::decode(e).ok())
                .unwrap_or_default()
        };
        let managed = match (request.subresource, managed::sent(&new)) {
            (Subresource::Status | Subresource::Scale, _) | (Subresource::Main, Sent::Absent) => {
                stored()
            }
            (Subresource::Main, Sent::Reset) => Managed::default(),
            (Subresource::Main, Sent::Entries(entries)) => match Managed::decode(entries) {
                Ok(sent) if !sent.is_empty() => sent,
                _ => stored(),
            },
        };
        managed::remove_from(&mut new);
        if managed.is_empty() && old.is_some() {
            return new;
        }
        let old = old.unwrap_or_else(|| Value::Object(Map::new()));
        match self.record_update(&old, &new, managed, request, request.manager) {
            Ok(managed) => managed::set_on(&mut new, &managed),
            Err(error) => {
                tracing::error!(%error, "failed to update managedFields; keeping the stored ones");
                if let (Some(stored), Some(Value::Object(meta))) =
                    (stored_entries, new.get_mut("metadata"))
                {
                    meta.insert("managedFields".into(), stored);
                }
            }
        }
        new
    }

    /// The Update of `manager` from `old` to `new`: it takes what changed,
    /// its entry's time changes if it took anything, and the oldest
    /// updaters beyond ten are merged.
    fn record_update(
        &self,
        old: &Value,
        new: &Value,
        mut managed: Managed,
        request: &Request,
        manager: &str,
    ) -> Result<Managed, ApplyError> {
        let version = request.version;
        let current =
            ManagerId::current_operation(version.api_version(), request.subresource.as_str());
        self.updater(request.subresource).update(
            old,
            new,
            version,
            &mut managed.fields,
            &current,
        )?;
        strip_meta(&mut managed.fields, &current);
        if let Some(mut taken) = managed.fields.remove(&current) {
            let id = request.manager_id(manager, Operation::Update);
            if let Some(previous) = managed.fields.get(&id) {
                taken.set.union_with(&previous.set);
            }
            managed.fields.insert(id.clone(), taken);
            managed.times.insert(id, request.now);
        }
        cap_update_managers(&mut managed, MAX_UPDATE_MANAGERS);
        Ok(managed)
    }

    /// Server-side apply of `config` (the decoded body, in the request's
    /// version, unknown fields already handled per `fieldValidation`) onto
    /// `live` (`None`: the object is created). Returns the object to store,
    /// with `managedFields`, in the request's version; it still needs
    /// defaulting, the endpoint's field resets and validation like any
    /// write. Unchanged fields are shared with their other owners; changed
    /// fields owned by others are conflicts unless `force`.
    pub fn apply(
        &self,
        live: Option<Value>,
        config: &Value,
        request: &Request,
        force: bool,
    ) -> Result<Value, ApplyError> {
        self.check_type(config, request.version)?;
        let keyed = self.versions.default_keys(config, request.version);
        let sent = config;
        let config = keyed.as_ref().unwrap_or(config);
        let mut live = live.unwrap_or_else(|| Value::Object(Map::new()));
        let managed = managed::take_from(&mut live)
            .and_then(|entries| Managed::decode(&entries).ok())
            .unwrap_or_default();
        let (new, managed) =
            match self.apply_tracked(&live, config, managed.clone(), request, force) {
                Err(ApplyError::Conflicts(conflicts)) if request.manager == KUBECTL => {
                    let ty = self.updater(request.subresource).ty(request.version);
                    let Some(allowed) =
                        last_applied::fields_kubectl_may_take(&live, request.version, ty)
                    else {
                        return Err(ApplyError::Conflicts(conflicts));
                    };
                    let blocking: Vec<_> = conflicts
                        .0
                        .into_iter()
                        .filter(|c| !allowed.has(&c.path.0))
                        .collect();
                    if !blocking.is_empty() {
                        return Err(ApplyError::Conflicts(Conflicts::new(blocking)));
                    }
                    self.apply_tracked(&live, config, managed, request, true)?
                }
                other => other?,
            };
        let mut object = new.unwrap_or(live);
        if request.manager == KUBECTL {
            last_applied::refresh(&mut object, sent);
        }
        managed::set_on(&mut object, &managed);
        Ok(object)
    }

    /// The configuration must be of the request's kind and version.
    fn check_type(&self, config: &Value, version: Version) -> Result<(), ApplyError> {
        let field = |name: &str| config.get(name).and_then(Value::as_str).unwrap_or_default();
        let (api_version, kind) = (field("apiVersion"), field("kind"));
        if api_version == version.api_version() && kind == self.versions.kind_name() {
            return Ok(());
        }
        Err(ApplyError::BadRequest(format!(
            "invalid object type: {}",
            gvk_string(api_version, kind)
        )))
    }

    /// The apply, after a first apply has given the existing fields to
    /// `before-first-apply`.
    fn apply_tracked(
        &self,
        live: &Value,
        config: &Value,
        mut managed: Managed,
        request: &Request,
        force: bool,
    ) -> Result<(Option<Value>, Managed), ApplyError> {
        if managed.is_empty() {
            let nothing = Value::Object(Map::new());
            managed = self.record_update(&nothing, live, managed, request, BEFORE_FIRST_APPLY)?;
        }
        if config
            .pointer("/metadata/managedFields")
            .is_some_and(Value::is_array)
        {
            return Err(ApplyError::BadRequest(
                "metadata.managedFields must be nil".to_owned(),
            ));
        }
        let updater = self.updater(request.subresource);
        let errors = validate_config(config, updater.ty(request.version));
        if !errors.is_empty() {
            return Err(ApplyError::Invalid(errors));
        }
        let applier = request.manager_id(request.manager, Operation::Apply);
        let new = updater.apply(
            live,
            request.version,
            config,
            &mut managed.fields,
            &applier,
            force,
        )?;
        strip_meta(&mut managed.fields, &applier);
        if new.is_some() {
            managed.times.insert(applier, request.now);
        }
        Ok((new, managed))
    }
}
