//! Generic REST machinery over JSON objects (`serde_json::Value`), driven by one descriptor
//! ("strategy") per kind: selectors, JSONPath and tables, metadata validation and lifecycle,
//! list options and continue tokens, patches, delete options, watch framing, the key layout
//! in the store, the REST operations themselves (`rest`), and the kinds other providers define
//! by CRD in our group-versions (`cotenant`). Messages match
//! kube-apiserver's so clients behave the same.
//!
//! Where to start: [`rest::ResourceRest`] (one kind's operations; the write path is in
//! `rest/write.rs`), [`strategy::Strategy`] and [`strategy::KindStrategy`] (what the
//! machinery asks of a kind), [`catalog::Catalog`] (every kind over one store; a kind is one
//! line in [`catalog::strategies`]), [`descriptor::ResourceDescriptor`] (names, scope and
//! per-version serving of a kind), [`object_store::ObjectStore`] (keys, values, storage
//! errors, timing) and [`apply`] (server-side apply and managedFields, docs/ssa.md). The
//! behaviour as clients see it, and its known gaps, are in docs/rest.md.
//!
//! Deliberate improvements over upstream, each documented where it is made: `['a.b']` in
//! JSONPath is one key and numeric filter comparisons work across integers and floats
//! ([`jsonpath`]); a present-but-null string cell is empty rather than `<no value>`
//! ([`table`]); checking a `generateName` prefix replaces only its trailing dash (upstream
//! also drops the character before it, [`validation`]); empty lists carry `"items": []`,
//! not `null` ([`rest`]).

pub mod admission;
pub mod apply;
pub mod catalog;
pub mod continue_token;
pub mod cotenant;
pub mod crd;
pub mod delete_options;
pub mod descriptor;
pub mod encoded_cache;
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
pub mod scale;
pub mod schemaless;
pub mod strategy;
pub mod table;
pub mod validation;
pub mod watch_event;

pub use error::RegistryError;
pub use field_error::{BadValue, FieldError, FieldErrorType, FieldPath};
