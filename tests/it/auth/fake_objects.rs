//! The fake kube-apiserver's generic object store: the management kinds the built-in
//! controller of `serve` reads and writes (`crate::standins::KINDS`: CAPI Cluster and
//! Machine, core Secret, IPAM claims, addresses and pools), in memory, with the REST verbs
//! kube-rs uses — GET, LIST (label and field selectors), WATCH, POST, PUT, PATCH (JSON,
//! merge, strategic merge taken as merge), DELETE (finalizers and preconditions) and
//! `/status` — and kube's rules for what each verb may change, borrowed from the project's
//! own registry (`registry::lifecycle`, `list_options`, `delete_options`, `patch`).
//!
//! Every write takes the next value of one resourceVersion counter and is kept in a bounded
//! history per kind, so a watch resuming from a list's resourceVersion replays what happened
//! since; one from before the history answers 410 Expired and the client relists. Not
//! served: server-side apply, `limit`/`continue` paging (a list is one page), dry runs,
//! garbage collection of dependents, Secret `stringData`.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use capmox_apiserver::management::kube::objects::key_of;
use capmox_apiserver::registry::delete_options::DeleteOptions;
use capmox_apiserver::registry::lifecycle::{
    DeletePlan, copy_status, edit_metadata, keep_identity_fields, meta_str, now, plan_delete,
    prepare_for_create, prepare_for_update, should_delete_during_update, status_update,
};
use capmox_apiserver::registry::list_options::{ListOptions, WatchStart};
use capmox_apiserver::registry::object_meta::generate_name;
use capmox_apiserver::registry::patch::Patch;
use capmox_apiserver::registry::watch_event::{EventType, bookmark_object, encode_event};
use capmox_apiserver::registry::{FieldError, FieldPath};
use capmox_apiserver::server::error::StatusDetails;
use capmox_apiserver::server::listener::Shutdown;
use capmox_apiserver::server::watch::{self, watch_timeout};
use capmox_apiserver::server::{ApiError, GroupKind, GroupResource, Status};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::fake_kube::{FakeKube, received};
use crate::standins::{KINDS, KindCase};

/// Changes kept per kind for watches that resume from an older resourceVersion. Generous
/// for a test's churn; older watches relist, as against a compacted etcd.
pub const HISTORY: usize = 1000;

/// Changes in flight to open watches; a watch that falls further behind is ended and its
/// client resumes from the history.
const WATCH_BUFFER: usize = 1024;

/// The PATCH bodies understood.
const PATCH_TYPES: [&str; 3] = [
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
];

/// The objects of every kind and the watches on them; cheap to clone. Tests read and
/// write them through `FakeKube`'s methods below.
#[derive(Clone)]
pub struct ObjectStore {
    state: Arc<Mutex<Stored>>,
    /// Ends the open watches when the fake stops.
    shutdown: Shutdown,
}

/// Its own counter rather than the ConfigMap's: a watch of the ConfigMap takes any move of
/// that one for a change of the ConfigMap.
struct Stored {
    resource_version: u64,
    /// Indexed like `KINDS`.
    kinds: Vec<Bucket>,
    /// Sent to under the lock, so a watch subscribing under it misses nothing.
    changes: broadcast::Sender<Arc<Change>>,
}

#[derive(Default)]
struct Bucket {
    /// By namespace ("" for cluster-scoped kinds) and name.
    objects: BTreeMap<(String, String), Value>,
    history: VecDeque<Arc<Change>>,
    /// The newest resourceVersion dropped from `history`: a watch from before it would miss
    /// changes.
    forgotten: u64,
}

/// One committed write.
struct Change {
    kind: usize,
    resource_version: u64,
    event: EventType,
    object: Value,
    /// The object a MODIFIED change replaced: a selector watch turns a change into ADDED or
    /// DELETED when the object starts or stops matching.
    previous: Option<Value>,
}

/// What a commit does.
enum Write {
    Store(Value),
    Remove(Value),
}

/// The kind, namespace and name a request path names.
struct Target {
    kind: usize,
    namespace: Option<String>,
    name: Option<String>,
    status: bool,
}

