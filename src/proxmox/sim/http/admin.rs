//! The admin endpoint (`/_sim/...`, plain JSON, no PVE envelope): read and replace the
//! fault plan, move the clock, hold a storage lock, dump a state summary, read the NoCloud
//! seed a VM boots with (what its guest would read).

use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Response, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use super::reply::json_response;
use crate::proxmox::sim::SimControl;
use crate::proxmox::sim::faults::FaultPlan;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Advance {
    seconds: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HoldLock {
    seconds: f64,
    #[serde(default)]
    node: Option<String>,
}

/// An admin failure: status and text.
type AdminError = (StatusCode, String);

fn bad_request(message: impl std::fmt::Display) -> AdminError {
    (StatusCode::BAD_REQUEST, message.to_string())
}

fn seconds(s: f64) -> Result<Duration, AdminError> {
    if (0.0..1e9).contains(&s) {
        Ok(Duration::from_secs_f64(s))
    } else {
        Err(bad_request("seconds must be between 0 and 1e9"))
    }
}

fn parse<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, AdminError> {
    serde_json::from_slice(body).map_err(bad_request)
}

/// The files of the seed on VM `vmid`'s CD-ROM, each base64 (a guest reads bytes, and the
/// checks compare bytes).
fn seed_files(control: &SimControl, vmid: u32) -> Result<Value, AdminError> {
    use base64::Engine as _;
    let seed = control.seed_of(vmid).ok_or_else(|| {
        (
            StatusCode::NOT_FOUND,
            format!("VM {vmid} does not exist or has no NoCloud seed attached"),
        )
    })?;
    let encode = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let mut files = serde_json::Map::new();
    files.insert("user-data".into(), json!(encode(&seed.user_data)));
    files.insert("meta-data".into(), json!(encode(&seed.meta_data)));
    for (name, file) in [
        ("network-config", &seed.network_config),
        ("vendor-data", &seed.vendor_data),
    ] {
        if let Some(bytes) = file {
            files.insert(name.into(), json!(encode(bytes)));
        }
    }
    Ok(json!({"vmid": vmid, "files": files}))
}

/// Handles `/_sim/{path}`.
pub fn handle(control: &SimControl, method: &Method, path: &str, body: &[u8]) -> Response<Body> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let result: Result<Value, AdminError> = match (method, segments.as_slice()) {
        (&Method::GET, ["faults"]) => Ok(json!(control.faults())),
        (&Method::PUT, ["faults"]) => parse::<FaultPlan>(body).map(|plan| {
            control.set_faults(plan);
            json!(control.faults())
        }),
        (&Method::POST, ["clock", "advance"]) => parse::<Advance>(body).and_then(|a| {
            control.advance(seconds(a.seconds)?);
            Ok(json!({"now": control.now().as_secs_f64()}))
        }),
        (&Method::POST, ["storages", id, "hold-lock"]) => parse::<HoldLock>(body).and_then(|h| {
            let by = seconds(h.seconds)?;
            control
                .hold_storage_lock(id, h.node.as_deref(), by)
                .map(|()| json!({"storage": id, "seconds": h.seconds}))
                .map_err(bad_request)
        }),
        (&Method::GET, ["state"]) => Ok(control.state()),
        (&Method::GET, ["vms", vmid, "seed"]) => vmid
            .parse()
            .map_err(bad_request)
            .and_then(|vmid| seed_files(control, vmid)),
        _ => Err((
            StatusCode::NOT_FOUND,
            format!("no admin endpoint {method} /_sim/{}", segments.join("/")),
        )),
    };
    match result {
        Ok(value) => json_response(StatusCode::OK, value),
        Err((status, message)) => json_response(status, json!({"error": message})),
    }
}
