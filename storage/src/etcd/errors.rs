//! etcd and gRPC failures mapped to the store's error type, and whether a request may be retried
//! on another endpoint.

use tonic::Code;

use crate::error::Error;
use crate::types::Revision;

/// Whether a failed request may be sent again, to the next endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Retry {
    /// The request never left this process (no connection): always safe.
    Always,
    /// The endpoint failed (transport error, no leader, …): safe for reads, but a write may
    /// have been applied, so its outcome is reported as `Unavailable` instead.
    IfIdempotent,
    /// etcd answered; the answer stands.
    Never,
}

/// Maps an etcd-client error. `revision` is the revision the request read at or compacted to,
/// used to describe `Expired` and `FutureRevision`.
pub(super) fn classify(error: etcd_client::Error, revision: Option<Revision>) -> (Error, Retry) {
    use etcd_client::Error as E;
    let retry = if never_sent(&error) {
        Retry::Always
    } else {
        Retry::IfIdempotent
    };
    match error {
        E::GRpcStatus(status) => {
            let error = from_status(&status, revision);
            let retry = if matches!(error, Error::Unavailable(_)) {
                retry
            } else {
                Retry::Never
            };
            (error, retry)
        }
        E::TransportError(error) => (
            Error::Unavailable(format!("etcd transport: {error}")),
            retry,
        ),
        E::IoError(error) => (Error::Unavailable(format!("etcd i/o: {error}")), retry),
        E::WatchError(message) => (Error::Unavailable(format!("etcd watch: {message}")), retry),
        E::InvalidArgs(message) => (Error::InvalidArgument(message), Retry::Never),
        E::InvalidUri(error) => (
            Error::InvalidArgument(format!("etcd endpoint: {error}")),
            Retry::Never,
        ),
        other => (Error::Internal(format!("etcd: {other}")), Retry::Never),
    }
}

/// Whether the failure happened while connecting, before the request was sent.
fn never_sent(error: &etcd_client::Error) -> bool {
    // etcd-client's error does not expose its cause as `source()`; look inside it.
    let mut source: Option<&(dyn std::error::Error + 'static)> = match error {
        etcd_client::Error::GRpcStatus(status) => Some(status),
        etcd_client::Error::TransportError(error) => Some(error),
        _ => None,
    };
    while let Some(cause) = source {
        if cause.downcast_ref::<tonic::ConnectError>().is_some() {
            return true;
        }
        source = cause.source();
    }
    false
}

fn from_status(status: &tonic::Status, revision: Option<Revision>) -> Error {
    let message = status.message();
    let requested = revision.unwrap_or_default();
    // etcd answers both with OutOfRange; only the text tells them apart.
    if message.contains("required revision has been compacted") {
        return Error::Expired { requested };
    }
    if message.contains("required revision is a future revision") {
        return Error::FutureRevision { requested };
    }
    let described = format!("etcd: {message} ({:?})", status.code());
    match status.code() {
        // Leader changes, timeouts, overload, lost connections: the request may simply be retried.
        Code::Unavailable
        | Code::DeadlineExceeded
        | Code::Aborted
        | Code::Cancelled
        | Code::ResourceExhausted => Error::Unavailable(described),
        // tonic reports a connection that broke mid-request as Unknown "transport error".
        Code::Unknown if message.contains("transport error") => Error::Unavailable(described),
        Code::InvalidArgument | Code::OutOfRange => Error::InvalidArgument(described),
        _ => Error::Internal(described),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compaction_and_future_revisions_are_told_apart() {
        let compacted =
            tonic::Status::out_of_range("etcdserver: mvcc: required revision has been compacted");
        let future =
            tonic::Status::out_of_range("etcdserver: mvcc: required revision is a future revision");
        assert!(matches!(
            from_status(&compacted, Some(7)),
            Error::Expired { requested: 7 }
        ));
        assert!(matches!(
            from_status(&future, Some(9)),
            Error::FutureRevision { requested: 9 }
        ));
    }

    #[test]
    fn lost_leaders_and_connections_are_retryable() {
        for status in [
            tonic::Status::unavailable("etcdserver: leader changed"),
            tonic::Status::unknown("transport error"),
        ] {
            let error = from_status(&status, None);
            assert!(error.is_retryable(), "{error:?}");
        }
        let error = from_status(&tonic::Status::internal("boom"), None);
        assert!(!error.is_retryable(), "{error:?}");
    }

    #[test]
    fn only_connection_failures_are_retried_for_writes() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let status = tonic::Status::from_error(Box::new(tonic::ConnectError(Box::new(refused))));
        let (error, retry) = classify(etcd_client::Error::GRpcStatus(status), None);
        assert!(matches!(error, Error::Unavailable(_)));
        assert_eq!(retry, Retry::Always);

        let status = tonic::Status::unavailable("etcdserver: request timed out");
        let (_, retry) = classify(etcd_client::Error::GRpcStatus(status), None);
        assert_eq!(retry, Retry::IfIdempotent);

        let status = tonic::Status::failed_precondition("etcdserver: permission denied");
        let (_, retry) = classify(etcd_client::Error::GRpcStatus(status), None);
        assert_eq!(retry, Retry::Never);
    }
}
