//! The management cluster's CustomResourceDefinitions, watched so that the server serves the
//! kinds other providers define in its group-versions (`registry::cotenant`): an informer
//! feeds [`CoTenants`] in `serve` ([`start`]), the registry's own CRD stand-in in `dev`
//! ([`follow_registry`]); [`serve_from_crds`] makes each kind's REST operations from its CRD
//! (`registry::crd`, with CEL for its rules). A request for a kind that cannot be served
//! answers 503 with the reason instead of 404 ([`unserved`]). Discovery lists them
//! (`resources::ApiState`), readyz names them ([`CoTenantsCheck`]).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt, reflector, watcher};

use crate::api::validation::rules::RuleEngine;
use crate::registry::catalog::Catalog;
use crate::registry::cotenant::cleanup::{Cleanup, Pending};
use crate::registry::cotenant::records::CrdRecords;
use crate::registry::cotenant::{CoTenantKind, CoTenants, Serving};
use crate::registry::crd::CustomStrategy;
use crate::registry::crd::conversion::ConversionCaller;
use crate::registry::crd::delegated::DelegatedKind;
use crate::registry::list_options::ListOptions;
use crate::registry::rest::ResourceRest;

use super::admission::schema_rules::CelRules;
use super::error::{ApiError, GroupResource};
use super::health::HealthCheck;
use super::request_info::RequestInfo;

/// Keeps the informer running; dropping it stops the watch.
pub type CrdInformer = crate::task::TaskGuard;

/// How long a client waits before asking again while the CRDs are not listed yet.
const NOT_LISTED_RETRY_SECONDS: i32 = 1;

/// How often the cleanup looks at a set that has not changed: seldom when nothing waits,
/// soon when objects wait for their finalizers or a step failed.
const CLEANUP_IDLE: Duration = Duration::from_secs(60);
const CLEANUP_RETRY: Duration = Duration::from_secs(2);

/// Starts the informer of the cluster's CRDs, replacing `cotenants`' set after each change.
/// CRDs are read as JSON, so one this server cannot parse defines nothing instead of
/// failing the list.
pub fn start(client: kube::Client, cotenants: Arc<CoTenants>) -> CrdInformer {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        "customresourcedefinitions",
    );
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let writer = reflector::store::Writer::new(resource);
    let cache = writer.as_reader();
    let task = tokio::spawn(async move {
        let events = reflector::reflector(writer, watcher(api, watcher::Config::default()))
            .default_backoff();
        events
            .for_each(|event| {
                match event {
                    Ok(watcher::Event::InitDone | watcher::Event::Apply(_))
                    | Ok(watcher::Event::Delete(_)) => {
                        let crds: Vec<serde_json::Value> = cache
                            .state()
                            .iter()
                            .filter_map(|crd| serde_json::to_value(crd.as_ref()).ok())
                            .collect();
                        replace(&cotenants, &crds);
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "watching CustomResourceDefinitions"),
                }
                futures::future::ready(())
            })
            .await;
    });
    CrdInformer::new(task)
}

/// Replaces the co-tenant set with the kinds of `crds`, logging what came and went.
fn replace(cotenants: &CoTenants, crds: &[serde_json::Value]) {
    let (added, removed) = cotenants.replace(crds);
    for kind in &added {
        match kind.unserved_reason() {
            None if kind.retired => tracing::info!(
                crd = %kind.crd,
                "a co-tenant kind's CRD is gone: served until its objects are gone"
            ),
            None if kind.terminating => tracing::info!(
                crd = %kind.crd,
                "a co-tenant kind's CRD is being deleted: deleting its objects"
            ),
            None => tracing::info!(
                crd = %kind.crd,
                versions = ?kind.versions,
                "serving another provider's kind from its CRD"
            ),
            Some(reason) => tracing::warn!(
                crd = %kind.crd,
                versions = ?kind.versions,
                "another provider's kind in our group-versions: {reason}"
            ),
        }
    }
    for kind in removed
        .iter()
        .filter(|k| !added.iter().any(|a| a.crd == k.crd))
    {
        tracing::info!(crd = %kind.crd, "co-tenant kind gone");
    }
}

