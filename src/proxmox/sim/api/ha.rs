//! HA resources: `GET`/`POST /cluster/ha/resources`, `PUT /cluster/ha/resources/{sid}`.
//! Synchronous, as on PVE (the HA manager acts on the configuration later). Error texts
//! follow PVE's HA API as documented; the controller does not depend on them.

use serde_json::{Value, json};

use super::{ApiRequest, HandlerResult, done};
use crate::proxmox::sim::error::PveError;
use crate::proxmox::sim::http::params::{Field, Kind, opt, req};
use crate::proxmox::sim::world::{HaResource, World};

const STATES: &[&str] = &["started", "stopped", "enabled", "disabled", "ignored"];

/// The settings every write accepts.
const SETTINGS: [Field; 5] = [
    opt("state", Kind::Enum(STATES)),
    opt("group", Kind::Str),
    opt("max_restart", Kind::Int(0, i64::MAX)),
    opt("max_relocate", Kind::Int(0, i64::MAX)),
    opt("comment", Kind::Str),
];

/// `vm:101` or `101` as `vm:101`.
fn parse_sid(raw: &str) -> Result<(String, u32), PveError> {
    let id = raw.strip_prefix("vm:").unwrap_or(raw);
    id.parse::<u32>()
        .map(|vmid| (format!("vm:{vmid}"), vmid))
        .map_err(|_| PveError::param("sid", format!("unable to parse service id '{raw}'")))
}

fn view(sid: &str, r: &HaResource) -> Value {
    let mut v = json!({
        "sid": sid, "type": "vm", "state": r.state,
        "max_restart": r.max_restart, "max_relocate": r.max_relocate,
    });
    if let Some(group) = &r.group {
        v["group"] = json!(group);
    }
    v
}

/// `GET /cluster/ha/resources`.
pub fn list(w: &mut World, r: &ApiRequest) -> HandlerResult {
    r.params
        .check(&[opt("type", Kind::Enum(&["vm", "ct"]))], |_| false)?;
    done(Value::Array(
        w.ha_resources
            .iter()
            .map(|(sid, res)| view(sid, res))
            .collect(),
    ))
}

/// The settings of a write, over `base`; the group must exist.
fn settings(w: &World, r: &ApiRequest, base: HaResource) -> Result<HaResource, PveError> {
    let group = r.params.get("group").map(str::to_string).or(base.group);
    if let Some(g) = group.as_deref().filter(|g| !w.ha_groups.contains(*g)) {
        return Err(PveError::internal(format!("group '{g}' does not exist")));
    }
    Ok(HaResource {
        state: match r.params.get("state") {
            Some("enabled") => "started".to_string(),
            Some(s) => s.to_string(),
            None => base.state,
        },
        group,
        max_restart: r.params.int("max_restart").unwrap_or(base.max_restart),
        max_relocate: r.params.int("max_relocate").unwrap_or(base.max_relocate),
    })
}

/// `POST /cluster/ha/resources`.
pub fn create(w: &mut World, r: &ApiRequest) -> HandlerResult {
    let mut fields = SETTINGS.to_vec();
    fields.extend([
        req("sid", Kind::Str),
        opt("type", Kind::Enum(&["vm", "ct"])),
    ]);
    r.params.check(&fields, |_| false)?;
    w.check_quorum()?;
    let (sid, vmid) = parse_sid(r.params.get("sid").unwrap_or_default())?;
    if !w.vms.contains_key(&vmid) {
        return Err(
            PveError::internal(format!("resource '{sid}' does not exist in cluster")).into(),
        );
    }
    if w.ha_resources.contains_key(&sid) {
        return Err(PveError::internal(format!("resource ID '{sid}' already defined")).into());
    }
    let defaults = HaResource {
        state: "started".to_string(),
        group: None,
        max_restart: 1,
        max_relocate: 1,
    };
    let resource = settings(w, r, defaults)?;
    w.ha_resources.insert(sid, resource);
    done(Value::Null)
}

/// `PUT /cluster/ha/resources/{sid}`.
pub fn update(w: &mut World, r: &ApiRequest, raw_sid: &str) -> HandlerResult {
    let mut fields = SETTINGS.to_vec();
    fields.push(opt("digest", Kind::Str));
    r.params.check(&fields, |_| false)?;
    w.check_quorum()?;
    let (sid, _) = parse_sid(raw_sid)?;
    let current = w
        .ha_resources
        .get(&sid)
        .cloned()
        .ok_or_else(|| PveError::internal(format!("no such resource '{sid}'")))?;
    let resource = settings(w, r, current)?;
    w.ha_resources.insert(sid, resource);
    done(Value::Null)
}
