//! capmox-apiserver: a Kubernetes aggregated API server for the Cluster API infrastructure
//! group `infrastructure.cluster.x-k8s.io` on Proxmox VE.
//!
//! See `docs/ARCHITECTURE.md` for the layers and how they depend on each other.

pub mod api;
pub mod cli;
pub mod controller;
pub mod emulation;
pub mod management;
pub mod proxmox;
pub mod registry;
pub mod run;
pub mod server;
pub mod task;
