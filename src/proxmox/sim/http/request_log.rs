//! The request log (`SimConfig::request_log`, `pve-sim --request-log`): one JSON line per
//! answered PVE API request, so tests can check our calls against PVE's published schema
//! and count the calls a scenario made. The format is documented in docs/proxmox.md
//! ("Request log") and must stay stable:
//!
//! `{"t": 1.5, "method": "POST", "path": "/nodes/pve1/qemu/100/clone", "params": {...},
//! "status": 200, "data": ..., "errors": {...}}`
//!
//! `path` is below `/api2/json`, percent-decoded as the router sees it; `params` are the
//! query and body parameters as sent (strings; JSON bodies keep their arrays, numbers and
//! booleans), an upload's file part is `"<N bytes>"`, any parameter whose name contains
//! `password` is `"***"`; `data` is the answer's `data` (or null) and `errors` the
//! per-parameter errors of a 400 (absent otherwise). Credentials are never logged.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;

use axum::body::Body;
use axum::http::{Method, Response};
use serde_json::{Map, Value, json};

use super::multipart;
use super::params::Params;

/// An open log; writes are serialized by the mutex and flushed per line, so a killed
/// process leaves only whole lines.
pub struct RequestLog {
    file: Mutex<BufWriter<File>>,
}

/// The request side of one entry.
pub struct Request<'a> {
    /// Simulated seconds since start when the answer was ready.
    pub t: f64,
    /// HTTP method.
    pub method: &'a Method,
    /// Path segments below `/api2/json`, percent-decoded.
    pub segments: &'a [String],
    /// Raw query string.
    pub query: Option<&'a str>,
    /// Content-Type of the body.
    pub content_type: &'a str,
    /// The body.
    pub body: &'a [u8],
}

impl RequestLog {
    /// Opens `path` for appending (created if missing).
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self {
            file: Mutex::new(BufWriter::new(file)),
        })
    }

    /// Appends the entry for `request` and hands the response back unchanged. The body
    /// is read to log its `data`; answers are small JSON documents, already in memory.
    pub async fn record(&self, request: &Request<'_>, response: Response<Body>) -> Response<Body> {
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX)
            .await
            .unwrap_or_default();
        let answer: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let mut entry = json!({
            "t": request.t,
            "method": request.method.as_str(),
            "path": format!("/{}", request.segments.join("/")),
            "params": params(request),
            "status": parts.status.as_u16(),
            "data": answer.get("data").cloned().unwrap_or(Value::Null),
        });
        if let Some(errors) = answer.get("errors") {
            entry["errors"] = errors.clone();
        }
        self.write_line(&entry);
        Response::from_parts(parts, Body::from(bytes))
    }

    fn write_line(&self, entry: &Value) {
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        // A full disk must not fail the request being answered: the log is a diagnostic.
        let _ = writeln!(file, "{entry}").and_then(|()| file.flush());
    }
}

/// The request's parameters as logged; a body that does not parse logs none of its own.
fn params(request: &Request<'_>) -> Map<String, Value> {
    let mut out = Params::parse(request.query, "", b"")
        .map(|p| p.to_json())
        .unwrap_or_default();
    let mime = request.content_type.split(';').next().unwrap_or("").trim();
    if let Some(boundary) = multipart::boundary(request.content_type) {
        for part in multipart::parse(request.body, &boundary).unwrap_or_default() {
            let value = match part.filename {
                Some(_) => format!("<{} bytes>", part.data.len()),
                None => String::from_utf8_lossy(&part.data).into_owned(),
            };
            out.insert(part.name, Value::String(value));
        }
    } else if mime.eq_ignore_ascii_case("application/json") {
        // JSON bodies keep their real types (e.g. `command` must be an array).
        if let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(request.body) {
            out.extend(body);
        }
    } else if let Ok(body) = Params::parse(None, request.content_type, request.body) {
        out.extend(body.to_json());
    }
    for (name, value) in out.iter_mut() {
        if name.to_ascii_lowercase().contains("password") {
            *value = Value::String("***".into());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logged(query: Option<&str>, content_type: &str, body: &[u8]) -> Value {
        let segments = vec!["nodes".to_string(), "pve1".to_string()];
        Value::Object(params(&Request {
            t: 0.0,
            method: &Method::POST,
            segments: &segments,
            query,
            content_type,
            body,
        }))
    }

    #[test]
    fn params_merge_query_and_body_and_mask_passwords() {
        assert_eq!(
            logged(
                Some("purge=1"),
                "application/x-www-form-urlencoded",
                b"newid=101&cipassword=secret&net0=virtio%2Cbridge%3Dvmbr0"
            ),
            json!({"purge": "1", "newid": "101", "cipassword": "***", "net0": "virtio,bridge=vmbr0"})
        );
        assert_eq!(
            logged(
                None,
                "application/json",
                br#"{"command":["echo","hi"],"n":5}"#
            ),
            json!({"command": ["echo", "hi"], "n": 5})
        );
    }

    #[test]
    fn uploads_log_the_file_size() {
        let body = b"--B\r\nContent-Disposition: form-data; name=\"content\"\r\n\r\niso\r\n\
--B\r\nContent-Disposition: form-data; name=\"filename\"; filename=\"a.iso\"\r\n\r\n1234\r\n--B--\r\n";
        assert_eq!(
            logged(None, "multipart/form-data; boundary=B", body),
            json!({"content": "iso", "filename": "<4 bytes>"})
        );
    }
}
