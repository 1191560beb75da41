//! The one integration-test binary; each area is a module.

mod api;
mod apply;
mod auth;
mod chaos;
mod controller;
mod conversion;
mod convert;
mod deploy;
mod devstack;
mod guest;
mod guide;
mod hostile;
mod management;
mod migrate;
mod peer;
mod proxmox;
mod rest;
mod server;
mod standins;