impl Target {
    /// Parses `/api/v1/…` and `/apis/{group}/{version}/…` paths of the served kinds; `None`
    /// for anything else (a kind not served, the wrong scope, a `/status` of a kind without
    /// one), which kube answers 404.
    fn parse(path: &str) -> Option<Self> {
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let (api_version, rest) = match segments.as_slice() {
            ["api", version, rest @ ..] => ((*version).to_owned(), rest),
            ["apis", group, version, rest @ ..] => (format!("{group}/{version}"), rest),
            _ => return None,
        };
        let (namespace, plural, rest) = match rest {
            ["namespaces", namespace, plural, rest @ ..] => (Some(*namespace), *plural, rest),
            [plural, rest @ ..] => (None, *plural, rest),
            [] => return None,
        };
        let (name, status) = match rest {
            [] => (None, false),
            [name] => (Some(*name), false),
            [name, "status"] => (Some(*name), true),
            _ => return None,
        };
        let kind = KINDS
            .iter()
            .position(|k| k.api_version == api_version && k.plural == plural)?;
        let case = &KINDS[kind];
        // Namespaced kinds are listed across namespaces without one; objects always have one.
        let scoped = if case.namespaced {
            namespace.is_some() || name.is_none()
        } else {
            namespace.is_none()
        };
        (scoped && (!status || case.status)).then(|| Self {
            kind,
            namespace: namespace.map(str::to_owned),
            name: name.map(str::to_owned),
            status,
        })
    }

    fn case(&self) -> &'static KindCase {
        &KINDS[self.kind]
    }

    fn key(&self, name: &str) -> (String, String) {
        (self.namespace.clone().unwrap_or_default(), name.to_owned())
    }
}

fn group(case: &KindCase) -> &'static str {
    case.api_version
        .rsplit_once('/')
        .map_or("", |(group, _)| group)
}

fn resource(case: &KindCase) -> GroupResource {
    GroupResource::new(group(case), case.plural)
}

/// Custom resources count `generation`; core Secrets have none.
fn has_generation(case: &KindCase) -> bool {
    !group(case).is_empty()
}

fn without_generation(case: &KindCase, mut object: Value) -> Value {
    if !has_generation(case) {
        edit_metadata(&mut object, |meta| {
            meta.remove("generation");
        });
    }
    object
}

/// The kind of a served object, by its `apiVersion` and `kind`.
fn kind_of(object: &Value) -> usize {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    KINDS
        .iter()
        .position(|k| k.api_version == api_version && object["kind"] == k.kind)
        .unwrap_or_else(|| panic!("the fake kube-apiserver does not serve {object}"))
}

fn kind_of_plural(api_version: &str, plural: &str) -> usize {
    KINDS
        .iter()
        .position(|k| k.api_version == api_version && k.plural == plural)
        .unwrap_or_else(|| panic!("the fake kube-apiserver does not serve {api_version} {plural}"))
}

fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the body is not JSON: {e}")))?;
    if value.is_object() {
        Ok(value)
    } else {
        Err(ApiError::bad_request("the body is not a JSON object"))
    }
}

fn json_response(code: StatusCode, object: &Value) -> Response {
    (code, axum::Json(object)).into_response()
}

/// Fills in the type metadata of a request body and refuses another kind's.
fn check_type(case: &KindCase, object: &mut Value) -> Result<(), ApiError> {
    for (field, expected) in [("apiVersion", case.api_version), ("kind", case.kind)] {
        match object[field].as_str().unwrap_or_default() {
            "" => object[field] = json!(expected),
            given if given == expected => {}
            given => {
                return Err(ApiError::bad_request(format!(
                    "the {field} in the data ({given}) does not match the expected {field} ({expected})"
                )));
            }
        }
    }
    Ok(())
}

/// Puts a request body where its URL says (or refuses a body that says otherwise).
fn place(target: &Target, name: Option<&str>, object: &mut Value) -> Result<(), ApiError> {
    let mut fields = vec![("namespace", target.namespace.as_deref().unwrap_or_default())];
    fields.extend(name.map(|name| ("name", name)));
    for (field, wanted) in fields {
        match meta_str(object, field) {
            "" if wanted.is_empty() => {}
            "" => edit_metadata(object, |meta| {
                meta.insert(field.to_owned(), json!(wanted));
            }),
            given if given == wanted => {}
            given => {
                return Err(ApiError::bad_request(format!(
                    "the {field} of the object ({given}) does not match the {field} on the request ({wanted})"
                )));
            }
        }
    }
    Ok(())
}

/// Which changes and objects a watch or list shows.
struct View {
    kind: usize,
    namespace: Option<String>,
    options: ListOptions,
}

