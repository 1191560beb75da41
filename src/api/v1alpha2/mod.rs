//! API version v1alpha2: the storage version and conversion hub.

pub mod proxmox_cluster;
pub mod proxmox_cluster_template;
pub mod proxmox_kubernetes_release;
pub mod proxmox_machine;
pub mod proxmox_machine_template;
pub mod shared;

pub use proxmox_cluster::*;
pub use proxmox_cluster_template::*;
pub use proxmox_kubernetes_release::*;
pub use proxmox_machine::*;
pub use proxmox_machine_template::*;
pub use shared::*;
