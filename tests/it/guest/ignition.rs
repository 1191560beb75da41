//! The Ignition configs the controller merges, read by Ignition's own validator
//! (`ignition-validate` v0.35.0, the last release of spec 2.x, which Flatcar's Cluster API
//! bootstrap emits; built from its Go module by `tests/e2e/run build-guest-tools`, which
//! tests/run calls first). Any error or warning fails the case. Then the networkd units in the
//! accepted config must carry exactly what the spec asked for, checked by the same
//! expectations as the files netplan generates from the network-config of the same network.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use capmox_apiserver::controller::render::Format;
use capmox_apiserver::controller::render::network::NetworkData;
use proptest::prelude::*;
use serde_json::Value;

use super::netplan::{Layout, build_case, check_units, network_case, network_data, parse_unit};

/// A config shaped as Cluster API's kubeadm bootstrap provider writes it for Flatcar
/// (Container Linux Config transpiled to spec 2.3; shortened).
const BOOTSTRAP: &str = r#"{
  "ignition": {"config": {}, "timeouts": {}, "version": "2.3.0"},
  "networkd": {},
  "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK0wmN admin"]}]},
  "storage": {"files": [
    {"filesystem": "root", "path": "/etc/kubeadm.yml", "user": {"id": 0}, "group": {"id": 0},
     "contents": {"source": "data:,apiVersion%3A%20kubeadm.k8s.io%2Fv1beta4%0Akind%3A%20InitConfiguration%0A", "verification": {}},
     "mode": 384},
    {"filesystem": "root", "path": "/etc/kubeadm.sh", "user": {"id": 0}, "group": {"id": 0},
     "contents": {"source": "data:,%23!%2Fbin%2Fbash%0Akubeadm%20init%20--config%20%2Fetc%2Fkubeadm.yml%0A", "verification": {}},
     "mode": 448}
  ]},
  "systemd": {"units": [
    {"contents": "[Unit]\nDescription=kubeadm\nAfter=network.target\n[Service]\nType=oneshot\nEnvironmentFile=/etc/proxmox-env\nExecStart=/etc/kubeadm.sh\n[Install]\nWantedBy=multi-user.target\n",
     "enabled": true, "name": "kubeadm.service"}
  ]}
}"#;

/// Unit names as the controller writes them (upstream's): by position, NICs then VRFs.
const CONTROLLER: Layout = Layout {
    device: |i| format!("{i:02}-eth{i}.network"),
    mac_key: "MACAddress",
    vrf: |devices| {
        (
            "00-vrf0.netdev".to_owned(),
            format!("{devices:02}-vrf{devices}.network"),
        )
    },
};

fn validator() -> PathBuf {
    let path = std::env::var_os("CAPMOX_IGNITION_VALIDATE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/.cache/bin/ignition-validate")
        });
    assert!(
        path.is_file(),
        "no ignition-validate at {}: run tests/e2e/run build-guest-tools",
        path.display()
    );
    path
}

/// The validator's verdict on `config`: its report (errors and warnings), empty when clean.
fn validate(validator: &Path, config: &[u8], file: &Path) -> (bool, String) {
    std::fs::write(file, config).expect("config");
    let output = Command::new(validator)
        .arg(file)
        .output()
        .expect("ignition-validate runs");
    let report = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), report)
}

fn merged(network: &NetworkData) -> Vec<u8> {
    super::seed(network, Format::Ignition, BOOTSTRAP).user_data
}

fn check_case(
    case: &super::netplan::NetworkCase,
    validator: &Path,
    file: &Path,
) -> Result<(), TestCaseError> {
    let built = build_case(case);
    let Ok(data) = network_data(&built) else {
        return Ok(()); // refused before rendering; netplan.rs checks that only these are
    };
    let config = merged(&data);
    let (accepted, report) = validate(validator, &config, file);
    prop_assert!(
        accepted && report.trim().is_empty(),
        "ignition-validate: {report}\n{}",
        String::from_utf8_lossy(&config)
    );
    let config: Value = serde_json::from_slice(&config).expect("JSON");
    let units: BTreeMap<String, _> = config["networkd"]["units"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|u| {
            let name = u["name"].as_str().expect("name").to_owned();
            (name, parse_unit(u["contents"].as_str().expect("contents")))
        })
        .collect();
    check_units(case, &built, &units, &CONTROLLER)
}

#[test]
fn ignition_accepts_the_merged_config_and_its_units_carry_the_spec() {
    let validator = validator();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("config.ign");
    let mut runner = super::runner(64);
    runner
        .run(&network_case(), |case| check_case(&case, &validator, &file))
        .unwrap_or_else(|e| panic!("{e}"));
}

/// The validator is a real judge: it rejects what Ignition would refuse at boot.
#[test]
fn ignition_refuses_a_broken_config() {
    let validator = validator();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("config.ign");
    let mut config: Value = serde_json::from_slice(&merged(&Default::default())).expect("JSON");
    config["storage"]["files"][0]["path"] = "etc/relative".into();
    let (accepted, report) = validate(&validator, config.to_string().as_bytes(), &file);
    assert!(
        !accepted && report.contains("path not absolute"),
        "{report}"
    );
}
