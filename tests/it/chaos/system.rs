//! The system under test: the etcd cluster, `serve` replicas (real processes, controller on,
//! leader-elected) on it, the stand-in management cluster (CAPI Cluster and Machines, the
//! bootstrap and credentials Secrets) and the Proxmox VE simulator the controller provisions
//! on. The management cluster and the simulator run in the test process and are not faulted:
//! the faults are in the API server's own tier.

use std::time::Duration;

use base64::Engine as _;
use capmox_apiserver::proxmox::sim::{self, Profile, RunningSim, SimConfig};
use capmox_apiserver::server::pki::DevPki;
use capmox_apiserver::server::tls;
use serde_json::{Value, json};

use super::etcd_cluster::EtcdCluster;
use super::process::Process;
use crate::auth::fake_kube::FakeKube;
use crate::rest::etcd::free_port;
use crate::server::pki_client_builder;

pub const NAMESPACE: &str = "default";
pub const GROUP_VERSION: &str = "infrastructure.cluster.x-k8s.io/v1alpha2";
const CLUSTER: &str = "chaos";

pub struct Replica {
    pub process: Process,
    pub url: String,
}

pub struct System {
    pub dir: tempfile::TempDir,
    pub etcd: EtcdCluster,
    pub replicas: Vec<Replica>,
    pub kube: FakeKube,
    pub pve: RunningSim,
    pub pki: DevPki,
    /// Probes: a short timeout, so that a paused replica reads as "no answer".
    probe: reqwest::Client,
}

impl System {
    pub async fn start(replicas: usize) -> Self {
        tls::install_default_provider();
        let dir = tempfile::tempdir().expect("tempdir");
        let pki = DevPki::ensure(dir.path(), &[]).expect("pki");
        let kube_dir = dir.path().join("management");
        std::fs::create_dir_all(&kube_dir).expect("management dir");
        // It publishes our CA as the client CA: the admin certificate needs no review.
        let kube =
            FakeKube::start(&kube_dir, Some(json!({"client-ca-file": pki.ca.cert_pem}))).await;
        let pve = sim::start(SimConfig {
            profile: Profile::Fast,
            ..SimConfig::default()
        })
        .await
        .expect("simulator");
        let etcd = EtcdCluster::start(dir.path(), 3).await;
        let mut system = Self {
            replicas: Vec::new(),
            probe: pki_client_with_timeout(&pki, Duration::from_millis(700)),
            dir,
            etcd,
            kube,
            pve,
            pki,
        };
        for i in 0..replicas {
            let replica = system.start_replica(i);
            system.replicas.push(replica);
        }
        for i in 0..replicas {
            system.wait_ready(i, Duration::from_secs(60)).await;
        }
        system.seed_management();
        system
    }

    fn start_replica(&self, i: usize) -> Replica {
        let dir = self.dir.path();
        let port = free_port().expect("free port");
        let path = |name: &str| dir.join(name).display().to_string();
        let mut args = vec![
            "serve".to_owned(),
            format!("--secure-port={port}"),
            "--bind-address=127.0.0.1".to_owned(),
            format!("--tls-cert-file={}", path("serving.crt")),
            format!("--tls-private-key-file={}", path("serving.key")),
            format!("--client-ca-file={}", path("ca.crt")),
            format!(
                "--authentication-kubeconfig={}",
                self.kube.kubeconfig.display()
            ),
            format!(
                "--authorization-kubeconfig={}",
                self.kube.kubeconfig.display()
            ),
            "--etcd-prefix=/capmox-chaos".to_owned(),
            "--controller-workers=4".to_owned(),
        ];
        args.extend(self.etcd.serve_flags());
        let env = vec![
            // The election identity starts with it: the logs name the replica.
            ("HOSTNAME".to_owned(), format!("replica-{i}")),
            ("RUST_LOG".to_owned(), "info".to_owned()),
        ];
        Replica {
            process: Process::start(
                &format!("replica {i}"),
                env!("CARGO_BIN_EXE_capmox-apiserver"),
                args,
                env,
                dir.join(format!("replica-{i}.log")),
            ),
            url: format!("https://127.0.0.1:{port}"),
        }
    }

