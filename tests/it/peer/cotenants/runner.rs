//! The requests of the co-tenant differential and the tally of how kube's CRD handler and our
//! server answered them.
//!
//! Objects drawn from each kind's schema (and those in the providers' cluster templates) are
//! created on both; those both accept are the bases. Then, until the run has sent its
//! requests: a base with one to three edits (the schema's rules crossed, generic ones) is
//! created under a random `fieldValidation`; where both accept it, it is read back as JSON and
//! as a Table, listed by field and label selector, updated with another edit, given a status
//! through the status subresource, scaled through the scale subresource (read, patched and
//! replaced, with bad replica counts, a stale resourceVersion and a wrong name), applied
//! server-side by two managers (a conflict, then forced), and deleted.

use reqwest::Method;
use serde_json::{Value, json};

use super::crds::CrdKind;
use super::schema::{schema_edit, valid};
use crate::peer::compare::{Difference, differences};
use crate::peer::documented::Documented;
use crate::peer::mutate::{Rng, random_edit};
use crate::peer::side::{Answer, Pair, Request};
use crate::peer::tally::{Report, Tally};

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";
/// Objects drawn from each kind's schema; a few of them pass its CEL rules too.
const DRAWS: usize = 24;
const LABEL: &str = "differential.capmox.dev/set";

pub struct Runner {
    pair: Pair,
    namespace: String,
    kinds: Vec<CrdKind>,
    rng: Rng,
    tally: Tally,
    requests: usize,
    objects: usize,
    /// Per request (its first two words), how often the peer answered with each code: what
    /// the run exercised, printed with the report.
    outcomes: std::collections::BTreeMap<(String, u16), usize>,
}

/// One object both sides accepted, as each read it back.
struct Stored {
    kind: usize,
    name: String,
    ours: Value,
    peer: Value,
}

/// What to send again of an object read back: what the server owns left out.
fn resendable(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(meta) = copy["metadata"].as_object_mut() {
        meta.retain(|key, _| matches!(key.as_str(), "labels" | "annotations"));
    }
    if let Some(object) = copy.as_object_mut() {
        object.remove("status");
    }
    copy
}

