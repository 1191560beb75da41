//! Guest agent endpoints (reference §5): each one loads the config, then requires the
//! agent to be configured, the VM to run and the guest to have booted far enough.

use axum::http::Method;
use serde_json::json;

use super::{ApiRequest, HandlerResult, done, not_implemented};
use crate::proxmox::sim::error::PveError;
use crate::proxmox::sim::http::params::{Kind, opt, req};
use crate::proxmox::sim::world::{World, os_info};

/// `/nodes/{node}/qemu/{vmid}/agent/{command}`.
pub fn call(w: &mut World, r: &ApiRequest, node: &str, vmid: u32, command: &str) -> HandlerResult {
    let method = &r.method;
    match (command, method) {
        ("ping", &Method::POST) => {
            r.params.check(&[], |_| false)?;
            w.agent_vm(node, vmid)?;
            done(json!({"result": {}}))
        }
        ("get-osinfo", &Method::GET) => {
            r.params.check(&[], |_| false)?;
            w.agent_vm(node, vmid)?;
            done(json!({"result": os_info()}))
        }
        ("get-host-name", &Method::GET) => {
            r.params.check(&[], |_| false)?;
            let vm = w.agent_vm(node, vmid)?;
            done(json!({"result": {"host-name": w.hostname(vm)}}))
        }
        ("file-read", &Method::GET) => {
            r.params.check(&[req("file", Kind::Str)], |_| false)?;
            let path = r.params.get("file").unwrap_or_default();
            let vm = w.agent_vm(node, vmid)?;
            // PVE decodes the agent's base64 chunks into `content` (no `result` wrapper).
            let content = w.guest_file(vm, path).ok_or_else(|| {
                PveError::internal(format!(
                    "VM {vmid} qmp command 'guest-file-open' failed - failed to open file '{path}' (mode: 'r'): No such file or directory"
                ))
            })?;
            done(json!({"content": content}))
        }
        ("network-get-interfaces", &Method::GET) => {
            r.params.check(&[], |_| false)?;
            w.agent_vm(node, vmid)?;
            done(json!({"result": w.guest_interfaces(vmid)}))
        }
        ("exec", &Method::POST) => {
            r.params.check(
                &[req("command", Kind::Array), opt("input-data", Kind::Str)],
                |_| false,
            )?;
            let command = r.params.list("command").unwrap_or_default();
            if command.is_empty() {
                return Err(PveError::param("command", "no command specified").into());
            }
            let input = r.params.get("input-data");
            if input.is_some_and(|i| i.len() > 64 * 1024) {
                return Err(PveError::param(
                    "input-data",
                    "value may only be 65536 characters long",
                )
                .into());
            }
            w.agent_vm(node, vmid)?;
            done(json!({"pid": w.start_exec(vmid, &command, input)}))
        }
        ("exec-status", &Method::GET) => {
            r.params
                .check(&[req("pid", Kind::Int(0, i64::MAX))], |_| false)?;
            let pid = r.params.int("pid").unwrap_or_default() as u64;
            let vm = w.agent_vm(node, vmid)?;
            done(w.exec_status(vm, pid)?)
        }
        _ => Err(not_implemented(r)),
    }
}
