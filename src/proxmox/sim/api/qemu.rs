//! VM endpoints: list, status, config (sync and async), pending, resize, destroy.

use std::time::Duration;

use serde_json::Value;

use super::{ApiRequest, HandlerResult, done};
use crate::proxmox::propstring::{DriveSpec, SizeChange, format_size, is_drive_key};
use crate::proxmox::sim::error::{HandlerError, PveError};
use crate::proxmox::sim::http::params::{Kind, opt, req};
use crate::proxmox::sim::locks::LockKey;
use crate::proxmox::sim::profile::Work;
use crate::proxmox::sim::tasks::{Step, TaskSpec};
use crate::proxmox::sim::world::{ConfigChange, Power, World, is_known_config_key};

/// PVE waits this long for a VM's config lock.
pub const CONFIG_LOCK_TIMEOUT: Duration = Duration::from_secs(10);

/// Starts a VM task: lock the config, then run `program`.
pub fn spawn_vm_task(
    w: &mut World,
    node: &str,
    vmid: u32,
    task_type: &'static str,
    program: Vec<Step>,
) -> String {
    let mut steps = vec![Step::lock(LockKey::VmConfig(vmid), CONFIG_LOCK_TIMEOUT)];
    steps.extend(program);
    w.spawn_task(
        TaskSpec {
            node: node.to_string(),
            task_type,
            id: vmid.to_string(),
            vmid: Some(vmid),
            program: steps,
            on_failure: None,
        },
        false,
    )
    .to_string()
}

/// `GET /nodes/{node}/qemu`.
pub fn list(w: &mut World, r: &ApiRequest, node: &str) -> HandlerResult {
    r.params.check(&[opt("full", Kind::Bool)], |_| false)?;
    done(w.vm_list_view(node))
}

/// `GET .../status/current`.
pub fn status(w: &mut World, r: &ApiRequest, node: &str, vmid: u32) -> HandlerResult {
    r.params.check(&[], |_| false)?;
    let vm = w.vm_on(node, vmid)?;
    done(w.vm_status_view(vm))
}

/// `GET .../config[?current=1]`.
pub fn config(w: &mut World, r: &ApiRequest, node: &str, vmid: u32) -> HandlerResult {
    r.params.check(
        &[opt("current", Kind::Bool), opt("snapshot", Kind::Str)],
        |_| false,
    )?;
    if let Some(snap) = r.params.get("snapshot") {
        return Err(PveError::internal(format!("snapshot '{snap}' does not exist")).into());
    }
    let vm = w.vm_on(node, vmid)?;
    done(w.vm_config_view(vm, r.params.flag("current")))
}

/// `GET .../pending`.
pub fn pending(w: &mut World, r: &ApiRequest, node: &str, vmid: u32) -> HandlerResult {
    r.params.check(&[], |_| false)?;
    let vm = w.vm_on(node, vmid)?;
    done(w.vm_pending_view(vm))
}

