//! Task calls and waiting for a task with backoff.

use std::time::Duration;

use tokio::time::Instant;

use super::{Client, Error, path};
use crate::proxmox::lenient::as_u64;
use crate::proxmox::types::{TaskLog, TaskLogLine, TaskOutcome, TaskStatus};
use crate::proxmox::upid::Upid;

/// How [`Client::wait_task`] polls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitOptions {
    /// Give up after this long (the task keeps running on the server).
    pub timeout: Duration,
    /// First pause between polls.
    pub initial_interval: Duration,
    /// Longest pause between polls; each pause is 1.5× the previous one.
    pub max_interval: Duration,
}

impl Default for WaitOptions {
    /// 10 minutes, polling at 0.5 s growing to 2 s.
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(600),
            initial_interval: Duration::from_millis(500),
            max_interval: Duration::from_secs(2),
        }
    }
}

impl WaitOptions {
    /// Default intervals with another overall limit.
    pub fn with_timeout(timeout: Duration) -> Self {
        Self {
            timeout,
            ..Self::default()
        }
    }
}

fn task_path(upid: &Upid, leaf: &str) -> String {
    // Tasks are polled on the node inside the UPID, whatever node started them.
    path(&["nodes", upid.node(), "tasks", upid.as_str(), leaf])
}

impl Client {
    /// `GET /nodes/{node-of-upid}/tasks/{upid}/status`.
    pub async fn task_status(&self, upid: &Upid) -> Result<TaskStatus, Error> {
        self.get(&task_path(upid, "status"), &[]).await
    }

    /// `GET .../log?start=&limit=`: `start` is a 0-based line offset.
    pub async fn task_log(&self, upid: &Upid, start: u64, limit: u64) -> Result<TaskLog, Error> {
        let query = [
            ("start".to_string(), start.to_string()),
            ("limit".to_string(), limit.to_string()),
        ];
        let path = task_path(upid, "log");
        let envelope = self
            .call_envelope(reqwest::Method::GET, &path, &query, super::Body::None)
            .await?;
        let total = envelope.get("total").and_then(as_u64);
        let lines: Vec<TaskLogLine> = super::decode_data(&reqwest::Method::GET, &path, envelope)?;
        Ok(TaskLog {
            total: total.unwrap_or(lines.len() as u64),
            lines,
        })
    }

    /// Polls until the task stops. `OK` and `WARNINGS: n` are success; any other exit
    /// status is [`Error::TaskFailed`] with the text. Transient errors while polling (a
    /// node briefly unreachable, 5xx) are retried until the deadline; the resulting
    /// [`Error::TaskTimeout`] then names the last one.
    pub async fn wait_task(&self, upid: &Upid, options: WaitOptions) -> Result<TaskStatus, Error> {
        let started = Instant::now();
        let deadline = started + options.timeout;
        // A zero interval would hammer the server; 10 ms is the floor.
        let floor = Duration::from_millis(10);
        let mut interval = options.initial_interval.max(floor);
        loop {
            let last_error = match self.task_status(upid).await {
                Ok(status) => match status.outcome() {
                    Some(outcome) if outcome.is_success() => return Ok(status),
                    Some(TaskOutcome::Failed(exitstatus)) => {
                        return Err(Error::TaskFailed {
                            upid: upid.clone(),
                            exitstatus,
                        });
                    }
                    _ => None,
                },
                Err(e) if e.is_transient() => {
                    tracing::debug!(%upid, error = %e, "task poll failed, retrying");
                    Some(e.to_string())
                }
                Err(e) => return Err(e),
            };
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::TaskTimeout {
                    upid: upid.clone(),
                    waited: now - started,
                    last_error,
                });
            }
            tokio::time::sleep(interval.min(deadline - now)).await;
            interval = interval.mul_f64(1.5).min(options.max_interval.max(floor));
        }
    }

    /// [`Client::wait_task`] for an optional UPID: PVE 7 answers some calls (resize)
    /// with `null`, meaning the work is already done.
    pub async fn wait_optional(
        &self,
        upid: Option<&Upid>,
        options: WaitOptions,
    ) -> Result<Option<TaskStatus>, Error> {
        match upid {
            Some(upid) => self.wait_task(upid, options).await.map(Some),
            None => Ok(None),
        }
    }
}
