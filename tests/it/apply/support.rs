//! Helpers of the server-side apply tests: the field manager of
//! ProxmoxMachine, machine objects, a store of one object, and a stand-in
//! v1alpha1 conversion.
//!
//! The real v1alpha1 ⇄ v1alpha2 conversion lives on another branch; until
//! it lands, [`MachineKind`] converts the fields these tests use (the
//! network devices, whose paths differ between the versions, and the spec
//! fields both versions share) through the same `HubConversion` seam the
//! registry uses, so the field manager is exercised exactly as it will be.

use capmox_apiserver::api::decode::FieldValidation;
pub use capmox_apiserver::api::resource::MachineKind;
use capmox_apiserver::api::resource::{AdmitError, Operation, admit};
use capmox_apiserver::api::{Version, v1alpha2};
use capmox_apiserver::registry::apply::{
    ApplyError, FieldManager, HubVersions, KindVersions, Request, Subresource,
};
use jiff::Timestamp;
use serde_json::{Map, Value, json};

pub const V1: Version = Version::V1alpha1;
pub const V2: Version = Version::V1alpha2;
pub const API_V1: &str = "infrastructure.cluster.x-k8s.io/v1alpha1";
pub const API_V2: &str = "infrastructure.cluster.x-k8s.io/v1alpha2";

/// A moment `seconds` after a fixed start.
pub fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_790_000_000 + seconds).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// A request of `manager` in `version` to the main resource at `at(seconds)`.
pub fn request(manager: &str, version: Version, seconds: i64) -> Request<'_> {
    Request {
        version,
        manager,
        subresource: Subresource::Main,
        now: at(seconds),
    }
}

/// A request through the status subresource.
pub fn status_request(manager: &str, seconds: i64) -> Request<'_> {
    Request {
        subresource: Subresource::Status,
        ..request(manager, V2, seconds)
    }
}

/// A ProxmoxMachine named `m` with `spec`, in `version`.
pub fn machine(version: Version, spec: Value) -> Value {
    json!({
        "apiVersion": version.api_version(),
        "kind": "ProxmoxMachine",
        "metadata": {"name": "m", "namespace": "default"},
        "spec": spec,
    })
}

/// The one object of the tests, stored as the hub (v1alpha2) like the
/// registry stores it, written through the field manager.
#[derive(Default)]
pub struct Store {
    /// The stored object, if any.
    pub hub: Option<Value>,
}

impl Store {
    fn typed_hub(&self) -> Option<v1alpha2::ProxmoxMachine> {
        self.hub.as_ref().map(|h| {
            serde_json::from_value(h.clone()).unwrap_or_else(|e| panic!("stored hub: {e}"))
        })
    }

    /// The stored object as a client of `version` reads it.
    pub fn read(&self, version: Version) -> Option<Value> {
        let hub = self.hub.as_ref()?;
        if version == V2 {
            return Some(hub.clone());
        }
        let typed = self.typed_hub();
        let versions = HubVersions::<MachineKind>::new(typed.as_ref());
        Some(
            versions
                .convert(hub, V2, version)
                .unwrap_or_else(|e| panic!("conversion: {e}")),
        )
    }

    /// Stores an object of `version` (converted to the hub with the stored
    /// one as context). The main resource keeps the stored status and the
    /// status subresource the stored spec, as the registry's strategies do.
    fn store(&mut self, object: Value, version: Version, subresource: Subresource) {
        let typed = self.typed_hub();
        let versions = HubVersions::<MachineKind>::new(typed.as_ref());
        let mut hub = if version == V2 {
            object
        } else {
            versions
                .convert(&object, version, V2)
                .unwrap_or_else(|e| panic!("conversion: {e}"))
        };
        let previous = self.hub.take().unwrap_or_else(|| json!({}));
        let kept = match subresource {
            Subresource::Main | Subresource::Scale => "status",
            Subresource::Status => "spec",
        };
        match previous.get(kept) {
            Some(value) => hub[kept] = value.clone(),
            None => {
                if let Some(map) = hub.as_object_mut() {
                    map.remove(kept);
                }
            }
        }
        self.hub = Some(hub);
    }

    /// A create, update or patch: `new` (in the request's version) replaces
    /// the object.
    pub fn write(&mut self, new: Value, request: &Request) -> Value {
        let live = self.read(request.version);
        let typed = self.typed_hub();
        let versions = HubVersions::<MachineKind>::new(typed.as_ref());
        let written = FieldManager::new(&versions).update(live, new, request);
        self.store(written.clone(), request.version, request.subresource);
        written
    }

    /// A server-side apply; the object is stored only when it succeeds.
    pub fn apply(
        &mut self,
        config: Value,
        request: &Request,
        force: bool,
    ) -> Result<Value, ApplyError> {
        let live = self.read(request.version);
        let typed = self.typed_hub();
        let versions = HubVersions::<MachineKind>::new(typed.as_ref());
        let applied = FieldManager::new(&versions).apply(live, &config, request, force)?;
        self.store(applied.clone(), request.version, request.subresource);
        Ok(applied)
    }

    /// The stored object's managed fields as `manager/operation/version`
    /// (plus `/subresource`) → `fieldsV1`.
    pub fn owners(&self) -> Value {
        let mut out = Map::new();
        let entries = self
            .hub
            .as_ref()
            .and_then(|h| h.pointer("/metadata/managedFields"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for entry in entries {
            let text = |k: &str| entry[k].as_str().unwrap_or_default().to_owned();
            let version = text("apiVersion")
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_owned();
            let mut key = format!("{}/{}/{version}", text("manager"), text("operation"));
            if !text("subresource").is_empty() {
                key = format!("{key}/{}", text("subresource"));
            }
            out.insert(key, entry["fieldsV1"].clone());
        }
        Value::Object(out)
    }

    /// The `time` of `manager`'s entry.
    pub fn time_of(&self, manager: &str) -> Option<String> {
        self.hub
            .as_ref()?
            .pointer("/metadata/managedFields")?
            .as_array()?
            .iter()
            .find(|e| e["manager"] == manager)?
            .get("time")?
            .as_str()
            .map(str::to_owned)
    }

    /// The stored object passes the v1alpha2 write path (decoding,
    /// defaulting, schema and webhook validation).
    pub fn admit(&self) -> Result<(), AdmitError> {
        let hub = self.hub.clone().unwrap_or_default();
        admit::<MachineKind>(V2, hub, FieldValidation::Strict, Operation::Create).map(|_| ())
    }
}

/// The conflicts of a refused apply, as `manager path` lines.
pub fn conflict_lines(result: Result<Value, ApplyError>) -> Vec<String> {
    match result {
        Err(ApplyError::Conflicts(conflicts)) => conflicts
            .0
            .iter()
            .map(|c| format!("{} {}", c.manager.manager(), c.path))
            .collect(),
        Err(other) => panic!("expected conflicts, got {other}"),
        Ok(object) => panic!("expected conflicts, got {object}"),
    }
}

/// The key of a list-map item named `name` in FieldsV1.
pub fn named(name: &str) -> String {
    format!("k:{{\"name\":\"{name}\"}}")
}
