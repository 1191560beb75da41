//! Leader election: which of several processes sharing a store does the single-writer work
//! (the API server's controller).
//!
//! On etcd a candidate holds leadership by a key under the store's prefix attached to a
//! lease it keeps alive: [`crate::Store::campaign`] waits until the key is free and creates it
//! in a transaction (create-if-absent), then a background task renews the lease every third of
//! its TTL and checks that the key is still its own. Leadership is lost when the lease cannot
//! be renewed before it would expire, when etcd answers that the lease is gone, or when the key
//! changes hands; [`Leadership::lost`] resolves then. [`Leadership::resign`] revokes the lease
//! (the key goes at once, so another candidate takes over immediately); dropping the handle
//! stops renewing and the key expires with the lease.
//!
//! The embedded store has one writer process by construction (the file is locked), so its
//! candidate always leads and never loses.
//!
//! A [`Fence`] is what a leader checks right before an action outside the store (a Proxmox
//! write): the lease's deadline as this process knows it, the send time of the last
//! successful renewal plus the TTL. etcd's own expiry is never earlier, and another candidate
//! cannot win before it, so while `now + margin` is before the deadline no other process
//! leads. A process paused past its lease (SIGSTOP, a frozen VM) finds the deadline passed
//! the moment it resumes, before its renewal task has even run.

use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The least TTL a lease is asked for (etcd rounds smaller ones up anyway).
pub const MIN_LEASE_TTL: Duration = Duration::from_secs(2);

/// Held leadership.
pub struct Leadership {
    inner: Option<Held>,
}

/// The etcd side: the renewing task and what it reports.
pub(crate) struct Held {
    pub(crate) lost: watch::Receiver<bool>,
    /// The lease's deadline after the last renewal; `None` once leadership is over.
    pub(crate) deadline: watch::Receiver<Option<Instant>>,
    pub(crate) resign: Option<oneshot::Sender<()>>,
    pub(crate) task: JoinHandle<()>,
}

impl Leadership {
    /// Leadership that is never lost (the embedded store).
    pub(crate) fn always() -> Self {
        Self { inner: None }
    }

    pub(crate) fn held(held: Held) -> Self {
        Self { inner: Some(held) }
    }

    /// The fence of this leadership. It may outlive the handle; then it holds until the
    /// lease's deadline, as the lease itself does.
    pub fn fence(&self) -> Fence {
        Fence {
            deadline: self.inner.as_ref().map(|held| held.deadline.clone()),
        }
    }

    /// Whether leadership is still held.
    pub fn is_held(&self) -> bool {
        self.inner.as_ref().is_none_or(|h| !*h.lost.borrow())
    }

    /// Resolves once leadership is lost (never for the embedded store).
    pub async fn lost(&mut self) {
        match &mut self.inner {
            None => std::future::pending().await,
            Some(held) => {
                // The sender lives in the task; its end also means leadership is gone.
                let _ = held.lost.wait_for(|lost| *lost).await;
            }
        }
    }

    /// Gives leadership up: the lease is revoked so another candidate takes over at once.
    pub async fn resign(mut self) {
        if let Some(mut held) = self.inner.take() {
            if let Some(resign) = held.resign.take() {
                let _ = resign.send(());
            }
            let _ = (&mut held.task).await;
        }
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        if let Some(held) = &self.inner {
            // No more renewals: the lease, and with it the key, expires after its TTL.
            held.task.abort();
        }
    }
}

/// Whether leadership still holds, by the lease's deadline (see the module docs).
#[derive(Clone, Debug)]
pub struct Fence {
    /// `None`: the embedded store, which always leads.
    deadline: Option<watch::Receiver<Option<Instant>>>,
}

impl Fence {
    /// Whether leadership holds for at least `margin` more: time enough for an action
    /// checked now to be carried out before anyone else could lead.
    pub fn holds_for(&self, margin: Duration) -> bool {
        match &self.deadline {
            None => true,
            Some(deadline) => deadline
                .borrow()
                .is_some_and(|d| Instant::now() + margin < d),
        }
    }
}
