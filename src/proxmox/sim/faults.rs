//! Fault-injection knobs. A [`FaultPlan`] is given at start and can be replaced at run
//! time (`PUT /_sim/faults` or [`super::SimControl::set_faults`]). Every field defaults
//! to "no fault", so a plan only names what it breaks.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// The complete set of knobs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FaultPlan {
    /// Answer matching requests with an error instead of handling them.
    pub http_errors: Vec<HttpFault>,
    /// Delay matching responses (client timeouts).
    pub response_delays: Vec<ResponseDelay>,
    /// Make matching tasks fail with a message.
    pub task_failures: Vec<TaskFault>,
    /// Extra seconds for tasks of a type (`qmclone` → 30).
    pub task_delays: BTreeMap<String, f64>,
    /// Task types that never finish.
    pub hang_tasks: BTreeSet<String>,
    /// Nodes that cannot be reached through the API (proxy errors 595/596).
    pub offline_nodes: BTreeMap<String, OfflineMode>,
    /// The cluster has lost quorum: mutating calls fail.
    pub no_quorum: bool,
    /// Storages whose allocations fail for lack of space.
    pub full_storages: BTreeSet<String>,
    /// Extra seconds every allocation holds a storage's lock (parallel clones queue and
    /// time out after 10 s, as on real clusters).
    pub storage_lock_hold: BTreeMap<String, f64>,
    /// Config locks forced onto VMs (`101 → "backup"`).
    pub locked_vms: BTreeMap<u32, String>,
    /// VMs whose guest agent never answers.
    pub agent_never_ready: BTreeSet<u32>,
    /// What `cloud-init status` reports per VM.
    pub cloud_init: BTreeMap<u32, CloudInitResult>,
    /// Leave `message` out of error bodies (PVE before 8.3 / libpve-http-server 5.2).
    pub drop_message_field: bool,
    /// Token ids that no longer authenticate.
    pub revoked_tokens: BTreeSet<String>,
}

/// An injected HTTP error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpFault {
    /// Method to match (any when absent).
    #[serde(default)]
    pub method: Option<String>,
    /// Path below `/api2/json` as a glob: `*` matches within a segment, `**` across.
    pub path: String,
    /// Status to answer with (500, 595, 596...).
    pub status: u16,
    /// Error text (reason phrase and `message`).
    #[serde(default)]
    pub message: String,
    /// Probability per matching request (error rate); 1 by default.
    #[serde(default = "one")]
    pub probability: f64,
    /// Fire at most this many times.
    #[serde(default)]
    pub count: Option<u32>,
}

/// A delayed response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResponseDelay {
    /// Method to match (any when absent).
    #[serde(default)]
    pub method: Option<String>,
    /// Path glob as in [`HttpFault::path`].
    pub path: String,
    /// Delay in milliseconds.
    pub millis: u64,
}

/// An injected task failure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskFault {
    /// Worker type (`qmclone`, `qmstart`...).
    pub task_type: String,
    /// Only for this VM (the target of a clone, else the task's VM).
    #[serde(default)]
    pub vmid: Option<u32>,
    /// The `TASK ERROR` text.
    pub message: String,
    /// Fire at most this many times.
    #[serde(default)]
    pub count: Option<u32>,
}

/// How an offline node fails.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OfflineMode {
    /// 595 `No route to host`.
    #[default]
    Unreachable,
    /// 595 `Connection refused`.
    Refused,
    /// 596 `Connection timed out` after the profile's proxy timeout.
    Timeout,
}

/// Outcome of cloud-init inside a guest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CloudInitResult {
    /// `status: done`, exit 0.
    #[default]
    Done,
    /// `status: error`, exit 1.
    Error,
    /// `status: done` with recoverable errors, exit 2 (cloud-init ≥ 23.4).
    Degraded,
    /// Stays `status: running`.
    Running,
}

fn one() -> f64 {
    1.0
}

/// Matches `path` (no leading slash needed) against `glob`.
pub fn glob_match(glob: &str, path: &str) -> bool {
    let pattern: Vec<&str> = glob.trim_matches('/').split('/').collect();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match_segments(&pattern, &segments)
}

fn match_segments(pattern: &[&str], path: &[&str]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((&"**", rest)) => (0..=path.len()).any(|skip| match_segments(rest, &path[skip..])),
        Some((p, rest)) => match path.split_first() {
            Some((seg, path_rest)) => segment_match(p, seg) && match_segments(rest, path_rest),
            None => false,
        },
    }
}