/// A Table with what differs between any two servers removed: its rows' object metadata and
/// the cells of `date` columns (an age, which moves with the clock).
fn stable_table(mut table: Value) -> Value {
    let dates: Vec<usize> = table["columnDefinitions"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .filter(|(_, c)| c["type"] == "date")
        .map(|(i, _)| i)
        .collect();
    for row in table["rows"].as_array_mut().into_iter().flatten() {
        for &i in &dates {
            row["cells"][i] = Value::Null;
        }
        if let Some(meta) = row["object"]["metadata"].as_object_mut() {
            meta.retain(|key, _| matches!(key.as_str(), "name" | "namespace" | "labels"));
        }
    }
    if let Some(meta) = table["metadata"].as_object_mut() {
        meta.clear();
    }
    table
}

/// An object's managedFields without their times, in order.
fn managed_fields(object: &Value) -> Value {
    let mut entries = object["metadata"]["managedFields"].clone();
    for entry in entries.as_array_mut().into_iter().flatten() {
        entry.as_object_mut().map(|e| e.remove("time"));
    }
    entries
}

/// Whether ours' managedFields are the peer's but for the version of entries, which ours
/// records outside our versions: a kind kube-apiserver keeps is written in its version there,
/// whatever version the client used (docs/api.md, "Kinds kube-apiserver keeps").
fn recorded_at_kube_version(ours: &Value, peer: &Value) -> bool {
    let (Some(ours), Some(peer)) = (ours.as_array(), peer.as_array()) else {
        return false;
    };
    let ours_version = |v: &Value| {
        v.as_str()
            .is_some_and(|v| v.ends_with("/v1alpha1") || v.ends_with("/v1alpha2"))
    };
    ours.len() == peer.len()
        && ours.iter().zip(peer).all(|(o, p)| {
            let mut o = o.clone();
            if !ours_version(&o["apiVersion"]) {
                o["apiVersion"] = p["apiVersion"].clone();
            }
            o == *p
        })
}

impl Runner {
    pub async fn new(
        pair: Pair,
        namespace: String,
        kinds: Vec<CrdKind>,
        seed: u64,
        documented: Documented,
    ) -> Self {
        let create = Request::new(Method::POST, "/api/v1/namespaces".into()).json(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        );
        let (ours, peer) = pair.send(&create).await;
        assert!(
            ours.ok() && peer.ok(),
            "namespace {namespace}: ours {} {}, peer {} {}",
            ours.status,
            ours.body,
            peer.status,
            peer.body
        );
        Self {
            pair,
            namespace,
            kinds,
            rng: Rng::new(seed),
            tally: Tally::new(documented),
            requests: 0,
            objects: 0,
            outcomes: Default::default(),
        }
    }

    pub async fn run(&mut self, target: usize, templates: Vec<(String, Value)>) {
        let mut drafts: Vec<(usize, String, Value)> = Vec::new();
        for (source, object) in templates {
            if let Some(kind) = self.kind_of(&object) {
                drafts.push((kind, source, object));
            }
        }
        for kind in 0..self.kinds.len() {
            for _ in 0..DRAWS {
                let object = self.drawn(kind);
                drafts.push((kind, "drawn from the schema".into(), object));
            }
        }
        // Per kind, what both accepted; a kind with few bases is edited as often as one with many.
        let mut bases: Vec<Vec<Value>> = vec![Vec::new(); self.kinds.len()];
        for (kind, source, object) in drafts {
            if let Some(stored) = self.create(kind, &source, &object, None).await {
                bases[kind].push(resendable(&stored.peer));
                self.delete(&stored).await;
            }
        }
        for (kind, found) in self.kinds.iter().zip(&bases) {
            println!(
                "co-tenant differential: {} {}: {} bases",
                kind.kind,
                kind.version,
                found.len()
            );
        }
        let kinds: Vec<usize> = (0..bases.len()).filter(|k| !bases[*k].is_empty()).collect();
        assert!(
            !kinds.is_empty(),
            "no co-tenant object was accepted by both sides"
        );
        while self.requests < target {
            let kind = *self.rng.pick(&kinds);
            let mut object = self.rng.pick(&bases[kind]).clone();
            let mut edits = Vec::new();
            for _ in 0..=self.rng.below(3) {
                if let Some(edit) = self.edit(kind, &object, "spec")
                    && edit.apply(&mut object)
                {
                    edits.push(edit.to_string());
                }
            }
            let validation = *self
                .rng
                .pick(&[None, Some("Ignore"), Some("Warn"), Some("Strict")]);
            let source = format!("edited:{}", edits.join(";"));
            if let Some(stored) = self.create(kind, &source, &object, validation).await {
                self.reads(&stored).await;
                self.update(&stored).await;
                self.set_status(&stored).await;
                self.scale(&stored).await;
                self.apply(&stored).await;
                self.delete(&stored).await;
            }
        }
    }

    fn kind_of(&self, object: &Value) -> Option<usize> {
        self.kinds.iter().position(|k| {
            object["kind"] == k.kind.as_str()
                && object["apiVersion"]
                    .as_str()
                    .is_some_and(|v| v.ends_with(&format!("/{}", k.version)))
        })
    }

    /// An object drawn from the kind's schema: its spec, and labels.
    fn drawn(&mut self, kind: usize) -> Value {
        let crd = &self.kinds[kind];
        let spec = valid(&crd.schema["properties"]["spec"], &mut self.rng, 1);
        json!({
            "apiVersion": format!("{}/{}", crate::rest::GROUP, crd.version),
            "kind": crd.kind,
            "metadata": {"labels": {LABEL: "drawn"}},
            "spec": spec,
        })
    }

    /// A schema-aware edit half of the time, a generic one otherwise.
    fn edit(
        &mut self,
        kind: usize,
        object: &Value,
        root: &str,
    ) -> Option<crate::peer::mutate::Edit> {
        if self.rng.below(2) == 0 {
            schema_edit(&mut self.rng, object, root, &self.kinds[kind].schema)
        } else {
            random_edit(&mut self.rng, object, root)
        }
    }

    /// Sends one request to both, records how they differ, warnings included.
    async fn both(
        &mut self,
        what: &str,
        context: &str,
        ours: &Request,
        peer: &Request,
    ) -> (Answer, Answer) {
        let (ours_answer, peer_answer) = self.pair.send_each(ours, peer).await;
        self.requests += 1;
        let request: Vec<&str> = what.split(' ').take(2).collect();
        *self
            .outcomes
            .entry((request.join(" "), peer_answer.status))
            .or_default() += 1;
        let mut found = differences(what, &ours_answer, &peer_answer);
        if ours_answer.warnings != peer_answer.warnings {
            found.push(Difference {
                signature: format!("{what}: warnings"),
                detail: format!(
                    "ours: {:?}\npeer: {:?}",
                    ours_answer.warnings, peer_answer.warnings
                ),
            });
        }
        if ours_answer.ok() && peer_answer.ok() {
            let (a, b) = (
                managed_fields(&ours_answer.body),
                managed_fields(&peer_answer.body),
            );
            if a != b {
                let how = if recorded_at_kube_version(&a, &b) {
                    "managedFields at kube's version"
                } else {
                    "managedFields"
                };
                found.push(Difference {
                    signature: format!("{what}: {how}"),
                    detail: format!("ours: {a}\npeer: {b}"),
                });
            }
        }
        self.tally.record_request(found, context, ours);
        (ours_answer, peer_answer)
    }

    async fn same(&mut self, what: &str, context: &str, request: Request) -> (Answer, Answer) {
        self.both(what, context, &request, &request).await
    }

    /// Creates `object` on both under a new name; where only one side accepts it, it is deleted
    /// there again.
    async fn create(
        &mut self,
        kind: usize,
        source: &str,
        object: &Value,
        validation: Option<&str>,
    ) -> Option<Stored> {
        self.objects += 1;
        let name = format!("o{}", self.objects);
        let mut object = object.clone();
        object["metadata"]["name"] = json!(name);
        object["metadata"]["namespace"] = json!(self.namespace);
        let crd = &self.kinds[kind];
        let mut path = crd.path(&self.namespace, None);
        if let Some(validation) = validation {
            path.push_str(&format!("?fieldValidation={validation}"));
        }
        let what = format!(
            "create {} {} ({})",
            crd.kind,
            crd.version,
            validation.unwrap_or("default")
        );
        let context = format!("{source}\n{object}");
        let created_path = crd.path(&self.namespace, Some(&name));
        let (ours, peer) = self
            .same(
                &what,
                &context,
                Request::new(Method::POST, path).json(object),
            )
            .await;
        if !self.pair.both_created(created_path, &ours, &peer).await {
            return None;
        }
        Some(Stored {
            kind,
            name,
            ours: ours.body,
            peer: peer.body,
        })
    }

    /// The object read back, as a Table, and listed by field and label selector.
    async fn reads(&mut self, object: &Stored) {
        let crd = &self.kinds[object.kind];
        let (kind, path) = (
            crd.kind.clone(),
            crd.path(&self.namespace, Some(&object.name)),
        );
        let collection = crd.path(&self.namespace, None);
        let context = format!("reads of\n{}", object.peer);
        self.same(
            &format!("get {kind}"),
            &context,
            Request::new(Method::GET, path.clone()),
        )
        .await;
        let table = Request::new(Method::GET, path).accept(TABLE);
        let (ours, peer) = self.pair.send(&table).await;
        self.requests += 1;
        let (ours, peer) = (
            Answer {
                body: stable_table(ours.body),
                ..ours
            },
            Answer {
                body: stable_table(peer.body),
                ..peer
            },
        );
        let found = differences(&format!("get {kind} as Table"), &ours, &peer);
        self.tally
            .record(found, |detail| format!("{context}\n{detail}"));
        for selector in [
            format!("fieldSelector=metadata.name%3D{}", object.name),
            format!("labelSelector={LABEL}%3Ddrawn"),
            format!("fieldSelector=metadata.name%21%3D{}", object.name),
        ] {
            let list = Request::new(Method::GET, format!("{collection}?{selector}"));
            let what = format!(
                "list {kind} by {}",
                selector.split('=').next().unwrap_or_default()
            );
            self.same(&what, &context, list).await;
        }
    }

    /// Each side's copy with the same edit of its spec, written back.
    async fn update(&mut self, object: &Stored) {
        let Some(edit) = self.edit(object.kind, &object.peer, "spec") else {
            return;
        };
        let (mut ours, mut peer) = (object.ours.clone(), object.peer.clone());
        if !(edit.apply(&mut ours) && edit.apply(&mut peer)) {
            return;
        }
        let crd = &self.kinds[object.kind];
        let validation = *self.rng.pick(&["Ignore", "Warn", "Strict"]);
        let path = format!(
            "{}?fieldValidation={validation}",
            crd.path(&self.namespace, Some(&object.name))
        );
        let what = format!("update {} ({validation})", crd.kind);
        let context = format!("spec edit {edit} of\n{}", object.peer);
        let put = |body: Value| Request::new(Method::PUT, path.clone()).json(body);
        self.both(&what, &context, &put(ours), &put(peer)).await;
    }

    /// A status drawn from the schema, perhaps edited, merged through the status subresource.
    async fn set_status(&mut self, object: &Stored) {
        let crd = &self.kinds[object.kind];
        if !crd.status {
            return;
        }
        let (kind, path) = (
            crd.kind.clone(),
            format!("{}/status", crd.path(&self.namespace, Some(&object.name))),
        );
        let mut patch =
            json!({"status": valid(&crd.schema["properties"]["status"], &mut self.rng, 1)});
        if self.rng.below(2) == 0
            && let Some(edit) = self.edit(object.kind, &patch, "status")
        {
            edit.apply(&mut patch);
        }
        let context = format!("status {patch} of\n{}", object.peer);
        let request = Request::new(Method::PATCH, path).merge_patch(patch);
        self.same(&format!("status {kind}"), &context, request)
            .await;
    }

    /// The `Scale` read, patched as `kubectl scale` does, and replaced (unconditionally, with a
    /// stale resourceVersion, under another name), each with a replica count good or bad.
    async fn scale(&mut self, object: &Stored) {
        let crd = &self.kinds[object.kind];
        if !crd.scale {
            return;
        }
        let kind = crd.kind.clone();
        let path = format!("{}/scale", crd.path(&self.namespace, Some(&object.name)));
        let context = format!("scale of\n{}", object.peer);
        self.same(
            &format!("get {kind} scale"),
            &context,
            Request::new(Method::GET, path.clone()),
        )
        .await;
        let counts = [
            json!(0),
            json!(3),
            json!(-1),
            json!(101),
            json!(2_147_483_648_i64),
            json!(1.5),
            json!("2"),
            Value::Null,
        ];
        let replicas = self.rng.pick(&counts).clone();
        let patch = json!({"spec": {"replicas": replicas}});
        self.same(
            &format!("patch {kind} scale"),
            &format!("{patch} on {context}"),
            Request::new(Method::PATCH, path.clone()).merge_patch(patch),
        )
        .await;
        let replicas = self.rng.pick(&counts).clone();
        for (what, name, version) in [
            ("put", object.name.as_str(), None),
            ("put stale", object.name.as_str(), Some("1")),
            ("put renamed", "renamed", None),
        ] {
            let mut metadata = json!({"name": name, "namespace": self.namespace});
            if let Some(version) = version {
                metadata["resourceVersion"] = json!(version);
            }
            let body = json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                              "metadata": metadata, "spec": {"replicas": replicas}});
            let request = Request::new(Method::PUT, path.clone()).json(body.clone());
            self.same(
                &format!("{what} {kind} scale"),
                &format!("{body} on {context}"),
                request,
            )
            .await;
        }
    }

    /// Server-side apply of one spec field by manager `alpha`, then of another value by
    /// `beta` (a conflict), then forced; the object's managedFields compared after each.
    async fn apply(&mut self, object: &Stored) {
        let crd = &self.kinds[object.kind];
        let Some(spec) = object.peer["spec"].as_object().filter(|s| !s.is_empty()) else {
            return;
        };
        let keys: Vec<&String> = spec.keys().collect();
        let key = (*self.rng.pick(&keys)).clone();
        let schema = &crd.schema["properties"]["spec"]["properties"][&key];
        let other = valid(schema, &mut self.rng, 1);
        let body = |value: &Value| {
            json!({
                "apiVersion": object.peer["apiVersion"],
                "kind": crd.kind,
                "metadata": {"name": object.name},
                "spec": {key.as_str(): value},
            })
        };
        let path = crd.path(&self.namespace, Some(&object.name));
        let kind = crd.kind.clone();
        let steps = [
            ("alpha", "", body(&spec[&key])),
            ("beta", "", body(&other)),
            ("beta", "&force=true", body(&other)),
        ];
        for (manager, force, body) in steps {
            let context = format!("apply by {manager}{force} of {body} to\n{}", object.peer);
            let request = Request::new(
                Method::PATCH,
                format!("{path}?fieldManager={manager}{force}"),
            )
            .apply_patch(body);
            self.same(
                &format!("apply {kind} by {manager}{force}"),
                &context,
                request,
            )
            .await;
        }
    }

    async fn delete(&mut self, object: &Stored) {
        let crd = &self.kinds[object.kind];
        let what = format!("delete {}", crd.kind);
        let request = Request::new(
            Method::DELETE,
            crd.path(&self.namespace, Some(&object.name)),
        );
        self.same(&what, "", request).await;
    }

    pub fn report(&self) -> Report {
        let mut lines: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
        for ((request, code), count) in &self.outcomes {
            lines
                .entry(request)
                .or_default()
                .push(format!("{code}×{count}"));
        }
        for (request, codes) in lines {
            println!("co-tenant differential: {request}: {}", codes.join(" "));
        }
        self.tally.report(self.requests)
    }
}
