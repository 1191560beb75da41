//! A co-tenant kind whose objects kube-apiserver keeps ([`Home::Kube`]): its CRD is stored or
//! also served in a version outside our group-versions, which kube-apiserver serves from its
//! own storage. This server serves our versions of it by asking kube-apiserver in that
//! version, so that both paths see one object (one uid, one resourceVersion sequence).
//!
//! What is this registry's part: the kind as discovery and Tables show it in our versions,
//! and the conversion between our versions and kube's, as kube's CRD handler converts (the
//! CRD's webhook, or `None`: only `apiVersion` changes), with our version's defaults applied
//! to what is written and its pruning to what is read. The requests are the server's
//! (`server::resources::delegated`).

use std::sync::Arc;

use serde_json::Value;

use crate::api::defaults::schema as defaulting;
use crate::api::schema::prune::prune_object;

use super::super::cotenant::CoTenantKind;
use super::super::descriptor::{GroupVersion, ResourceDescriptor};
use super::super::table::TableConvertor;
use super::conversion::{ConversionCaller, WebhookConversion};
use super::definition::{self, Definition, Home};

/// A co-tenant kind kube-apiserver keeps, served in our versions through it.
pub struct DelegatedKind {
    definition: Definition,
    /// The version kube-apiserver is asked in.
    kube_version: &'static str,
    webhook: Option<WebhookConversion>,
    tables: Vec<(GroupVersion, Arc<TableConvertor>)>,
}

impl std::fmt::Debug for DelegatedKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegatedKind")
            .field("kind", &self.definition.descriptor.kind)
            .field("kube_version", &self.kube_version)
            .finish_non_exhaustive()
    }
}

impl DelegatedKind {
    /// The kind of `kind`'s CRD `spec` when kube-apiserver keeps its objects; the reason it
    /// cannot be served otherwise (`Ok(None)` when its objects live here).
    pub fn new(
        kind: &CoTenantKind,
        spec: &Value,
        caller: Arc<dyn ConversionCaller>,
    ) -> Result<Option<Self>, String> {
        let definition = definition::read(kind, spec)?;
        let Home::Kube(kube_version) = definition.home else {
            return Ok(None);
        };
        let webhook = match spec.get("conversion") {
            Some(conversion) => WebhookConversion::from_crd(conversion, caller)?,
            None => None,
        };
        let tables = definition
            .descriptor
            .versions
            .iter()
            .map(|v| {
                TableConvertor::new(&v.printer_columns)
                    .map(|table| (v.version, Arc::new(table)))
                    .map_err(|e| format!("its printer columns cannot be served: {e}"))
            })
            .collect::<Result<_, _>>()?;
        Ok(Some(Self {
            definition,
            kube_version,
            webhook,
            tables,
        }))
    }

    /// The kind in our versions.
    pub fn descriptor(&self) -> &ResourceDescriptor {
        &self.definition.descriptor
    }