fn split_list(value: Option<&str>) -> Vec<String> {
    value
        .unwrap_or("")
        .split([',', ';', ' '])
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

const CONFIG_META: [&str; 6] = [
    "delete",
    "revert",
    "digest",
    "skiplock",
    "force",
    "background_delay",
];

/// `POST .../config` (a `qmconfig` task) or `PUT .../config` (in the request).
pub fn set_config(
    w: &mut World,
    r: &ApiRequest,
    node: &str,
    vmid: u32,
    asynchronous: bool,
) -> HandlerResult {
    let mut fields = vec![
        opt("delete", Kind::Str),
        opt("revert", Kind::Str),
        opt("digest", Kind::Str),
        opt("skiplock", Kind::Bool),
        opt("force", Kind::Bool),
    ];
    if asynchronous {
        fields.push(opt("background_delay", Kind::Int(1, 30)));
    }
    r.params.check(&fields, is_known_config_key)?;
    w.check_quorum()?;
    let change = ConfigChange {
        set: r.params.scalars_except(&CONFIG_META),
        delete: split_list(r.params.get("delete")),
        revert: split_list(r.params.get("revert")),
        digest: r.params.get("digest").map(str::to_string),
        skiplock: r.params.flag("skiplock"),
    };
    w.validate_config_change(node, vmid, &change)?;
    if !asynchronous {
        let key = LockKey::VmConfig(vmid);
        if w.tasks.locks.is_held(&key) {
            return Err(HandlerError::Busy {
                message: key.timeout_message(),
            });
        }
        w.apply_config_change(vmid, &change)
            .map_err(PveError::internal)?;
        return done(Value::Null);
    }
    let duration = w.duration(Work::Config);
    let summary: Vec<String> = change
        .set
        .iter()
        .map(|(k, v)| format!("-{k} '{v}'"))
        .chain((!change.delete.is_empty()).then(|| format!("-delete {}", change.delete.join(","))))
        .collect();
    let program = vec![
        Step::Sleep(duration),
        Step::run(move |w, ctx| {
            ctx.log(format!("update VM {vmid}: {}", summary.join(" ")));
            // The worker holds the config lock: a request queued behind another
            // worker compares its digest with the config that worker left.
            w.check_digest(vmid, change.digest.as_deref())?;
            w.apply_config_change(vmid, &change)
        }),
    ];
    done(spawn_vm_task(w, node, vmid, "qmconfig", program))
}

/// `PUT .../resize`: a `resize` task; every check happens inside it.
pub fn resize(w: &mut World, r: &ApiRequest, node: &str, vmid: u32) -> HandlerResult {
    r.params.check(
        &[
            req("disk", Kind::Str),
            req("size", Kind::Str),
            opt("digest", Kind::Str),
            opt("skiplock", Kind::Bool),
        ],
        |_| false,
    )?;
    let disk = r.params.get("disk").unwrap_or_default().to_string();
    if !is_drive_key(&disk) {
        return Err(PveError::param(
            "disk",
            format!("value '{disk}' does not have a value in the enumeration"),
        )
        .into());
    }
    let size = r.params.get("size").unwrap_or_default();
    let change = SizeChange::parse(size).ok_or_else(|| {
        PveError::param(
            "size",
            format!("value '{size}' does not match the regex pattern"),
        )
    })?;
    w.check_quorum()?;
    w.vm_on(node, vmid)?;
    let skiplock = r.params.flag("skiplock");
    let duration = w.duration(Work::Resize);
    let program = vec![
        Step::run(move |w, ctx| grow_disk(w, ctx, vmid, &disk, change, skiplock)),
        Step::Sleep(duration),
    ];
    done(spawn_vm_task(w, node, vmid, "resize", program))
}

fn grow_disk(
    w: &mut World,
    ctx: &mut crate::proxmox::sim::tasks::TaskCtx,
    vmid: u32,
    disk: &str,
    change: SizeChange,
    skiplock: bool,
) -> Result<(), String> {
    if !skiplock {
        w.check_lock(vmid).map_err(|e| e.message)?;
    }
    let vm = w.vms.get(&vmid).ok_or("VM vanished")?;
    let node = vm.node.clone();
    let mut drive = vm
        .config
        .get(disk)
        .and_then(|v| DriveSpec::parse(v))
        .ok_or_else(|| format!("disk '{disk}' does not exist"))?;
    if drive.is_cdrom() {
        return Err("you can't resize a cdrom".into());
    }
    let current = drive.size_bytes().unwrap_or(0);
    let wanted = change.apply(current);
    if wanted < current {
        return Err("shrinking disks is not supported".into());
    }
    if wanted == current {
        ctx.log(format!(
            "disk '{disk}' already has size {}",
            format_size(current)
        ));
        return Ok(());
    }
    let (storage, volname) = drive
        .storage_volume()
        .map(|(s, v)| (s.to_string(), v.to_string()))
        .ok_or_else(|| format!("disk '{disk}' has no storage volume"))?;
    let scope = w
        .storages
        .get(&storage)
        .map(|s| s.scope(&node))
        .unwrap_or_default();
    w.check_space(&storage, &scope, wanted - current)?;
    if let Some(vol) = w
        .storages
        .get_mut(&storage)
        .and_then(|s| s.volumes.get_mut(&scope))
        .and_then(|v| v.get_mut(&volname))
    {
        vol.size = wanted;
    }
    drive.options.insert("size".into(), format_size(wanted));
    if let Some(vm) = w.vms.get_mut(&vmid) {
        vm.config.insert(disk.to_string(), drive.to_canonical());
    }
    ctx.log(format!(
        "  Size of logical volume pve/{volname} changed from {} to {}.",
        format_size(current),
        format_size(wanted)
    ));
    Ok(())
}

/// `DELETE /nodes/{node}/qemu/{vmid}`: `qmdestroy`; a running VM is refused at once.
pub fn destroy(w: &mut World, r: &ApiRequest, node: &str, vmid: u32) -> HandlerResult {
    r.params.check(
        &[
            opt("purge", Kind::Bool),
            opt("destroy-unreferenced-disks", Kind::Bool),
            opt("skiplock", Kind::Bool),
        ],
        |_| false,
    )?;
    w.check_quorum()?;
    let vm = w.vm_on(node, vmid)?;
    if vm.config.get("protection").is_some_and(|p| p == "1") {
        return Err(PveError::internal(format!(
            "can't remove VM {vmid} - protection mode enabled"
        ))
        .into());
    }
    if vm.power != Power::Stopped {
        return Err(PveError::internal(format!("VM {vmid} is running - destroy failed")).into());
    }
    let purge = r.params.flag("purge");
    let sid = format!("vm:{vmid}");
    if w.ha_resources.contains_key(&sid) && !purge {
        return Err(PveError::internal(format!(
            "unable to remove VM {vmid} - used in HA resources and purge parameter not set."
        ))
        .into());
    }
    let skiplock = r.params.flag("skiplock");
    let duration = w.duration(Work::Destroy);
    let program = vec![
        Step::run(move |w, _| {
            if w.vms
                .get(&vmid)
                .is_some_and(|vm| vm.power != Power::Stopped)
            {
                return Err(format!("VM {vmid} is running - destroy failed"));
            }
            if skiplock {
                Ok(())
            } else {
                w.check_lock(vmid).map_err(|e| e.message)
            }
        }),
        Step::Sleep(duration),
        Step::run(move |w, ctx| {
            w.free_vm_volumes(vmid);
            w.vms.remove(&vmid);
            if purge && w.ha_resources.remove(&sid).is_some() {
                ctx.log(format!("Removing {sid} from HA resources"));
            }
            ctx.log(format!("Removing VM {vmid} and its disks"));
            Ok(())
        }),
    ];
    done(spawn_vm_task(w, node, vmid, "qmdestroy", program))
}
