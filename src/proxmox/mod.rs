//! Proxmox VE: a typed async API client, an in-repo simulator of the API, and the
//! NoCloud ISO writer/reader used to hand cloud-init data to a VM.
//!
//! * [`client`]: the calls a Cluster API provider needs, with API-token auth, TLS options,
//!   timeouts, a concurrency limit and classified errors.
//! * [`sim`]: an HTTP(S) server on loopback that behaves like PVE for the same calls
//!   (tasks, locks, error texts, timing profiles, fault injection).
//! * [`nocloud`]: writes the `cidata` ISO (hadris-iso) and reads one back (our own reader).
//!
//! The wire-level helpers ([`upid`], [`lenient`], [`propstring`], [`tags`], [`form`]) are
//! shared by the client and the simulator so both speak exactly the same dialect.

pub mod client;
pub mod form;
pub mod lenient;
pub mod nocloud;
pub mod pci_address;
pub mod propstring;
pub mod sha256;
pub mod sim;
pub mod tags;
pub mod types;
pub mod upid;

pub use client::{ApiToken, Client, ClientConfig, Error, ErrorKind, TlsMode};
pub use upid::Upid;
