//! The one integration-test binary; each area is a module.

mod api;
mod conversion;
mod rest;
mod server;