    /// The version kube-apiserver is asked in.
    pub fn kube_version(&self) -> &'static str {
        self.kube_version
    }

    /// The CRD's storage version (discovery's `storageVersionHash`).
    pub fn storage_version(&self) -> &'static str {
        self.definition.storage_version
    }

    /// Whether versions convert through the CRD's webhook (else only `apiVersion` changes,
    /// and patches are the same in every version).
    pub fn converts_by_webhook(&self) -> bool {
        self.webhook.is_some()
    }

    /// The Table convertor of a version of ours.
    pub fn table(&self, version: GroupVersion) -> Option<&Arc<TableConvertor>> {
        self.tables
            .iter()
            .find(|(v, _)| *v == version)
            .map(|(_, t)| t)
    }

    /// `object`, written in `version` of ours, in kube's version: our version's defaults
    /// applied first (kube defaults a request in the request's version), then converted.
    pub fn to_kube(&self, version: GroupVersion, mut object: Value) -> Result<Value, String> {
        if let Some(schema) = version.api().and_then(|v| self.definition.schema(v)) {
            defaulting::apply(&mut object, schema);
        }
        self.convert(object, &format!("{}/{}", version.group, self.kube_version))
    }

    /// A configuration of server-side apply (a partial object) in kube's version. Only
    /// `apiVersion` changes under `None`; a webhook converts it as an object, filling what
    /// its types fill (docs/api.md, "Kinds kube-apiserver keeps").
    pub fn configuration_to_kube(
        &self,
        version: GroupVersion,
        config: Value,
    ) -> Result<Value, String> {
        self.convert(config, &format!("{}/{}", version.group, self.kube_version))
    }

    /// An object kube answered with, in `version` of ours: converted, then what that
    /// version's schema does not declare pruned.
    pub fn from_kube(&self, version: GroupVersion, object: Value) -> Result<Value, String> {
        let mut object = self.convert(object, &version.api_version())?;
        if let Some(schema) = version.api().and_then(|v| self.definition.schema(v)) {
            prune_object(&mut object, schema);
        }
        Ok(object)
    }

    fn convert(&self, mut object: Value, desired: &str) -> Result<Value, String> {
        let current = object.get("apiVersion").and_then(Value::as_str);
        if current == Some(desired) {
            return Ok(object);
        }
        match &self.webhook {
            Some(webhook) => webhook.convert(object, desired),
            None => {
                if let Value::Object(map) = &mut object {
                    map.insert("apiVersion".to_owned(), desired.into());
                }
                Ok(object)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::registry::cotenant::CoTenants;

    /// Refuses every call: the CRDs below convert with `None`.
    struct NoWebhook;

    impl ConversionCaller for NoWebhook {
        fn call(&self, _: &Value, _: &Value) -> Result<Vec<u8>, String> {
            Err("no webhook here".to_owned())
        }
    }

    fn version(name: &str, served: bool, storage: bool, default: &str) -> Value {
        json!({
            "name": name, "served": served, "storage": storage,
            "subresources": {"status": {}},
            "additionalPrinterColumns": [{"name": "Ready", "type": "string", "jsonPath": ".status.ready"}],
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {"type": "object", "properties": {
                        "location": {"type": "string", "default": default},
                    }},
                    "status": {"type": "object", "properties": {"ready": {"type": "string"}}},
                },
            }},
        })
    }

    /// CAPZ's ASO kinds: v1alpha1 (deprecated) beside the v1beta1 kube stores.
    fn crd(versions: Vec<Value>) -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "azureasomanagedclusters.infrastructure.cluster.x-k8s.io"},
            "spec": {
                "group": "infrastructure.cluster.x-k8s.io",
                "scope": "Namespaced",
                "names": {"kind": "AzureASOManagedCluster", "plural": "azureasomanagedclusters",
                          "singular": "azureasomanagedcluster", "listKind": "AzureASOManagedClusterList"},
                "versions": versions,
            },
        })
    }

    fn delegated(crd: &Value) -> Result<Option<DelegatedKind>, String> {
        let ours = crate::registry::catalog::strategies();
        let cotenants = CoTenants::for_group(
            "infrastructure.cluster.x-k8s.io",
            ours.iter().map(|s| s.descriptor()),
        );
        cotenants.replace([crd]);
        let set = cotenants.current();
        let kind = set.kinds.first().expect("a co-tenant kind");
        DelegatedKind::new(kind, &kind.spec, Arc::new(NoWebhook))
    }

    #[test]
    fn a_kind_stored_outside_our_versions_is_delegated_at_its_storage_version() {
        let kind = delegated(&crd(vec![
            version("v1alpha1", true, false, "westeurope"),
            version("v1beta1", true, true, "eastus"),
        ]))
        .expect("servable")
        .expect("kept by kube");
        assert_eq!(kind.kube_version(), "v1beta1");
        assert_eq!(kind.storage_version(), "v1beta1");
        let ours = GroupVersion::new("infrastructure.cluster.x-k8s.io", "v1alpha1");
        let versions: Vec<_> = kind
            .descriptor()
            .versions
            .iter()
            .map(|v| v.version)
            .collect();
        assert_eq!(versions, [ours], "only our versions are described");
        assert!(kind.table(ours).is_some());

        // Written in v1alpha1: its defaults, not v1beta1's, then only apiVersion changes.
        let written = kind
            .to_kube(
                ours,
                json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
                       "kind": "AzureASOManagedCluster", "metadata": {"name": "a"}, "spec": {}}),
            )
            .expect("converted");
        assert_eq!(
            written["apiVersion"],
            "infrastructure.cluster.x-k8s.io/v1beta1"
        );
        assert_eq!(written["spec"]["location"], "westeurope");

        // Read back: in v1alpha1, what v1alpha1 does not declare pruned.
        let read = kind
            .from_kube(
                ours,
                json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                       "kind": "AzureASOManagedCluster", "metadata": {"name": "a", "uid": "u"},
                       "spec": {"location": "eastus", "onlyInBeta": true}}),
            )
            .expect("converted");
        assert_eq!(
            read,
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
                   "kind": "AzureASOManagedCluster", "metadata": {"name": "a", "uid": "u"},
                   "spec": {"location": "eastus"}})
        );
    }

    #[test]
    fn a_kind_also_served_outside_our_versions_is_delegated_where_kube_serves_it() {
        let kind = delegated(&crd(vec![
            version("v1alpha2", true, true, "x"),
            version("v1beta1", true, false, "x"),
        ]))
        .expect("servable")
        .expect("kept by kube");
        assert_eq!(kind.kube_version(), "v1beta1");
        assert_eq!(kind.storage_version(), "v1alpha2");
    }

    #[test]
    fn a_kind_only_in_our_versions_is_not_delegated() {
        let kind = delegated(&crd(vec![version("v1alpha1", true, true, "x")])).expect("servable");
        assert!(kind.is_none());
    }

    #[test]
    fn a_kind_kube_serves_in_none_of_its_versions_is_refused() {
        let error = delegated(&crd(vec![
            version("v1alpha1", true, false, "x"),
            version("v1beta1", false, true, "x"),
        ]))
        .expect_err("refused");
        assert!(
            error.contains("kube-apiserver serves it in no version but ours"),
            "{error}"
        );
    }
}
