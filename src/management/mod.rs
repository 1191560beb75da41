//! The management cluster (the Kubernetes cluster the server is an extension of).
//!
//! * [`client`]: kube clients for it (in-cluster or from a kubeconfig).
//! * [`types`]: the shapes of the objects the controller reads and writes, as plain typed
//!   structs (no CRD code generation): Cluster API `Cluster` and `Machine`, IPAM claims,
//!   addresses and in-cluster pools; only the fields the controller uses (unknown fields are
//!   ignored on read; the controller never rewrites objects it does not own). Secrets use
//!   `k8s_openapi`'s `Secret`.
//! * [`ipam_allocator`]: a small allocator that fulfils `IPAddressClaim`s from
//!   `InClusterIPPool` address ranges the way the in-cluster IPAM provider does. Tests use
//!   it through the in-memory management cluster, and the `dev` IPAM emulation
//!   ([`crate::emulation::ipam`]) allocates with it.
//! * [`kube`]: [`kube::KubeManagement`], the controller's `Management` seam over a kube
//!   client, the change streams that requeue our objects when CAPI objects change, and the
//!   JSON-level object access the `dev` emulation ([`crate::emulation`]) shares.
//! * [`standins`]: the kinds above (and Secrets) as schemaless registry kinds that `dev`
//!   serves itself, so the controller can run without a management cluster.
//!
//! The controller reaches the management cluster only through its `Management` seam
//! (`controller::seams`).

pub mod client;
pub mod ipam_allocator;
pub mod kube;
pub mod secret_protobuf;
pub mod standins;
pub mod types;