impl View {
    fn shows(&self, object: &Value) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| meta_str(object, "namespace") == ns)
            && self.options.label_selector.matches_object(object)
            && self.options.field_selector.matches_object(object)
    }

    /// The event a watch of this view streams for `change`, if any.
    fn frame(&self, change: &Change) -> Option<Bytes> {
        if change.kind != self.kind {
            return None;
        }
        let now = self.shows(&change.object);
        let before = change.previous.as_ref().is_some_and(|p| self.shows(p));
        let event = match change.event {
            EventType::Modified if before && !now => EventType::Deleted,
            EventType::Modified if !before && now => EventType::Added,
            _ if now => change.event,
            _ => return None,
        };
        Some(encode_event(event, &change.object))
    }
}

impl Stored {
    fn bucket(&self, kind: usize) -> &Bucket {
        &self.kinds[kind]
    }

    fn current(&self, target: &Target, name: &str) -> Result<Value, ApiError> {
        self.bucket(target.kind)
            .objects
            .get(&target.key(name))
            .cloned()
            .ok_or_else(|| ApiError::not_found(&resource(target.case()), name))
    }

    /// Stores or removes an object at the next resourceVersion, records the change and tells
    /// the watches.
    fn commit(&mut self, kind: usize, write: Write) -> Value {
        self.resource_version += 1;
        let resource_version = self.resource_version;
        let (removing, mut object) = match write {
            Write::Store(object) => (false, object),
            Write::Remove(object) => (true, object),
        };
        edit_metadata(&mut object, |meta| {
            meta.insert(
                "resourceVersion".to_owned(),
                json!(resource_version.to_string()),
            );
        });
        let bucket = &mut self.kinds[kind];
        let key = key_of(&object);
        let (event, previous) = if removing {
            bucket.objects.remove(&key);
            (EventType::Deleted, None)
        } else {
            match bucket.objects.insert(key, object.clone()) {
                Some(previous) => (EventType::Modified, Some(previous)),
                None => (EventType::Added, None),
            }
        };
        let change = Arc::new(Change {
            kind,
            resource_version,
            event,
            object: object.clone(),
            previous,
        });
        if bucket.history.len() == HISTORY
            && let Some(dropped) = bucket.history.pop_front()
        {
            bucket.forgotten = dropped.resource_version;
        }
        bucket.history.push_back(Arc::clone(&change));
        // No receiver only means no watch is open right now; the next list sees it.
        let _ = self.changes.send(change);
        object
    }

    /// Writes `new` over `old`: nothing when it changes nothing (as kube, no new
    /// resourceVersion), a removal when it drops the last finalizer of an object being
    /// deleted.
    fn update(&mut self, kind: usize, mut new: Value, old: &Value) -> Value {
        let stored_version = meta_str(old, "resourceVersion").to_owned();
        edit_metadata(&mut new, |meta| {
            meta.insert("resourceVersion".to_owned(), json!(stored_version));
        });
        if should_delete_during_update(&new) {
            self.commit(kind, Write::Remove(new))
        } else if new == *old {
            new
        } else {
            self.commit(kind, Write::Store(new))
        }
    }

    fn create(&mut self, target: &Target, mut object: Value) -> Result<Value, ApiError> {
        let case = target.case();
        check_type(case, &mut object)?;
        place(target, None, &mut object)?;
        if meta_str(&object, "name").is_empty() {
            let prefix = meta_str(&object, "generateName");
            if prefix.is_empty() {
                let path = FieldPath::new("metadata").child("name");
                let error = FieldError::required(&path, "name or generateName is required");
                let kind = GroupKind::new(group(case), case.kind);
                return Err(ApiError::invalid(&kind, "", &[error]));
            }
            let name = generate_name(prefix);
            edit_metadata(&mut object, |meta| {
                meta.insert("name".to_owned(), json!(name));
            });
        }
        let name = meta_str(&object, "name").to_owned();
        if self.current(target, &name).is_ok() {
            return Err(ApiError::already_exists(&resource(case), &name));
        }
        prepare_for_create(&mut object, &uuid::Uuid::new_v4().to_string(), &now());
        if case.status
            && let Some(fields) = object.as_object_mut()
        {
            // The status of a kind with a status subresource is written through it only.
            fields.remove("status");
        }
        let object = without_generation(case, object);
        Ok(self.commit(target.kind, Write::Store(object)))
    }

