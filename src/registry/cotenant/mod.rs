//! Co-tenant kinds: kinds other providers define by CustomResourceDefinition in the
//! group-versions this server holds. An APIService takes a whole group-version, so once ours
//! is registered kube-apiserver's CRD handler never sees a request for them; this server
//! serves them from their CRDs (`registry::crd`), beside its own kinds: from its own store,
//! or, for a kind kube-apiserver keeps (stored or also served outside our group-versions),
//! through kube-apiserver ([`Serving::Delegated`]). One it cannot serve faithfully is still
//! known and listed, and a request for it is a 503 naming the kind and the reason, never a
//! 404: a 404 tells the garbage collector and Cluster API that the objects are gone.
//!
//! [`CoTenants`] is the set, fed with the cluster's CRDs by whoever watches them (an informer
//! in `serve`); readers take a [`CoTenantSet`] snapshot and a generation that moves with
//! every change, so that derived documents (discovery) are rebuilt only when it moves. Each
//! kind's REST operations are made by the [`Builder`] the server installs, once per CRD
//! content: a CRD read again unchanged keeps its operations (and their watches).
//!
//! A kind whose CRD is deleted goes as kube's `customresourcecleanup` finalizer makes it go:
//! it terminates (no creates), its objects are deleted, and it stays served until the last
//! one is gone (finalizers pending keep it), so that its controller can finish them
//! ([`cleanup`], over the [`records`] that remember the CRDs across restarts).

pub mod cleanup;
pub mod records;

use std::collections::BTreeSet;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use serde_json::Value;

use super::crd::delegated::DelegatedKind;
use super::descriptor::ResourceDescriptor;
use super::rest::ResourceRest;

/// Decides from its CRD how a co-tenant kind is served.
pub type Builder = Box<dyn Fn(&CoTenantKind) -> Serving + Send + Sync>;

/// Whether a co-tenant kind is served, and by what.
#[derive(Clone)]
pub enum Serving {
    /// From this server's store.
    Served(Arc<ResourceRest>),
    /// Through kube-apiserver, which keeps its objects.
    Delegated(Arc<DelegatedKind>),
    /// Why not.
    Unserved(String),
}

impl fmt::Debug for Serving {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Serving::Served(_) => f.write_str("Served"),
            Serving::Delegated(kind) => f.debug_tuple("Delegated").field(kind).finish(),
            Serving::Unserved(reason) => f.debug_tuple("Unserved").field(reason).finish(),
        }
    }
}

/// One co-tenant kind, as its CRD names it.
#[derive(Debug, Clone)]
pub struct CoTenantKind {
    /// The CRD's name, `<plural>.<group>`.
    pub crd: String,
    pub group: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    /// Short names that name none of our kinds.
    pub short_names: Vec<String>,
    pub namespaced: bool,
    /// The CRD's served versions that lie in our group-versions, oldest first.
    pub versions: Vec<String>,
    /// The CRD's storage version (may lie outside our group-versions).
    pub storage_version: Option<String>,
    /// The CRD's `spec`, which defines the kind.
    pub spec: Arc<Value>,
    /// Its CRD is being deleted (or is gone, [`Self::retired`]): creates are refused and its
    /// objects are being deleted.
    pub terminating: bool,
    /// Its CRD is gone, and objects of it remain here: served from the CRD last seen until
    /// they are gone.
    pub retired: bool,
    /// Made from `spec`, so not part of what makes two kinds equal.
    pub serving: Serving,
}

impl PartialEq for CoTenantKind {
    fn eq(&self, other: &Self) -> bool {
        self.same_definition(other)
            && self.terminating == other.terminating
            && self.retired == other.retired
    }
}

impl Eq for CoTenantKind {}

