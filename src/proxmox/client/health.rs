//! Whether a Proxmox VE endpoint answers, shared by every client of the endpoint.
//!
//! A Proxmox VE cluster that stops answering must delay only the machines in it. A plain
//! request timeout (60 s) would let each of its requests hold a controller worker for a
//! minute, and a few of them would hold all workers. So an endpoint is declared *down*
//! when a request has waited `stall_after` with no answer from the endpoint meanwhile
//! (another request's answer proves it alive, and a slow call may then take its full
//! timeout), or when a connection could not be made at all. While it is down, requests
//! are refused at once, except one probe every `probe_every`, which waits only
//! `probe_patience`; its first answer brings it back. Separately, the endpoint is *failing* from its first failure (no answer, 401, or
//! a 5xx other than PVE's node proxy errors 595/596) until its next success, so that
//! conditions can say since when.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use jiff::Timestamp;

/// How long an endpoint may stay silent and how often a down one is probed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HealthOptions {
    /// Silence after which a waiting request gives up and the endpoint is down.
    pub stall_after: Duration,
    /// How often a request is let through to a down endpoint.
    pub probe_every: Duration,
    /// How long that request waits for an answer.
    pub probe_patience: Duration,
}

impl Default for HealthOptions {
    /// 5 s of silence (PVE answers in milliseconds; a call that waits for a lock is
    /// answered within its 10 s lock timeout, and is only given up on when nothing else
    /// was answered meanwhile); a probe every 5 s, waiting 2 s.
    fn default() -> Self {
        Self {
            stall_after: Duration::from_secs(5),
            probe_every: Duration::from_secs(5),
            probe_patience: Duration::from_secs(2),
        }
    }
}

/// Since when, and why, an endpoint fails.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failing {
    /// The first failure of the current run of failures.
    pub since: Timestamp,
    /// The latest failure.
    pub error: String,
    /// Whether requests are refused without being sent.
    pub down: bool,
}

/// Leave to send one request.
#[derive(Debug)]
pub struct Admission {
    /// How long it may go unanswered.
    patience: Duration,
}

/// One sent request.
#[derive(Debug)]
pub struct Ticket {
    id: u64,
    sent: Instant,
    patience: Duration,
}

/// The health of one endpoint.
#[derive(Debug)]
pub struct Health {
    options: HealthOptions,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    next_ticket: u64,
    /// Requests sent and not answered, by ticket.
    outstanding: BTreeMap<u64, Instant>,
    /// When the endpoint last answered anything.
    last_answer: Option<Instant>,
    failing: Option<Failing>,
    /// While down: when the next probe may go.
    probe_at: Option<Instant>,
}

impl Default for Health {
    fn default() -> Self {
        Self::new(HealthOptions::default())
    }
}

