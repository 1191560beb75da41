//! Version, cluster, node and task endpoints.

use serde_json::{Map, Value, json};

use super::{ApiRequest, HandlerResult, Reply, done};
use crate::proxmox::sim::error::PveError;
use crate::proxmox::sim::http::params::{Kind, opt};
use crate::proxmox::sim::world::World;
use crate::proxmox::upid::Upid;

/// `GET /version`.
pub fn version(w: &mut World, r: &ApiRequest) -> HandlerResult {
    r.params.check(&[], |_| false)?;
    done(w.version_view())
}

/// `GET /cluster/status`.
pub fn status(w: &mut World, r: &ApiRequest) -> HandlerResult {
    r.params.check(&[], |_| false)?;
    done(w.cluster_status_view())
}

/// `GET /cluster/resources[?type=]`.
pub fn resources(w: &mut World, r: &ApiRequest) -> HandlerResult {
    r.params.check(
        &[opt("type", Kind::Enum(&["vm", "storage", "node", "sdn"]))],
        |_| false,
    )?;
    match r.params.get("type") {
        Some("sdn") => done(Value::Array(Vec::new())),
        kind => done(w.resources_view(kind)),
    }
}

/// `GET /cluster/nextid[?vmid=]`: the id as a string, like Perl prints it.
pub fn nextid(w: &mut World, r: &ApiRequest) -> HandlerResult {
    r.params
        .check(&[opt("vmid", Kind::Int(100, 999_999_999))], |_| false)?;
    if let Some(vmid) = r.params.int("vmid") {
        let id = u32::try_from(vmid).unwrap_or(u32::MAX);
        if w.vms.contains_key(&id) {
            return Err(PveError::param("vmid", format!("VM {vmid} already exists")).into());
        }
        return done(json!(vmid.to_string()));
    }
    (100..1_000_000u32)
        .find(|id| !w.vms.contains_key(id))
        .map(|id| done(json!(id.to_string())))
        .unwrap_or_else(|| {
            Err(PveError::internal("unable to get any free VMID in range [100, 999999]").into())
        })
}

/// `GET /cluster/mapping/pci`.
pub fn pci_mappings(w: &mut World, r: &ApiRequest) -> HandlerResult {
    r.params.check(
        &[opt("check-node", Kind::Str), opt("mdev", Kind::Bool)],
        |_| false,
    )?;
    done(w.pci.mappings_view())
}

/// `GET /nodes`.
pub fn nodes(w: &mut World, r: &ApiRequest) -> HandlerResult {
    r.params.check(&[], |_| false)?;
    done(w.nodes_view())
}

/// `GET /nodes/{node}/status`.
pub fn node_status(w: &mut World, r: &ApiRequest, node: &str) -> HandlerResult {
    r.params.check(&[], |_| false)?;
    let node = w
        .nodes
        .get(node)
        .ok_or_else(|| PveError::internal(format!("no such node '{node}'")))?;
    done(w.node_status_view(node))
}

/// `GET /nodes/{node}/hardware/pci`: the node's PCI devices.
pub fn node_pci(w: &mut World, r: &ApiRequest, node: &str) -> HandlerResult {
    r.params.check(
        &[
            opt("pci-class-blacklist", Kind::Str),
            opt("verbose", Kind::Bool),
        ],
        |_| false,
    )?;
    if !w.nodes.contains_key(node) {
        return Err(PveError::internal(format!("no such node '{node}'")).into());
    }
    done(w.pci.node_view(node))
}

/// `GET /nodes/{node}/tasks`.
pub fn task_list(w: &mut World, r: &ApiRequest, node: &str) -> HandlerResult {
    r.params.check(
        &[
            opt("vmid", Kind::Int(100, 999_999_999)),
            opt("limit", Kind::Int(0, 1_000_000)),
            opt("start", Kind::Int(0, 1_000_000)),
            opt("source", Kind::Enum(&["archive", "active", "all"])),
        ],
        |_| false,
    )?;
    let vmid = r.params.int("vmid").and_then(|v| u32::try_from(v).ok());
    let limit = r.params.int("limit").unwrap_or(50) as usize;
    done(w.task_list_view(node, vmid, limit))
}

/// Looks a task up on the node that runs it (PVE reads the node's task log directory).
fn find_task<'w>(
    w: &'w World,
    node: &str,
    raw: &str,
) -> Result<&'w crate::proxmox::sim::tasks::Task, PveError> {
    let upid: Upid = raw
        .parse()
        .map_err(|_| PveError::param("upid", "unable to parse worker upid"))?;
    w.tasks
        .get(upid.as_str())
        .filter(|t| t.upid.node() == node)
        .ok_or_else(|| PveError::param("upid", "no such task"))
}

/// `GET /nodes/{node}/tasks/{upid}/status`.
pub fn task_status(w: &mut World, r: &ApiRequest, node: &str, upid: &str) -> HandlerResult {
    r.params.check(&[], |_| false)?;
    let task = find_task(w, node, upid)?;
    done(w.task_status_view(task))
}

/// `GET /nodes/{node}/tasks/{upid}/log[?start=&limit=]`.
pub fn task_log(w: &mut World, r: &ApiRequest, node: &str, upid: &str) -> HandlerResult {
    r.params.check(
        &[
            opt("start", Kind::Int(0, i64::MAX)),
            opt("limit", Kind::Int(0, i64::MAX)),
            opt("download", Kind::Bool),
        ],
        |_| false,
    )?;
    let task = find_task(w, node, upid)?;
    let start = r.params.int("start").unwrap_or(0) as usize;
    let limit = r.params.int("limit").unwrap_or(50) as usize;
    let lines: Vec<Value> = task
        .log
        .iter()
        .enumerate()
        .skip(start)
        .take(limit)
        .map(|(i, t)| json!({"n": i + 1, "t": t}))
        .collect();
    let mut extra = Map::new();
    extra.insert("total".into(), json!(task.log.len()));
    Ok(Reply {
        data: Value::Array(lines),
        extra,
    })
}
