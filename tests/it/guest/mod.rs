//! What the guest receives, read by the guest's own tools (issue: the documents the
//! controller hands each VM are checked by the programs that will read them, not only by
//! our re-parsing).

mod cloud_init;
pub(crate) mod netplan;
