//! Request deadlines like kube-apiserver's: every request that is not long-running (watches)
//! must finish within 60 s, or sooner if the client asks with `?timeout=<Go duration>`;
//! otherwise it is answered with a 504 Timeout Status.

use std::time::Duration;

use super::error::ApiError;
use super::request_info::RequestInfo;

/// kube-apiserver's default `--request-timeout`.
pub const REQUEST_TIMEOUT_MAX: Duration = Duration::from_secs(60);

/// Whether kube treats the request as long-running (exempt from the deadline).
pub fn is_long_running(info: &RequestInfo) -> bool {
    matches!(info.verb.as_str(), "watch" | "proxy")
        || matches!(
            info.subresource.as_str(),
            "attach" | "exec" | "log" | "portforward" | "proxy"
        )
}

/// Go's `time.ParseDuration` (e.g. `32s`, `1m30s`, `250ms`, `-1h`); negative values are
/// returned as zero, which callers treat as "no client timeout".
pub fn parse_go_duration(text: &str) -> Result<Duration, String> {
    let invalid = || {
        format!(
            "time: invalid duration {}",
            crate::registry::gofmt::quote(text)
        )
    };
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| {
                format!(
                    "time: missing unit in duration {}",
                    crate::registry::gofmt::quote(text)
                )
            })?;
        let (number, after) = rest.split_at(number_len);
        let value: f64 = number.parse().map_err(|_| invalid())?;
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => {
                return Err(format!(
                    "time: missing unit in duration {}",
                    crate::registry::gofmt::quote(text)
                ));
            }
            other => {
                return Err(format!(
                    "time: unknown unit {} in duration {}",
                    crate::registry::gofmt::quote(other),
                    crate::registry::gofmt::quote(text)
                ));
            }
        };
        total += value * scale;
        rest = after;
    }
    if negative || !total.is_finite() {
        return Ok(Duration::ZERO);
    }
    Duration::try_from_secs_f64(total).map_err(|_| invalid())
}

/// The deadline of a request: the client's `timeout` when positive and shorter, else 60 s.
pub fn request_deadline(query: &[(String, String)]) -> Result<Duration, ApiError> {
    let Some((_, value)) = query.iter().find(|(k, _)| k == "timeout") else {
        return Ok(REQUEST_TIMEOUT_MAX);
    };
    if value.is_empty() {
        return Ok(REQUEST_TIMEOUT_MAX);
    }
    let requested = parse_go_duration(value).map_err(|e| {
        ApiError::bad_request(format!(
            "invalid timeout specified in the request URL - {e}"
        ))
    })?;
    Ok(
        if requested > Duration::ZERO && requested < REQUEST_TIMEOUT_MAX {
            requested
        } else {
            REQUEST_TIMEOUT_MAX
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let cases = [
            ("32s", Duration::from_secs(32)),
            ("1m30s", Duration::from_secs(90)),
            ("250ms", Duration::from_millis(250)),
            ("1.5h", Duration::from_secs(5400)),
            ("0", Duration::ZERO),
            ("-5s", Duration::ZERO),
            ("10us", Duration::from_micros(10)),
        ];
        for (input, want) in cases {
            assert_eq!(parse_go_duration(input), Ok(want), "{input}");
        }
        assert_eq!(
            parse_go_duration("x").expect_err("x"),
            "time: invalid duration \"x\""
        );
        assert_eq!(
            parse_go_duration("5").expect_err("5"),
            "time: missing unit in duration \"5\""
        );
        assert_eq!(
            parse_go_duration("5d").expect_err("5d"),
            "time: unknown unit \"d\" in duration \"5d\""
        );
        assert!(parse_go_duration("").is_err());
    }

    #[test]
    fn deadlines() {
        let q = |v: &str| vec![("timeout".to_owned(), v.to_owned())];
        assert_eq!(request_deadline(&[]).expect("default"), REQUEST_TIMEOUT_MAX);
        assert_eq!(
            request_deadline(&q("32s")).expect("32s"),
            Duration::from_secs(32)
        );
        assert_eq!(
            request_deadline(&q("5m")).expect("capped"),
            REQUEST_TIMEOUT_MAX
        );
        assert_eq!(
            request_deadline(&q("0s")).expect("zero"),
            REQUEST_TIMEOUT_MAX
        );
        assert_eq!(
            request_deadline(&q("soon")).expect_err("bad").to_string(),
            "invalid timeout specified in the request URL - time: invalid duration \"soon\""
        );
    }

    #[test]
    fn long_running_requests() {
        let info = |method, path: &str, query: &[(&str, &str)]| {
            let query: Vec<(String, String)> = query
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect();
            RequestInfo::new(&method, path, &query).expect("info")
        };
        use axum::http::Method;
        assert!(is_long_running(&info(
            Method::GET,
            "/apis/g/v/things",
            &[("watch", "true")]
        )));
        assert!(!is_long_running(&info(
            Method::GET,
            "/apis/g/v/things",
            &[]
        )));
        assert!(!is_long_running(&info(Method::GET, "/healthz", &[])));
    }
}
