//! The API layer: types, decoding, defaulting, validation and OpenAPI.

mod flavors;
mod support;
