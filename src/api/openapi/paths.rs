//! The `paths` of a group-version document, as kube-apiserver publishes them for a custom
//! resource: list/create/deletecollection on the collection (the namespace's, and a
//! cluster-wide list, for a namespaced kind), read/replace/patch/delete on an object, and
//! read/replace/patch on `status` where the version has that subresource. Our kinds and the
//! co-tenant kinds served from CRDs ([`PathKind`]) get the same paths.
//!
//! kubectl reads two things here besides the schemas: the PATCH operation of a kind must list
//! the patch media types the server accepts (no strategic merge patch, so kubectl computes a
//! merge patch) and must declare the `fieldValidation` query parameter (else kubectl falls
//! back to client-side validation through protobuf OpenAPI v2).

use serde_json::{Map, Value, json};

use super::{Flavor, definition_name};
use crate::api::{GROUP, Kind, Version};

const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";

/// The patch media types the server accepts; strategic merge patch is not among them.
pub const PATCH_CONTENT_TYPES: [&str; 3] = [
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
];
const CONTENT_TYPES: [&str; 2] = ["application/json", "application/yaml"];

/// A query (or path) parameter: name, schema type, description.
type Param = (&'static str, &'static str, &'static str);

const PRETTY: Param = (
    "pretty",
    "string",
    "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget).",
);
const DRY_RUN: Param = (
    "dryRun",
    "string",
    "When present, indicates that modifications should not be persisted. An invalid or unrecognized dryRun directive will result in an error response and no further processing of the request. Valid values are: - All: all dry run stages will be processed",
);
const FIELD_MANAGER: Param = (
    "fieldManager",
    "string",
    "fieldManager is a name associated with the actor or entity that is making these changes. The value must be less than or 128 characters long, and only contain printable characters, as defined by https://golang.org/pkg/unicode/#IsPrint. This field is required for apply requests (application/apply-patch) but optional for non-apply patch types.",
);
const FIELD_VALIDATION: Param = (
    "fieldValidation",
    "string",
    "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: This will ignore any unknown fields that are silently dropped from the object, and will ignore all but the last duplicate field that the decoder encounters. - Warn: This will send a warning via the standard warning response header for each unknown field that is dropped from the object, and for each duplicate field that is encountered. The request will still succeed if there are no other errors, and will only persist the last of any duplicate fields. This is the default. - Strict: This will fail the request with a BadRequest error if any unknown fields would be dropped from the object, or if any duplicate fields are present. The error returned from the server will contain all unknown and duplicate fields encountered.",
);
const FORCE: Param = (
    "force",
    "boolean",
    "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests.",
);
const LIST_PARAMS: [Param; 10] = [
    (
        "allowWatchBookmarks",
        "boolean",
        "allowWatchBookmarks requests watch events with type \"BOOKMARK\". Servers that do not implement bookmarks may ignore this flag and bookmarks are sent at the server's discretion. Clients should not assume bookmarks are returned at any specific interval, nor may they assume the server will send any BOOKMARK event during a session.",
    ),
    (
        "continue",
        "string",
        "The continue option should be set when retrieving more results from the server. Since this value is server defined, clients may only use the continue value from a previous query result with identical query parameters (except for the value of continue) and the server may reject a continue value it does not recognize.",
    ),
    (
        "fieldSelector",
        "string",
        "A selector to restrict the list of returned objects by their fields. Defaults to everything. Supported fields: metadata.name, metadata.namespace.",
    ),
    (
        "labelSelector",
        "string",
        "A selector to restrict the list of returned objects by their labels. Defaults to everything.",
    ),
    (
        "limit",
        "integer",
        "limit is a maximum number of responses to return for a list call. If more items exist, the server will set the `continue` field on the list metadata to a value that can be used with the same initial query to retrieve the next set of results.",
    ),
    (
        "resourceVersion",
        "string",
        "resourceVersion sets a constraint on what resource versions a request may be served from. See https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details. Defaults to unset",
    ),
    (
        "resourceVersionMatch",
        "string",
        "resourceVersionMatch determines how resourceVersion is applied to list calls. It is highly recommended that resourceVersionMatch be set for list calls where resourceVersion is set See https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details. Defaults to unset",
    ),
    (
        "sendInitialEvents",
        "boolean",
        "`sendInitialEvents=true` may be set together with `watch=true`. In that case, the watch stream will begin with synthetic events to produce the current state of objects in the collection. Once all such events have been sent, a synthetic \"Bookmark\" event will be sent. The bookmark will report the ResourceVersion (RV) corresponding to the set of objects, and be marked with `\"k8s.io/initial-events-end\": \"true\"` annotation.",
    ),
    (
        "timeoutSeconds",
        "integer",
        "Timeout for the list/watch call. This limits the duration of the call, regardless of any activity or inactivity.",
    ),
    (
        "watch",
        "boolean",
        "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications. Specify resourceVersion.",
    ),
];
const DELETE_PARAMS: [Param; 4] = [
    DRY_RUN,
    (
        "gracePeriodSeconds",
        "integer",
        "The duration in seconds before the object should be deleted. Value must be non-negative integer. The value zero indicates delete immediately.",
    ),
    (
        "orphanDependents",
        "boolean",
        "Deprecated: please use the PropagationPolicy, this field will be deprecated in 1.7. Should the dependent objects be orphaned. If true/false, the \"orphan\" finalizer will be added to/removed from the object's finalizers list. Either this field or PropagationPolicy may be set, but not both.",
    ),
    (
        "propagationPolicy",
        "string",
        "Whether and how garbage collection will be performed. Either this field or OrphanDependents may be set, but not both. The default policy is decided by the existing finalizer set in the metadata.finalizers and the resource-specific default policy. Acceptable values are: 'Orphan' - orphan the dependents; 'Background' - allow the garbage collector to delete the dependents in the background; 'Foreground' - a cascading policy that deletes all dependents in the foreground.",
    ),
];

fn parameter(flavor: Flavor, location: &str, (name, type_, description): Param) -> Value {
    let mut param = json!({
        "name": name,
        "in": location,
        "description": description,
    });
    if location == "path" {
        param["required"] = Value::Bool(true);
    }
    let type_ = json!({ "type": type_, "uniqueItems": true });
    match flavor {
        Flavor::V3 => {
            param["schema"] = type_;
            // OpenAPI 3's default styles, written out as the `openapiv3` model writes them.
            param["style"] = Value::from(if location == "path" { "simple" } else { "form" });
        }
        Flavor::V2 => {
            if let (Value::Object(param), Value::Object(type_)) = (&mut param, type_) {
                param.extend(type_);
            }
        }
    }
    param
}

fn query(flavor: Flavor, params: &[Param]) -> Vec<Value> {
    params
        .iter()
        .map(|p| parameter(flavor, "query", *p))
        .collect()
}

/// Which operation, for the operation id, the action extension and the description.
#[derive(Clone, Copy)]
enum Action {
    List,
    ListAll,
    Create,
    DeleteCollection,
    Read,
    Replace,
    Patch,
    Delete,
}

impl Action {
    fn extension(self) -> &'static str {
        match self {
            Action::List | Action::ListAll => "list",
            Action::Create => "post",
            Action::DeleteCollection => "deletecollection",
            Action::Read => "get",
            Action::Replace => "put",
            Action::Patch => "patch",
            Action::Delete => "delete",
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Action::List | Action::ListAll => "list",
            Action::Create => "create",
            Action::DeleteCollection | Action::Delete => "delete",
            Action::Read => "read",
            Action::Replace => "replace",
            Action::Patch => "patch",
        }
    }
}

