//! A tiny Cluster API core: what CAPI's Cluster and Machine controllers do with our
//! infrastructure objects, only as far as the controller needs it.
//!
//! * [`cluster::Clusters`]: a Cluster whose `spec.infrastructureRef` names a
//!   ProxmoxCluster gets the finalizer `cluster.cluster.x-k8s.io`; the ProxmoxCluster gets
//!   the Cluster as controlling owner and the cluster-name label; once the ProxmoxCluster
//!   reports `status.initialization.provisioned`, the Cluster gets
//!   `status.initialization.infrastructureProvisioned=true` and — unless it has a valid
//!   one — the ProxmoxCluster's `spec.controlPlaneEndpoint`. A deleted Cluster deletes its
//!   Machines, then (once they are gone) the ProxmoxCluster, then drops its finalizer.
//! * [`machine::Machines`]: a Machine whose `spec.infrastructureRef` names a
//!   ProxmoxMachine gets the finalizer `machine.cluster.x-k8s.io`; the ProxmoxMachine gets
//!   the Machine as controlling owner and the cluster-name label; once the ProxmoxMachine
//!   is provisioned, the Machine gets `spec.providerID`, `status.addresses`,
//!   `status.initialization.infrastructureProvisioned` and — **pretending, since no
//!   kubelet exists here** — a `status.nodeRef` (the ProxmoxMachine's name) and
//!   `Available=True`: the node "joins" when the VM is provisioned. A deleted Machine
//!   deletes its ProxmoxMachine, waits until it is gone, then drops its finalizer.
//!
//! Not emulated: bootstrap and control-plane providers (the bootstrap Secret and
//! `spec.bootstrap.dataSecretName` are the user's), MachineSets/Deployments, topology,
//! failure domains, pausing of CAPI's own work, health checks, the garbage collector.

pub mod cluster;
pub mod machine;

/// CAPI's Cluster finalizer.
pub const CLUSTER_FINALIZER: &str = "cluster.cluster.x-k8s.io";
/// CAPI's Machine finalizer.
pub const MACHINE_FINALIZER: &str = "machine.cluster.x-k8s.io";

/// How often a deletion waiting for dependents looks again when no watch event comes.
const DELETION_RECHECK: std::time::Duration = std::time::Duration::from_secs(5);
