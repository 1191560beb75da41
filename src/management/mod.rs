//! The management cluster (the Kubernetes cluster the server is an extension of), reached
//! through the kube crate.

pub mod client;
