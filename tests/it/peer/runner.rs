//! The requests of a differential run and the tally of how the two sides answered them.
//!
//! Every seed is created as it is, read back in both versions, updated through the other
//! version with what that version showed (the round trip upstream needs its conversion-data
//! annotation for), and read back again; then every kind is listed in both versions. Then,
//! until the run has sent its requests: a seed of a random kind and version (the seeds as
//! both sides showed them in each version), with one to three random edits, is created, and,
//! where both accept it, read back, round-tripped, updated with a random edit of its spec
//! (immutable fields, the template kinds), given a status, and deleted.

use capmox_apiserver::api::{Kind, Version};
use reqwest::Method;
use serde_json::{Value, json};

use super::compare::differences;
use super::corpus::seeds;
use super::documented::Documented;
use super::mutate::{Rng, random_edit};
use super::side::{Answer, Pair, Request, path};
use super::tally::{Report, Tally};

const NAMESPACE: &str = "differential";

pub struct Runner {
    pair: Pair,
    rng: Rng,
    tally: Tally,
    requests: usize,
    objects: usize,
}

/// Both sides' copies of one object, as each read it back.
struct Stored {
    kind: Kind,
    name: String,
    ours: Value,
    peer: Value,
}

fn version_of(object: &Value) -> Version {
    match object["apiVersion"]
        .as_str()
        .and_then(|v| v.rsplit_once('/'))
    {
        Some((_, "v1alpha1")) => Version::V1alpha1,
        _ => Version::V1alpha2,
    }
}

fn other(version: Version) -> Version {
    match version {
        Version::V1alpha1 => Version::V1alpha2,
        Version::V1alpha2 => Version::V1alpha1,
    }
}

/// What to send again of an object read back: its apiVersion, kind, name, labels,
/// annotations, spec; what the server owns left out.
fn resendable(object: &Value) -> Value {
    let mut meta = json!({});
    for key in ["labels", "annotations"] {
        if let Some(value) = object["metadata"].get(key) {
            meta[key] = value.clone();
        }
    }
    json!({
        "apiVersion": object["apiVersion"],
        "kind": object["kind"],
        "metadata": meta,
        "spec": object["spec"],
    })
}

/// A status each kind can be given through its status subresource, per version.
fn status_patches(kind: Kind, version: Version) -> Vec<Value> {
    let condition = json!({
        "type": "Ready", "status": "True", "reason": "Ready", "message": "",
        "lastTransitionTime": "2026-12-01T00:00:00Z"
    });
    match (kind, version) {
        (Kind::ProxmoxCluster, Version::V1alpha1) => vec![
            json!({"ready": true}),
            json!({"failureReason": "InvalidConfiguration", "failureMessage": "no"}),
            json!({"conditions": [condition]}),
        ],
        (Kind::ProxmoxCluster, Version::V1alpha2) => vec![
            json!({"initialization": {"provisioned": true}}),
            json!({"conditions": [condition]}),
        ],
        (Kind::ProxmoxMachine, Version::V1alpha1) => vec![
            json!({"ready": true, "vmStatus": "ready", "proxmoxNode": "pve1"}),
            json!({"addresses": [{"type": "InternalIP", "address": "10.0.0.5"}]}),
            json!({"bootstrapDataProvided": true, "conditions": [condition]}),
        ],
        (Kind::ProxmoxMachine, Version::V1alpha2) => vec![
            json!({"initialization": {"provisioned": true}, "vmStatus": "ready"}),
            json!({"addresses": [{"type": "InternalIP", "address": "10.0.0.5"}]}),
            json!({"proxmoxNode": "pve1", "conditions": [condition]}),
        ],
        _ => Vec::new(),
    }
}

impl Runner {
    pub async fn new(pair: Pair, seed: u64, documented: Documented) -> Self {
        let namespace = Request::new(Method::POST, "/api/v1/namespaces".into()).json(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        );
        let (ours, peer) = pair.send(&namespace).await;
        assert!(
            ours.ok() && peer.ok(),
            "namespace {NAMESPACE}: ours {} {}, peer {} {}",
            ours.status,
            ours.body,
            peer.status,
            peer.body
        );
        println!("differential: seed {seed}");
        Self {
            pair,
            rng: Rng::new(seed),
            tally: Tally::new(documented),
            requests: 0,
            objects: 0,
        }
    }