/// Each part with its first letter in upper case, joined.
fn camel<'a>(parts: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for part in parts {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            out.extend(first.to_uppercase());
            out.push_str(chars.as_str());
        }
    }
    out
}

/// `infrastructure.cluster.x-k8s.io` → `InfrastructureClusterXK8sIo`.
fn group_camel() -> String {
    camel(GROUP.split(['.', '-']))
}

/// … plus the version: `InfrastructureClusterXK8sIoV1alpha2`.
fn group_version_camel(version: Version) -> String {
    camel(GROUP.split(['.', '-']).chain([version.as_str()]))
}

/// What the paths of one kind in one version are made of.
#[derive(Clone, Copy, Debug)]
pub struct PathKind<'a> {
    pub kind: &'a str,
    pub list_kind: &'a str,
    pub plural: &'a str,
    pub namespaced: bool,
    /// Whether the version has the `status` subresource.
    pub status: bool,
}

impl PathKind<'static> {
    /// The names of one of our kinds.
    pub fn of(kind: Kind, version: Version) -> Self {
        let d = kind.descriptor();
        PathKind {
            kind: d.kind,
            list_kind: d.list_kind,
            plural: d.plural,
            namespaced: d.namespaced,
            status: d.version(version).status_subresource,
        }
    }
}

