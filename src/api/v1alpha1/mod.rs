//! API version v1alpha1: served for compatibility, deprecated. Converted to
//! and from the hub (v1alpha2) by `crate::api::conversion`.

pub mod proxmox_cluster;
pub mod proxmox_cluster_template;
pub mod proxmox_machine;
pub mod proxmox_machine_template;

pub use proxmox_cluster::*;
pub use proxmox_cluster_template::*;
pub use proxmox_machine::*;
pub use proxmox_machine_template::*;
