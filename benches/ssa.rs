//! Server-side apply benchmark: an apply to a ProxmoxMachine with 20
//! network devices, against a JSON merge patch of the same change (the
//! json-patch crate) measured in the same run; both followed by the same
//! write-path validation. Prints figures and ratios; asserts nothing.
//!
//! Run: `cargo bench --bench ssa`

#[path = "../tests/it/apply/support.rs"]
#[allow(dead_code)]
mod support;

use std::hint::black_box;
use std::time::{Duration, Instant};

use capmox_apiserver::api::Version;
use capmox_apiserver::api::decode::FieldValidation;
use capmox_apiserver::api::resource::{Operation, admit};
use capmox_apiserver::api::v1alpha2;
use capmox_apiserver::registry::apply::{FieldManager, HubVersions, Request, Subresource};
use jiff::Timestamp;
use serde_json::{Value, json};

/// ProxmoxMachine (the stand-in v1alpha1 conversion of the tests is never
/// used: everything here is v1alpha2).
type Machine = support::MachineKind;

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

/// Calls per measured round, and rounds per operation.
const CALLS: u32 = 200;
const ROUNDS: usize = 15;

/// The best mean time per call of each operation over `ROUNDS` rounds of
/// `CALLS` calls, the operations taking turns in each round so that they
/// run under the same conditions (the machine is shared); the best round
/// is the one least disturbed.
fn best_times(ops: &mut [(&str, &mut dyn FnMut())]) -> Vec<Duration> {
    let mut best = vec![Duration::MAX; ops.len()];
    for (_, op) in ops.iter_mut() {
        for _ in 0..20 {
            op();
        }
    }
    for _ in 0..ROUNDS {
        for ((_, op), best) in ops.iter_mut().zip(&mut best) {
            let started = Instant::now();
            for _ in 0..CALLS {
                op();
            }
            *best = (*best).min(started.elapsed() / CALLS);
        }
    }
    best
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
    // The same applier no longer applies net19: pruning runs.
    let mut smaller = config.clone();
    if let Some(devices) = smaller
        .pointer_mut("/spec/network/networkDevices")
        .and_then(Value::as_array_mut)
    {
        devices.pop();
    }
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

    let mut merge_only = || {
        let mut object = live.clone();
        capmox_apiserver::registry::patch::merge(&mut object, black_box(&patch));
        black_box(object);
    };
    let run_apply = |config: &Value| {
        fields
            .apply(
                Some(live.clone()),
                black_box(config),
                &request("capi-machineset"),
                false,
            )
            .expect("apply")
    };
    let mut apply_only = || {
        black_box(run_apply(&config));
    };
    let mut merge_then_track = || {
        let mut object = live.clone();
        capmox_apiserver::registry::patch::merge(&mut object, black_box(&patch));
        black_box(fields.update(Some(live.clone()), object, &request("kubectl-patch")));
    };
    let mut merge_patch = || {
        let mut object = live.clone();
        capmox_apiserver::registry::patch::merge(&mut object, black_box(&patch));
        black_box(validate(object));
    };
    let mut apply = || {
        black_box(validate(run_apply(&config)));
    };
    let mut prune_apply = || {
        black_box(validate(run_apply(&smaller)));
    };
    let mut ops: Vec<(&str, &mut dyn FnMut())> = vec![
        ("merge patch (json-patch merge)", &mut merge_only),
        ("server-side apply (field manager)", &mut apply_only),
        (
            "merge patch + managedFields tracking",
            &mut merge_then_track,
        ),
        ("merge patch + validation (baseline)", &mut merge_patch),
        ("apply + validation", &mut apply),
        ("apply dropping a device + validation", &mut prune_apply),
    ];
    let times = best_times(&mut ops);
    println!(
        "ProxmoxMachine with {DEVICES} network devices, change of 2 fields (best of {ROUNDS} rounds of {CALLS})"
    );
    for ((name, _), time) in ops.iter().zip(&times) {
        println!("  {name:<42} {}", micros(*time));
    }
    let ratio = |a: usize, b: usize| times[a].as_secs_f64() / times[b].as_secs_f64();
    println!(
        "  ratio apply / merge patch, with validation         {:>6.2}×",
        ratio(4, 3)
    );
    println!(
        "  ratio apply dropping a device / merge patch        {:>6.2}×",
        ratio(5, 3)
    );
    println!(
        "  ratio field manager alone / json-patch merge alone {:>6.2}×",
        ratio(1, 0)
    );
}
