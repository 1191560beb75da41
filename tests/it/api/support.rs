//! Helpers shared by the API tests: valid objects of every kind, JSON edits,
//! and the write path for v1alpha2.

use capmox_apiserver::api::decode::{DecodeError, FieldValidation};
use capmox_apiserver::api::resource::{
    AdmitError, Admitted, ClusterKind, ClusterTemplateKind, HubConversion, KubernetesReleaseKind,
    MachineKind, MachineTemplateKind, Operation, admit,
};
use capmox_apiserver::api::validation::validate_schema;
use capmox_apiserver::api::{Kind, Version, decode, object, v1alpha1};
use serde_json::{Value, json};

/// The messages of a refused write, one per field error; empty if admitted.
pub fn messages<H>(result: &Result<Admitted<H>, AdmitError>) -> Vec<String> {
    match result {
        Ok(_) => Vec::new(),
        Err(AdmitError::Invalid { errors, .. }) => errors.iter().map(ToString::to_string).collect(),
        Err(AdmitError::Decode(DecodeError::Invalid(errors))) => {
            errors.iter().map(ToString::to_string).collect()
        }
        Err(other) => vec![other.to_string()],
    }
}

/// The warnings of a write, admitted or not.
pub fn warnings<H>(result: &Result<Admitted<H>, AdmitError>) -> Vec<String> {
    match result {
        Ok(admitted) => admitted.warnings.clone(),
        Err(AdmitError::Invalid { warnings, .. }) => warnings.clone(),
        Err(_) => Vec::new(),
    }
}

/// Admits a v1alpha2 create of kind `R`.
pub fn create<R: HubConversion>(body: Value) -> Result<Admitted<R::Hub>, AdmitError> {
    admit::<R>(
        Version::V1alpha2,
        body,
        FieldValidation::Strict,
        Operation::Create,
    )
}

/// Admits a v1alpha2 update of kind `R`, the stored object being `old`
/// (itself admitted as a create first).
pub fn update<R: HubConversion>(body: Value, old: Value) -> Result<Admitted<R::Hub>, AdmitError> {
    let stored = create::<R>(old).expect("the old object is valid").hub;
    admit::<R>(
        Version::V1alpha2,
        body,
        FieldValidation::Strict,
        Operation::Update(&stored),
    )
}

/// The messages of a v1alpha2 create of any kind.
pub fn admit_create(kind: Kind, body: Value) -> Vec<String> {
    admit_create_warned(kind, body).0
}

/// The messages and the warnings of a v1alpha2 create of any kind.
pub fn admit_create_warned(kind: Kind, body: Value) -> (Vec<String>, Vec<String>) {
    fn both<H>(result: Result<Admitted<H>, AdmitError>) -> (Vec<String>, Vec<String>) {
        (messages(&result), warnings(&result))
    }
    match kind {
        Kind::ProxmoxCluster => both(create::<ClusterKind>(body)),
        Kind::ProxmoxClusterTemplate => both(create::<ClusterTemplateKind>(body)),
        Kind::ProxmoxKubernetesRelease => both(create::<KubernetesReleaseKind>(body)),
        Kind::ProxmoxMachine => both(create::<MachineKind>(body)),
        Kind::ProxmoxMachineTemplate => both(create::<MachineTemplateKind>(body)),
    }
}

/// The messages of a v1alpha2 update of any kind.
pub fn admit_update(kind: Kind, body: Value, old: Value) -> Vec<String> {
    match kind {
        Kind::ProxmoxCluster => messages(&update::<ClusterKind>(body, old)),
        Kind::ProxmoxClusterTemplate => messages(&update::<ClusterTemplateKind>(body, old)),
        Kind::ProxmoxKubernetesRelease => messages(&update::<KubernetesReleaseKind>(body, old)),
        Kind::ProxmoxMachine => messages(&update::<MachineKind>(body, old)),
        Kind::ProxmoxMachineTemplate => messages(&update::<MachineTemplateKind>(body, old)),
    }
}

/// The stored (hub) form of an admitted v1alpha2 create, as JSON.
pub fn admitted_value(kind: Kind, body: Value) -> Value {
    fn stored<R: HubConversion>(body: Value) -> Value {
        object::to_value(&create::<R>(body).expect("admitted").hub)
    }
    match kind {
        Kind::ProxmoxCluster => stored::<ClusterKind>(body),
        Kind::ProxmoxClusterTemplate => stored::<ClusterTemplateKind>(body),
        Kind::ProxmoxKubernetesRelease => stored::<KubernetesReleaseKind>(body),
        Kind::ProxmoxMachine => stored::<MachineKind>(body),
        Kind::ProxmoxMachineTemplate => stored::<MachineTemplateKind>(body),
    }
}

