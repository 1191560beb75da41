//! `metav1.Condition` helpers: set a condition (the transition time moves only when the
//! status changes) and compute the `Ready` summary the way CAPI v1beta2's summary does.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::names::READY;

/// Condition status values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// `True`.
    True,
    /// `False`.
    False,
    /// `Unknown`.
    Unknown,
}

impl Status {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
}

/// The condition of `type_`, if present.
pub fn get<'c>(conditions: &'c [Condition], type_: &str) -> Option<&'c Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of `type_` is `True`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    get(conditions, type_).is_some_and(|c| c.status == "True")
}

/// Upserts a condition. The transition time changes only when the status changes.
/// Messages are capped at the schema's 32768 bytes.
pub fn set(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: Status,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: Timestamp,
) {
    let message = truncate(message, 32_768);
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != status.as_str() {
                c.status = status.as_str().to_string();
                c.last_transition_time = Time(now);
            }
            c.reason = reason.to_string();
            c.message = message;
            c.observed_generation = generation;
        }
        None => conditions.push(Condition {
            type_: type_.to_string(),
            status: status.as_str().to_string(),
            reason: reason.to_string(),
            message,
            observed_generation: generation,
            last_transition_time: Time(now),
        }),
    }
}

/// Sets `Ready` from the given condition types: `True` (`InfoReported`) when all are
/// true, `False` (`IssuesReported`) when one is false, else `Unknown`
/// (`UnknownReported`); the message lists the non-true ones as CAPI does.
pub fn set_summary(
    conditions: &mut Vec<Condition>,
    of: &[&str],
    generation: Option<i64>,
    now: Timestamp,
) {
    let mut status = Status::True;
    let mut lines = Vec::new();
    for type_ in of {
        match get(conditions, type_) {
            Some(c) if c.status == "True" => {}
            Some(c) => {
                if c.status == "False" {
                    status = Status::False;
                } else if status == Status::True {
                    status = Status::Unknown;
                }
                let detail = if c.message.is_empty() {
                    c.reason.clone()
                } else {
                    c.message.clone()
                };
                lines.push(format!("* {type_}: {detail}"));
            }
            None => {
                if status == Status::True {
                    status = Status::Unknown;
                }
                lines.push(format!("* {type_}: Condition not yet reported"));
            }
        }
    }
    let reason = match status {
        Status::True => "InfoReported",
        Status::False => "IssuesReported",
        Status::Unknown => "UnknownReported",
    };
    set(
        conditions,
        READY,
        status,
        reason,
        &lines.join("\n"),
        generation,
        now,
    );
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_moves_only_on_status_change() {
        let t0 = Timestamp::UNIX_EPOCH;
        let t1 = Timestamp::from_second(100).expect("valid");
        let mut cs = Vec::new();
        set(&mut cs, "A", Status::False, "One", "m", Some(1), t0);
        set(&mut cs, "A", Status::False, "Two", "n", Some(2), t1);
        assert_eq!(cs[0].last_transition_time, Time(t0));
        assert_eq!(
            (cs[0].reason.as_str(), cs[0].observed_generation),
            ("Two", Some(2))
        );
        set(&mut cs, "A", Status::True, "Three", "", Some(2), t1);
        assert_eq!(cs[0].last_transition_time, Time(t1));
    }

    #[test]
    fn summary_reports_the_worst_status() {
        let now = Timestamp::UNIX_EPOCH;
        let mut cs = Vec::new();
        set_summary(&mut cs, &["A"], None, now);
        assert_eq!(get(&cs, READY).map(|c| c.status.as_str()), Some("Unknown"));
        set(&mut cs, "A", Status::False, "Broken", "it broke", None, now);
        set_summary(&mut cs, &["A"], None, now);
        let ready = get(&cs, READY).expect("ready");
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "IssuesReported")
        );
        assert_eq!(ready.message, "* A: it broke");
        set(&mut cs, "A", Status::True, "Fine", "", None, now);
        set_summary(&mut cs, &["A"], None, now);
        assert!(is_true(&cs, READY));
        assert_eq!(truncate("héllo", 2), "h");
    }
}
