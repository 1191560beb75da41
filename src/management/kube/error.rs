//! kube-rs errors as [`ManagementError`]s, one mapping for every call.

use crate::controller::seams::ManagementError;

/// Maps a failed call on `what` (e.g. `IPAddressClaim ns/name`).
///
/// 409 `AlreadyExists` → `AlreadyExists`; any other 409 → `Conflict`; 404 on a write → a
/// `Conflict` too (the object read before is gone: read again); 400 and 422 → `Invalid`;
/// everything else — 5xx, 401/403, 429, transport failures, timeouts — → `Unavailable`
/// (retried with back-off by the callers). Reads, lists and deletes treat 404 before
/// calling this, and a create answered 404 (the kind is not served) is `Unavailable`.
pub fn management_error(error: kube::Error, what: &str) -> ManagementError {
    match error {
        kube::Error::Api(status) => match status.code {
            409 if status.reason == "AlreadyExists" => ManagementError::AlreadyExists(what.into()),
            409 => ManagementError::Conflict(what.into()),
            404 => ManagementError::Conflict(format!("{what} (not found)")),
            400 | 422 => ManagementError::Invalid(format!("{what}: {}", status.message)),
            code => ManagementError::Unavailable(format!("{what}: {code} {}", status.message)),
        },
        other => ManagementError::Unavailable(format!("{what}: {other}")),
    }
}

/// Whether the call failed with 404.
pub fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("boom", reason)
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn statuses_map_to_management_errors() {
        let cases = [
            (
                409,
                "AlreadyExists",
                ManagementError::AlreadyExists("x".into()),
            ),
            (409, "Conflict", ManagementError::Conflict("x".into())),
            (
                404,
                "NotFound",
                ManagementError::Conflict("x (not found)".into()),
            ),
            (
                400,
                "BadRequest",
                ManagementError::Invalid("x: boom".into()),
            ),
            (422, "Invalid", ManagementError::Invalid("x: boom".into())),
            (
                500,
                "InternalError",
                ManagementError::Unavailable("x: 500 boom".into()),
            ),
            (
                503,
                "ServiceUnavailable",
                ManagementError::Unavailable("x: 503 boom".into()),
            ),
        ];
        for (code, reason, expected) in cases {
            assert_eq!(
                management_error(status(code, reason), "x"),
                expected,
                "{code}"
            );
        }
        assert!(is_not_found(&status(404, "NotFound")));
        assert!(!is_not_found(&status(409, "Conflict")));
        let transport = kube::Error::LinesCodecMaxLineLengthExceeded;
        assert!(matches!(
            management_error(transport, "x"),
            ManagementError::Unavailable(_)
        ));
    }
}