    pub async fn run(&mut self, target: usize) {
        let seeds = seeds();
        println!("differential: {} seeds", seeds.len());
        let mut stored = Vec::new();
        for seed in &seeds {
            if let Some(object) = self
                .create_and_read(seed.kind(), &seed.source, &seed.object)
                .await
            {
                stored.push(object);
            }
        }
        // Later creates start from what both accepted, in both versions as the peer shows it.
        let mut bases = Vec::new();
        for object in &stored {
            bases.push(resendable(&object.peer));
            if let Some(shown) = self.round_trip(object).await {
                bases.push(resendable(&shown));
            }
        }
        self.lists().await;
        for object in &stored {
            self.delete(object).await;
        }
        assert!(!bases.is_empty(), "no seed was accepted by both sides");
        while self.requests < target {
            let mut object = self.rng.pick(&bases).clone();
            let mut edits = Vec::new();
            for _ in 0..=self.rng.below(3) {
                if let Some(edit) = random_edit(&mut self.rng, &object, "spec")
                    && edit.apply(&mut object)
                {
                    edits.push(edit.to_string());
                }
            }
            let kind = Kind::from_name(object["kind"].as_str().unwrap_or_default()).expect("kind");
            let source = format!("edited:{}", edits.join(";"));
            if let Some(stored) = self.create_and_read(kind, &source, &object).await {
                self.round_trip(&stored).await;
                self.edit_spec(&stored).await;
                self.set_status(&stored).await;
                self.delete(&stored).await;
            }
        }
    }

    /// Sends one request to both, records how they differ; `what` starts each signature.
    async fn both(
        &mut self,
        what: &str,
        context: &str,
        ours: &Request,
        peer: &Request,
    ) -> (Answer, Answer) {
        let (ours_answer, peer_answer) = self.pair.send_each(ours, peer).await;
        self.requests += 1;
        let found = differences(what, &ours_answer, &peer_answer);
        self.tally.record_request(found, context, ours);
        (ours_answer, peer_answer)
    }

    async fn same(&mut self, what: &str, context: &str, request: Request) -> (Answer, Answer) {
        self.both(what, context, &request, &request).await
    }

    /// Creates `object` on both under a new name; where both accept it, reads it back in both
    /// versions. Where only one side accepts it, it is deleted there again.
    async fn create_and_read(
        &mut self,
        kind: Kind,
        source: &str,
        object: &Value,
    ) -> Option<Stored> {
        self.objects += 1;
        let name = format!("o{}", self.objects);
        let mut object = object.clone();
        object["metadata"]["name"] = json!(name);
        object["metadata"]["namespace"] = json!(NAMESPACE);
        let version = version_of(&object);
        let context = format!("{source}\n{object}");
        let create = Request::new(Method::POST, path(kind, version, NAMESPACE, None)).json(object);
        let (ours, peer) = self
            .same(&format!("create {kind:?} {version}"), &context, create)
            .await;
        let created = path(kind, version, NAMESPACE, Some(&name));
        if !self.pair.both_created(created, &ours, &peer).await {
            return None;
        }
        let mut read = None;
        for shown in Version::ALL {
            let get = Request::new(Method::GET, path(kind, shown, NAMESPACE, Some(&name)));
            let what = format!("get {kind:?} {shown} (created in {version})");
            let (ours, peer) = self.same(&what, &context, get).await;
            if shown == version {
                read = Some((ours.body, peer.body));
            }
        }
        let (ours, peer) = read?;
        Some(Stored {
            kind,
            name,
            ours,
            peer,
        })
    }

