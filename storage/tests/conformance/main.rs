//! Integration tests of capmox-storage, in one binary:
//! - `cases`: the conformance suite, run against both backends;
//! - `model`: property tests of both backends against a model;
//! - `embedded` and `etcd`: what only one backend has (persistence, crash safety, history bound;
//!   TLS, several endpoints, reconnecting watches).
//!
//! etcd tests start real `etcd` processes on free loopback ports.

mod cases;
mod embedded;
mod etcd;
mod model;
mod support;

/// Instantiates each conformance case once per backend: `etcd::<case>` and `embedded::<case>`.
/// Cases marked `own` get an etcd of their own (they compact, which is cluster-wide).
macro_rules! conformance {
    ($($case:ident $(: $own:ident)?),* $(,)?) => {
        mod conformance_etcd {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    let fixture = crate::support::Fixture::new(
                        crate::support::Backend::Etcd,
                        concat!("etcd-", stringify!($case)),
                        conformance!(@isolation $($own)?),
                    ).await;
                    crate::cases::$case(fixture).await;
                }
            )*
        }
        mod conformance_embedded {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    let fixture = crate::support::Fixture::new(
                        crate::support::Backend::Embedded,
                        stringify!($case),
                        crate::support::Isolation::Own,
                    ).await;
                    crate::cases::$case(fixture).await;
                }
            )*
        }
    };
    (@isolation own) => { crate::support::Isolation::Own };
    (@isolation) => { crate::support::Isolation::Shared };
}

conformance! {
    get_missing_is_not_found,
    create_then_get_round_trips_bytes,
    create_of_an_existing_key_is_already_exists,
    update_is_compare_and_swap_on_the_revision,
    update_of_a_missing_key_is_not_found,
    delete_returns_the_previous_object_and_its_revision,
    delete_honours_a_revision_precondition,
    writes_get_strictly_increasing_revisions,
    invalid_arguments_are_rejected,
    list_returns_the_prefix_sorted,
    list_pages_with_limit_and_start_after,
    list_reads_the_past_at_a_revision,
    list_with_lends_each_returned_key_to_its_reader,
    list_at_a_future_revision_is_refused,
    paging_is_consistent_while_writing,
    watch_reports_changes_with_previous_values,
    watch_sees_only_its_prefix,
    watch_replays_history_then_follows_live,
    watch_from_a_future_revision_waits_for_it,
    watch_keeps_order_under_concurrent_writes,
    concurrent_writers_race_with_exactly_one_winner,
    watch_progress_on_request,
    compaction_expires_older_revisions: own,
    many_keys_list_in_one_page,
    progress_marks_never_overtake_replayed_events,
}
