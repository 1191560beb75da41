//! Revisioned key-value store under capmox-apiserver.