impl CoTenantKind {
    /// Whether both are defined alike, so that one's REST operations serve the other.
    fn same_definition(&self, other: &Self) -> bool {
        self.crd == other.crd
            && self.group == other.group
            && self.kind == other.kind
            && self.plural == other.plural
            && self.singular == other.singular
            && self.short_names == other.short_names
            && self.namespaced == other.namespaced
            && self.versions == other.versions
            && self.storage_version == other.storage_version
            && self.spec == other.spec
    }

    /// This kind once its CRD is gone.
    fn retired(&self) -> Self {
        Self {
            terminating: true,
            retired: true,
            ..self.clone()
        }
    }

    /// `Kind (plural.group)`, as messages name it.
    pub fn display_name(&self) -> String {
        format!("{} ({})", self.kind, self.crd)
    }

    /// Its REST operations, when it is served from this server's store.
    pub fn served(&self) -> Option<&Arc<ResourceRest>> {
        match &self.serving {
            Serving::Served(rest) => Some(rest),
            Serving::Delegated(_) | Serving::Unserved(_) => None,
        }
    }

    /// How it is served through kube-apiserver, when kube-apiserver keeps its objects.
    pub fn delegated(&self) -> Option<&Arc<DelegatedKind>> {
        match &self.serving {
            Serving::Delegated(kind) => Some(kind),
            Serving::Served(_) | Serving::Unserved(_) => None,
        }
    }

    /// The kind as it is served in our versions, either way; `None` when it is not.
    pub fn served_descriptor(&self) -> Option<&ResourceDescriptor> {
        match &self.serving {
            Serving::Served(rest) => Some(rest.descriptor()),
            Serving::Delegated(kind) => Some(kind.descriptor()),
            Serving::Unserved(_) => None,
        }
    }

    /// Why a request for this kind is not served, for the 503 and readyz; `None` when it is.
    pub fn unserved_reason(&self) -> Option<String> {
        let Serving::Unserved(reason) = &self.serving else {
            return None;
        };
        Some(format!(
            "{} is defined by CustomResourceDefinition {:?} in a group-version this aggregated \
             server holds, and this server cannot serve it: {reason}; its objects are \
             unavailable, not gone (docs/deploy.md, \"Other providers in our group-versions\")",
            self.kind, self.crd
        ))
    }
}

/// Why a kind is unserved before the server has installed its [`Builder`].
const NO_BUILDER: &str = "the server is still starting";

/// The co-tenant kinds at one moment.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CoTenantSet {
    /// Whether the CRDs have been listed at all; before that, any unknown resource of our
    /// group-versions may be one.
    pub listed: bool,
    /// By CRD name.
    pub kinds: Vec<CoTenantKind>,
}

impl CoTenantSet {
    /// The kind served as `plural` in `version`, if a CRD defines one.
    pub fn find(&self, version: &str, plural: &str) -> Option<&CoTenantKind> {
        self.kinds
            .iter()
            .find(|k| k.plural == plural && k.versions.iter().any(|v| v == version))
    }

    /// The REST operations of the kind served as `plural` in `version`, if it is served.
    pub fn served(&self, version: &str, plural: &str) -> Option<Arc<ResourceRest>> {
        self.find(version, plural)?.served().cloned()
    }

    /// The kinds served in `version`.
    pub fn in_version<'a>(&'a self, version: &'a str) -> impl Iterator<Item = &'a CoTenantKind> {
        self.kinds
            .iter()
            .filter(move |k| k.versions.iter().any(|v| v == version))
    }
}

/// What this server holds: a group, its versions, and the names its own kinds take.
#[derive(Debug, Clone)]
struct Holdings {
    group: String,
    versions: Vec<String>,
    plurals: Vec<String>,
    kinds: Vec<String>,
    short_names: Vec<String>,
}

/// The co-tenant kinds of one group, kept current by a CRD watch.
pub struct CoTenants {
    holdings: Holdings,
    state: RwLock<State>,
    generation: AtomicU64,
    /// Told of every change, for those who wait for one.
    changes: tokio::sync::watch::Sender<()>,
    builder: OnceLock<Builder>,
}

