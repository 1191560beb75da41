//! Building responses the way pveproxy does: `{"data": ...}` on success; on errors the
//! text in the reason phrase *and* the body's `message` (with PVE's trailing newline),
//! empty bodies for 401 and proxy errors, and no keep-alive after an error.

use axum::body::Body;
use axum::http::{HeaderValue, Response, StatusCode, header};
use serde_json::{Map, Value, json};

use crate::proxmox::sim::error::PveError;

const JSON: &str = "application/json;charset=UTF-8";

/// A success answer; `extra` adds siblings of `data` (e.g. `total`).
pub fn ok(data: Value, extra: Map<String, Value>) -> Response<Body> {
    let mut envelope = extra;
    envelope.insert("data".into(), data);
    json_response(StatusCode::OK, Value::Object(envelope))
}

/// A plain JSON answer (admin endpoints).
pub fn json_response(status: StatusCode, body: Value) -> Response<Body> {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(JSON));
    response
}

/// Reason phrases may not contain control characters.
fn reason_phrase(message: &str) -> String {
    message
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// An error answer. `with_message: false` emulates servers older than
/// libpve-http-server 5.2 (no `message` in the body).
pub fn error(e: &PveError, with_message: bool) -> Response<Body> {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let empty_body = e.status == 401 || (595..=599).contains(&e.status);
    let mut response = if empty_body {
        Response::new(Body::empty())
    } else {
        let mut body = json!({"data": null});
        if with_message {
            body["message"] = json!(format!("{}\n", e.message.trim_end_matches('\n')));
        }
        if !e.errors.is_empty() {
            body["errors"] = json!(e.errors);
        }
        json_response(status, body)
    };
    *response.status_mut() = status;
    if let Ok(reason) = hyper::ext::ReasonPhrase::try_from(reason_phrase(&e.message)) {
        response.extensions_mut().insert(reason);
    }
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}
