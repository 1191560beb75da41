//! The port through which the write path runs the management cluster's own admission (its
//! mutating and validating webhooks), as kube-apiserver's admission chain runs around a
//! custom resource's strategy: mutation on the request's object before our defaulting and
//! validation, validation of the result after ours, before anything is stored.
//!
//! The registry knows no HTTP: it hands the chain the request's attributes and the objects
//! in the request's version, and an [`AdmissionKind`] for the chain to see them in another served
//! version (a webhook registered for v1alpha1 with `matchPolicy: Equivalent`). The
//! implementation lives in `server::admission`; [`NoAdmission`] is the chain of `dev` and of
//! servers without a management cluster.

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use serde_json::Value;

use super::descriptor::{GroupVersion, ResourceDescriptor};

/// The operation a chain admits, as AdmissionReview names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdmissionOperation {
    Create,
    Update,
    Delete,
}

impl AdmissionOperation {
    /// `CREATE`, `UPDATE`, `DELETE`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
        }
    }

    /// The kind of the options object AdmissionReview carries for it.
    pub fn options_kind(self) -> &'static str {
        match self {
            Self::Create => "CreateOptions",
            Self::Update => "UpdateOptions",
            Self::Delete => "DeleteOptions",
        }
    }
}

/// Who asked: the authenticated user of the request, as AdmissionReview's `userInfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requester {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl Requester {
    /// This server's own writes (the built-in controller), which kube-apiserver would see
    /// from the provider's service account.
    pub fn server() -> Self {
        Self {
            username: "system:capmox-apiserver".to_owned(),
            groups: vec!["system:authenticated".to_owned()],
            ..Self::default()
        }
    }
}

/// One write as the chain sees it.
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    pub descriptor: &'a ResourceDescriptor,
    /// The request's version: the objects handed to the chain are in it.
    pub version: GroupVersion,
    /// `""` or `"status"`.
    pub subresource: &'a str,
    pub operation: AdmissionOperation,
    pub namespace: &'a str,
    pub name: &'a str,
    pub requester: &'a Requester,
    pub dry_run: bool,
    /// The `fieldManager` of a create or update (in the options object).
    pub field_manager: &'a str,
}

/// The kind of a write, as the chain needs it beyond the objects: conversion between its
/// served versions, and structured merge with a version's schema.
pub trait AdmissionKind: Send + Sync {
    fn convert(
        &self,
        object: &Value,
        from: GroupVersion,
        to: GroupVersion,
    ) -> Result<Value, String>;

    /// The schema defaults of `version` applied to a mutated `object` (see
    /// `Strategy::apply_schema_defaults`).
    fn apply_schema_defaults(&self, version: GroupVersion, object: &mut Value);

    /// A MutatingAdmissionPolicy's apply configuration `config` merged onto `object`, both in
    /// `version` (see `Strategy::merge_configuration`).
    fn merge_configuration(
        &self,
        version: GroupVersion,
        object: &Value,
        config: &Value,
    ) -> Result<Value, String>;
}

/// A chain's refusal, already in kube's words.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AdmissionError {
    /// A policy denied the request: the Status to answer (`admission webhook "x" denied the
    /// request: …`), its code at least 400.
    #[error("{message}")]
    Denied {
        code: u16,
        reason: String,
        message: String,
        /// The denying webhook's `StatusDetails`, if it sent any (field causes).
        details: Option<Value>,
        /// The denying webhook's warnings, sent with the error.
        warnings: Vec<String>,
    },
    /// The request cannot be admitted as sent (400: a dry run a webhook with side effects
    /// would see).
    #[error("{0}")]
    BadRequest(String),
    /// A webhook that must be called (`failurePolicy: Fail`) could not be (500).
    #[error("{0}")]
    Failed(String),
}

/// What mutation made of the object, with the chain's warnings.
#[derive(Debug, Clone, PartialEq)]
pub struct Mutated {
    pub object: Value,
    pub warnings: Vec<String>,
}

/// The admission chain of the management cluster.
pub trait Admission: Send + Sync {
    /// Whether any policy might intercept writes of this kind at all; when not, the write
    /// path skips the conversions the chain would need.
    fn intercepts(&self, descriptor: &ResourceDescriptor) -> bool;

    /// Mutating admission of `object` (a create or update; `old` on updates).
    fn mutate<'a>(
        &'a self,
        attributes: Attributes<'a>,
        object: Value,
        old: Option<&'a Value>,
        kind: &'a dyn AdmissionKind,
    ) -> BoxFuture<'a, Result<Mutated, AdmissionError>>;

    /// Validating admission: `object` is absent on deletes, `old` on creates. Answers the
    /// warnings to send.
    fn validate<'a>(
        &'a self,
        attributes: Attributes<'a>,
        object: Option<&'a Value>,
        old: Option<&'a Value>,
        kind: &'a dyn AdmissionKind,
    ) -> BoxFuture<'a, Result<Vec<String>, AdmissionError>>;
}

/// No policies: every write is admitted unchanged.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoAdmission;

impl Admission for NoAdmission {
    fn intercepts(&self, _: &ResourceDescriptor) -> bool {
        false
    }

    fn mutate<'a>(
        &'a self,
        _: Attributes<'a>,
        object: Value,
        _: Option<&'a Value>,
        _: &'a dyn AdmissionKind,
    ) -> BoxFuture<'a, Result<Mutated, AdmissionError>> {
        Box::pin(async move {
            Ok(Mutated {
                object,
                warnings: Vec::new(),
            })
        })
    }

    fn validate<'a>(
        &'a self,
        _: Attributes<'a>,
        _: Option<&'a Value>,
        _: Option<&'a Value>,
        _: &'a dyn AdmissionKind,
    ) -> BoxFuture<'a, Result<Vec<String>, AdmissionError>> {
        Box::pin(async { Ok(Vec::new()) })
    }
}
