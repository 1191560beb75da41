//! Generic REST machinery over JSON objects (`serde_json::Value`), driven by one descriptor
//! ("strategy") per kind: selectors, JSONPath and tables, metadata validation and lifecycle,
//! list options and continue tokens, patches, delete options, watch framing, the key layout
//! in the store, and the REST operations themselves (`rest`). Messages match
//! kube-apiserver's so clients behave the same.

pub mod apply;
pub mod catalog;
pub mod continue_token;
pub mod delete_options;
pub mod descriptor;
pub mod error;
pub mod field_error;
pub mod field_selector;
pub mod gofmt;
pub mod jsonpath;
pub mod label_selector;
pub mod lifecycle;
pub mod list_options;
pub mod meta;
pub mod object_meta;
pub mod object_store;
pub mod patch;
pub mod request_options;
pub mod rest;
pub mod schemaless;
pub mod strategy;
pub mod table;
pub mod validation;
pub mod watch_event;

pub use error::RegistryError;
pub use field_error::{BadValue, FieldError, FieldErrorType, FieldPath};
