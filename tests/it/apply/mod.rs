//! Server-side apply and managedFields: the field manager on real schemas,
//! FieldsV1 as Kubernetes writes it, ownership across versions, and
//! properties on arbitrary input.

mod field_manager;
mod support;
