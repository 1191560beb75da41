//! API-token authentication and the simulator's two-level permission model (full
//! access, or read-only tokens that get PVE's 403 on every change).

use axum::http::Method;

use crate::proxmox::sim::error::PveError;
use crate::proxmox::sim::world::World;

/// The authenticated caller.
pub struct Caller {
    /// `user@realm!token`.
    pub token_id: String,
    /// Read-only tokens may only GET.
    pub read_only: bool,
}

/// Checks `Authorization: PVEAPIToken=<user@realm!name>=<secret>` (a space instead of
/// the first `=` is accepted too). Every failure is PVE's uniform 401.
pub fn authenticate(w: &World, header: Option<&str>) -> Result<Caller, PveError> {
    let Some(value) = header else {
        return Err(PveError::new(401, "No ticket"));
    };
    let failed = || PveError::new(401, "Authentication failed!");
    let rest = value
        .strip_prefix("PVEAPIToken=")
        .or_else(|| value.strip_prefix("PVEAPIToken "))
        .ok_or_else(failed)?;
    let (id, secret) = rest.split_once('=').ok_or_else(failed)?;
    let token = w.tokens.get(id).ok_or_else(failed)?;
    if token.secret != secret || w.faults.revoked_tokens.contains(id) {
        return Err(failed());
    }
    Ok(Caller {
        token_id: id.to_string(),
        read_only: token.read_only,
    })
}

/// The ACL path and privilege PVE would check for a change.
fn required(method: &Method, segments: &[String]) -> (String, &'static str) {
    let s: Vec<&str> = segments.iter().map(String::as_str).collect();
    match s.as_slice() {
        ["nodes", _, "qemu", vmid, rest @ ..] => {
            let privilege = match rest {
                [] => "VM.Allocate",
                ["clone"] => "VM.Clone",
                ["resize"] => "VM.Config.Disk",
                ["status", _] => "VM.PowerMgmt",
                ["agent", ..] => "VM.GuestAgent.Unrestricted",
                _ => "VM.Config.Options",
            };
            (format!("/vms/{vmid}"), privilege)
        }
        ["nodes", _, "storage", id, "upload"] => {
            (format!("/storage/{id}"), "Datastore.AllocateTemplate")
        }
        ["nodes", _, "storage", id, ..] => (format!("/storage/{id}"), "Datastore.Allocate"),
        ["nodes", node, ..] => (format!("/nodes/{node}"), "Sys.Modify"),
        _ if *method == Method::GET => ("/".to_string(), "Sys.Audit"),
        _ => ("/".to_string(), "Sys.Modify"),
    }
}

/// Read-only callers may not change anything.
pub fn authorize(caller: &Caller, method: &Method, segments: &[String]) -> Result<(), PveError> {
    if !caller.read_only || *method == Method::GET {
        return Ok(());
    }
    let (path, privilege) = required(method, segments);
    Err(PveError::forbidden(format!(
        "Permission check failed ({path}, {privilege})"
    )))
}