/// One kind in one version, and the document flavour the paths are written for.
struct Resource<'a> {
    flavor: Flavor,
    version: Version,
    kind: PathKind<'a>,
}

impl Resource<'_> {
    fn reference(&self, name: &str) -> Value {
        json!({ "$ref": self.flavor.reference(name) })
    }

    fn response(&self, description: &str, schema: &str) -> Value {
        match self.flavor {
            Flavor::V3 => {
                let content: Map<String, Value> = CONTENT_TYPES
                    .iter()
                    .map(|t| ((*t).to_owned(), json!({ "schema": self.reference(schema) })))
                    .collect();
                json!({ "description": description, "content": content })
            }
            Flavor::V2 => json!({ "description": description, "schema": self.reference(schema) }),
        }
    }

    fn operation(
        &self,
        action: Action,
        subresource: Option<&str>,
        params: Vec<Value>,
        body: Option<(&[&str], &str)>,
        responses: &[(&str, &str, &str)],
    ) -> Value {
        let kind = self.kind.kind;
        let gv = group_version_camel(self.version);
        let namespaced = if self.kind.namespaced {
            "Namespaced"
        } else {
            ""
        };
        let (scope, suffix) = match action {
            Action::ListAll => (String::new(), "ForAllNamespaces"),
            Action::DeleteCollection => (format!("Collection{namespaced}"), ""),
            _ => (namespaced.to_owned(), ""),
        };
        let status = if subresource.is_some() { "Status" } else { "" };
        let target = match (action, subresource) {
            (Action::List | Action::ListAll, _) => format!("objects of kind {kind}"),
            (Action::DeleteCollection, _) => format!("collection of {kind}"),
            (Action::Create, _) => format!("a {kind}"),
            (_, Some(sub)) => format!("{sub} of the specified {kind}"),
            (_, None) => format!("the specified {kind}"),
        };
        let description = match action {
            Action::Patch => format!("partially update {target}"),
            _ => format!("{} {target}", action.verb()),
        };
        let mut operation = json!({
            "tags": [format!("{}_{}", lower_first(&group_camel()), self.version)],
            "description": description,
            "operationId": format!("{}{gv}{scope}{kind}{status}{suffix}", action.verb()),
            "x-kubernetes-action": action.extension(),
            "x-kubernetes-group-version-kind": {
                "group": GROUP,
                "version": self.version.as_str(),
                "kind": kind,
            },
        });
        if !params.is_empty() {
            operation["parameters"] = Value::Array(params);
        }
        let mut codes = Map::new();
        for (code, description, schema) in responses {
            codes.insert((*code).to_owned(), self.response(description, schema));
        }
        codes.insert("401".to_owned(), json!({ "description": "Unauthorized" }));
        operation["responses"] = Value::Object(codes);
        if let Some((types, schema)) = body {
            self.add_body(&mut operation, types, schema);
        }
        operation
    }

    fn add_body(&self, operation: &mut Value, types: &[&str], schema: &str) {
        match self.flavor {
            Flavor::V3 => {
                let content: Map<String, Value> = types
                    .iter()
                    .map(|t| ((*t).to_owned(), json!({ "schema": self.reference(schema) })))
                    .collect();
                operation["requestBody"] = json!({ "content": content, "required": true });
            }
            Flavor::V2 => {
                operation["consumes"] = json!(types);
                let body = json!({
                    "name": "body",
                    "in": "body",
                    "required": true,
                    "schema": self.reference(schema),
                });
                match operation.get_mut("parameters") {
                    Some(Value::Array(params)) => params.push(body),
                    _ => operation["parameters"] = json!([body]),
                }
            }
        }
        if self.flavor == Flavor::V2 {
            operation["produces"] = json!(CONTENT_TYPES);
        }
    }

    fn path_params(&self, with_name: bool) -> Value {
        let name_doc = format!("name of the {}", self.kind.kind);
        let mut params = Vec::new();
        if with_name {
            // The description must outlive the tuple; build the parameter directly.
            let mut name = parameter(self.flavor, "path", ("name", "string", ""));
            name["description"] = Value::String(name_doc);
            params.push(name);
        }
        if self.kind.namespaced {
            params.push(parameter(
                self.flavor,
                "path",
                (
                    "namespace",
                    "string",
                    "object name and auth scope, such as for teams and projects",
                ),
            ));
        }
        params.push(parameter(self.flavor, "query", PRETTY));
        Value::Array(params)
    }

    fn paths(&self, paths: &mut Map<String, Value>) {
        let d = self.kind;
        let kind_def = definition_name(self.version, d.kind);
        let list_def = definition_name(self.version, d.list_kind);
        let base = format!("/apis/{GROUP}/{}", self.version);
        let collection = if d.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}", d.plural)
        } else {
            format!("{base}/{}", d.plural)
        };
        let item = format!("{collection}/{{name}}");
        let flavor = self.flavor;
        let write_params = || query(flavor, &[DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION]);
        let patch_params = || query(flavor, &[DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION, FORCE]);
        let ok = [("200", "OK", kind_def.as_str())];
        let written = [
            ("200", "OK", kind_def.as_str()),
            ("201", "Created", kind_def.as_str()),
        ];

        if d.namespaced {
            paths.insert(
                format!("{base}/{}", d.plural),
                json!({
                    "get": self.operation(Action::ListAll, None, query(flavor, &LIST_PARAMS), None,
                        &[("200", "OK", list_def.as_str())]),
                    "parameters": [parameter(flavor, "query", PRETTY)],
                }),
            );
        }
        paths.insert(
            collection,
            json!({
                "get": self.operation(Action::List, None, query(flavor, &LIST_PARAMS), None,
                    &[("200", "OK", list_def.as_str())]),
                "post": self.operation(Action::Create, None, write_params(),
                    Some((&["application/json", "application/yaml"], kind_def.as_str())),
                    &[("200", "OK", kind_def.as_str()), ("201", "Created", kind_def.as_str()),
                      ("202", "Accepted", kind_def.as_str())]),
                "delete": self.operation(Action::DeleteCollection, None,
                    [query(flavor, &DELETE_PARAMS), query(flavor, &LIST_PARAMS)].concat(),
                    Some((&["application/json", "application/yaml"], DELETE_OPTIONS)),
                    &[("200", "OK", STATUS)]),
                "parameters": self.path_params(false),
            }),
        );
        paths.insert(
            item.clone(),
            json!({
                "get": self.operation(Action::Read, None, Vec::new(), None, &ok),
                "put": self.operation(Action::Replace, None, write_params(),
                    Some((&["application/json", "application/yaml"], kind_def.as_str())), &written),
                "patch": self.operation(Action::Patch, None, patch_params(),
                    Some((&PATCH_CONTENT_TYPES, PATCH)), &written),
                "delete": self.operation(Action::Delete, None, query(flavor, &DELETE_PARAMS),
                    Some((&["application/json", "application/yaml"], DELETE_OPTIONS)),
                    &[("200", "OK", STATUS), ("202", "Accepted", STATUS)]),
                "parameters": self.path_params(true),
            }),
        );
        if d.status {
            let sub = Some("status");
            paths.insert(
                format!("{item}/status"),
                json!({
                    "get": self.operation(Action::Read, sub, Vec::new(), None, &ok),
                    "put": self.operation(Action::Replace, sub, write_params(),
                        Some((&["application/json", "application/yaml"], kind_def.as_str())), &written),
                    "patch": self.operation(Action::Patch, sub, patch_params(),
                        Some((&PATCH_CONTENT_TYPES, PATCH)), &written),
                    "parameters": self.path_params(true),
                }),
            );
        }
    }
}

