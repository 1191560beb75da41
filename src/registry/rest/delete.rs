//! DELETE and DELETECOLLECTION: preconditions, the garbage-collection finalizers of the
//! propagation policy, `deletionTimestamp` while finalizers are pending, removal otherwise.

use serde_json::Value;

use crate::registry::admission::AdmissionOperation;
use crate::registry::delete_options::DeleteOptions;
use crate::registry::descriptor::GroupVersion;
use crate::registry::error::RegistryError;
use crate::registry::lifecycle::{self, DeletePlan, meta_str, plan_delete};
use crate::registry::list_options::ListOptions;

use super::admission::Write;
use super::write::{Current, Plan};
use super::{Failure, ResourceRest, Subresource};

/// What a delete did.
#[derive(Debug, Clone, PartialEq)]
pub enum DeleteOutcome {
    /// The object is gone (answered with a `Success` Status naming it).
    Removed { name: String, uid: String },
    /// Finalizers keep it; this is the object, now terminating, in the request's version.
    Terminating(Value),
}

impl ResourceRest {
    /// BeforeDelete's precondition checks (409 naming the kind, as kube does).
    fn check_preconditions(
        &self,
        name: &str,
        current: &Current,
        options: &DeleteOptions,
    ) -> Result<(), Failure> {
        let kind_conflict = |reason: String| {
            Failure::from(RegistryError::Conflict {
                group: self.descriptor().group.to_owned(),
                resource: self.descriptor().kind.to_owned(),
                name: name.to_owned(),
                reason,
            })
        };
        let uid = meta_str(&current.hub, "uid");
        if let Some(want) = &options.preconditions.uid
            && want != uid
        {
            return Err(kind_conflict(format!(
                "the UID in the precondition ({want}) does not match the UID in record ({uid}). \
                 The object might have been deleted and then recreated"
            )));
        }
        let rv = current.stored.revision.to_string();
        if let Some(want) = &options.preconditions.resource_version
            && *want != rv
        {
            return Err(kind_conflict(format!(
                "the ResourceVersion in the precondition ({want}) does not match the ResourceVersion \
                 in record ({rv}). The object might have been modified"
            )));
        }
        Ok(())
    }

    /// DELETE of one object.
    pub async fn delete(
        &self,
        version: GroupVersion,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<DeleteOutcome, Failure> {
        let now = lifecycle::now();
        let write = Write {
            version,
            subresource: Subresource::Main,
            operation: AdmissionOperation::Delete,
            namespace,
            name,
            requester: &options.requester,
            dry_run: options.dry_run,
            field_manager: "",
        };
        let mut attempts = self.attempts(namespace, name)?;
        let (committed, removed) = loop {
            let current = self.next_attempt(&mut attempts, name).await?;
            self.check_preconditions(name, &current, options)?;
            // Warnings of a delete's admission have no answer to travel in.
            if !options.past_admission {
                self.validate(&write, None, Some(&current.hub), Vec::new())
                    .await?;
            }
            let (plan, removed) = match plan_delete(&current.hub, &options.gc, &now) {
                DeletePlan::RemoveNow => (Plan::Remove(current.hub.clone()), true),
                DeletePlan::MarkDeleting(object) if object == current.hub => (Plan::Keep, false),
                DeletePlan::MarkDeleting(object) => (Plan::Write(object), false),
            };
            if let Some(committed) = self
                .commit(&mut attempts, current, plan, options.dry_run, name)
                .await?
            {
                break (committed, removed);
            }
        };
        if removed {
            return Ok(DeleteOutcome::Removed {
                name: name.to_owned(),
                uid: meta_str(&committed.hub, "uid").to_owned(),
            });
        }
        let object = self.encode(version, committed.hub, Some(committed.revision))?;
        Ok(DeleteOutcome::Terminating(object))
    }

    /// DELETECOLLECTION: deletes every object the selectors match, each with the same
    /// semantics as a single delete; answers the list of what was deleted (terminating
    /// objects as they are now).
    pub async fn delete_collection(
        &self,
        version: GroupVersion,
        namespace: Option<&str>,
        list: &ListOptions,
        options: &DeleteOptions,
    ) -> Result<super::ListResult, Failure> {
        let mut all = list.clone();
        all.limit = 0;
        all.continue_token.clear();
        let listed = self.list(version, namespace, &all).await?;
        let mut deleted = Vec::with_capacity(listed.items.len());
        for item in listed.items {
            let name = meta_str(&item, "name").to_owned();
            let item_namespace = meta_str(&item, "namespace").to_owned();
            match self.delete(version, &item_namespace, &name, options).await {
                Ok(DeleteOutcome::Removed { .. }) => deleted.push(item),
                Ok(DeleteOutcome::Terminating(object)) => deleted.push(object),
                // Deleted meanwhile by someone else: nothing left to do.
                Err(failure) if matches!(*failure.error, RegistryError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let mut result = super::ListResult {
            items: deleted,
            meta: listed.meta,
        };
        result.meta.continue_token.clear();
        result.meta.remaining_item_count = None;
        Ok(result)
    }
}
