//! `POST .../status/{start|stop|shutdown|reboot|reset|suspend|resume}` (reference §4.8):
//! a few synchronous refusals, everything else inside the worker.

use super::qemu::spawn_vm_task;
use super::{ApiRequest, HandlerResult, done};
use crate::proxmox::sim::error::PveError;
use crate::proxmox::sim::http::params::{Field, Kind, opt};
use crate::proxmox::sim::profile::Work;
use crate::proxmox::sim::tasks::{Step, TaskCtx};
use crate::proxmox::sim::world::{Power, World, memory_mib};
use crate::proxmox::types::PowerAction;

fn fields(action: PowerAction) -> Vec<Field> {
    let mut f = vec![opt("skiplock", Kind::Bool)];
    match action {
        PowerAction::Start => f.extend([
            opt("timeout", Kind::Int(0, 86400)),
            opt("machine", Kind::Str),
            opt("forceCPU", Kind::Str),
        ]),
        PowerAction::Stop => f.extend([
            opt("timeout", Kind::Int(0, i64::MAX)),
            opt("overrule-shutdown", Kind::Bool),
            opt("keepActive", Kind::Bool),
        ]),
        PowerAction::Shutdown => f.extend([
            opt("timeout", Kind::Int(0, i64::MAX)),
            opt("forceStop", Kind::Bool),
            opt("keepActive", Kind::Bool),
        ]),
        PowerAction::Reboot => f.push(opt("timeout", Kind::Int(0, i64::MAX))),
        PowerAction::Suspend => {
            f.extend([opt("todisk", Kind::Bool), opt("statestorage", Kind::Str)])
        }
        PowerAction::Resume => f.push(opt("nocheck", Kind::Bool)),
        PowerAction::Reset => {}
    }
    f
}

fn lock_check(w: &World, vmid: u32, skiplock: bool) -> Result<(), String> {
    if skiplock {
        return Ok(());
    }
    w.check_lock(vmid).map_err(|e| e.message)
}

fn power_on(w: &mut World, vmid: u32) -> Result<(), String> {
    w.apply_pending(vmid);
    let boot = w.plan_boot();
    let pid = 100_000 + w.rng.range(0, 800_000) as u32;
    let vm = w.vms.get_mut(&vmid).ok_or("VM vanished")?;
    vm.power = Power::Running;
    vm.boot = Some(boot);
    vm.qemu_pid = pid;
    vm.exec.clear();
    if vm.config.get("lock").is_some_and(|l| l == "suspended") {
        vm.config.remove("lock");
    }
    Ok(())
}

fn power_off(w: &mut World, vmid: u32) -> Result<(), String> {
    w.pci.release(vmid);
    let vm = w.vms.get_mut(&vmid).ok_or("VM vanished")?;
    vm.power = Power::Stopped;
    vm.boot = None;
    vm.qemu_pid = 0;
    vm.exec.clear();
    Ok(())
}

/// The start checks of `qm start`, in order; the last takes the VM's PCI devices.
fn start_checks(w: &mut World, ctx: &mut TaskCtx, vmid: u32, skiplock: bool) -> Result<(), String> {
    let vm = w.vms.get(&vmid).ok_or("VM vanished")?;
    if vm.is_template() {
        return Err("you can't start a vm if it's a template".into());
    }
    // A hibernated VM (lock `suspended`) is started to resume it.
    if w.vm_lock(vmid).is_some_and(|l| l != "suspended") {
        lock_check(w, vmid, skiplock)?;
    }
    if vm.power != Power::Stopped {
        return Err(format!("VM {vmid} already running"));
    }
    let node = w.nodes.get(&vm.node).ok_or("node vanished")?;
    let used = node.mem_base + w.node_vm_memory(&vm.node);
    let wanted = memory_mib(&vm.effective_config()) << 20;
    if used + wanted > node.mem_total {
        ctx.log("kvm: cannot set up guest memory 'pc.ram': Cannot allocate memory");
        return Err("start failed: QEMU exited with code 1".into());
    }
    let (node, config) = (vm.node.clone(), vm.effective_config());
    w.pci.reserve(vmid, &node, &config)
}

