//! The complete `dev` mode: `kubectl apply -f examples/dev/` provisions a cluster with a VIP
//! from a pool, three control-plane and two worker VMs on the simulator, through the
//! built-in controller, the stand-ins and the dev emulation of Cluster API and IPAM; and
//! `kubectl delete cluster dev` removes every VM, claim and object again; the provider's
//! metrics follow the flow.

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

use capmox_apiserver::emulation::EmulationOptions;
use capmox_apiserver::proxmox::sim::Profile;
use capmox_apiserver::proxmox::sim::world::Power;
use capmox_apiserver::run::dev::{DevStack, DevStackOptions};
use capmox_apiserver::server::dev::DevOptions;
use capmox_apiserver::server::tls;
use serde_json::Value;

use crate::server::kubectl;

const MACHINES: [&str; 5] = [
    "dev-cp-0",
    "dev-cp-1",
    "dev-cp-2",
    "dev-worker-0",
    "dev-worker-1",
];

struct Cli<'a> {
    kubeconfig: &'a Path,
    cache: String,
}

impl<'a> Cli<'a> {
    fn of(stack: &'a DevStack, dir: &Path) -> Self {
        Cli {
            kubeconfig: &stack.dev.kubeconfig,
            cache: dir.join("kubectl-cache").to_string_lossy().into_owned(),
        }
    }

    async fn run(&self, args: &[&str]) -> (bool, String) {
        let output = tokio::process::Command::new(kubectl("1.33"))
            .args(["--kubeconfig", &self.kubeconfig.to_string_lossy()])
            .args(["--cache-dir", &self.cache])
            .args(args)
            .output()
            .await
            .expect("kubectl runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.success(), text)
    }

    /// `kubectl get <what> -o json`'s items.
    async fn items(&self, what: &str) -> Vec<Value> {
        let (ok, text) = self
            .run(&["get", what, "-n", "default", "-o", "json"])
            .await;
        assert!(ok, "kubectl get {what}: {text}");
        let list: Value = serde_json::from_str(&text).expect("json list");
        list["items"].as_array().cloned().unwrap_or_default()
    }
}

/// One sample of an OpenMetrics exposition: name, labels, value.
pub(crate) type Sample = (String, Vec<(String, String)>, f64);

/// The samples of `/metrics` (label values may hold braces and commas: `{node}`).
pub(crate) fn samples(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (series, value) = line.rsplit_once(' ').expect("sample has a value");
        let (name, mut rest) = series.split_once('{').unwrap_or((series, ""));
        let mut labels = Vec::new();
        while let Some((key, after)) = rest.split_once("=\"") {
            let mut value = String::new();
            let mut chars = after.char_indices();
            let end = loop {
                match chars.next().expect("closing quote") {
                    (_, '\\') => value.push(chars.next().expect("escaped").1),
                    (i, '"') => break i,
                    (_, c) => value.push(c),
                }
            };
            labels.push((key.trim_start_matches(',').to_owned(), value));
            rest = &after[end + 1..];
        }
        out.push((name.to_owned(), labels, value.parse().expect("number")));
    }
    out
}

/// The sum of the series of `name` that carry all of `labels`.
fn sum(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .map(|(_, _, v)| v)
        .sum()
}

/// `/metrics` of the dev server, through kubectl.
async fn metrics(cli: &Cli<'_>) -> Vec<Sample> {
    let (ok, text) = cli.run(&["get", "--raw", "/metrics"]).await;
    assert!(ok, "kubectl get --raw /metrics: {text}");
    samples(&text)
}

fn in_range(address: &str, first: u8, last: u8) -> bool {
    address
        .parse::<Ipv4Addr>()
        .is_ok_and(|ip| ip.octets()[..3] == [10, 0, 0] && (first..=last).contains(&ip.octets()[3]))
}

/// Non-template VMs of the simulator: (name, running, node).
fn vms(stack: &DevStack) -> Vec<(String, bool, String)> {
    let mut vms: Vec<(String, bool, String)> = stack.sim_control.with_world(|w| {
        w.vms
            .values()
            .filter(|vm| !vm.is_template())
            .map(|vm| (vm.name(), vm.power == Power::Running, vm.node.clone()))
            .collect()
    });
    vms.sort();
    vms
}

/// The distinct nodes of the VMs whose names start with `prefix`.
fn nodes_of(vms: &[(String, bool, String)], prefix: &str) -> std::collections::BTreeSet<String> {
    vms.iter()
        .filter(|(name, _, _)| name.starts_with(prefix))
        .map(|(_, _, node)| node.clone())
        .collect()
}