/// The messages of decoding and schema-validating a v1alpha1 object (the
/// v1alpha1 part of the write path; webhooks run on the hub).
pub fn check_v1alpha1(kind: Kind, body: Value, old: Option<Value>) -> Vec<String> {
    fn typed<T: capmox_apiserver::api::ApiObject>(body: Value) -> Result<Value, DecodeError> {
        decode::decode::<T>(body, FieldValidation::Strict).map(|d| d.value)
    }
    let decoded = match kind {
        Kind::ProxmoxCluster => typed::<v1alpha1::ProxmoxCluster>(body),
        Kind::ProxmoxClusterTemplate => typed::<v1alpha1::ProxmoxClusterTemplate>(body),
        Kind::ProxmoxKubernetesRelease => return vec![format!("{kind} is not served in v1alpha1")],
        Kind::ProxmoxMachine => typed::<v1alpha1::ProxmoxMachine>(body),
        Kind::ProxmoxMachineTemplate => typed::<v1alpha1::ProxmoxMachineTemplate>(body),
    };
    match decoded {
        Ok(value) => validate_schema(Version::V1alpha1, kind, &value, old.as_ref())
            .errors
            .iter()
            .map(ToString::to_string)
            .collect(),
        Err(DecodeError::Invalid(errors)) => errors.iter().map(ToString::to_string).collect(),
        Err(other) => vec![other.to_string()],
    }
}

/// Reads a JSON fixture from `tests/it/api/fixtures/`.
pub fn fixture(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/api/fixtures")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Sets the value at a JSON pointer, creating the last key.
pub fn set(value: &mut Value, pointer: &str, new: Value) {
    let (parent, key) = pointer.rsplit_once('/').expect("a pointer");
    let parent = value
        .pointer_mut(parent)
        .unwrap_or_else(|| panic!("no parent at {pointer}"));
    match parent {
        Value::Object(map) => {
            map.insert(key.to_owned(), new);
        }
        Value::Array(items) => {
            let i: usize = key.parse().expect("an index");
            if i == items.len() {
                items.push(new);
            } else {
                items[i] = new;
            }
        }
        other => panic!("cannot set {pointer} in {other}"),
    }
}

/// Removes the value at a JSON pointer.
pub fn remove(value: &mut Value, pointer: &str) {
    let (parent, key) = pointer.rsplit_once('/').expect("a pointer");
    match value.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.remove(key);
        }
        Some(Value::Array(items)) => {
            items.remove(key.parse::<usize>().expect("an index"));
        }
        _ => panic!("nothing at {pointer}"),
    }
}

/// An edit of a valid object.
#[derive(Clone, Debug)]
pub enum Edit {
    /// Set the value at a pointer.
    Set(&'static str, Value),
    /// Remove the value at a pointer.
    Remove(&'static str),
}

/// `base` with the edits applied.
pub fn edited(mut base: Value, edits: &[Edit]) -> Value {
    for edit in edits {
        match edit {
            Edit::Set(pointer, value) => set(&mut base, pointer, value.clone()),
            Edit::Remove(pointer) => remove(&mut base, pointer),
        }
    }
    base
}

const V1ALPHA1: &str = "infrastructure.cluster.x-k8s.io/v1alpha1";
const V1ALPHA2: &str = "infrastructure.cluster.x-k8s.io/v1alpha2";

fn cluster_spec() -> Value {
    json!({
        "controlPlaneEndpoint": { "host": "10.10.10.9", "port": 6443 },
        "ipv4Config": {
            "addresses": ["10.10.10.10-10.10.10.15"],
            "prefix": 24,
            "gateway": "10.10.10.1"
        },
        "dnsServers": ["8.8.8.8", "8.8.4.4"]
    })
}

fn machine_spec() -> Value {
    json!({
        "sourceNode": "pve1",
        "templateID": 100,
        "numSockets": 2,
        "numCores": 4,
        "memoryMiB": 16384,
        "disks": { "bootVolume": { "disk": "scsi0", "sizeGb": 100 } },
        "network": {
            "networkDevices": [{ "name": "net0", "bridge": "vmbr0", "model": "virtio" }]
        }
    })
}

fn object(api_version: &str, kind: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": { "name": name, "namespace": "default" },
        "spec": spec
    })
}

