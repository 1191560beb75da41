//! `ListOptions` from a query string, with kube's decoding rules and error messages, and the
//! resourceVersion / resourceVersionMatch / continue semantics of list and watch
//! (apimachinery `internalversion` validation, apiserver `storage.ValidateListOptions`).

use super::continue_token::{self, Continue};
use super::error::RegistryError;
use super::field_error::{FieldError, FieldPath};
use super::field_selector::FieldSelector;
use super::label_selector::LabelSelector;

/// `resourceVersionMatch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceVersionMatch {
    NotOlderThan,
    Exact,
}

impl ResourceVersionMatch {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotOlderThan => "NotOlderThan",
            Self::Exact => "Exact",
        }
    }
}

/// Decoded list/watch options of one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    pub label_selector: LabelSelector,
    pub field_selector: FieldSelector,
    pub watch: bool,
    pub allow_watch_bookmarks: bool,
    /// Empty means unset.
    pub resource_version: String,
    /// The raw value; empty means unset. Validation checks it.
    pub resource_version_match: String,
    pub timeout_seconds: Option<i64>,
    /// 0 means no limit.
    pub limit: i64,
    pub continue_token: String,
    pub send_initial_events: Option<bool>,
}

/// Go's query conversion for booleans: present and not `0`/`false` means true (even empty).
fn query_bool(value: &str) -> bool {
    !(value == "0" || value.eq_ignore_ascii_case("false"))
}

fn query_int(value: &str) -> Result<i64, RegistryError> {
    value.parse::<i64>().map_err(|e| {
        let reason = match e.kind() {
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                "value out of range"
            }
            _ => "invalid syntax",
        };
        RegistryError::BadRequest(format!(
            "strconv.ParseInt: parsing {}: {reason}",
            super::gofmt::quote(value)
        ))
    })
}

