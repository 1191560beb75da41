//! The ProxmoxMachine the API benchmarks (`api`, `peer`) create: one both our server and
//! upstream's CRD accept (upstream requires a network with its devices list, and a source node
//! with a template).

use serde_json::{Value, json};

pub fn machine(name: &str) -> Value {
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
        "kind": "ProxmoxMachine",
        "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": "bench"}},
        "spec": {
            "sourceNode": "pve1", "templateID": 100, "numSockets": 2, "numCores": 4,
            "memoryMiB": 16384,
            "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 100}},
            "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0", "model": "virtio"}]}
        }
    })
}