/// What the last listing of the CRDs left.
#[derive(Default)]
struct State {
    set: Arc<CoTenantSet>,
    /// The names of every CRD listed (a co-tenant kind's CRD may exist and no longer define a
    /// co-tenant kind: its objects are then unreachable, not deleted).
    present: BTreeSet<String>,
}

impl CoTenants {
    /// The co-tenants of `group` as the kinds of `ours` serve it: its versions, and its
    /// kinds' names, which a CRD of the same names (our own shadow CRDs, upstream CAPMOX's)
    /// does not take.
    pub fn for_group<'a>(
        group: &str,
        ours: impl IntoIterator<Item = &'a ResourceDescriptor>,
    ) -> Self {
        let mut holdings = Holdings {
            group: group.to_owned(),
            versions: Vec::new(),
            plurals: Vec::new(),
            kinds: Vec::new(),
            short_names: Vec::new(),
        };
        for d in ours {
            if d.group != group {
                continue;
            }
            for v in &d.versions {
                if !holdings.versions.iter().any(|h| h == v.version.version) {
                    holdings.versions.push(v.version.version.to_owned());
                }
            }
            holdings.plurals.push(d.plural.to_owned());
            holdings.kinds.push(d.kind.to_owned());
            holdings
                .short_names
                .extend(d.short_names.iter().map(|s| (*s).to_owned()));
        }
        Self {
            holdings,
            state: RwLock::new(State::default()),
            generation: AtomicU64::new(0),
            changes: tokio::sync::watch::Sender::new(()),
            builder: OnceLock::new(),
        }
    }

    /// Serves the co-tenant kinds with REST operations `builder` makes, those known already
    /// included. Only the first builder installed is used.
    pub fn serve_with(&self, builder: Builder) {
        if self.builder.set(builder).is_err() {
            return;
        }
        let Ok(mut state) = self.state.write() else {
            return;
        };
        let mut next = CoTenantSet::clone(&state.set);
        for kind in &mut next.kinds {
            kind.serving = self.build(kind);
        }
        self.publish(&mut state, next);
    }

    fn publish(&self, state: &mut State, next: CoTenantSet) {
        state.set = Arc::new(next);
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.changes.send_replace(());
    }

    /// Sees every change of the set from now on.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<()> {
        self.changes.subscribe()
    }

    fn build(&self, kind: &CoTenantKind) -> Serving {
        match self.builder.get() {
            Some(builder) => builder(kind),
            None => Serving::Unserved(NO_BUILDER.to_owned()),
        }
    }

    /// Whether `version` of `group` is a group-version this server holds, where an unknown
    /// resource may be a co-tenant's.
    pub fn holds(&self, group: &str, version: &str) -> bool {
        group == self.holdings.group && self.holdings.versions.iter().any(|v| v == version)
    }

    /// Whether `group` is the group whose versions this server holds.
    pub fn holds_group(&self, group: &str) -> bool {
        group == self.holdings.group
    }

    /// Returns once the CRDs have been listed (at once if they have been).
    pub async fn listed(&self) {
        let mut changes = self.subscribe();
        while !self.current().listed {
            if changes.changed().await.is_err() {
                return;
            }
        }
    }

    /// The set now.
    pub fn current(&self) -> Arc<CoTenantSet> {
        self.state
            .read()
            .map(|state| Arc::clone(&state.set))
            .unwrap_or_default()
    }

    /// Moves with every change of the set.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Replaces the set with the co-tenant kinds of `crds` (the cluster's CRDs, as JSON),
    /// marking it listed. A served kind whose CRD is no longer listed stays, retired, until
    /// [`Self::forget`]. Returns the kinds that were added and removed.
    pub fn replace<'a>(
        &self,
        crds: impl IntoIterator<Item = &'a Value>,
    ) -> (Vec<CoTenantKind>, Vec<CoTenantKind>) {
        let mut present = BTreeSet::new();
        let mut kinds: Vec<CoTenantKind> = crds
            .into_iter()
            .inspect(|crd| {
                if let Some(name) = crd_name(crd) {
                    present.insert(name.to_owned());
                }
            })
            .filter_map(|crd| self.kind_of(crd))
            .collect();
        let Ok(mut state) = self.state.write() else {
            return (Vec::new(), Vec::new());
        };
        let current = Arc::clone(&state.set);
        for kind in &mut kinds {
            // A kind read again unchanged keeps what serves it (and its watches).
            kind.serving = match current.kinds.iter().find(|k| k.same_definition(kind)) {
                Some(known) => known.serving.clone(),
                None => self.build(kind),
            };
        }
        kinds.extend(
            current
                .kinds
                .iter()
                .filter(|k| k.served().is_some() && !present.contains(&k.crd))
                .map(CoTenantKind::retired),
        );
        kinds.sort_by(|a, b| a.crd.cmp(&b.crd));
        state.present = present;
        let next = CoTenantSet {
            listed: true,
            kinds,
        };
        if *current == next {
            return (Vec::new(), Vec::new());
        }
        let added = next
            .kinds
            .iter()
            .filter(|k| !current.kinds.contains(k))
            .cloned()
            .collect();
        let removed = current
            .kinds
            .iter()
            .filter(|k| !next.kinds.contains(k))
            .cloned()
            .collect();
        self.publish(&mut state, next);
        (added, removed)
    }

    /// Retires the kinds of `crds` (CRDs this server served once, as [`records`] kept them)
    /// that are no longer listed, so that their objects are deleted as if this server had
    /// seen their CRDs go. Answers the names of the CRDs that still exist but define no
    /// co-tenant kind any more, whose records are obsolete. Before the CRDs are listed, does
    /// nothing.
    pub fn retire_absent<'a>(&self, crds: impl IntoIterator<Item = &'a Value>) -> Vec<String> {
        let Ok(mut state) = self.state.write() else {
            return Vec::new();
        };
        if !state.set.listed {
            return Vec::new();
        }
        let mut next = CoTenantSet::clone(&state.set);
        let mut obsolete = Vec::new();
        for crd in crds {
            let Some(name) = crd_name(crd) else { continue };
            if next.kinds.iter().any(|k| k.crd == name) {
                continue;
            }
            if state.present.contains(name) {
                obsolete.push(name.to_owned());
                continue;
            }
            if let Some(mut kind) = self.kind_of(crd).map(|k| k.retired()) {
                kind.serving = self.build(&kind);
                if kind.served().is_some() {
                    next.kinds.push(kind);
                }
            }
        }
        if next != *state.set {
            next.kinds.sort_by(|a, b| a.crd.cmp(&b.crd));
            self.publish(&mut state, next);
        }
        obsolete
    }

    /// Forgets the retired kind of CRD `crd`, once its objects are gone.
    pub fn forget(&self, crd: &str) {
        let Ok(mut state) = self.state.write() else {
            return;
        };
        let mut next = CoTenantSet::clone(&state.set);
        next.kinds.retain(|k| !(k.retired && k.crd == crd));
        if next != *state.set {
            self.publish(&mut state, next);
        }
    }

    /// The co-tenant kind a CRD defines, if it defines one in our group-versions that is not
    /// ours. Read leniently: a CRD missing a field kube requires defines nothing.
    fn kind_of(&self, crd: &Value) -> Option<CoTenantKind> {
        let h = &self.holdings;
        let spec = crd.get("spec")?;
        if spec.get("group")?.as_str()? != h.group {
            return None;
        }
        let names = spec.get("names")?;
        let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
        let plural = text(names, "plural")?;
        let kind = text(names, "kind")?;
        if h.plurals.contains(&plural) || h.kinds.contains(&kind) {
            return None;
        }
        let declared = spec.get("versions")?.as_array()?;
        let versions: Vec<String> = h
            .versions
            .iter()
            .filter(|ours| {
                declared.iter().any(|v| {
                    v.get("served").and_then(Value::as_bool) == Some(true)
                        && v.get("name").and_then(Value::as_str) == Some(ours.as_str())
                })
            })
            .cloned()
            .collect();
        if versions.is_empty() {
            return None;
        }
        let storage_version = declared
            .iter()
            .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
            .and_then(|v| text(v, "name"));
        let short_names = names
            .get("shortNames")
            .and_then(Value::as_array)
            .map(|s| {
                s.iter()
                    .filter_map(Value::as_str)
                    .filter(|s| !h.short_names.iter().any(|ours| ours == s))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        Some(CoTenantKind {
            // kube names a CRD `<plural>.<group>`; the name is what says whether it still exists.
            crd: crd_name(crd).map_or_else(|| format!("{plural}.{}", h.group), str::to_owned),
            group: h.group.clone(),
            singular: text(names, "singular").unwrap_or_else(|| kind.to_lowercase()),
            kind,
            plural,
            short_names,
            namespaced: spec.get("scope").and_then(Value::as_str) != Some("Cluster"),
            versions,
            storage_version,
            spec: Arc::new(spec.clone()),
            terminating: crd
                .pointer("/metadata/deletionTimestamp")
                .is_some_and(|t| !t.is_null()),
            retired: false,
            serving: Serving::Unserved(NO_BUILDER.to_owned()),
        })
    }
}

/// A CRD's `metadata.name`.
fn crd_name(crd: &Value) -> Option<&str> {
    crd.pointer("/metadata/name").and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn holdings() -> CoTenants {
        CoTenants {
            holdings: Holdings {
                group: "infrastructure.cluster.x-k8s.io".into(),
                versions: vec!["v1alpha1".into(), "v1alpha2".into()],
                plurals: vec!["proxmoxmachines".into()],
                kinds: vec!["ProxmoxMachine".into()],
                short_names: vec!["moxm".into()],
            },
            state: RwLock::new(State::default()),
            generation: AtomicU64::new(0),
            changes: tokio::sync::watch::Sender::new(()),
            builder: OnceLock::new(),
        }
    }

    fn crd(group: &str, plural: &str, kind: &str, versions: Value) -> Value {
        json!({
            "metadata": {"name": format!("{plural}.{group}")},
            "spec": {
                "group": group,
                "names": {"plural": plural, "kind": kind, "shortNames": ["oss", "moxm"]},
                "scope": "Namespaced",
                "versions": versions,
            }
        })
    }

    #[test]
    fn a_crd_in_our_group_versions_is_a_co_tenant_and_ours_are_not() {
        let cotenants = holdings();
        let crds = [
            // CAPO's OpenStackServer: v1alpha1 only.
            crd(
                "infrastructure.cluster.x-k8s.io",
                "openstackservers",
                "OpenStackServer",
                json!([{"name": "v1alpha1", "served": true, "storage": true}]),
            ),
            // CAPZ's ASO kinds: served in v1alpha1 beside storage v1beta1.
            crd(
                "infrastructure.cluster.x-k8s.io",
                "azureasomanagedclusters",
                "AzureASOManagedCluster",
                json!([
                    {"name": "v1alpha1", "served": true, "storage": false},
                    {"name": "v1beta1", "served": true, "storage": true},
                ]),
            ),
            // Upstream CAPMOX's (or our shadow) CRD for our own kind.
            crd(
                "infrastructure.cluster.x-k8s.io",
                "proxmoxmachines",
                "ProxmoxMachine",
                json!([{"name": "v1alpha2", "served": true, "storage": true}]),
            ),
            // Only in v1beta1: not in our group-versions.
            crd(
                "infrastructure.cluster.x-k8s.io",
                "openstackclusters",
                "OpenStackCluster",
                json!([{"name": "v1beta1", "served": true, "storage": true}]),
            ),
            // Declared in v1alpha2 but not served.
            crd(
                "infrastructure.cluster.x-k8s.io",
                "oldthings",
                "OldThing",
                json!([{"name": "v1alpha2", "served": false, "storage": true}]),
            ),
            // Another group.
            crd(
                "cluster.x-k8s.io",
                "clusters",
                "Cluster",
                json!([{"name": "v1alpha1", "served": true, "storage": true}]),
            ),
            json!({"spec": "not a CRD"}),
        ];
        let (added, removed) = cotenants.replace(crds.iter());
        assert!(removed.is_empty());
        let names: Vec<&str> = added.iter().map(|k| k.kind.as_str()).collect();
        assert_eq!(names, ["AzureASOManagedCluster", "OpenStackServer"]);
        let set = cotenants.current();
        assert!(set.listed);
        let server = set.find("v1alpha1", "openstackservers").unwrap();
        assert_eq!(server.short_names, ["oss"], "moxm is ours");
        assert!(server.namespaced);
        assert_eq!(server.storage_version.as_deref(), Some("v1alpha1"));
        assert!(set.find("v1alpha2", "openstackservers").is_none());
        let aso = set.find("v1alpha1", "azureasomanagedclusters").unwrap();
        assert_eq!(aso.versions, ["v1alpha1"]);
        assert_eq!(aso.storage_version.as_deref(), Some("v1beta1"));
        assert_eq!(set.in_version("v1alpha2").count(), 0);
    }

    #[test]
    fn a_record_of_a_crd_that_still_exists_outside_our_versions_is_obsolete_not_retired() {
        let cotenants = holdings();
        let group = "infrastructure.cluster.x-k8s.io";
        let servers = |version: &str| {
            crd(
                group,
                "openstackservers",
                "OpenStackServer",
                json!([{"name": version, "served": true, "storage": true}]),
            )
        };
        let recorded = [servers("v1alpha1")];
        assert!(
            cotenants.retire_absent(recorded.iter()).is_empty(),
            "nothing before the CRDs are listed"
        );
        // Its provider moved it to v1beta1: kube keeps its objects, so must we.
        cotenants.replace([&servers("v1beta1")]);
        let generation = cotenants.generation();
        assert_eq!(
            cotenants.retire_absent(recorded.iter()),
            ["openstackservers.infrastructure.cluster.x-k8s.io"]
        );
        assert!(cotenants.current().kinds.is_empty());
        assert_eq!(cotenants.generation(), generation);
    }

    #[test]
    fn the_generation_moves_only_when_the_set_changes() {
        let cotenants = holdings();
        let server = crd(
            "infrastructure.cluster.x-k8s.io",
            "openstackservers",
            "OpenStackServer",
            json!([{"name": "v1alpha1", "served": true, "storage": true}]),
        );
        assert_eq!(cotenants.generation(), 0);
        assert!(!cotenants.current().listed);
        cotenants.replace([]);
        assert_eq!(cotenants.generation(), 1, "listed, even if empty");
        cotenants.replace([&server]);
        cotenants.replace([&server]);
        assert_eq!(cotenants.generation(), 2);
        let (added, removed) = cotenants.replace([]);
        assert!(added.is_empty());
        assert_eq!(removed[0].plural, "openstackservers");
        assert_eq!(cotenants.generation(), 3);
    }

    #[tokio::test]
    async fn listed_waits_for_the_first_listing() {
        let cotenants = Arc::new(holdings());
        let waiting = tokio::spawn({
            let cotenants = Arc::clone(&cotenants);
            async move { cotenants.listed().await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "nothing listed yet");
        cotenants.replace([]);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("listed once the CRDs are")
            .expect("joins");
        tokio::time::timeout(std::time::Duration::from_secs(5), cotenants.listed())
            .await
            .expect("at once when already listed");
    }
}