impl ListOptions {
    /// Decodes and validates list options like kube's list handler: decoding errors are 400,
    /// option validation is 422 (`ListOptions.meta.k8s.io "" is invalid: …`), and unsupported
    /// field selectors are 400. Only the first value of a repeated parameter counts.
    /// `selectable` names the fields a field selector may use besides the metadata ones.
    pub fn from_query<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
        namespaced: bool,
        selectable: &[String],
        watch_list_supported: bool,
    ) -> Result<Self, RegistryError> {
        let pairs: Vec<(&str, &str)> = pairs.into_iter().collect();
        let get = |key: &str| pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
        let mut opts = Self::default();
        if let Some(v) = get("labelSelector") {
            opts.label_selector =
                LabelSelector::parse(v).map_err(|e| RegistryError::BadRequest(e.to_string()))?;
        }
        if let Some(v) = get("fieldSelector") {
            opts.field_selector =
                FieldSelector::parse(v).map_err(|e| RegistryError::BadRequest(e.to_string()))?;
        }
        opts.watch = get("watch").is_some_and(query_bool);
        opts.allow_watch_bookmarks = get("allowWatchBookmarks").is_some_and(query_bool);
        opts.resource_version = get("resourceVersion").unwrap_or_default().to_owned();
        opts.resource_version_match = get("resourceVersionMatch").unwrap_or_default().to_owned();
        opts.timeout_seconds = get("timeoutSeconds").map(query_int).transpose()?;
        opts.limit = get("limit").map(query_int).transpose()?.unwrap_or(0);
        opts.continue_token = get("continue").unwrap_or_default().to_owned();
        opts.send_initial_events = get("sendInitialEvents").map(query_bool);

        opts.apply_defaults(watch_list_supported);
        let errors = opts.validate(watch_list_supported);
        if !errors.is_empty() {
            return Err(RegistryError::invalid_options("ListOptions", errors));
        }
        opts.field_selector
            .ensure_selectable(namespaced, selectable)
            .map_err(|e| RegistryError::BadRequest(e.to_string()))?;
        Ok(opts)
    }

    /// `SetListOptionsDefaults`: with WatchList support, a legacy watch (RV unset or "0")
    /// becomes an explicit "initial events, not older than" watch — unless it carries a
    /// `continue` (which a watch ignores), where the defaulted resourceVersionMatch would be
    /// refused as if the client had sent it.
    fn apply_defaults(&mut self, watch_list_supported: bool) {
        if !watch_list_supported
            || self.send_initial_events.is_some()
            || !self.resource_version_match.is_empty()
        {
            return;
        }
        let legacy = self.resource_version.is_empty() || self.resource_version == "0";
        if self.watch && legacy && self.continue_token.is_empty() {
            self.send_initial_events = Some(true);
            self.resource_version_match = ResourceVersionMatch::NotOlderThan.as_str().to_owned();
        }
    }

    /// `ValidateListOptions`.
    pub fn validate(&self, watch_list_supported: bool) -> Vec<FieldError> {
        let rvm = FieldPath::new("resourceVersionMatch");
        let mut errs = Vec::new();
        let m = self.resource_version_match.as_str();
        if self.watch {
            if self.send_initial_events.is_some() {
                if m != "NotOlderThan" {
                    errs.push(FieldError::forbidden(
                        &rvm,
                        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                    ));
                }
                if !watch_list_supported {
                    errs.push(FieldError::forbidden(
                        &FieldPath::new("sendInitialEvents"),
                        "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
                    ));
                }
            }
            if !m.is_empty() {
                if self.send_initial_events.is_none() {
                    errs.push(FieldError::forbidden(
                        &rvm,
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                    ));
                }
                if m != "NotOlderThan" {
                    errs.push(FieldError::not_supported(&rvm, m, &["NotOlderThan"]));
                }
                if !self.continue_token.is_empty() {
                    errs.push(FieldError::forbidden(
                        &rvm,
                        "resourceVersionMatch is forbidden when continue is provided",
                    ));
                }
            }
            return errs;
        }
        if !m.is_empty() {
            if self.resource_version.is_empty() {
                errs.push(FieldError::forbidden(
                    &rvm,
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if !self.continue_token.is_empty() {
                errs.push(FieldError::forbidden(
                    &rvm,
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
            if m != "Exact" && m != "NotOlderThan" {
                errs.push(FieldError::not_supported(
                    &rvm,
                    m,
                    &["Exact", "NotOlderThan", ""],
                ));
            }
            if m == "Exact" && self.resource_version == "0" {
                errs.push(FieldError::forbidden(
                    &rvm,
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
        }
        if self.send_initial_events.is_some() {
            errs.push(FieldError::forbidden(
                &FieldPath::new("sendInitialEvents"),
                "sendInitialEvents is forbidden for list",
            ));
        }
        errs
    }

    /// Where a (non-watch) list reads from; `key_prefix` is the resource's storage prefix
    /// that continue tokens are relative to.
    pub fn list_start(&self, key_prefix: &str) -> Result<ListStart, RegistryError> {
        if !self.continue_token.is_empty() {
            let Continue {
                start_key,
                revision,
            } = continue_token::decode(&self.continue_token, key_prefix)?;
            if !self.resource_version.is_empty() && self.resource_version != "0" {
                return Err(RegistryError::BadRequest(
                    "specifying resource version is not allowed when using continue".to_owned(),
                ));
            }
            return Ok(ListStart::Continue {
                start_key,
                revision,
            });
        }
        if self.resource_version.is_empty() {
            return Ok(ListStart::Latest);
        }
        let rv = parse_resource_version(&self.resource_version)?;
        Ok(match self.resource_version_match.as_str() {
            "Exact" => ListStart::Exact(rv),
            "NotOlderThan" => ListStart::NotOlderThan(rv),
            // Legacy paging: an RV with a limit reads exactly at that RV.
            _ if self.limit > 0 && rv > 0 => ListStart::Exact(rv),
            _ if rv == 0 => ListStart::Any,
            _ => ListStart::NotOlderThan(rv),
        })
    }

    /// Where a watch starts.
    pub fn watch_start(&self) -> Result<WatchStart, RegistryError> {
        let rv = parse_resource_version(&self.resource_version)?;
        let consistent = self.resource_version.is_empty();
        Ok(match self.send_initial_events {
            Some(true) => WatchStart::InitialState {
                consistent,
                min_revision: rv,
                end_bookmark: self.allow_watch_bookmarks,
            },
            Some(false) | None if rv > 0 => WatchStart::ChangesAfter(Some(rv)),
            Some(false) => WatchStart::ChangesAfter(None),
            None => WatchStart::InitialState {
                consistent,
                min_revision: 0,
                end_bookmark: false,
            },
        })
    }
}

/// The read point of a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListStart {
    /// RV unset: a consistent read at the latest revision.
    Latest,
    /// RV "0": any recent state is acceptable.
    Any,
    /// At least this revision (older is a 504 "Too large resource version" if the store lags).
    NotOlderThan(u64),
    /// Exactly this revision (410 Expired when compacted).
    Exact(u64),
    /// The next page of an earlier list; `revision` `None` = latest.
    Continue {
        start_key: String,
        revision: Option<u64>,
    },
}

/// The start point of a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchStart {
    /// Send the current state as ADDED events first, then changes. `consistent` when RV was
    /// unset; `min_revision` > 0 for `sendInitialEvents` with an RV; `end_bookmark` asks for
    /// the `k8s.io/initial-events-end` BOOKMARK after the initial events.
    InitialState {
        consistent: bool,
        min_revision: u64,
        end_bookmark: bool,
    },
    /// Only changes after this revision (`None`: from the latest revision on).
    ChangesAfter(Option<u64>),
}

/// `APIObjectVersioner.ParseResourceVersion`: "" and "0" are 0; otherwise a decimal `u64`.
pub fn parse_resource_version(rv: &str) -> Result<u64, RegistryError> {
    if rv.is_empty() || rv == "0" {
        return Ok(0);
    }
    rv.parse::<u64>().map_err(|e| {
        let reason = match e.kind() {
            std::num::IntErrorKind::PosOverflow => "value out of range",
            _ => "invalid syntax",
        };
        let quoted = super::gofmt::quote(rv);
        RegistryError::BadRequest(format!(
            "invalid resource version: resourceVersion: Invalid value: {quoted}: \
             strconv.ParseUint: parsing {quoted}: {reason}"
        ))
    })
}

/// The 504 raised when a client asks for a revision the store has not reached.
pub fn too_large_resource_version_message(requested: u64, current: u64) -> String {
    format!("Too large resource version: {requested}, current: {current}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(query: &[(&str, &str)]) -> Result<ListOptions, RegistryError> {
        ListOptions::from_query(query.iter().copied(), true, &[], false)
    }

    fn message(query: &[(&str, &str)]) -> String {
        parse(query).expect_err("should fail").to_string()
    }

    #[test]
    fn decodes_like_kube() {
        let opts = parse(&[
            ("labelSelector", "app=web"),
            ("fieldSelector", "metadata.name=m1"),
            ("watch", "1"),
            ("allowWatchBookmarks", ""),
            ("resourceVersion", "10"),
            ("timeoutSeconds", "290"),
            ("limit", "500"),
            ("watch", "false"),
        ])
        .expect("valid");
        assert!(opts.watch, "first value wins");
        assert!(opts.allow_watch_bookmarks, "empty value is true");
        assert_eq!(opts.timeout_seconds, Some(290));
        assert_eq!(opts.limit, 500);
        assert_eq!(
            opts.field_selector.requires_exact_match("metadata.name"),
            Some("m1")
        );
        assert!(!parse(&[("watch", "False")]).expect("valid").watch);
    }

    #[test]
    fn decoding_errors_are_bad_requests() {
        let cases: [(&[(&str, &str)], &str); 5] = [
            (
                &[("limit", "x")],
                "strconv.ParseInt: parsing \"x\": invalid syntax",
            ),
            (
                &[("timeoutSeconds", "")],
                "strconv.ParseInt: parsing \"\": invalid syntax",
            ),
            (
                &[("limit", "99999999999999999999")],
                "strconv.ParseInt: parsing \"99999999999999999999\": value out of range",
            ),
            (
                &[("labelSelector", "a in b")],
                "unable to parse requirement: found 'b' expected: '('",
            ),
            (
                &[("fieldSelector", "spec.x=1")],
                "field label not supported: spec.x",
            ),
        ];
        for (query, want) in cases {
            let err = parse(query).expect_err(want);
            assert!(matches!(err, RegistryError::BadRequest(_)), "{err:?}");
            assert_eq!(err.to_string(), want);
        }
    }

    #[test]
    fn validation_errors_are_invalid_list_options() {
        let cases: [(&[(&str, &str)], &str); 6] = [
            (
                &[("resourceVersionMatch", "Exact")],
                "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
            ),
            (
                &[("resourceVersionMatch", "Exact"), ("resourceVersion", "0")],
                "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ),
            (
                &[("resourceVersionMatch", "Newest"), ("resourceVersion", "5")],
                "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Unsupported value: \"Newest\": supported values: \"Exact\", \"NotOlderThan\", \"\"",
            ),
            (
                &[("sendInitialEvents", "true")],
                "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list",
            ),
            (
                &[("watch", "1"), ("resourceVersionMatch", "NotOlderThan")],
                "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ),
            (
                &[
                    ("watch", "1"),
                    ("sendInitialEvents", "true"),
                    ("resourceVersionMatch", "NotOlderThan"),
                ],
                "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
            ),
        ];
        for (query, want) in cases {
            let err = parse(query).expect_err(want);
            assert!(matches!(err, RegistryError::Invalid { .. }), "{err:?}");
            assert_eq!(err.to_string(), want);
        }
        assert_eq!(
            message(&[("resourceVersionMatch", "Exact"), ("continue", "x")]),
            "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided, resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided]"
        );
    }

    #[test]
    fn list_start_points() {
        let prefix = "/registry/g/things/";
        let start = |query: &[(&str, &str)]| parse(query).expect("valid").list_start(prefix);
        assert_eq!(start(&[]), Ok(ListStart::Latest));
        assert_eq!(start(&[("resourceVersion", "0")]), Ok(ListStart::Any));
        assert_eq!(
            start(&[("resourceVersion", "7")]),
            Ok(ListStart::NotOlderThan(7))
        );
        assert_eq!(
            start(&[("resourceVersion", "7"), ("limit", "5")]),
            Ok(ListStart::Exact(7))
        );
        assert_eq!(
            start(&[("resourceVersion", "7"), ("resourceVersionMatch", "Exact")]),
            Ok(ListStart::Exact(7))
        );
        let token =
            continue_token::encode_after("/registry/g/things/ns/a", prefix, 7).expect("token");
        assert_eq!(
            start(&[("continue", token.as_str())]),
            Ok(ListStart::Continue {
                start_key: "/registry/g/things/ns/a\u{0}".into(),
                revision: Some(7)
            })
        );
        assert_eq!(
            start(&[("continue", token.as_str()), ("resourceVersion", "3")])
                .expect_err("rv with continue")
                .to_string(),
            "specifying resource version is not allowed when using continue"
        );
        assert_eq!(
            start(&[("resourceVersion", "abc")])
                .expect_err("bad rv")
                .to_string(),
            "invalid resource version: resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax"
        );
    }

    #[test]
    fn watch_start_points() {
        let watch = |query: &[(&str, &str)], watch_list: bool| {
            let mut q = vec![("watch", "true")];
            q.extend_from_slice(query);
            ListOptions::from_query(q, true, &[], watch_list)
                .expect("valid")
                .watch_start()
                .expect("start")
        };
        assert_eq!(
            watch(&[], false),
            WatchStart::InitialState {
                consistent: true,
                min_revision: 0,
                end_bookmark: false
            }
        );
        assert_eq!(
            watch(&[("resourceVersion", "0")], false),
            WatchStart::InitialState {
                consistent: false,
                min_revision: 0,
                end_bookmark: false
            }
        );
        assert_eq!(
            watch(&[("resourceVersion", "12")], false),
            WatchStart::ChangesAfter(Some(12))
        );
        assert_eq!(
            watch(
                &[
                    ("sendInitialEvents", "true"),
                    ("resourceVersionMatch", "NotOlderThan"),
                    ("allowWatchBookmarks", "true")
                ],
                true
            ),
            WatchStart::InitialState {
                consistent: true,
                min_revision: 0,
                end_bookmark: true
            }
        );
        assert_eq!(
            watch(
                &[
                    ("sendInitialEvents", "false"),
                    ("resourceVersionMatch", "NotOlderThan")
                ],
                true
            ),
            WatchStart::ChangesAfter(None)
        );
    }
}