    /// A `system:masters` client with a request timeout.
    pub fn client(&self, timeout: Duration) -> reqwest::Client {
        pki_client_with_timeout(&self.pki, timeout)
    }

    pub async fn wait_ready(&self, i: usize, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        let url = format!("{}/readyz", self.replicas[i].url);
        loop {
            if let Ok(r) = self.probe.get(&url).send().await
                && r.status().is_success()
            {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "replica {i} not ready:\n{}",
                self.replicas[i].process.log_tail(3000)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Which replicas say they lead the controller now (a paused one says nothing).
    pub async fn leaders(&self) -> Vec<usize> {
        let probes = self.replicas.iter().enumerate().map(|(i, r)| {
            let probe = self.probe.clone();
            let url = format!("{}/metrics", r.url);
            async move {
                let text = probe.get(url).send().await.ok()?.text().await.ok()?;
                text.lines()
                    .any(|l| l == "capmox_controller_leader 1")
                    .then_some(i)
            }
        });
        futures::future::join_all(probes)
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// Waits for a leader other than `not`; returns it.
    pub async fn wait_for_leader(&self, not: Option<usize>, limit: Duration) -> Option<usize> {
        let deadline = tokio::time::Instant::now() + limit;
        while tokio::time::Instant::now() < deadline {
            if let Some(&leader) = self.leaders().await.iter().find(|&&l| Some(l) != not) {
                return Some(leader);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        None
    }

    pub fn restart_replica(&mut self, i: usize) {
        self.replicas[i].process.restart();
    }

    /// The CAPI Cluster (its infrastructure already provisioned, as CAPI core would mark it)
    /// and the simulator's credentials.
    fn seed_management(&self) {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        self.kube.put_object(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": CLUSTER, "namespace": NAMESPACE},
            "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "ProxmoxCluster", "name": CLUSTER}},
            "status": {"initialization": {"infrastructureProvisioned": true}},
        }));
        self.kube.put_object(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("{CLUSTER}-proxmox-credentials"), "namespace": NAMESPACE},
            "data": {
                "url": b64(self.pve.url()), "token": b64(&self.pve.token().id),
                "secret": b64(&self.pve.token().secret), "insecure": b64("false"),
                "root_ca": b64(self.pve.ca_pem()),
            },
        }));
    }

    /// Metadata of our object `name` in the chaos cluster, owned by the CAPI object of `kind`
    /// and name, with `labels` added.
    fn owned_by(&self, kind: &str, name: &str, mut labels: Value) -> Value {
        let plural = format!("{}s", kind.to_ascii_lowercase());
        let owner = self
            .kube
            .object("cluster.x-k8s.io/v1beta2", &plural, NAMESPACE, name)
            .unwrap_or_else(|| panic!("{kind} {name}"));
        labels["cluster.x-k8s.io/cluster-name"] = json!(CLUSTER);
        json!({
            "name": name, "namespace": NAMESPACE, "labels": labels,
            "ownerReferences": [{
                "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": kind, "name": name,
                "uid": owner["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true,
            }],
        })
    }

    /// The ProxmoxCluster, created through any replica.
    pub async fn create_cluster(&self) {
        let body = json!({
            "apiVersion": GROUP_VERSION, "kind": "ProxmoxCluster",
            "metadata": self.owned_by("Cluster", CLUSTER, json!({})),
            "spec": {
                "controlPlaneEndpoint": {"host": "10.0.0.200", "port": 6443},
                "dnsServers": ["10.0.0.53"],
                "credentialsRef": {"name": format!("{CLUSTER}-proxmox-credentials")},
            },
        });
        self.post_until_created("proxmoxclusters", body).await;
    }

    /// A CAPI Machine with bootstrap data, and its ProxmoxMachine (DHCP, so no IPAM).
    pub async fn create_provisioned_machine(&self, name: &str) {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let secret = format!("{name}-bootstrap");
        self.kube.put_object(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": secret, "namespace": NAMESPACE},
            "data": {"value": b64("#cloud-config\nruncmd:\n  - kubeadm join\n"), "format": b64("cloud-config")},
        }));
        self.kube.put_object(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER}},
            "spec": {
                "clusterName": CLUSTER, "version": "v1.32.3",
                "bootstrap": {"dataSecretName": secret},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "ProxmoxMachine", "name": name},
            },
        }));
        let body = json!({
            "apiVersion": GROUP_VERSION, "kind": "ProxmoxMachine",
            "metadata": self.owned_by("Machine", name, json!({"chaos": "provisioned"})),
            "spec": machine_spec(),
        });
        self.post_until_created("proxmoxmachines", body).await;
    }

    /// Creates through any replica, retrying answers lost to a fault (409 = it went in).
    async fn post_until_created(&self, plural: &str, body: Value) {
        let client = self.client(Duration::from_secs(5));
        for attempt in 0..40 {
            let url = format!(
                "{}/apis/{GROUP_VERSION}/namespaces/{NAMESPACE}/{plural}",
                self.replicas[attempt % self.replicas.len()].url
            );
            if let Ok(r) = client.post(url).json(&body).send().await {
                let status = r.status().as_u16();
                if status == 201 || status == 409 {
                    return;
                }
                // 5xx, 429 and a replica not yet ready (403) change nothing: try again.
                assert!(
                    status >= 500 || status == 429 || status == 403,
                    "{status}: {}",
                    r.text().await.unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        panic!("could not create {plural}: {body}");
    }

    /// Deletes a provisioned machine (the controller then deletes its VM) and its Machine.
    pub async fn delete_provisioned_machine(&self, name: &str) {
        let client = self.client(Duration::from_secs(5));
        for attempt in 0..40 {
            let url = format!(
                "{}/apis/{GROUP_VERSION}/namespaces/{NAMESPACE}/proxmoxmachines/{name}",
                self.replicas[attempt % self.replicas.len()].url
            );
            if let Ok(r) = client.delete(url).send().await
                && matches!(r.status().as_u16(), 200 | 202 | 404)
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        panic!("could not delete {name}");
    }

    /// The ProxmoxMachines labelled `chaos=provisioned`, read through any replica.
    pub async fn provisioned_machines(&self) -> Option<Vec<Value>> {
        let client = self.client(Duration::from_secs(5));
        for replica in &self.replicas {
            let url = format!(
                "{}/apis/{GROUP_VERSION}/namespaces/{NAMESPACE}/proxmoxmachines?labelSelector=chaos%3Dprovisioned",
                replica.url
            );
            if let Ok(r) = client.get(url).send().await
                && r.status().is_success()
                && let Ok(list) = r.json::<Value>().await
            {
                return Some(list["items"].as_array().cloned().unwrap_or_default());
            }
        }
        None
    }

    pub fn log_tails(&self) -> String {
        let replicas = self
            .replicas
            .iter()
            .map(|r| r.process.log_tail(3000))
            .collect::<Vec<_>>()
            .join("\n");
        format!("{replicas}\n{}", self.etcd.log_tails())
    }

    /// Keeps the directory (logs, data) after a failed run when `CAPMOX_CHAOS_KEEP` is set.
    pub fn keep_on_failure(&mut self) {
        if std::env::var_os("CAPMOX_CHAOS_KEEP").is_some() {
            self.dir.disable_cleanup(true);
            eprintln!("chaos: logs kept in {}", self.dir.path().display());
        }
    }
}

/// The spec every chaos machine has: small, one DHCP NIC.
pub fn machine_spec() -> Value {
    json!({
        "sourceNode": "pve1", "templateID": 9000, "numCores": 1, "memoryMiB": 1024,
        "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 20}},
        "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0", "dhcp4": true}]},
    })
}

fn pki_client_with_timeout(pki: &DevPki, timeout: Duration) -> reqwest::Client {
    pki_client_builder(pki, Some(&pki.admin))
        .timeout(timeout)
        .connect_timeout(Duration::from_secs(1))
        .build()
        .expect("client")
}