async fn wait_for<F, Fut>(what: &str, limit: Duration, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match done().await {
            Ok(()) => return,
            Err(state) if tokio::time::Instant::now() > deadline => {
                panic!("timed out waiting for {what}; last state: {state}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// `dev` on the simulator's fast profile, in `dir`.
async fn start_stack(dir: &Path) -> DevStack {
    tls::install_default_provider();
    DevStack::start(&DevStackOptions {
        server: DevOptions {
            dir: dir.join("dev"),
            port: 0,
            ..DevOptions::default()
        },
        sim_port: 0,
        sim_profile: Profile::Fast,
        emulation: EmulationOptions {
            relist_interval: Duration::from_secs(5),
        },
        ..DevStackOptions::default()
    })
    .await
    .expect("dev starts")
}

/// Waits until `count` ProxmoxMachines are provisioned and their Machines joined.
async fn wait_provisioned(cli: &Cli<'_>, count: usize) {
    wait_for("provisioned machines", Duration::from_secs(240), || async {
        let machines = cli.items("proxmoxmachines").await;
        let provisioned = machines
            .iter()
            .filter(|m| m["status"]["initialization"]["provisioned"] == true)
            .count();
        let joined = cli
            .items("machines")
            .await
            .iter()
            .filter(|m| m["status"]["nodeRef"]["name"].is_string())
            .count();
        if provisioned == count && joined == count {
            Ok(())
        } else {
            let conditions: Vec<String> = machines
                .iter()
                .map(|m| format!("{}: {}", m["metadata"]["name"], m["status"]["conditions"]))
                .collect();
            Err(format!(
                "{provisioned} provisioned, {joined} joined of {count}; {conditions:?}"
            ))
        }
    })
    .await;
}

/// Deletes a Cluster and waits until nothing of it is left.
async fn delete_cluster(cli: &Cli<'_>, stack: &DevStack, name: &str) {
    let (ok, text) = cli
        .run(&["delete", "cluster", name, "-n", "default", "--timeout=240s"])
        .await;
    assert!(ok, "kubectl delete cluster {name}: {text}");
    wait_for("everything gone", Duration::from_secs(240), || async {
        let left = (
            vms(stack).len(),
            cli.items("proxmoxmachines").await.len(),
            cli.items("proxmoxclusters").await.len(),
            cli.items("machines").await.len(),
            cli.items("ipaddressclaims").await.len(),
            cli.items("ipaddresses").await.len(),
        );
        if left == (0, 0, 0, 0, 0, 0) {
            Ok(())
        } else {
            Err(format!(
                "(vms, proxmoxmachines, proxmoxclusters, machines, claims, addresses) = {left:?}"
            ))
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn examples_provision_five_vms_with_a_vip_and_delete_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let stack = start_stack(dir.path()).await;
    let instructions = stack.instructions();
    assert!(
        instructions.contains("SIMULATED Proxmox VE"),
        "{instructions}"
    );
    assert!(instructions.contains("stand-ins"), "{instructions}");

    let cli = Cli::of(&stack, dir.path());
    let before = metrics(&cli).await;
    assert_eq!(
        sum(&before, "capmox_proxmox_requests_total", &[]),
        0.0,
        "no machine, no Proxmox call"
    );
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/dev");
    let (ok, text) = cli.run(&["apply", "-f", &examples.to_string_lossy()]).await;
    assert!(ok, "kubectl apply -f examples/dev/: {text}");

    wait_provisioned(&cli, MACHINES.len()).await;

    // The provider's metrics moved with the flow: one clone per machine (the controller
    // never clones twice), its latency, the tasks it waited for, the time each machine
    // took to be provisioned, and every machine counted in a provisioned phase.
    let provisioned = metrics(&cli).await;
    let clone = [
        ("operation", "POST /nodes/{node}/qemu/{vmid}/clone"),
        ("result", "200"),
    ];
    let five = MACHINES.len() as f64;
    assert_eq!(
        sum(&provisioned, "capmox_proxmox_requests_total", &clone),
        five
    );
    assert_eq!(
        sum(
            &provisioned,
            "capmox_proxmox_request_duration_seconds_count",
            &clone[..1]
        ),
        five
    );
    assert!(
        sum(
            &provisioned,
            "capmox_proxmox_requests_total",
            &[("operation", "GET /version")]
        ) >= 1.0
    );
    for task in ["qmclone", "qmstart"] {
        assert!(
            sum(
                &provisioned,
                "capmox_proxmox_task_duration_seconds_count",
                &[("type", task), ("result", "success")]
            ) >= five,
            "{task} tasks"
        );
    }
    assert_eq!(
        sum(
            &provisioned,
            "capmox_machine_provisioning_duration_seconds_count",
            &[]
        ),
        five
    );
    assert!(
        sum(
            &provisioned,
            "capmox_machine_provisioning_duration_seconds_sum",
            &[]
        ) > 0.0
    );
    let in_phase = |phase| sum(&provisioned, "capmox_machines", &[("phase", phase)]);
    assert_eq!(
        in_phase("Provisioned") + in_phase("WaitingForBootstrapReady"),
        five
    );
    assert_eq!(sum(&provisioned, "capmox_machines", &[]), five);
    let machine_creations = [
        ("resource", "proxmoxmachines"),
        ("verb", "POST"),
        ("code", "201"),
    ];
    assert_eq!(
        sum(&provisioned, "apiserver_request_total", &machine_creations)
            - sum(&before, "apiserver_request_total", &machine_creations),
        five,
        "kubectl apply created five machines"
    );

    // The VIP came from the dev-vip pool and is the Cluster's endpoint.
    let cluster = cli.items("proxmoxclusters").await.remove(0);
    let vip = cluster["spec"]["controlPlaneEndpoint"]["host"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(in_range(&vip, 50, 59), "VIP {vip:?} from the pool");
    assert_eq!(cluster["status"]["initialization"]["provisioned"], true);
    let capi = cli.items("clusters").await.remove(0);
    assert_eq!(capi["spec"]["controlPlaneEndpoint"]["host"], vip.as_str());

    // Every machine has a VM on the simulator, running, and a node address from the pool;
    // machines created together spread over the allowed nodes, per role.
    let running = vms(&stack);
    let names: Vec<(&str, bool)> = running.iter().map(|(n, r, _)| (n.as_str(), *r)).collect();
    let expected: Vec<(&str, bool)> = MACHINES.iter().map(|m| (*m, true)).collect();
    assert_eq!(names, expected);
    assert_eq!(nodes_of(&running, "dev-cp-").len(), 3, "{running:?}");
    assert_eq!(nodes_of(&running, "dev-worker-").len(), 2, "{running:?}");
    for machine in cli.items("proxmoxmachines").await {
        let addresses = machine["status"]["addresses"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            addresses
                .iter()
                .any(|a| in_range(a["address"].as_str().unwrap_or_default(), 60, 89)),
            "{}: {addresses:?}",
            machine["metadata"]["name"]
        );
        assert!(
            machine["spec"]["providerID"]
                .as_str()
                .is_some_and(|id| id.starts_with("proxmox://")),
            "{machine}"
        );
        // The workers' template came from the release of their Machines' version.
        if machine["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("dev-worker-"))
        {
            assert_eq!(
                machine["status"]["template"],
                serde_json::json!({"sourceNode": "pve2", "templateID": 9001,
                    "kubernetesRelease": "kubernetes-v1.32.3", "kubernetesVersion": "v1.32.3"}),
                "{machine}"
            );
        }
    }
    for machine in cli.items("machines").await {
        assert!(
            machine["spec"]["providerID"]
                .as_str()
                .is_some_and(|id| id.starts_with("proxmox://")),
            "{machine}"
        );
    }
    let claims = cli.items("ipaddressclaims").await;
    assert_eq!(
        claims.len(),
        MACHINES.len() + 1,
        "one per machine and the VIP"
    );

    // Deleting the Cluster removes everything the example made.
    delete_cluster(&cli, &stack, "dev").await;
    let deleted = metrics(&cli).await;
    assert_eq!(
        sum(&deleted, "capmox_machines", &[]),
        0.0,
        "deleted machines leave the gauge"
    );
    assert_eq!(
        sum(
            &deleted,
            "capmox_proxmox_requests_total",
            &[
                ("operation", "DELETE /nodes/{node}/qemu/{vmid}"),
                ("result", "200")
            ]
        ),
        five
    );
    stack.shutdown().await;
}

/// A bootstrap Secret, Machine and ProxmoxMachine `name` of the DHCP cluster, the
/// ProxmoxMachine's spec from template 9001 on pve2 plus `spec` (YAML lines, indented two).
fn dhcp_machine(name: &str, spec: &str) -> String {
    format!(
        r##"
apiVersion: v1
kind: Secret
metadata: {{name: {name}-bootstrap, namespace: default, labels: {{cluster.x-k8s.io/cluster-name: dhcp}}}}
type: cluster.x-k8s.io/secret
stringData: {{format: cloud-config, value: "#cloud-config\n"}}
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: Machine
metadata: {{name: {name}, namespace: default, labels: {{cluster.x-k8s.io/cluster-name: dhcp}}}}
spec:
  clusterName: dhcp
  version: v1.32.3
  bootstrap: {{dataSecretName: {name}-bootstrap}}
  infrastructureRef: {{apiGroup: infrastructure.cluster.x-k8s.io, kind: ProxmoxMachine, name: {name}}}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha2
kind: ProxmoxMachine
metadata: {{name: {name}, namespace: default, labels: {{cluster.x-k8s.io/cluster-name: dhcp}}}}
spec:
  sourceNode: pve2
  templateID: 9001
{spec}"##
    )
}

/// A machine of the DHCP cluster that asks for the cluster's pool (net0 without DHCP, so the
/// defaulting webhook gives it `defaultIPv4`/`defaultIPv6`), which that cluster does not have.
fn relying_on_the_clusters_pool() -> String {
    dhcp_machine(
        "dhcp-static",
        "  network:\n    networkDevices:\n    - {name: net0, bridge: vmbr0}\n",
    )
}

/// A worker with a GPU through the default simulator's PCI mapping `gpu` (a device on pve2
/// and on pve3).
fn with_a_gpu() -> String {
    dhcp_machine(
        "dhcp-gpu",
        "  pciDevices:\n  - {mapping: gpu, pcie: true}\n  network:\n    networkDevices:\n    \
         - {name: net0, bridge: vmbr0, dhcp4: true}\n",
    )
}

/// `kubectl apply -f examples/dhcp/`: a cluster with no IP pool of its own, whose machines
/// get every address by DHCP and publish what the guest agent reports; a machine that asks
/// for the cluster's pool is told what is missing and gets no VM; a worker that asks for a
/// GPU by resource mapping gets one.
#[tokio::test(flavor = "multi_thread")]
async fn dhcp_example_needs_no_pools_and_publishes_the_leases() {
    let dir = tempfile::tempdir().expect("tempdir");
    let stack = start_stack(dir.path()).await;
    let cli = Cli::of(&stack, dir.path());
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/dhcp");
    let (ok, text) = cli.run(&["apply", "-f", &examples.to_string_lossy()]).await;
    assert!(ok, "kubectl apply -f examples/dhcp/: {text}");
    wait_provisioned(&cli, 3).await;

    let cluster = cli.items("proxmoxclusters").await.remove(0);
    assert_eq!(cluster["status"]["initialization"]["provisioned"], true);
    assert!(
        cluster["status"]["inClusterIpPoolRef"].is_null(),
        "no pool made: {cluster}"
    );
    assert!(cli.items("inclusterippools").await.is_empty());
    assert!(cli.items("ipaddressclaims").await.is_empty());
    // The leases the simulator's DHCP range gave each NIC, as the guest agent reports them.
    let leases: std::collections::BTreeMap<String, String> = stack.sim_control.with_world(|w| {
        w.vms
            .values()
            .filter(|vm| !vm.is_template())
            .filter_map(|vm| {
                let mac = vm.typed().nets().into_iter().next()?.1.mac?;
                let lease = w.leases.get(&mac.to_ascii_lowercase())?;
                Some((vm.name(), lease.to_string()))
            })
            .collect()
    });
    assert_eq!(leases.len(), 3, "{leases:?}");
    for machine in cli.items("proxmoxmachines").await {
        let name = machine["metadata"]["name"].as_str().unwrap_or_default();
        let internal: Vec<&str> = machine["status"]["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["type"] == "InternalIP")
            .filter_map(|a| a["address"].as_str())
            .collect();
        assert_eq!(internal, [leases[name].as_str()], "{name}: {machine}");
        assert!(in_range(&leases[name], 100, 199));
    }

    let manifest = dir.path().join("relying.yaml");
    std::fs::write(&manifest, relying_on_the_clusters_pool()).expect("manifest");
    let (ok, text) = cli.run(&["apply", "-f", &manifest.to_string_lossy()]).await;
    assert!(ok, "kubectl apply: {text}");
    wait_for(
        "the missing pool named",
        Duration::from_secs(60),
        || async {
            let (_, text) = cli
                .run(&[
                    "get",
                    "proxmoxmachine",
                    "dhcp-static",
                    "-n",
                    "default",
                    "-o",
                    "json",
                ])
                .await;
            let expected = "net0 takes its addresses from the cluster's IP pools (defaultIPv4, \
                        defaultIPv6), but ProxmoxCluster dhcp has none for zone default";
            if text.contains(expected) {
                Ok(())
            } else {
                Err(text)
            }
        },
    )
    .await;
    assert!(
        !vms(&stack).iter().any(|(name, _, _)| name == "dhcp-static"),
        "no VM for a machine without addresses"
    );

    let manifest = dir.path().join("gpu.yaml");
    std::fs::write(&manifest, with_a_gpu()).expect("manifest");
    let (ok, text) = cli.run(&["apply", "-f", &manifest.to_string_lossy()]).await;
    assert!(ok, "kubectl apply: {text}");
    wait_provisioned(&cli, 4).await;
    let gpu = stack.sim_control.with_world(|w| {
        w.vms
            .values()
            .find(|vm| vm.name() == "dhcp-gpu")
            .map(|vm| (vm.node.clone(), vm.config.get("hostpci0").cloned()))
    });
    let (node, hostpci) = gpu.expect("the GPU worker's VM");
    assert!(
        node == "pve2" || node == "pve3",
        "on a node with the GPU: {node}"
    );
    assert_eq!(hostpci.as_deref(), Some("mapping=gpu,pcie=1"));

    delete_cluster(&cli, &stack, "dhcp").await;
    stack.shutdown().await;
}

/// `dev` simulates a second Proxmox VE cluster with the same node names, its credentials
/// in a Secret; examples/two-pve-clusters/ spreads one cluster over both by failure domain:
/// each machine's VM is in its domain's cluster (dc-2's VMIDs from its own range), the
/// ProxmoxCluster reports both clusters, and deleting the Cluster empties both.
#[tokio::test(flavor = "multi_thread")]
async fn two_pve_clusters_example_spreads_a_cluster_over_both() {
    let dir = tempfile::tempdir().expect("tempdir");
    let stack = start_stack(dir.path()).await;
    let instructions = stack.instructions();
    assert!(
        instructions.contains("Secret default/capmox-sim-2"),
        "{instructions}"
    );
    let cli = Cli::of(&stack, dir.path());
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/two-pve-clusters");
    let (ok, text) = cli.run(&["apply", "-f", &examples.to_string_lossy()]).await;
    assert!(ok, "kubectl apply -f examples/two-pve-clusters/: {text}");
    wait_provisioned(&cli, 4).await;

    let second = &stack.other_sims[0];
    let in_second: Vec<(u32, String)> = second.control.with_world(|w| {
        w.vms
            .values()
            .filter(|vm| !vm.is_template())
            .map(|vm| (vm.vmid, vm.name()))
            .collect()
    });
    let names = |vms: Vec<String>| vms.into_iter().collect::<std::collections::BTreeSet<_>>();
    assert_eq!(
        names(in_second.iter().map(|(_, n)| n.clone()).collect()),
        names(vec!["two-cp-1".into(), "two-worker-1".into()])
    );
    assert!(in_second.iter().all(|(id, _)| (2000..=2099).contains(id)));
    assert_eq!(
        names(vms(&stack).into_iter().map(|(n, _, _)| n).collect()),
        names(vec!["two-cp-0".into(), "two-worker-0".into()])
    );
    for machine in cli.items("proxmoxmachines").await {
        let expected = match machine["spec"]["virtualMachineID"].as_u64() {
            Some(2000..=2099) => "capmox-sim-2",
            _ => "capmox-sim",
        };
        assert_eq!(machine["status"]["pveCluster"], expected, "{machine}");
    }
    let cluster = cli.items("proxmoxclusters").await.remove(0);
    let reported: Vec<(String, bool)> = cluster["status"]["pveClusters"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r["name"].as_str().unwrap_or_default().to_string(),
                r["reachable"] == true,
            )
        })
        .collect();
    assert_eq!(
        reported,
        [
            ("capmox-sim".to_string(), true),
            ("capmox-sim-2".to_string(), true)
        ],
        "{cluster}"
    );

    delete_cluster(&cli, &stack, "two").await;
    let left = second
        .control
        .with_world(|w| w.vms.values().filter(|vm| !vm.is_template()).count());
    assert_eq!(left, 0, "the second cluster's VMs are deleted too");
}
