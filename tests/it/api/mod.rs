//! The API layer: types, decoding, defaulting, validation and OpenAPI.

mod cel_rules;
mod decoding;
mod defaulting;
mod flavors;
mod no_panic;
mod openapi_docs;
mod ratcheting;
mod release_rules;
mod schema_rules;
pub mod support;
mod volume_rules;
mod webhook_rules;
