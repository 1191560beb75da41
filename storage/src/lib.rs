//! Revisioned key-value store under capmox-apiserver.
//!
//! One API ([`Store`]) over two backends that behave identically:
//! - **etcd** (production, HA): kube-apiserver's key layout under a prefix, `mod_revision` as the
//!   revision, transactions for create / compare-and-swap / delete, reconnecting prefix watches.
//! - **embedded** (single node default): one redb file, a global revision, durable group commits,
//!   and a bounded change log so watches and reads can start in the recent past.
//!
//! Values are opaque bytes. Both backends pass the same conformance suite
//! (`storage/tests/conformance`).

mod config;
mod election;
mod embedded;
mod error;
mod etcd;
mod store;
mod types;
mod watch;

pub use config::{
    ClientCertFiles, DEFAULT_ETCD_PREFIX, DEFAULT_HISTORY, EmbeddedConfig, EtcdConfig, StoreConfig,
    TlsFiles,
};
pub use election::{Fence, Leadership, MIN_LEASE_TTL};
pub use error::{Error, Result};
pub use store::Store;
pub use types::{Deleted, Event, KeyValue, ListPage, Listed, Revision};
pub use watch::WatchStream;