    /// PUT of the object or its `/status`; a `resourceVersion` in the body is the
    /// precondition.
    fn replace(&mut self, target: &Target, name: &str, mut body: Value) -> Result<Value, ApiError> {
        let case = target.case();
        let old = self.current(target, name)?;
        check_type(case, &mut body)?;
        place(target, Some(name), &mut body)?;
        let precondition = meta_str(&body, "resourceVersion");
        if !precondition.is_empty() && precondition != meta_str(&old, "resourceVersion") {
            return Err(ApiError::conflict_modified(&resource(case), name));
        }
        let new = if target.status {
            status_update(&old, &body)
        } else {
            keep_identity_fields(&mut body, &old);
            prepare_for_update(&mut body, &old, case.status);
            if case.status {
                copy_status(&mut body, &old);
            }
            body
        };
        let new = without_generation(case, new);
        Ok(self.update(target.kind, new, &old))
    }

    fn patch(&mut self, target: &Target, name: &str, patch: &Patch) -> Result<Value, ApiError> {
        let patched = patch.apply(&self.current(target, name)?)?;
        self.replace(target, name, patched)
    }

    /// DELETE: removes the object, or marks it deleting while finalizers remain. Answers the
    /// body kube does: a Success Status, or the object being deleted.
    fn delete(
        &mut self,
        target: &Target,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let case = target.case();
        let old = self.current(target, name)?;
        let expected = &options.preconditions;
        for (field, label, wanted) in [
            ("uid", "UID", &expected.uid),
            (
                "resourceVersion",
                "ResourceVersion",
                &expected.resource_version,
            ),
        ] {
            let actual = meta_str(&old, field);
            if let Some(wanted) = wanted.as_deref().filter(|w| *w != actual) {
                let reason = format!(
                    "Precondition failed: {label} in precondition: {wanted}, {label} in object meta: {actual}"
                );
                return Err(ApiError::conflict(&resource(case), name, &reason));
            }
        }
        match plan_delete(&old, &options.gc, &now()) {
            DeletePlan::MarkDeleting(marked) => Ok(self.update(target.kind, marked, &old)),
            DeletePlan::RemoveNow => {
                let removed = self.commit(target.kind, Write::Remove(old));
                let details = StatusDetails {
                    name: name.to_owned(),
                    group: group(case).to_owned(),
                    kind: case.plural.to_owned(),
                    uid: meta_str(&removed, "uid").to_owned(),
                    ..StatusDetails::default()
                };
                Ok(serde_json::to_value(Status::success(details)).expect("a Status is JSON"))
            }
        }
    }

    fn list(&self, view: &View) -> Value {
        let case = &KINDS[view.kind];
        let items: Vec<&Value> = self
            .bucket(view.kind)
            .objects
            .values()
            .filter(|object| view.shows(object))
            .collect();
        json!({
            "apiVersion": case.api_version,
            "kind": format!("{}List", case.kind),
            "metadata": {"resourceVersion": self.resource_version.to_string()},
            "items": items,
        })
    }

    /// The events a watch of `view` starts with, and whether live changes follow (not after
    /// a 410: the client has to relist).
    fn watch_start(&self, view: &View, start: &WatchStart) -> (Vec<Bytes>, bool) {
        let bucket = self.bucket(view.kind);
        match *start {
            WatchStart::InitialState { end_bookmark, .. } => {
                let case = &KINDS[view.kind];
                let mut events: Vec<Bytes> = bucket
                    .objects
                    .values()
                    .filter(|object| view.shows(object))
                    .map(|object| encode_event(EventType::Added, object))
                    .collect();
                if end_bookmark {
                    let bookmark =
                        bookmark_object(case.api_version, case.kind, self.resource_version, true);
                    events.push(encode_event(EventType::Bookmark, &bookmark));
                }
                (events, true)
            }
            WatchStart::ChangesAfter(None) => (Vec::new(), true),
            WatchStart::ChangesAfter(Some(since)) if since < bucket.forgotten => {
                let message = format!(
                    "too old resource version: {since} ({})",
                    bucket.forgotten + 1
                );
                let status = serde_json::to_value(ApiError::expired(message).into_status())
                    .expect("a Status is JSON");
                (vec![encode_event(EventType::Error, &status)], false)
            }
            WatchStart::ChangesAfter(Some(since)) => {
                let missed = bucket
                    .history
                    .iter()
                    .filter(|change| change.resource_version > since)
                    .filter_map(|change| view.frame(change))
                    .collect();
                (missed, true)
            }
        }
    }
}

