//! NoCloud ISO.
