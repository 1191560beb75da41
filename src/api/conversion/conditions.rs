//! Cluster API v1beta1 conditions (v1alpha1) ⇄ `metav1.Condition` (v1alpha2).
//!
//! The versions share type, status, reason, message and lastTransitionTime.
//! v1beta1 has a severity, metav1 an observedGeneration: an unchanged
//! condition keeps the prior hub condition whole (its observedGeneration
//! included); a changed one starts without observedGeneration, since the
//! generation it was observed at is no longer known. Severity has no place in
//! the hub and reads back empty.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::pairing::pair_keyed;
use super::prior::{Origin, Prior};
use crate::api::common::V1Beta1Condition;

/// The hub reason of a condition whose v1alpha1 reason is empty (metav1
/// requires one). Upstream uses the same value.
pub const EMPTY_REASON: &str = "APIConversionReason";

/// The message upstream gives a v1alpha1 condition whose hub message is
/// empty. This server keeps empty messages empty (metav1 allows them); the
/// value only matters when comparing against upstream's annotation.
const UPSTREAM_EMPTY_MESSAGE: &str = "API Conversion";

/// The hub time of a condition without lastTransitionTime (metav1 requires
/// one): the Unix epoch, which no real transition carries.
fn unknown_transition() -> Time {
    Time(Timestamp::UNIX_EPOCH)
}

/// The v1alpha1 conditions of the hub conditions.
pub(crate) fn down(hub: &[Condition], origin: Origin) -> Vec<V1Beta1Condition> {
    hub.iter().map(|c| down_one(c, origin)).collect()
}

fn down_one(hub: &Condition, origin: Origin) -> V1Beta1Condition {
    let Condition {
        last_transition_time,
        message,
        observed_generation: _,
        reason,
        status,
        type_,
    } = hub;
    let (reason, message) = match origin {
        Origin::Stored => (
            if reason == EMPTY_REASON { "" } else { reason }.to_string(),
            message.clone(),
        ),
        Origin::Upstream => (
            if reason.is_empty() {
                EMPTY_REASON
            } else {
                reason
            }
            .to_string(),
            if message.is_empty() {
                UPSTREAM_EMPTY_MESSAGE
            } else {
                message
            }
            .to_string(),
        ),
    };
    V1Beta1Condition {
        type_: type_.clone(),
        status: status.clone(),
        severity: String::new(),
        last_transition_time: Some(last_transition_time.clone())
            .filter(|t| *t != unknown_transition()),
        reason,
        message,
    }
}

/// The hub conditions of the v1alpha1 conditions; each is paired by type
/// with the prior hub condition and keeps it when unchanged.
pub(crate) fn up(spoke: Vec<V1Beta1Condition>, prior: Prior<'_, Vec<Condition>>) -> Vec<Condition> {
    let prior_list = prior.get().map_or(&[][..], Vec::as_slice);
    let unchanged = |s: &V1Beta1Condition, h: &Condition| down_one(h, prior.origin()) == *s;
    let pairs = pair_keyed(&spoke, prior_list, |s, h| s.type_ == h.type_, unchanged);
    spoke
        .into_iter()
        .zip(pairs)
        .map(|(condition, pair)| match pair.map(|i| &prior_list[i]) {
            Some(old) if unchanged(&condition, old) => old.clone(),
            _ => up_one(condition),
        })
        .collect()
}

fn up_one(spoke: V1Beta1Condition) -> Condition {
    let V1Beta1Condition {
        type_,
        status,
        severity: _,
        last_transition_time,
        reason,
        message,
    } = spoke;
    Condition {
        last_transition_time: last_transition_time.unwrap_or_else(unknown_transition),
        message,
        observed_generation: None,
        reason: if reason.is_empty() {
            EMPTY_REASON.to_string()
        } else {
            reason
        },
        status,
        type_,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hub(type_: &str, reason: &str, generation: Option<i64>) -> Condition {
        Condition {
            last_transition_time: Time(Timestamp::from_second(1_700_000_000).unwrap()),
            message: String::new(),
            observed_generation: generation,
            reason: reason.into(),
            status: "True".into(),
            type_: type_.into(),
        }
    }

    #[test]
    fn an_empty_v1alpha1_reason_round_trips() {
        let spoke = V1Beta1Condition {
            type_: "Ready".into(),
            status: "True".into(),
            ..V1Beta1Condition::default()
        };
        let up = up(vec![spoke.clone()], Prior::none());
        assert_eq!(up[0].reason, EMPTY_REASON);
        assert_eq!(up[0].last_transition_time, unknown_transition());
        assert_eq!(down(&up, Origin::Stored), vec![spoke]);
    }

    #[test]
    fn observed_generation_survives_only_while_the_condition_is_unchanged() {
        let stored = vec![
            hub("Ready", "Provisioned", Some(7)),
            hub("Other", "X", Some(3)),
        ];
        let prior = Prior::new(Some(&stored), Origin::Stored);
        let mut spoke = down(&stored, Origin::Stored);
        assert_eq!(up(spoke.clone(), prior), stored);

        spoke[1].status = "False".into();
        spoke[1].severity = "Warning".into();
        let changed = up(spoke, prior);
        assert_eq!(changed[0], stored[0]);
        assert_eq!(changed[1].observed_generation, None);
        assert_eq!(changed[1].status, "False");
    }

    #[test]
    fn upstream_data_is_compared_the_way_upstream_wrote_it() {
        let stored = vec![hub("Ready", "Provisioned", Some(2))];
        let seen_by_upstream = down(&stored, Origin::Upstream);
        assert_eq!(seen_by_upstream[0].message, UPSTREAM_EMPTY_MESSAGE);
        let prior = Prior::new(Some(&stored), Origin::Upstream);
        assert_eq!(up(seen_by_upstream, prior), stored);
    }
}
