//! `migrate import`: objects exported from upstream CAPMOX's CRDs (`kubectl get
//! proxmoxclusters,proxmoxclustertemplates,proxmoxmachines,proxmoxmachinetemplates -A -o
//! json`, or YAML documents) written into our store as they were, through the registry's
//! restore (`ResourceRest::restore`). Every object is admitted in a dry run first, so a
//! refused one leaves the store untouched; a second run skips what is already there.
//!
//! Objects of other providers' kinds in our group-versions (co-tenants, which the server then
//! serves from their CRDs) are imported the same way, through the REST the server makes from
//! their CRD: the CustomResourceDefinitions in the file define them, and are not imported.
//! The procedure around it: docs/migration.md.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use capmox_storage::Store;
use serde_json::Value;

use crate::controller::machine::phase::Phase;
use crate::controller::names::VM_PROVISIONED;
use crate::registry::catalog::{self, Catalog};
use crate::registry::cotenant::{CoTenantSet, CoTenants};
use crate::registry::descriptor::GroupVersion;
use crate::registry::object_store::NoObserver;
use crate::registry::rest::{ResourceRest, RestConfig, Restored};
use crate::server::admission::Caller;
use crate::server::serve::StorageOptions;
use crate::server::{assembly, cotenants};

/// Objects written and skipped, by kind.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Kind → (written, already there).
    pub kinds: BTreeMap<String, (usize, usize)>,
    /// Whether nothing was written (`--dry-run`).
    pub dry_run: bool,
}

impl fmt::Display for ImportReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verb = if self.dry_run {
            "would restore"
        } else {
            "restored"
        };
        for (kind, (written, there)) in &self.kinds {
            writeln!(f, "{kind}: {verb} {written}, {there} already there")?;
        }
        Ok(())
    }
}

/// Imports the objects of `file` (`-`: standard input) into the store of `storage`.
pub async fn import(
    file: &Path,
    storage: &StorageOptions,
    dry_run: bool,
) -> anyhow::Result<ImportReport> {
    let (crds, objects): (Vec<Value>, Vec<Value>) = read_objects(file)?
        .into_iter()
        .partition(|o| o["kind"] == "CustomResourceDefinition");
    let store = assembly::open_store(&storage.config()?).await?;
    let result = restore_all(&store, &crds, objects, dry_run).await;
    // Released only once the catalog's clones are gone: restore_all has dropped them.
    store.close().await;
    result
}

/// Checks every object, then (unless `dry_run`) writes them.
async fn restore_all(
    store: &Store,
    crds: &[Value],
    objects: Vec<Value>,
    dry_run: bool,
) -> anyhow::Result<ImportReport> {
    let catalog = Arc::new(Catalog::new(
        catalog::strategies(),
        store,
        Arc::new(NoObserver),
        &RestConfig::default(),
        Arc::new(crate::registry::admission::NoAdmission),
    )?);
    let cotenants = CoTenants::for_group(
        crate::api::GROUP,
        catalog.resources().iter().map(|r| r.descriptor()),
    );
    // The import is read at each kind's storage version: no conversion webhook is called.
    // Kinds kube-apiserver keeps are not imported: their objects stay where they are.
    let conversion = Arc::new(Caller::without_cluster());
    cotenants::serve_from_crds(&cotenants, &catalog, conversion, false);
    cotenants.replace(crds);
    let cotenants = cotenants.current();
    let targets = objects
        .into_iter()
        .map(resume_from_upstream_phase)
        .map(|object| target(&catalog, &cotenants, object))
        .collect::<anyhow::Result<Vec<_>>>()?;
    // Everything is checked before anything is written; a dry run stops at the check.
    let mut checked = Vec::with_capacity(targets.len());
    let mut refused = Vec::new();
    for (rest, version, object) in &targets {
        match rest.restore(*version, object.clone(), true).await {
            Ok(outcome) => checked.push(outcome),
            Err(failure) => refused.push(format!("{}: {}", describe(object), failure.error)),
        }
    }
    if !refused.is_empty() {
        bail!(
            "{} of {} objects cannot be restored, nothing was written:\n  {}",
            refused.len(),
            targets.len(),
            refused.join("\n  ")
        );
    }
    let mut report = ImportReport {
        dry_run,
        ..ImportReport::default()
    };
    for ((rest, version, object), checked) in targets.into_iter().zip(checked) {
        let outcome = if dry_run {
            checked
        } else {
            let what = describe(&object);
            rest.restore(version, object, false)
                .await
                .map_err(|failure| anyhow::anyhow!("{what}: {}", failure.error))?
        };
        let counts = report
            .kinds
            .entry(rest.descriptor().kind.to_owned())
            .or_default();
        match outcome {
            Restored::Written => counts.0 += 1,
            Restored::AlreadyThere => counts.1 += 1,
        }
    }
    Ok(report)
}

