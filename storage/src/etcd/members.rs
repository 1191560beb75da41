//! The etcd endpoints and fail-over between them.
//!
//! tonic's balanced channel keeps routing requests to an endpoint that refuses connections, so
//! half the requests would fail while one member of a three-node cluster is down. Instead there
//! is one client per endpoint; requests go to the current one, and a connection-level failure
//! moves every later request (and watch) on to the next endpoint.
//!
//! The clients can be replaced while requests run ([`Members::reconnect`], for a renewed client
//! certificate): requests and watches opened after it use the new ones, those in flight finish
//! on the old connections, which close once nothing uses them.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use etcd_client::{Client, ConnectOptions, KvClient, LeaseClient, MaintenanceClient, WatchClient};
use tokio::time::Instant;

use super::errors::{Retry, classify};
use crate::error::{Error, Result};
use crate::types::Revision;

/// gRPC messages from etcd may be as large as a full list; tonic's default cap is 4 MiB.
const MAX_MESSAGE_BYTES: usize = i32::MAX as usize;
/// Pause between attempts, so a lone endpoint that is restarting is not hammered.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

#[derive(Clone)]
pub(super) struct Member {
    pub kv: KvClient,
    pub watch: WatchClient,
    pub maintenance: MaintenanceClient,
    pub lease: LeaseClient,
}

pub(super) struct Members {
    endpoints: Vec<String>,
    /// One per endpoint, in the endpoints' order.
    members: RwLock<Arc<[Member]>>,
    current: AtomicUsize,
    request_timeout: Duration,
}

/// Whether a request may run twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Idempotent {
    Yes,
    No,
}

impl Members {
    pub(super) async fn connect(
        endpoints: &[String],
        options: ConnectOptions,
        request_timeout: Duration,
    ) -> Result<Self> {
        if endpoints.is_empty() {
            return Err(Error::InvalidArgument(
                "no etcd endpoints configured".into(),
            ));
        }
        Ok(Self {
            endpoints: endpoints.to_vec(),
            members: RwLock::new(clients(endpoints, options).await?),
            current: AtomicUsize::new(0),
            request_timeout,
        })
    }

    /// Replaces every endpoint's client by one connecting with `options`.
    pub(super) async fn reconnect(&self, options: ConnectOptions) -> Result<()> {
        let members = clients(&self.endpoints, options).await?;
        *self.members.write().unwrap_or_else(PoisonError::into_inner) = members;
        Ok(())
    }

    /// The endpoint requests go to now, and its index for [`Members::failed`].
    pub(super) fn current(&self) -> (usize, Member) {
        let members = self.members.read().unwrap_or_else(PoisonError::into_inner);
        let index = self.current.load(Ordering::Relaxed) % members.len();
        (index, members[index].clone())
    }

    /// Moves on from endpoint `index` unless another request already did.
    pub(super) fn failed(&self, index: usize) {
        let next = (index + 1) % self.endpoints.len();
        let _ = self
            .current
            .compare_exchange(index, next, Ordering::Relaxed, Ordering::Relaxed);
    }
    /// The version of the etcd server that answers, trying the endpoints in turn.
    pub(super) async fn server_version(&self) -> Result<String> {
        let deadline = Instant::now() + self.request_timeout;
        let mut last_error = None;
        for _ in 0..self.endpoints.len() {
            let (index, member) = self.current();
            let mut maintenance = member.maintenance.clone();
            match tokio::time::timeout_at(deadline, maintenance.status()).await {
                Ok(Ok(status)) => return Ok(status.version().to_owned()),
                Ok(Err(error)) => {
                    let (error, retry) = classify(error, None);
                    if retry == Retry::Never {
                        return Err(error);
                    }
                    last_error = Some(error);
                }
                Err(_) => break,
            }
            self.failed(index);
        }
        Err(last_error.unwrap_or_else(|| {
            Error::Unavailable(format!(
                "etcd did not answer within {:?}",
                self.request_timeout
            ))
        }))
    }

    /// Runs one KV request within the request timeout, on the next endpoints too when the
    /// current one fails and it is safe to send the request again.
    pub(super) async fn request<T, F>(
        &self,
        revision: Option<Revision>,
        idempotent: Idempotent,
        send: impl Fn(KvClient) -> F,
    ) -> Result<T>
    where
        F: Future<Output = Result<T, etcd_client::Error>>,
    {
        self.call(revision, idempotent, |m| m.kv.clone(), send)
            .await
    }

    /// Runs one lease request like [`Members::request`].
    pub(super) async fn lease<T, F>(
        &self,
        idempotent: Idempotent,
        send: impl Fn(LeaseClient) -> F,
    ) -> Result<T>
    where
        F: Future<Output = Result<T, etcd_client::Error>>,
    {
        self.call(None, idempotent, |m| m.lease.clone(), send).await
    }

    /// The fail-over loop of one request to the client `pick` chooses.
    async fn call<C, T, F>(
        &self,
        revision: Option<Revision>,
        idempotent: Idempotent,
        pick: impl Fn(&Member) -> C,
        send: impl Fn(C) -> F,
    ) -> Result<T>
    where
        F: Future<Output = Result<T, etcd_client::Error>>,
    {
        let deadline = Instant::now() + self.request_timeout;
        let attempts = 2 * self.endpoints.len();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (index, member) = self.current();
            let error = match tokio::time::timeout_at(deadline, send(pick(&member))).await {
                Ok(Ok(answer)) => return Ok(answer),
                Ok(Err(error)) => error,
                Err(_) => {
                    self.failed(index);
                    return Err(Error::Unavailable(format!(
                        "etcd did not answer within {:?}",
                        self.request_timeout
                    )));
                }
            };
            let (error, retry) = classify(error, revision);
            if retry == Retry::Never {
                return Err(error);
            }
            self.failed(index);
            let again = retry == Retry::Always || idempotent == Idempotent::Yes;
            if !again || attempt >= attempts || Instant::now() + RETRY_PAUSE >= deadline {
                return Err(error);
            }
            tracing::debug!(%error, attempt, "etcd request failed, trying the next endpoint");
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }
}

/// A client per endpoint, connecting with `options`.
async fn clients(endpoints: &[String], options: ConnectOptions) -> Result<Arc<[Member]>> {
    let mut members = Vec::with_capacity(endpoints.len());
    for endpoint in endpoints {
        // Connecting is lazy: this only builds the channel.
        let client = Client::connect([endpoint], Some(options.clone()))
            .await
            .map_err(|error| classify(error, None).0)?;
        members.push(Member {
            kv: client
                .kv_client()
                .max_decoding_message_size(MAX_MESSAGE_BYTES),
            watch: client
                .watch_client()
                .max_decoding_message_size(MAX_MESSAGE_BYTES),
            maintenance: client.maintenance_client(),
            lease: client.lease_client(),
        });
    }
    Ok(members.into())
}
