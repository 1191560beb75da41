//! Generic REST machinery over JSON objects (`serde_json::Value`), with no knowledge of any
//! particular kind: selectors, JSONPath and tables, metadata validation, list options and
//! continue tokens, watch framing. Messages match kube-apiserver's so clients behave the same.

pub mod apply;
pub mod continue_token;
pub mod error;
pub mod field_error;
pub mod field_selector;
pub mod gofmt;
pub mod jsonpath;
pub mod label_selector;
pub mod list_options;
pub mod meta;
pub mod object_meta;
pub mod request_options;
pub mod table;
pub mod validation;
pub mod watch_event;

pub use error::RegistryError;
pub use field_error::{BadValue, FieldError, FieldErrorType, FieldPath};
