//! The one integration-test binary; each area is a module.

mod api;
mod controller;
mod proxmox;
mod server;
