//! Leader election on etcd: a key attached to a lease, created if absent in a transaction,
//! kept by renewing the lease. See `crate::election` for the contract.

use std::time::Duration;

use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp};
use futures::StreamExt;
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use super::EtcdStore;
use super::members::Idempotent;
use crate::election::{Held, Leadership, MIN_LEASE_TTL};
use crate::error::{Error, Result};
use crate::types::{Event, Revision};

impl EtcdStore {
    pub(crate) async fn campaign(
        &self,
        key: &str,
        candidate: &str,
        ttl: Duration,
    ) -> Result<Leadership> {
        let ttl_secs = i64::try_from(ttl.max(MIN_LEASE_TTL).as_secs()).unwrap_or(i64::MAX);
        loop {
            match self.get(key).await {
                Ok(holder) => {
                    self.wait_for_release(key, holder.revision, ttl).await;
                    continue;
                }
                Err(Error::NotFound { .. }) => {}
                Err(error) => return Err(error),
            }
            let granted_at = Instant::now();
            let (lease, granted) = self.grant(ttl_secs).await?;
            let full = self.keys.full(key);
            let claim = Txn::new()
                .when([Compare::create_revision(full.clone(), CompareOp::Equal, 0)])
                .and_then([TxnOp::put(
                    full,
                    candidate.as_bytes().to_vec(),
                    Some(PutOptions::new().with_lease(lease)),
                )]);
            let won = match self.txn(claim).await {
                Ok(answer) => answer.succeeded(),
                Err(error) => {
                    // Unknown outcome: the lease is revoked, so a key it may hold goes too.
                    self.revoke(lease).await;
                    return Err(error);
                }
            };
            if won {
                tracing::info!(key, candidate, lease, "leadership acquired");
                return Ok(Leadership::held(self.keep(
                    key.to_owned(),
                    candidate.to_owned(),
                    lease,
                    granted,
                    granted_at,
                )));
            }
            self.revoke(lease).await;
        }
    }

    /// Returns when `key` (written at `revision`) is deleted, or after `ttl` at the latest
    /// (the caller looks again; a missed event costs at most that).
    async fn wait_for_release(&self, key: &str, revision: Revision, ttl: Duration) {
        let released = async {
            let Ok(mut events) = self.watch(key, revision).await else {
                return;
            };
            while let Some(event) = events.next().await {
                match event {
                    Ok(Event::Delete { key: k, .. }) if k == key => return,
                    Ok(_) => {}
                    Err(_) => return,
                }
            }
        };
        let _ = tokio::time::timeout(ttl.max(MIN_LEASE_TTL), released).await;
    }

    /// A lease: its id and the TTL etcd granted.
    async fn grant(&self, ttl: i64) -> Result<(i64, Duration)> {
        let answer = self
            .members
            .lease(Idempotent::No, |mut lease| async move {
                lease.grant(ttl, None).await
            })
            .await?;
        let granted = Duration::from_secs(u64::try_from(answer.ttl()).unwrap_or(0));
        Ok((answer.id(), granted))
    }

    /// Revokes a lease, best effort (an unrevoked lease expires by itself).
    async fn revoke(&self, lease: i64) {
        let revoked = self
            .members
            .lease(Idempotent::Yes, |mut client| async move {
                client.revoke(lease).await
            })
            .await;
        if let Err(error) = revoked {
            tracing::debug!(%error, lease, "revoking the lease failed; it expires by itself");
        }
    }

    /// One renewal; `Ok(false)` when etcd says the lease is gone.
    async fn renew(&self, lease: i64) -> Result<bool> {
        let renewed = self
            .members
            .lease(Idempotent::Yes, |mut client| async move {
                client.keep_alive(lease).await.map(|_| ())
            })
            .await;
        match renewed {
            Ok(()) => Ok(true),
            Err(Error::Unavailable(message)) => Err(Error::Unavailable(message)),
            // etcd answered (e.g. "lease not found"): the lease is over.
            Err(error) => {
                tracing::warn!(%error, lease, "lease renewal refused");
                Ok(false)
            }
        }
    }

    /// Starts renewing `lease` and watching `key`; the handle reports the loss.
    fn keep(
        &self,
        key: String,
        candidate: String,
        lease: i64,
        ttl: Duration,
        granted_at: Instant,
    ) -> Held {
        let (lost_tx, lost) = watch::channel(false);
        // The server's expiry is never earlier than a renewal's send time plus the TTL.
        let (deadline_tx, deadline) = watch::channel(Some(granted_at + ttl));
        let (resign, mut resigned) = oneshot::channel::<()>();
        let store = self.clone();
        let task = tokio::spawn(async move {
            let mut expires = granted_at + ttl;
            let tick = ttl / 3;
            let reason = loop {
                tokio::select! {
                    _ = &mut resigned => {
                        deadline_tx.send_replace(None);
                        store.revoke(lease).await;
                        tracing::info!(key, lease, "leadership resigned");
                        let _ = lost_tx.send(true);
                        return;
                    }
                    _ = tokio::time::sleep(tick) => {}
                }
                let sent = Instant::now();
                match tokio::time::timeout_at(expires, store.renew(lease)).await {
                    Ok(Ok(true)) => {
                        expires = sent + ttl;
                        deadline_tx.send_replace(Some(expires));
                    }
                    Ok(Ok(false)) => break "the lease is gone",
                    Ok(Err(error)) => tracing::warn!(%error, lease, "lease renewal failed"),
                    Err(_) => break "the lease could not be renewed in time",
                }
                if Instant::now() >= expires {
                    break "the lease could not be renewed in time";
                }
                match tokio::time::timeout_at(expires, store.get(&key)).await {
                    Ok(Ok(holder)) if holder.value.as_ref() == candidate.as_bytes() => {}
                    Ok(Ok(_)) | Ok(Err(Error::NotFound { .. })) => {
                        break "the leader key changed hands";
                    }
                    Ok(Err(error)) => tracing::warn!(%error, "reading the leader key failed"),
                    Err(_) => break "the lease could not be renewed in time",
                }
            };
            deadline_tx.send_replace(None);
            tracing::warn!(key, lease, reason, "leadership lost");
            let _ = lost_tx.send(true);
        });
        Held {
            lost,
            deadline,
            resign: Some(resign),
            task,
        }
    }
}