impl ObjectStore {
    pub fn new() -> Self {
        Self {
            state: Arc::new(Mutex::new(Stored {
                resource_version: 1,
                kinds: KINDS.iter().map(|_| Bucket::default()).collect(),
                changes: broadcast::channel(WATCH_BUFFER).0,
            })),
            shutdown: Shutdown::new(),
        }
    }

    fn locked(&self) -> std::sync::MutexGuard<'_, Stored> {
        self.state.lock().expect("object store")
    }

    /// Ends the open watches.
    pub fn close(&self) {
        self.shutdown.trigger();
    }

    fn list_or_watch(&self, target: &Target, query: &[(&str, &str)]) -> Result<Response, ApiError> {
        let options =
            ListOptions::from_query(query.iter().copied(), target.case().namespaced, &[], true)?;
        let view = View {
            kind: target.kind,
            namespace: target.namespace.clone(),
            options,
        };
        if !view.options.watch {
            return Ok(json_response(StatusCode::OK, &self.locked().list(&view)));
        }
        let start = view.options.watch_start()?;
        let timeout = watch_timeout(view.options.timeout_seconds);
        // Subscribing under the lock the writers commit under: every change is either in
        // the replayed history or arrives live, none in both.
        let (initial, live) = {
            let stored = self.locked();
            let (initial, follow) = stored.watch_start(&view, &start);
            (
                initial,
                follow.then(|| received(stored.changes.subscribe())),
            )
        };
        let live = futures::stream::iter(live)
            .flatten()
            .filter_map(move |change| futures::future::ready(view.frame(&change)));
        let events = futures::stream::iter(initial).chain(live);
        Ok(watch::response(
            events,
            "application/json",
            timeout,
            self.shutdown.clone(),
            None,
        ))
    }
}

impl FakeKube {
    /// Creates or replaces a management object as an administrator would, `status`
    /// included: its `apiVersion`, `kind`, `metadata.namespace` and `name` say where. A new
    /// object gets a uid, creationTimestamp and generation unless it carries them; a
    /// replaced one keeps its identity and moves its generation like an update. Watches see
    /// the change.
    pub fn put_object(&self, mut object: Value) {
        let kind = kind_of(&object);
        let case = &KINDS[kind];
        if case.namespaced {
            assert!(
                !meta_str(&object, "namespace").is_empty(),
                "a {} needs a namespace",
                case.kind
            );
        } else {
            edit_metadata(&mut object, |meta| {
                meta.remove("namespace");
            });
        }
        assert!(
            !meta_str(&object, "name").is_empty(),
            "{object} has no name"
        );
        let mut stored = self.objects.locked();
        match stored.kinds[kind].objects.get(&key_of(&object)).cloned() {
            Some(old) => {
                keep_identity_fields(&mut object, &old);
                prepare_for_update(&mut object, &old, case.status);
                stored.update(kind, without_generation(case, object), &old);
            }
            None => {
                let uid = uuid::Uuid::new_v4().to_string();
                edit_metadata(&mut object, |meta| {
                    let mut missing =
                        vec![("uid", json!(uid)), ("creationTimestamp", json!(now()))];
                    if has_generation(case) {
                        missing.push(("generation", json!(1)));
                    }
                    for (field, value) in missing {
                        meta.entry(field).or_insert(value);
                    }
                });
                stored.commit(kind, Write::Store(object));
            }
        }
    }

    /// A management object (`namespace` is ignored for cluster-scoped kinds).
    pub fn object(
        &self,
        api_version: &str,
        plural: &str,
        namespace: &str,
        name: &str,
    ) -> Option<Value> {
        let kind = kind_of_plural(api_version, plural);
        let namespace = if KINDS[kind].namespaced {
            namespace
        } else {
            ""
        };
        self.objects.locked().kinds[kind]
            .objects
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    /// Every management object of a kind, by namespace and name.
    pub fn objects(&self, api_version: &str, plural: &str) -> Vec<Value> {
        let kind = kind_of_plural(api_version, plural);
        self.objects.locked().kinds[kind]
            .objects
            .values()
            .cloned()
            .collect()
    }

    /// Deletes the management object `object` names (its `apiVersion`, `kind`, namespace
    /// and name) as a client's DELETE does: one with finalizers is only marked deleting.
    /// Whether it existed.
    pub fn delete_object(&self, object: &Value) -> bool {
        let kind = kind_of(object);
        let (namespace, name) = key_of(object);
        let target = Target {
            kind,
            namespace: KINDS[kind].namespaced.then_some(namespace),
            name: None,
            status: false,
        };
        let options = DeleteOptions::default();
        let deleted = self.objects.locked().delete(&target, &name, &options);
        deleted.is_ok()
    }
}

/// The PATCH body by its content type.
fn patch_of(headers: &HeaderMap, body: &[u8]) -> Result<Patch, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    match content_type.split(';').next().unwrap_or_default().trim() {
        "application/json-patch+json" => Ok(Patch::json(body)?),
        // Strategic merge differs from merge on lists with merge keys, which the
        // controller's patches do not touch.
        "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
            Ok(Patch::merge(decode(body)?)?)
        }
        _ => Err(ApiError::unsupported_media_type(&PATCH_TYPES)),
    }
}

