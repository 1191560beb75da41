//! What the commands run, composed from the layers: `serve` is the API server with the
//! built-in controller; `dev` adds the Proxmox simulator, the management-cluster stand-ins
//! and the emulation of their controllers, all in one process; `migrate` writes exported
//! objects into the store through the registry; `convert` rewrites manifests offline. Nothing here has rules of its own; it only
//! starts the parts and ties their lifetimes to the server's.

pub mod controller;
pub mod convert;
pub mod dev;
pub mod migrate;
pub mod serve;
