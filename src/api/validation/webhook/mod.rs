//! Upstream's admission webhook rules (internal/webhook), on hub objects,
//! with the upstream defects fixed (see docs/api.md).

pub mod cluster;
pub mod ip_set;
pub mod machine;
pub mod network;
pub mod release;
pub mod volumes;