async fn serve(
    State(store): State<ObjectStore>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let target = Target::parse(uri.path()).ok_or_else(ApiError::route_not_found)?;
    let Query(query) = Query::<Vec<(String, String)>>::try_from_uri(&uri)
        .map_err(|e| ApiError::bad_request(e.body_text()))?;
    let query: Vec<(&str, &str)> = query
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let (code, object) = match (&method, target.name.as_deref()) {
        (&Method::GET, None) if !target.status => return store.list_or_watch(&target, &query),
        (&Method::POST, None) if target.namespace.is_some() || !target.case().namespaced => {
            let created = store.locked().create(&target, decode(&body)?)?;
            (StatusCode::CREATED, created)
        }
        (&Method::GET, Some(name)) => (StatusCode::OK, store.locked().current(&target, name)?),
        (&Method::PUT, Some(name)) => {
            let replaced = store.locked().replace(&target, name, decode(&body)?)?;
            (StatusCode::OK, replaced)
        }
        (&Method::PATCH, Some(name)) => {
            let patch = patch_of(&headers, &body)?;
            (StatusCode::OK, store.locked().patch(&target, name, &patch)?)
        }
        (&Method::DELETE, Some(name)) if !target.status => {
            let body = (!body.is_empty()).then(|| decode(&body)).transpose()?;
            let options = DeleteOptions::from_request(body.as_ref(), &query)?;
            if options.dry_run {
                return Err(ApiError::bad_request(
                    "the fake kube-apiserver has no dry run",
                ));
            }
            (
                StatusCode::OK,
                store.locked().delete(&target, name, &options)?,
            )
        }
        _ => return Err(ApiError::route_method_not_allowed()),
    };
    Ok(json_response(code, &object))
}

/// The routes of the served kinds; `serve` reads the kind, namespace and name from the path
/// itself, the same way for the core and the named groups.
pub fn router(store: ObjectStore) -> Router {
    [
        "/api/v1/secrets",
        "/api/v1/namespaces/{namespace}/secrets",
        "/api/v1/namespaces/{namespace}/secrets/{name}",
        "/apis/{group}/{version}/{plural}",
        "/apis/{group}/{version}/{plural}/{name}",
        "/apis/{group}/{version}/{plural}/{name}/status",
        "/apis/{group}/{version}/namespaces/{namespace}/{plural}",
        "/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}",
        "/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}/status",
    ]
    .into_iter()
    .fold(Router::new(), |router, path| router.route(path, any(serve)))
    .with_state(store)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_served_kinds_in_their_scope() {
        let machine =
            Target::parse("/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines/m/status")
                .expect("a Machine's status");
        assert_eq!(machine.case().kind, "Machine");
        assert_eq!(
            (machine.namespace.as_deref(), machine.name.as_deref()),
            (Some("ns"), Some("m"))
        );
        assert!(machine.status);
        let secrets = Target::parse("/api/v1/secrets").expect("every Secret");
        assert_eq!(
            (secrets.case().kind, secrets.namespace, secrets.name),
            ("Secret", None, None)
        );
        let pool = Target::parse("/apis/ipam.cluster.x-k8s.io/v1alpha2/globalinclusterippools/p")
            .expect("a global pool");
        assert_eq!(pool.case().kind, "GlobalInClusterIPPool");
        for refused in [
            "/api/v1/secrets/s",
            "/api/v1/namespaces/ns/secrets/s/status",
            "/apis/ipam.cluster.x-k8s.io/v1alpha2/namespaces/ns/globalinclusterippools",
            "/apis/cluster.x-k8s.io/v1beta1/namespaces/ns/machines",
            "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines/m/scale",
        ] {
            assert!(Target::parse(refused).is_none(), "{refused}");
        }
    }
}
