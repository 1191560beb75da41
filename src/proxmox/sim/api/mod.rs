//! The PVE endpoints: routing by method and path segments, then one handler per call.
//! Handlers are synchronous functions on the [`World`]; anything slow is a task.

mod agent;
mod clone;
mod cluster;
mod ha;
mod power;
mod qemu;
mod storage;

use axum::http::Method;
use serde_json::{Map, Value};

use super::error::{HandlerError, PveError};
use super::http::params::Params;
use super::world::World;

/// A parsed request.
pub struct ApiRequest {
    /// Method.
    pub method: Method,
    /// Path segments below `/api2/json`, percent-decoded.
    pub segments: Vec<String>,
    /// Query and body parameters.
    pub params: Params,
    /// The file part of a multipart upload.
    pub upload: Option<Upload>,
}

/// An uploaded file.
pub struct Upload {
    /// The part's `filename=`.
    pub filename: String,
    /// Its bytes.
    pub data: Vec<u8>,
}

/// A success answer: `data` plus optional siblings.
pub struct Reply {
    /// The `data` value.
    pub data: Value,
    /// Siblings such as `total`.
    pub extra: Map<String, Value>,
}

impl From<Value> for Reply {
    fn from(data: Value) -> Self {
        Self {
            data,
            extra: Map::new(),
        }
    }
}

/// What a handler returns.
pub type HandlerResult = Result<Reply, HandlerError>;

/// Wraps a value as a successful reply.
fn done(data: impl Into<Value>) -> HandlerResult {
    Ok(Reply::from(data.into()))
}

/// `vmid` path parameter: 100 ≤ id ≤ 999999999.
fn parse_vmid(raw: &str) -> Result<u32, PveError> {
    match raw.parse::<u32>() {
        Ok(id) if (100..=999_999_999).contains(&id) => Ok(id),
        Ok(_) => Err(PveError::param(
            "vmid",
            "value must have a minimum value of 100",
        )),
        Err(_) => Err(PveError::param(
            "vmid",
            format!("type check ('integer') failed - got '{raw}'"),
        )),
    }
}

fn not_implemented(r: &ApiRequest) -> HandlerError {
    PveError::not_implemented(format!(
        "Method '{} /{}' not implemented",
        r.method,
        r.segments.join("/")
    ))
    .into()
}

/// Dispatches a request.
pub fn route(w: &mut World, r: &ApiRequest) -> HandlerResult {
    let segs: Vec<&str> = r.segments.iter().map(String::as_str).collect();
    let get = r.method == Method::GET;
    let post = r.method == Method::POST;
    match segs.as_slice() {
        ["version"] if get => cluster::version(w, r),
        ["cluster", "status"] if get => cluster::status(w, r),
        ["cluster", "resources"] if get => cluster::resources(w, r),
        ["cluster", "nextid"] if get => cluster::nextid(w, r),
        ["cluster", "mapping", "pci"] if get => cluster::pci_mappings(w, r),
        ["cluster", "ha", "resources"] if get => ha::list(w, r),
        ["cluster", "ha", "resources"] if post => ha::create(w, r),
        ["cluster", "ha", "resources", sid] if r.method == Method::PUT => ha::update(w, r, sid),
        ["nodes"] if get => cluster::nodes(w, r),
        ["nodes", node, "status"] if get => cluster::node_status(w, r, node),
        ["nodes", node, "hardware", "pci"] if get => cluster::node_pci(w, r, node),
        ["nodes", _, "lxc"] if get => done(Value::Array(Vec::new())),
        ["nodes", node, "tasks"] if get => cluster::task_list(w, r, node),
        ["nodes", node, "tasks", upid, "status"] if get => cluster::task_status(w, r, node, upid),
        ["nodes", node, "tasks", upid, "log"] if get => cluster::task_log(w, r, node, upid),
        ["nodes", node, "qemu"] if get => qemu::list(w, r, node),
        ["nodes", node, "qemu", vmid, rest @ ..] => {
            let vmid = parse_vmid(vmid)?;
            route_vm(w, r, node, vmid, rest)
        }
        ["nodes", node, "storage"] if get => storage::list(w, r, node),
        ["nodes", node, "storage", id, "content"] if get => storage::content(w, r, node, id),
        ["nodes", node, "storage", id, "content", volume @ ..] if !volume.is_empty() => {
            let volid = volume.join("/");
            match r.method {
                Method::GET => storage::volume(w, r, node, id, &volid),
                Method::DELETE => storage::delete_volume(w, r, node, id, &volid),
                _ => Err(not_implemented(r)),
            }
        }
        ["nodes", node, "storage", id, "upload"] if post => storage::upload(w, r, node, id),
        _ => Err(not_implemented(r)),
    }
}

fn route_vm(w: &mut World, r: &ApiRequest, node: &str, vmid: u32, rest: &[&str]) -> HandlerResult {
    let m = &r.method;
    match rest {
        [] if *m == Method::DELETE => qemu::destroy(w, r, node, vmid),
        ["status", "current"] if *m == Method::GET => qemu::status(w, r, node, vmid),
        ["status", action] if *m == Method::POST => power::action(w, r, node, vmid, action),
        ["config"] if *m == Method::GET => qemu::config(w, r, node, vmid),
        ["config"] if *m == Method::POST => qemu::set_config(w, r, node, vmid, true),
        ["config"] if *m == Method::PUT => qemu::set_config(w, r, node, vmid, false),
        ["pending"] if *m == Method::GET => qemu::pending(w, r, node, vmid),
        ["clone"] if *m == Method::POST => clone::clone(w, r, node, vmid),
        ["resize"] if *m == Method::PUT => qemu::resize(w, r, node, vmid),
        ["agent", command] => agent::call(w, r, node, vmid, command),
        _ => Err(not_implemented(r)),
    }
}
