//! Proxmox tasks: wait inline for a short while, else persist the UPID in
//! `status.taskRef` and poll it on later passes. A failed task never leaves the machine
//! stuck (upstream's perpetual `TaskFailed`): the failure is reported in the condition
//! message, `status.retryAfter` is set with back-off, and the phase's step — idempotent —
//! runs again once the window passed.

use std::str::FromStr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::{Failure, Flow, Pass};
use crate::controller::action::Action;
use crate::controller::clock::{after, until};
use crate::controller::seams::{InfraStore, Management};
use crate::proxmox::types::TaskOutcome;
use crate::proxmox::{self, Upid};

/// How a task ended as far as this pass knows.
pub(super) enum TaskEnd {
    /// Finished with `OK` or `WARNINGS`.
    Done,
    /// Still running; its UPID is recorded. Return this action.
    Pending(Action),
    /// Finished with an error (the exit status).
    Failed(String),
}

impl<S: InfraStore, M: Management> Pass<'_, S, M> {
    /// Waits up to `task_wait` for a task.
    pub(super) async fn await_task(&mut self, upid: Upid) -> Result<TaskEnd, Failure> {
        let client = self.client().await?;
        match client.wait_task(&upid, self.r.config.wait_options()).await {
            Ok(_) => {
                self.task_ended(&upid, true);
                Ok(TaskEnd::Done)
            }
            Err(proxmox::Error::TaskFailed { exitstatus, .. }) => {
                self.task_ended(&upid, false);
                Ok(TaskEnd::Failed(exitstatus))
            }
            Err(proxmox::Error::TaskTimeout { .. }) => {
                self.h.status.task_ref = Some(upid.as_str().to_string());
                Ok(TaskEnd::Pending(Action::Requeue(self.r.config.poll)))
            }
            // The task vanished (node restarted): let the step check and redo its work.
            Err(e) if super::not_found(&e) => Ok(TaskEnd::Failed(e.to_string())),
            Err(e) => Err(e.into()),
        }
    }

    /// Waits for a task the step cannot go on without: `None` once it is done (or, for a
    /// `removal`, when the object was already gone), `Some(wait)` while it runs; a
    /// failure is recorded with back-off.
    pub(super) async fn settle(
        &mut self,
        upid: Upid,
        what: &str,
        removal: bool,
    ) -> Result<Option<Flow>, Failure> {
        match self.await_task(upid).await? {
            TaskEnd::Done => Ok(None),
            TaskEnd::Pending(action) => Ok(Some(Flow::Wait(action))),
            TaskEnd::Failed(text) if removal && text.contains("does not exist") => Ok(None),
            TaskEnd::Failed(text) => Err(self.task_failed(what, &text)),
        }
    }

    /// Reports a task seen to end, timed from its start as its UPID records it (whole
    /// seconds, on the Proxmox node's clock).
    fn task_ended(&self, upid: &Upid, succeeded: bool) {
        let started = jiff::Timestamp::from_second(upid.starttime()).unwrap_or(self.now);
        let elapsed = self.r.clock.now().duration_since(started);
        self.r.observer.task_finished(
            upid.task_type(),
            if succeeded { "success" } else { "failed" },
            std::time::Duration::try_from(elapsed).unwrap_or_default(),
        );
    }

    /// Records a failed task: message, `retryAfter` with back-off, and a requeue then.
    pub(super) fn task_failed(&mut self, what: &str, exitstatus: &str) -> Failure {
        let attempt = self.r.bump_failures(self.h.uid());
        let delay = self.r.config.task_retry.delay(attempt, false);
        self.h.status.retry_after = Some(Time(after(self.now, delay)));
        self.h.status.task_ref = None;
        Failure::Blocked(format!("{what} failed: {exitstatus}"), delay)
    }

    /// At the start of a pass: honour `retryAfter`, then settle a recorded task.
    /// `Some(action)` means the pass has to wait.
    pub(super) async fn track_task(&mut self) -> Result<Option<Action>, Failure> {
        if let Some(Time(at)) = self.h.status.retry_after {
            if at > self.now {
                return Ok(Some(Action::Requeue(until(self.now, at))));
            }
            self.h.status.retry_after = None;
        }
        let Some(raw) = self.h.status.task_ref.clone() else {
            return Ok(None);
        };
        let Ok(upid) = Upid::from_str(&raw) else {
            self.h.status.task_ref = None;
            return Ok(None);
        };
        let client = self.client().await?;
        let status = match client.task_status(&upid).await {
            Ok(status) => status,
            Err(e) if super::not_found(&e) => {
                self.h.status.task_ref = None;
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        };
        let outcome = status.outcome();
        if let Some(outcome) = &outcome {
            self.task_ended(&upid, outcome.is_success());
        }
        match outcome {
            None => Ok(Some(Action::Requeue(self.r.config.poll))),
            Some(TaskOutcome::Failed(text)) if !tolerated(upid.task_type(), &text) => {
                Err(self.task_failed(upid.task_type(), &text))
            }
            Some(_) => {
                self.h.status.task_ref = None;
                self.finished = Some(upid.task_type().to_string());
                Ok(None)
            }
        }
    }
}

/// Task failures that are not failures for the controller: a start of a VM that already
/// runs (upstream tolerated every failed `qmstart` for this reason).
pub(super) fn tolerated(task_type: &str, exitstatus: &str) -> bool {
    task_type == "qmstart" && exitstatus.contains("already running")
}