    /// Both copies written back through the other version as each side shows it, then read in
    /// the original version; the peer's answer in the other version.
    async fn round_trip(&mut self, object: &Stored) -> Option<Value> {
        let (kind, version) = (object.kind, version_of(&object.ours));
        let through = other(version);
        let context = format!("round trip through {through} of\n{}", object.peer);
        let get = Request::new(
            Method::GET,
            path(kind, through, NAMESPACE, Some(&object.name)),
        );
        let what = format!("get {kind:?} {through} (for a round trip)");
        let (ours, peer) = self.same(&what, &context, get).await;
        if !(ours.ok() && peer.ok()) {
            return None;
        }
        let put = |body: Value| {
            Request::new(
                Method::PUT,
                path(kind, through, NAMESPACE, Some(&object.name)),
            )
            .json(body)
        };
        let what = format!("update {kind:?} {through} (round trip of a {version} object)");
        self.both(
            &what,
            &context,
            &put(ours.body.clone()),
            &put(peer.body.clone()),
        )
        .await;
        let get = Request::new(
            Method::GET,
            path(kind, version, NAMESPACE, Some(&object.name)),
        );
        let what = format!("get {kind:?} {version} (after a {through} round trip)");
        self.same(&what, &context, get).await;
        Some(peer.body)
    }

    /// A random edit of the spec, the same on both copies, written back.
    async fn edit_spec(&mut self, object: &Stored) {
        let Some(edit) = random_edit(&mut self.rng, &object.peer, "spec") else {
            return;
        };
        let (mut ours, mut peer) = (object.ours.clone(), object.peer.clone());
        if !(edit.apply(&mut ours) && edit.apply(&mut peer)) {
            return;
        }
        let (kind, version) = (object.kind, version_of(&object.ours));
        // The copies read before the round trip: their resourceVersion is stale by now.
        for copy in [&mut ours, &mut peer] {
            copy["metadata"]
                .as_object_mut()
                .map(|m| m.remove("resourceVersion"));
        }
        let put = |body: Value| {
            Request::new(
                Method::PUT,
                path(kind, version, NAMESPACE, Some(&object.name)),
            )
            .json(body)
        };
        let context = format!("spec edit {edit} of\n{}", object.peer);
        let what = format!("update {kind:?} {version} (spec edited)");
        let (a, b) = self.both(&what, &context, &put(ours), &put(peer)).await;
        if a.ok() && b.ok() {
            let get = Request::new(
                Method::GET,
                path(kind, other(version), NAMESPACE, Some(&object.name)),
            );
            self.same(
                &format!("get {kind:?} {} (after a spec edit)", other(version)),
                &context,
                get,
            )
            .await;
        }
    }

    /// A status given through the status subresource, then read back in the other version.
    async fn set_status(&mut self, object: &Stored) {
        let (kind, version) = (object.kind, version_of(&object.ours));
        let candidates = status_patches(kind, version);
        if candidates.is_empty() {
            return;
        }
        let status = self.rng.pick(&candidates).clone();
        let context = format!("status {status} of\n{}", object.peer);
        let status_path = format!(
            "{}/status",
            path(kind, version, NAMESPACE, Some(&object.name))
        );
        let patch = Request::new(Method::PATCH, status_path).merge_patch(json!({"status": status}));
        let (a, b) = self
            .same(&format!("status {kind:?} {version}"), &context, patch)
            .await;
        if a.ok() && b.ok() {
            let shown = other(version);
            let get = Request::new(
                Method::GET,
                path(kind, shown, NAMESPACE, Some(&object.name)),
            );
            self.same(
                &format!("get {kind:?} {shown} (after a status update)"),
                &context,
                get,
            )
            .await;
        }
    }

    async fn delete(&mut self, object: &Stored) {
        let version = version_of(&object.ours);
        let delete = Request::new(
            Method::DELETE,
            path(object.kind, version, NAMESPACE, Some(&object.name)),
        );
        self.same(&format!("delete {:?}", object.kind), "", delete)
            .await;
    }

    /// Every kind of upstream's (those v1alpha1 serves) listed in both versions.
    async fn lists(&mut self) {
        for kind in Kind::served_in(Version::V1alpha1) {
            for version in Version::ALL {
                let list = Request::new(Method::GET, path(kind, version, NAMESPACE, None));
                self.same(&format!("list {kind:?} {version}"), "the seeds", list)
                    .await;
            }
        }
    }

    pub fn report(&self) -> Report {
        self.tally.report(self.requests)
    }
}