/// Dispatches a power action.
pub fn action(
    w: &mut World,
    r: &ApiRequest,
    node: &str,
    vmid: u32,
    segment: &str,
) -> HandlerResult {
    let Some(action) = PowerAction::from_segment(segment) else {
        return Err(super::not_implemented(r));
    };
    r.params.check(&fields(action), |_| false)?;
    w.check_quorum()?;
    let vm = w.vm_on(node, vmid)?;
    let power = vm.power;
    let hibernated = power == Power::Stopped && w.vm_lock(vmid).is_some_and(|l| l == "suspended");
    let skiplock = r.params.flag("skiplock");
    let not_running = || PveError::internal(format!("VM {vmid} not running"));
    match action {
        PowerAction::Shutdown if power == Power::Paused && !r.params.flag("forceStop") => {
            return Err(PveError::internal("VM is paused - cannot shutdown").into());
        }
        PowerAction::Reboot | PowerAction::Reset if power == Power::Stopped => {
            return Err(not_running().into());
        }
        PowerAction::Resume if power == Power::Stopped && !hibernated => {
            return Err(not_running().into());
        }
        _ => {}
    }
    let program = match action {
        PowerAction::Start => {
            let d = w.duration(Work::Start);
            vec![
                Step::run(move |w, ctx| start_checks(w, ctx, vmid, skiplock)),
                Step::Sleep(d),
                Step::run(move |w, _| power_on(w, vmid)),
            ]
        }
        PowerAction::Stop | PowerAction::Shutdown => {
            let d = w.duration(if action == PowerAction::Stop {
                Work::Stop
            } else {
                Work::Shutdown
            });
            vec![
                Step::run(move |w, _| {
                    let running = w
                        .vms
                        .get(&vmid)
                        .is_some_and(|vm| vm.power != Power::Stopped);
                    if running {
                        lock_check(w, vmid, skiplock)
                    } else {
                        Ok(())
                    }
                }),
                Step::Sleep(d),
                Step::run(move |w, _| power_off(w, vmid)),
            ]
        }
        PowerAction::Reboot => {
            let d = w.duration(Work::Shutdown) + w.duration(Work::Start);
            vec![
                Step::run(move |w, _| lock_check(w, vmid, skiplock)),
                Step::Sleep(d),
                Step::run(move |w, _| power_on(w, vmid)),
            ]
        }
        PowerAction::Reset => vec![Step::run(move |w, _| {
            lock_check(w, vmid, skiplock)?;
            let boot = w.plan_boot();
            let vm = w.vms.get_mut(&vmid).ok_or("VM vanished")?;
            vm.boot = Some(boot);
            vm.exec.clear();
            Ok(())
        })],
        PowerAction::Suspend => {
            let todisk = r.params.flag("todisk");
            let d = w.duration(Work::Suspend);
            vec![
                Step::Sleep(d),
                Step::run(move |w, _| {
                    lock_check(w, vmid, skiplock)?;
                    let vm = w.vms.get_mut(&vmid).ok_or("VM vanished")?;
                    match (vm.power, todisk) {
                        (Power::Stopped, _) => Err(format!("VM {vmid} not running")),
                        (_, true) => {
                            vm.config.insert("lock".into(), "suspended".into());
                            power_off(w, vmid)
                        }
                        (_, false) => {
                            vm.power = Power::Paused;
                            Ok(())
                        }
                    }
                }),
            ]
        }
        PowerAction::Resume => {
            let d = w.duration(Work::Suspend);
            vec![
                Step::Sleep(d),
                Step::run(move |w, _| {
                    let vm = w.vms.get_mut(&vmid).ok_or("VM vanished")?;
                    match vm.power {
                        Power::Paused => {
                            vm.power = Power::Running;
                            Ok(())
                        }
                        Power::Stopped => power_on(w, vmid),
                        Power::Running => Ok(()),
                    }
                }),
            ]
        }
    };
    done(spawn_vm_task(w, node, vmid, action.task_type(), program))
}