/// Deletes the objects of co-tenant kinds whose CRDs are deleted (`registry::cotenant::
/// cleanup`), at once after each change of the set and every few seconds while objects wait
/// for their finalizers, until the returned guard is dropped.
/// Between passes it holds no store (as [`serve_from_crds`], it may outlive the server by a
/// moment, and must not keep the store open).
pub fn start_cleanup(cotenants: Arc<CoTenants>, catalog: &Arc<Catalog>) -> CrdInformer {
    let catalog = Arc::downgrade(catalog);
    let task = tokio::spawn(async move {
        let mut changes = cotenants.subscribe();
        let mut cleanup = Cleanup::new(cotenants);
        loop {
            changes.borrow_and_update();
            let Some(records) = catalog
                .upgrade()
                .map(|c| CrdRecords::new(c.store().clone()))
            else {
                return;
            };
            let pause = match cleanup.pass(&records).await {
                Pending::Nothing => CLEANUP_IDLE,
                Pending::Again => CLEANUP_RETRY,
            };
            drop(records);
            // A change during the pass ends the wait at once.
            let _ = tokio::time::timeout(pause, changes.changed()).await;
        }
    });
    CrdInformer::new(task)
}

/// Follows the CRDs `crds` serves (`dev`'s stand-in, in process), replacing `cotenants`' set
/// after every change, until the returned guard is dropped. CRDs are few and change seldom:
/// each event lists them again.
pub fn follow_registry(crds: Arc<ResourceRest>, cotenants: Arc<CoTenants>) -> CrdInformer {
    let task = tokio::spawn(async move {
        let version = crds.descriptor().storage_version();
        loop {
            match crds.list(version, None, &ListOptions::default()).await {
                Ok(listed) => {
                    replace(&cotenants, &listed.items);
                    let options = ListOptions {
                        resource_version: listed.meta.resource_version,
                        ..ListOptions::default()
                    };
                    if let Ok(events) = crds.watch(version, None, &options).await {
                        futures::pin_mut!(events);
                        // The first event that changes anything ends this watch: relisted.
                        if events.next().await.is_some() {
                            continue;
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "listing CustomResourceDefinitions"),
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    CrdInformer::new(task)
}

/// Serves the co-tenant kinds of `cotenants` from their CRDs, over the store, cache and
/// admission of `catalog`, their `x-kubernetes-validations` run by CEL and their conversion
/// webhooks called through `conversion`. Kinds kube-apiserver keeps are served through it
/// when `through_kube` (`serve`, whose `ServerState::kube` asks it), else answered 503 with
/// the reason. The catalog is not kept alive by this: the CRD informer may outlive the
/// server by a moment, and must not keep its store open.
pub fn serve_from_crds(
    cotenants: &CoTenants,
    catalog: &Arc<Catalog>,
    conversion: Arc<dyn ConversionCaller>,
    through_kube: bool,
) {
    let rules: Arc<dyn RuleEngine> = Arc::new(CelRules);
    let catalog = Arc::downgrade(catalog);
    let build = move |kind: &CoTenantKind| -> Result<Serving, String> {
        if through_kube
            && let Some(delegated) = DelegatedKind::new(kind, &kind.spec, Arc::clone(&conversion))?
        {
            return Ok(Serving::Delegated(Arc::new(delegated)));
        }
        let strategy = CustomStrategy::new(
            kind,
            &kind.spec,
            Arc::clone(&rules),
            Arc::clone(&conversion),
        )?;
        catalog
            .upgrade()
            .ok_or("the server is stopping")?
            .rest_for(Arc::new(strategy))
            .map(|rest| Serving::Served(Arc::new(rest)))
            .map_err(|e| format!("its printer columns cannot be served: {e}"))
    };
    cotenants.serve_with(Box::new(move |kind| {
        build(kind).unwrap_or_else(Serving::Unserved)
    }));
}

/// The answer for a resource request no served kind takes, when it may be a co-tenant's: a
/// 503 naming the kind and the reason, or, before the CRDs are listed, a 503 to retry. `None`
/// when it is no co-tenant's (a plain 404).
pub fn unserved(cotenants: &CoTenants, info: &RequestInfo) -> Option<ApiError> {
    if !cotenants.holds(&info.api_group, &info.api_version) {
        return None;
    }
    let set = cotenants.current();
    if !set.listed {
        return Some(ApiError::service_unavailable_for(
            &info.api_group,
            &info.resource,
            format!(
                "the CustomResourceDefinitions of {} are not listed yet, and {:?} may be a kind \
                 another provider defines there",
                info.api_group, info.resource
            ),
            NOT_LISTED_RETRY_SECONDS,
        ));
    }
    let reason = set
        .find(&info.api_version, &info.resource)?
        .unserved_reason()?;
    Some(ApiError::service_unavailable_for(
        &info.api_group,
        &info.resource,
        reason,
        0,
    ))
}

/// The answer for discovery of `group` (one `version` of it, or all) before the CRDs are
/// listed: a 503 to retry, never a document that lacks the other providers' kinds, because
/// kube-aggregator keeps the document it fetched for a minute and retries an error at once
/// (`docs/rest.md`, "Discovery"). `None` once listed, or for a group not ours.
pub fn discovery_unlisted(
    cotenants: &CoTenants,
    group: &str,
    version: Option<&str>,
) -> Option<ApiError> {
    let ours = match version {
        Some(version) => cotenants.holds(group, version),
        None => cotenants.holds_group(group),
    };
    if !ours || cotenants.current().listed {
        return None;
    }
    Some(ApiError::service_unavailable_for(
        group,
        "",
        format!(
            "the CustomResourceDefinitions of {group} are not listed yet, and other providers \
             may define kinds in its versions"
        ),
        NOT_LISTED_RETRY_SECONDS,
    ))
}

/// kube's answer to a create of a kind whose CRD is being deleted (or, here, is gone while
/// its objects are deleted): 405, `create not allowed while custom resource definition is
/// terminating`. `None` for any other request.
pub fn refused_while_terminating(cotenants: &CoTenants, info: &RequestInfo) -> Option<ApiError> {
    if info.verb != "create" || !cotenants.holds(&info.api_group, &info.api_version) {
        return None;
    }
    let set = cotenants.current();
    let kind = set.find(&info.api_version, &info.resource)?;
    kind.terminating.then(|| {
        ApiError::method_not_supported(
            &GroupResource::new(&info.api_group, &info.resource),
            "create",
        )
        .with_message("create not allowed while custom resource definition is terminating")
    })
}

/// readyz's line for the co-tenants: `informer-sync-customresourcedefinitions` fails until
/// the CRDs are listed, then passes and names the co-tenant kinds and their state (they do
/// not make the server unready: our own kinds are served either way).
pub struct CoTenantsCheck(pub Arc<CoTenants>);

impl HealthCheck for CoTenantsCheck {
    fn name(&self) -> &str {
        "informer-sync-customresourcedefinitions"
    }

    fn check(&self) -> BoxFuture<'_, Result<(), String>> {
        let listed = self.0.current().listed;
        Box::pin(async move {
            listed
                .then_some(())
                .ok_or_else(|| "CustomResourceDefinitions not listed yet".to_owned())
        })
    }

    fn detail(&self) -> Option<String> {
        let set = self.0.current();
        if set.kinds.is_empty() {
            return None;
        }
        let kinds: Vec<String> = set
            .kinds
            .iter()
            .map(|k| {
                let state = match &k.serving {
                    Serving::Served(_) => "served".to_owned(),
                    Serving::Delegated(d) => {
                        format!("served through kube-apiserver's {}", d.kube_version())
                    }
                    Serving::Unserved(_) => "not served".to_owned(),
                };
                format!(
                    "{} in {} ({state})",
                    k.display_name(),
                    k.versions.join(", ")
                )
            })
            .collect();
        Some(format!("co-tenant kinds: {}", kinds.join("; ")))
    }
}