/// `*` within a segment matches any run of characters.
fn segment_match(pattern: &str, segment: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == segment;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !segment.starts_with(first)
        || !segment.ends_with(last)
        || segment.len() < first.len() + last.len()
    {
        return false;
    }
    // Both ends matched, so these are char boundaries.
    let mut rest = &segment[first.len()..segment.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

fn method_matches(want: &Option<String>, method: &str) -> bool {
    want.as_deref()
        .is_none_or(|m| m.eq_ignore_ascii_case(method))
}

impl FaultPlan {
    /// The first HTTP fault that fires for this request (consuming one of its count).
    pub fn take_http_error(
        &mut self,
        method: &str,
        path: &str,
        roll: &mut impl FnMut(f64) -> bool,
    ) -> Option<HttpFault> {
        let fault = self.http_errors.iter_mut().find(|f| {
            f.count != Some(0)
                && method_matches(&f.method, method)
                && glob_match(&f.path, path)
                && roll(f.probability)
        })?;
        if let Some(n) = fault.count.as_mut() {
            *n -= 1;
        }
        Some(fault.clone())
    }

    /// Total delay for this request.
    pub fn response_delay(&self, method: &str, path: &str) -> u64 {
        self.response_delays
            .iter()
            .filter(|d| method_matches(&d.method, method) && glob_match(&d.path, path))
            .map(|d| d.millis)
            .sum()
    }

    /// The failure message for a new task, consuming one of its count.
    pub fn take_task_failure(&mut self, task_type: &str, vmid: Option<u32>) -> Option<String> {
        let fault = self.task_failures.iter_mut().find(|f| {
            f.count != Some(0) && f.task_type == task_type && (f.vmid.is_none() || f.vmid == vmid)
        })?;
        if let Some(n) = fault.count.as_mut() {
            *n -= 1;
        }
        Some(fault.message.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match(
            "/nodes/*/qemu/*/clone",
            "/nodes/pve1/qemu/9000/clone"
        ));
        assert!(!glob_match(
            "/nodes/*/qemu/*/clone",
            "/nodes/pve1/qemu/9000/config"
        ));
        assert!(glob_match("/nodes/**", "/nodes/pve1/qemu/9000/config"));
        assert!(glob_match(
            "**/agent/*",
            "/nodes/pve1/qemu/1/agent/get-osinfo"
        ));
        assert!(glob_match("/nodes/pve*/status", "/nodes/pve2/status"));
        assert!(glob_match("/cluster/*", "/cluster/nextid"));
        assert!(!glob_match("/cluster/*", "/cluster"));
        assert!(glob_match("**", "/anything/at/all"));
        assert!(glob_match("/a/*x*y/b", "/a/1x2y/b"));
        assert!(!glob_match("/a/ab*ba", "/a/aba"));
    }

    #[test]
    fn counts_are_consumed() {
        let mut plan = FaultPlan {
            http_errors: vec![HttpFault {
                method: Some("POST".into()),
                path: "/nodes/*/qemu/*/clone".into(),
                status: 500,
                message: "boom".into(),
                probability: 1.0,
                count: Some(1),
            }],
            ..FaultPlan::default()
        };
        let mut always = |_: f64| true;
        assert!(
            plan.take_http_error("GET", "/nodes/a/qemu/1/clone", &mut always)
                .is_none()
        );
        assert!(
            plan.take_http_error("post", "/nodes/a/qemu/1/clone", &mut always)
                .is_some()
        );
        assert!(
            plan.take_http_error("POST", "/nodes/a/qemu/1/clone", &mut always)
                .is_none()
        );
    }

    #[test]
    fn plans_parse_from_json() {
        let plan: FaultPlan = serde_json::from_str(
            r#"{"offline_nodes":{"pve2":"timeout"},"cloud_init":{"101":"error"},
                "http_errors":[{"path":"/cluster/**","status":503,"probability":0.5}]}"#,
        )
        .expect("parses");
        assert_eq!(plan.offline_nodes["pve2"], OfflineMode::Timeout);
        assert_eq!(plan.cloud_init[&101], CloudInitResult::Error);
        assert_eq!(plan.http_errors[0].probability, 0.5);
        assert!(serde_json::from_str::<FaultPlan>(r#"{"bogus":1}"#).is_err());
    }
}