fn lower_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Every path of the group-version's own kinds.
pub fn paths(version: Version, flavor: Flavor) -> Map<String, Value> {
    let mut paths = Map::new();
    for kind in Kind::served_in(version) {
        add_paths(&mut paths, version, flavor, PathKind::of(kind, version));
    }
    paths
}

/// Adds the paths of `kind` in `version` to `paths`.
pub fn add_paths(paths: &mut Map<String, Value>, version: Version, flavor: Flavor, kind: PathKind) {
    Resource {
        flavor,
        version,
        kind,
    }
    .paths(paths);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_ids_follow_kube() {
        assert_eq!(
            group_version_camel(Version::V1alpha2),
            "InfrastructureClusterXK8sIoV1alpha2"
        );
        let paths = paths(Version::V1alpha2, Flavor::V3);
        let patch = &paths["/apis/infrastructure.cluster.x-k8s.io/v1alpha2/namespaces/{namespace}/proxmoxmachines/{name}"]
            ["patch"];
        assert_eq!(
            patch["operationId"],
            "patchInfrastructureClusterXK8sIoV1alpha2NamespacedProxmoxMachine"
        );
        assert_eq!(
            patch["x-kubernetes-group-version-kind"]["kind"],
            "ProxmoxMachine"
        );
        let types: Vec<&String> = patch["requestBody"]["content"]
            .as_object()
            .map(|c| c.keys().collect())
            .unwrap_or_default();
        assert_eq!(types.len(), 3);
        assert!(!types.iter().any(|t| t.contains("strategic")));
        let params: Vec<&str> = patch["parameters"]
            .as_array()
            .map(|p| p.iter().filter_map(|p| p["name"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(
            params,
            ["dryRun", "fieldManager", "fieldValidation", "force"]
        );
        let all = &paths["/apis/infrastructure.cluster.x-k8s.io/v1alpha2/proxmoxmachines"]["get"];
        assert_eq!(
            all["operationId"],
            "listInfrastructureClusterXK8sIoV1alpha2ProxmoxMachineForAllNamespaces"
        );
        assert_eq!(patch["tags"][0], "infrastructureClusterXK8sIo_v1alpha2");
    }

    #[test]
    fn cluster_scoped_kinds_have_no_namespace_in_their_paths() {
        let mut paths = Map::new();
        let identity = PathKind {
            kind: "OpenStackClusterIdentity",
            list_kind: "OpenStackClusterIdentityList",
            plural: "openstackclusteridentities",
            namespaced: false,
            status: false,
        };
        add_paths(&mut paths, Version::V1alpha1, Flavor::V3, identity);
        let base = "/apis/infrastructure.cluster.x-k8s.io/v1alpha1/openstackclusteridentities";
        let keys: Vec<&String> = paths.keys().collect();
        assert_eq!(keys, [base, &format!("{base}/{{name}}")]);
        let ids = |path: &str, verbs: &[&str]| -> Vec<String> {
            verbs
                .iter()
                .map(|verb| {
                    paths[path][verb]["operationId"]
                        .as_str()
                        .unwrap_or("")
                        .to_owned()
                })
                .collect()
        };
        assert_eq!(
            ids(base, &["get", "post", "delete"]),
            [
                "listInfrastructureClusterXK8sIoV1alpha1OpenStackClusterIdentity",
                "createInfrastructureClusterXK8sIoV1alpha1OpenStackClusterIdentity",
                "deleteInfrastructureClusterXK8sIoV1alpha1CollectionOpenStackClusterIdentity",
            ]
        );
        let item_params: Vec<&str> = paths[&format!("{base}/{{name}}")]["parameters"]
            .as_array()
            .map(|p| p.iter().filter_map(|p| p["name"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(item_params, ["name", "pretty"]);
    }

    #[test]
    fn status_paths_follow_the_version() {
        let template_status = "/apis/infrastructure.cluster.x-k8s.io/{v}/namespaces/{namespace}/proxmoxclustertemplates/{name}/status";
        let v1 = paths(Version::V1alpha1, Flavor::V2);
        let v2 = paths(Version::V1alpha2, Flavor::V2);
        assert!(v1.contains_key(&template_status.replace("{v}", "v1alpha1")));
        assert!(!v2.contains_key(&template_status.replace("{v}", "v1alpha2")));
    }
}
