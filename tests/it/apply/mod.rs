//! Server-side apply and managedFields: the field manager on real schemas,
//! FieldsV1 as Kubernetes writes it, ownership across versions, and
//! properties on generated input.

mod cross_version;
mod field_manager;
mod fields_v1;
mod properties;
mod support;