/// A valid v1alpha2 ProxmoxCluster.
pub fn cluster_v2() -> Value {
    object(V1ALPHA2, "ProxmoxCluster", "demo", cluster_spec())
}

/// A valid v1alpha2 ProxmoxClusterTemplate.
pub fn cluster_template_v2() -> Value {
    object(
        V1ALPHA2,
        "ProxmoxClusterTemplate",
        "demo",
        json!({ "template": { "spec": cluster_spec() } }),
    )
}

/// A valid v1alpha2 ProxmoxMachine.
pub fn machine_v2() -> Value {
    object(V1ALPHA2, "ProxmoxMachine", "demo-cp-0", machine_spec())
}

/// A valid v1alpha2 ProxmoxMachineTemplate.
pub fn machine_template_v2() -> Value {
    object(
        V1ALPHA2,
        "ProxmoxMachineTemplate",
        "demo-cp",
        json!({ "template": { "spec": machine_spec() } }),
    )
}

/// A valid v1alpha1 ProxmoxCluster.
pub fn cluster_v1() -> Value {
    object(V1ALPHA1, "ProxmoxCluster", "demo", cluster_spec())
}

/// A valid v1alpha1 ProxmoxMachine.
pub fn machine_v1() -> Value {
    object(
        V1ALPHA1,
        "ProxmoxMachine",
        "demo-cp-0",
        json!({
            "sourceNode": "pve1",
            "templateID": 100,
            "network": { "default": { "bridge": "vmbr0" } }
        }),
    )
}

/// A valid v1alpha1 ProxmoxMachineTemplate.
pub fn machine_template_v1() -> Value {
    object(
        V1ALPHA1,
        "ProxmoxMachineTemplate",
        "demo-cp",
        json!({ "template": { "spec": { "sourceNode": "pve1", "templateID": 100 } } }),
    )
}

/// A valid v1alpha1 ProxmoxClusterTemplate.
pub fn cluster_template_v1() -> Value {
    object(
        V1ALPHA1,
        "ProxmoxClusterTemplate",
        "demo",
        json!({ "template": { "spec": cluster_spec() } }),
    )
}

/// The error kube-apiserver adds when schema errors keep the CEL rules from
/// running.
pub const NOT_CHECKED: &str = r#"<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"#;

/// One table case: a valid base object, edits, and the exact messages
/// expected (none when the edited object must be accepted).
pub struct Case {
    /// What the case shows.
    pub name: &'static str,
    /// The valid object the case starts from.
    pub base: fn() -> Value,
    /// The edits made to it.
    pub edits: Vec<Edit>,
    /// The expected messages, in order.
    pub expect: Vec<&'static str>,
}

/// A case expecting `expect`.
pub fn case(
    name: &'static str,
    base: fn() -> Value,
    edits: Vec<Edit>,
    expect: Vec<&'static str>,
) -> Case {
    Case {
        name,
        base,
        edits,
        expect,
    }
}

/// The messages of creating `body` in its version: the full write path for
/// v1alpha2, decoding and schema validation for v1alpha1.
pub fn create_messages(body: Value) -> Vec<String> {
    let kind = Kind::from_name(body["kind"].as_str().unwrap_or_default()).expect("a kind");
    if body["apiVersion"] == V1ALPHA1 {
        check_v1alpha1(kind, body, None)
    } else {
        admit_create(kind, body)
    }
}

/// Runs cases through `check` (which gets the valid base and the edited
/// object); reports every mismatch at once.
fn run_cases(cases: Vec<Case>, check: impl Fn(Value, Value) -> Vec<String>) {
    let failures: Vec<String> = cases
        .into_iter()
        .filter_map(|c| {
            let base = (c.base)();
            let got = check(base.clone(), edited(base, &c.edits));
            (got != c.expect).then(|| {
                format!(
                    "{}:\n  expected {:#?}\n  got      {:#?}",
                    c.name, c.expect, got
                )
            })
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Runs create cases.
pub fn run_create_cases(cases: Vec<Case>) {
    run_cases(cases, |_, new| create_messages(new));
}

/// Runs update cases: the base object is stored, the edited one written
/// over it.
pub fn run_update_cases(cases: Vec<Case>) {
    run_cases(cases, |old, new| {
        let kind = Kind::from_name(old["kind"].as_str().unwrap_or_default()).expect("a kind");
        if old["apiVersion"] == V1ALPHA1 {
            check_v1alpha1(kind, new, Some(old))
        } else {
            admit_update(kind, new, old)
        }
    });
}
