//! Server-side apply benchmark: an apply to a ProxmoxMachine with 20
//! network devices, against a JSON merge patch of the same change (the
//! json-patch crate) measured in the same run; both followed by the same
//! write-path validation. Prints figures and ratios; asserts nothing.
//!
//! Run: `cargo bench --bench ssa`

use std::hint::black_box;
use std::time::{Duration, Instant};

use capmox_apiserver::api::decode::FieldValidation;
use capmox_apiserver::api::resource::{
    ConversionError, HubConversion, MachineKind, Operation, Resource, admit,
};
use capmox_apiserver::api::validation::Verdict;
use capmox_apiserver::api::{Kind, Version, v1alpha1, v1alpha2};
use capmox_apiserver::registry::apply::{FieldManager, HubVersions, Request, Subresource};
use jiff::Timestamp;
use serde_json::{Value, json};

/// ProxmoxMachine served in v1alpha2 only: the benchmark converts nothing.
struct Machine;

impl Resource for Machine {
    const KIND: Kind = Kind::ProxmoxMachine;
    type V1alpha1 = v1alpha1::ProxmoxMachine;
    type Hub = v1alpha2::ProxmoxMachine;

    fn default_hub(hub: &mut Self::Hub) {
        MachineKind::default_hub(hub);
    }

    fn validate_create(hub: &Self::Hub) -> Verdict {
        MachineKind::validate_create(hub)
    }

    fn validate_update(new: &Self::Hub, old: &Self::Hub) -> Verdict {
        MachineKind::validate_update(new, old)
    }
}

impl HubConversion for Machine {
    fn to_hub(_: Self::V1alpha1, _: Option<&Self::Hub>) -> Result<Self::Hub, ConversionError> {
        Err(ConversionError("v1alpha1 is not benchmarked".into()))
    }

    fn from_hub(_: &Self::Hub) -> Result<Self::V1alpha1, ConversionError> {
        Err(ConversionError("v1alpha1 is not benchmarked".into()))
    }
}

const DEVICES: usize = 20;

/// The machine's spec; `cores` and the bridge of net7 are what changes.
fn spec(cores: i32, bridge: &str) -> Value {
    let devices: Vec<Value> = (0..DEVICES)
        .map(|i| {
            json!({
                "name": format!("net{i}"),
                "bridge": if i == 7 { bridge.to_owned() } else { format!("vmbr{i}") },
                "model": "virtio",
                "mtu": 1500,
                "dnsServers": ["10.0.0.53", "10.0.1.53"],
                "ipPoolRef": [{"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": format!("pool-{i}")}]
            })
        })
        .collect();
    json!({
        "sourceNode": "pve1",
        "templateID": 100,
        "numSockets": 1,
        "numCores": cores,
        "memoryMiB": 4096,
        "allowedNodes": ["pve1", "pve2", "pve3"],
        "network": {"networkDevices": devices}
    })
}

fn machine(spec: Value) -> Value {
    json!({
        "apiVersion": Version::V1alpha2.api_version(),
        "kind": "ProxmoxMachine",
        "metadata": {"name": "cp-0", "namespace": "default", "labels": {"cluster.x-k8s.io/cluster-name": "demo"}},
        "spec": spec
    })
}

/// Mean time per call of `op` over a fixed number of calls after a warm-up.
fn time_per_call(mut op: impl FnMut()) -> Duration {
    for _ in 0..50 {
        op();
    }
    let calls = 400u32;
    let started = Instant::now();
    for _ in 0..calls {
        op();
    }
    started.elapsed() / calls
}

fn micros(d: Duration) -> String {
    format!("{:>9.1} µs", d.as_secs_f64() * 1e6)
}

fn main() {
    let request = |manager| Request {
        version: Version::V1alpha2,
        manager,
        subresource: Subresource::Main,
        now: Timestamp::UNIX_EPOCH,
    };
    let versions = HubVersions::<Machine>::new(None);
    let fields = FieldManager::new(&versions);

    // The stored object: created by an apply, so it carries managedFields.
    let live = fields
        .apply(
            None,
            &machine(spec(2, "vmbr7")),
            &request("capi-machineset"),
            true,
        )
        .expect("create by apply");
    let stored: v1alpha2::ProxmoxMachine =
        serde_json::from_value(live.clone()).expect("stored object");
    let config = machine(spec(4, "vmbr70"));
    let patch = json!({"spec": spec(4, "vmbr70")});
    let validate = |object: Value| {
        admit::<Machine>(
            Version::V1alpha2,
            object,
            FieldValidation::Strict,
            Operation::Update(&stored),
        )
        .expect("valid")
    };

    let merge_only = time_per_call(|| {
        let mut object = live.clone();
        json_patch::merge(&mut object, black_box(&patch));
        black_box(object);
    });
    let apply_only = time_per_call(|| {
        let object = fields
            .apply(
                Some(&live),
                black_box(&config),
                &request("capi-machineset"),
                false,
            )
            .expect("apply");
        black_box(object);
    });
    let merge_then_track = time_per_call(|| {
        let mut object = live.clone();
        json_patch::merge(&mut object, black_box(&patch));
        black_box(fields.update(Some(&live), object, &request("kubectl-patch")));
    });
    let merge_patch = time_per_call(|| {
        let mut object = live.clone();
        json_patch::merge(&mut object, black_box(&patch));
        black_box(validate(object));
    });
    let apply = time_per_call(|| {
        let object = fields
            .apply(
                Some(&live),
                black_box(&config),
                &request("capi-machineset"),
                false,
            )
            .expect("apply");
        black_box(validate(object));
    });

    println!("ProxmoxMachine with {DEVICES} network devices, change of 2 fields");
    println!(
        "  merge patch (json-patch merge)            {}",
        micros(merge_only)
    );
    println!(
        "  server-side apply (field manager)         {}",
        micros(apply_only)
    );
    println!(
        "  merge patch + managedFields tracking      {}",
        micros(merge_then_track)
    );
    println!(
        "  merge patch + validation   (baseline)     {}",
        micros(merge_patch)
    );
    println!(
        "  apply + validation                        {}",
        micros(apply)
    );
    println!(
        "  ratio apply/merge patch, with validation  {:>9.2}×",
        apply.as_secs_f64() / merge_patch.as_secs_f64()
    );
    println!(
        "  ratio field manager alone / merge alone   {:>9.2}×",
        apply_only.as_secs_f64() / merge_only.as_secs_f64()
    );
}