/// Upstream reports a machine `Provisioned` with its NoCloud seed still attached; ours
/// means by it that the seed is gone. Such a machine resumes one step earlier, in
/// `WaitingForBootstrapReady` (also provisioned), where our controller detaches and deletes
/// the seed once the node has joined, as it does for its own machines.
fn resume_from_upstream_phase(mut object: Value) -> Value {
    if object["kind"] != "ProxmoxMachine" {
        return object;
    }
    for list in [
        "/status/conditions",
        "/status/deprecated/v1beta1/conditions",
    ] {
        let Some(Value::Array(conditions)) = object.pointer_mut(list) else {
            continue;
        };
        for condition in conditions {
            if condition["type"] == VM_PROVISIONED
                && condition["reason"] == Phase::Provisioned.reason()
            {
                condition["reason"] = Phase::WaitingForBootstrapReady.reason().into();
            }
        }
    }
    object
}

/// The kind's REST (ours, or a co-tenant's from its CRD) and the object's version, for one
/// exported object.
fn target(
    catalog: &Catalog,
    cotenants: &CoTenantSet,
    object: Value,
) -> anyhow::Result<(Arc<ResourceRest>, GroupVersion, Value)> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let is_it =
        |r: &&Arc<ResourceRest>| r.descriptor().group == group && r.descriptor().kind == kind;
    let cotenant = || -> anyhow::Result<&Arc<ResourceRest>> {
        let defined = cotenants
            .in_version(version)
            .find(|k| k.group == group && k.kind == kind)
            .with_context(|| format!("{}: not a kind this server serves, and no CustomResourceDefinition in the file defines it", describe(&object)))?;
        defined.served().with_context(|| {
            format!(
                "{}: {}",
                describe(&object),
                defined.unserved_reason().unwrap_or_default()
            )
        })
    };
    let rest = match catalog.resources().iter().find(is_it) {
        Some(rest) => rest,
        None => cotenant()?,
    };
    let version = rest
        .descriptor()
        .version_named(version)
        .with_context(|| format!("{}: version {version:?} is not served", describe(&object)))?;
    Ok((Arc::clone(rest), version, object))
}

/// `ProxmoxMachine ns/name`, for messages.
fn describe(object: &Value) -> String {
    let meta = &object["metadata"];
    format!(
        "{} {}/{}",
        object["kind"].as_str().unwrap_or("?"),
        meta["namespace"].as_str().unwrap_or_default(),
        meta["name"].as_str().unwrap_or_default()
    )
}

/// The objects of a List (`items`) or of a stream of YAML/JSON documents.
fn read_objects(file: &Path) -> anyhow::Result<Vec<Value>> {
    let mut text = String::new();
    if file == Path::new("-") {
        std::io::stdin().read_to_string(&mut text)?;
    } else {
        text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    }
    let documents: Vec<Value> = serde_saphyr::from_multiple(&text)
        .with_context(|| format!("{} is neither JSON nor YAML documents", file.display()))?;
    Ok(documents
        .into_iter()
        .flat_map(|doc| match doc.get("items") {
            Some(Value::Array(items)) => items.clone(),
            _ if doc.is_null() => Vec::new(),
            _ => vec![doc],
        })
        .collect())
}