impl Health {
    /// A healthy endpoint.
    pub fn new(options: HealthOptions) -> Self {
        Self {
            options,
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a request may be sent now: `Err` with the failure while the endpoint is
    /// down, unless it is time for a probe (which this call then is).
    pub fn admit(&self) -> Result<Admission, Failing> {
        let mut state = self.lock();
        let (Some(probe_at), Some(failing)) = (state.probe_at, state.failing.clone()) else {
            return Ok(Admission {
                patience: self.options.stall_after,
            });
        };
        let now = Instant::now();
        if now < probe_at {
            return Err(failing);
        }
        state.probe_at = Some(now + self.options.probe_every);
        Ok(Admission {
            patience: self.options.probe_patience,
        })
    }

    /// Records an admitted request as sent.
    pub fn sent(&self, admission: Admission) -> Ticket {
        let mut state = self.lock();
        let ticket = Ticket {
            id: state.next_ticket,
            sent: Instant::now(),
            patience: admission.patience,
        };
        state.next_ticket += 1;
        state.outstanding.insert(ticket.id, ticket.sent);
        ticket
    }

    /// The endpoint answered `ticket`; `failure` is the text of an answer that counts as
    /// failing (401, 5xx), `None` for any other.
    pub fn answered(&self, ticket: Ticket, failure: Option<String>) {
        let mut state = self.lock();
        state.outstanding.remove(&ticket.id);
        state.last_answer = Some(Instant::now());
        state.probe_at = None;
        match failure {
            None => state.failing = None,
            Some(error) => {
                let since = state
                    .failing
                    .as_ref()
                    .map_or_else(now_in_seconds, |f| f.since);
                state.failing = Some(Failing {
                    since,
                    error,
                    down: false,
                });
            }
        }
    }

    /// `ticket` got no answer (a timeout, a reset, a connection refused, a stall). The
    /// endpoint is down until a probe is answered when nothing else was answered
    /// meanwhile and the request could not connect or waited `stall_after`; otherwise
    /// the failure is this request's alone (a slow call with a short timeout).
    pub fn lost(&self, ticket: Ticket, error: String, unconnected: bool) -> Failing {
        let mut state = self.lock();
        state.outstanding.remove(&ticket.id);
        let silent = unconnected || ticket.sent.elapsed() >= ticket.patience;
        if !silent
            || state
                .last_answer
                .is_some_and(|answered| answered > ticket.sent)
        {
            return Failing {
                since: now_in_seconds(),
                error,
                down: false,
            };
        }
        let since = state
            .failing
            .as_ref()
            .map_or_else(now_in_seconds, |f| f.since);
        let failing = Failing {
            since,
            error,
            down: true,
        };
        state.failing = Some(failing.clone());
        state.probe_at = Some(Instant::now() + self.options.probe_every);
        failing
    }

    /// Resolves once `ticket` has waited its patience (`stall_after`, or a probe's) and
    /// the endpoint has answered nothing for that long; never while answers keep coming.
    pub async fn stalled(&self, ticket: &Ticket) {
        loop {
            let quiet_since = {
                let state = self.lock();
                state
                    .last_answer
                    .map_or(ticket.sent, |answered| answered.max(ticket.sent))
            };
            let deadline = quiet_since + ticket.patience;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline.into()).await;
        }
    }

    /// The current run of failures, if any.
    pub fn failing(&self) -> Option<Failing> {
        self.lock().failing.clone()
    }
}

impl Ticket {
    /// How long it may go unanswered.
    pub fn patience(&self) -> Duration {
        self.patience
    }
}

/// Now, to the second (it is shown to people).
fn now_in_seconds() -> Timestamp {
    let now = Timestamp::now();
    Timestamp::from_second(now.as_second()).unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quick() -> Health {
        Health::new(HealthOptions {
            stall_after: Duration::from_millis(40),
            probe_every: Duration::from_millis(60),
            probe_patience: Duration::from_millis(20),
        })
    }

    #[test]
    fn a_lost_request_makes_it_down_until_a_probe_is_answered() {
        let health = quick();
        let t = health.sent(health.admit().expect("up"));
        let _ = health.lost(t, "connection refused".into(), true);
        let failing = health.admit().expect_err("down: refused at once");
        assert!(failing.down);
        assert_eq!(failing.error, "connection refused");
        std::thread::sleep(Duration::from_millis(70));
        let probe = health.admit().expect("the probe goes");
        assert_eq!(
            probe.patience,
            Duration::from_millis(20),
            "a probe is impatient"
        );
        assert!(health.admit().is_err(), "one probe per interval");
        let probe = health.sent(probe);
        health.answered(probe, None);
        assert_eq!(health.failing(), None);
        health.admit().expect("up again");
    }

    #[test]
    fn a_request_lost_while_others_are_answered_is_not_an_outage() {
        let health = quick();
        let slow = health.sent(health.admit().expect("up"));
        let fast = health.sent(health.admit().expect("up"));
        health.answered(fast, None);
        assert!(!health.lost(slow, "timeout".into(), true).down);
        assert_eq!(health.failing(), None);
        health.admit().expect("still up");
        let quick_timeout = health.sent(health.admit().expect("up"));
        assert!(
            !health.lost(quick_timeout, "timeout".into(), false).down,
            "a timeout shorter than the stall is the request's"
        );
        health.admit().expect("still up");
    }

    #[test]
    fn failing_answers_keep_their_first_time_and_do_not_refuse() {
        let health = quick();
        let t = health.sent(health.admit().expect("up"));
        health.answered(t, Some("401 authentication failure".into()));
        let first = health.failing().expect("failing").since;
        std::thread::sleep(Duration::from_millis(5));
        let t = health.sent(health.admit().expect("up"));
        health.answered(t, Some("500 internal".into()));
        let failing = health.failing().expect("failing");
        assert_eq!(failing.since, first, "since the first failure");
        assert_eq!(failing.error, "500 internal");
        assert!(!failing.down);
        health
            .admit()
            .expect("an answering endpoint is not refused");
    }

    #[tokio::test]
    async fn a_waiting_request_stalls_only_while_nothing_is_answered() {
        let health = quick();
        let waiting = health.sent(health.admit().expect("up"));
        let started = Instant::now();
        tokio::time::sleep(Duration::from_millis(25)).await;
        let other = health.sent(health.admit().expect("up"));
        health.answered(other, None);
        health.stalled(&waiting).await;
        assert!(
            started.elapsed() >= Duration::from_millis(60),
            "the answer after 25 ms restarted the 40 ms of silence"
        );
    }
}
