//! `POST /nodes/{node}/qemu/{vmid}/clone` (reference §4.6): synchronous checks, a locked
//! placeholder VM at once, then a `qmclone` worker that writes the real config, copies
//! or links every disk (only the allocation under the storage lock), and finally unlocks and moves the VM.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{ApiRequest, HandlerResult, done};
use crate::proxmox::propstring::{DriveSpec, NetDevice, PropertyString, format_size, net_index};
use crate::proxmox::sim::error::PveError;
use crate::proxmox::sim::http::params::{Kind, opt, req};
use crate::proxmox::sim::locks::{LockKey, LockMode};
use crate::proxmox::sim::profile::{Work, seconds};
use crate::proxmox::sim::tasks::{Effect, Step, TaskCtx, TaskSpec};
use crate::proxmox::sim::world::{Power, Vm, World, is_dns_name};

/// The clone worker takes both VM locks with this timeout.
const CLONE_LOCK_TIMEOUT: Duration = Duration::from_secs(1);
/// Storage allocation locks queue this long.
const STORAGE_LOCK_TIMEOUT: Duration = Duration::from_secs(10);

/// Config keys a clone does not copy.
fn dropped_on_clone(key: &str) -> bool {
    matches!(
        key,
        "snapshots"
            | "parent"
            | "snaptime"
            | "vmstate"
            | "runningcpu"
            | "runningmachine"
            | "template"
            | "lock"
    ) || key.starts_with("unused")
}

/// One disk to copy or link.
#[derive(Clone)]
struct DiskPlan {
    key: String,
    source: DriveSpec,
    target_storage: String,
    size: u64,
}

/// Parameters after validation.
struct CloneArgs {
    source: u32,
    newid: u32,
    node: String,
    target: String,
    full: bool,
    pool: Option<String>,
}

/// `POST .../clone`.
pub fn clone(w: &mut World, r: &ApiRequest, node: &str, vmid: u32) -> HandlerResult {
    let p = &r.params;
    p.check(
        &[
            req("newid", Kind::Int(100, 999_999_999)),
            opt("name", Kind::Str),
            opt("description", Kind::Str),
            opt("pool", Kind::Str),
            opt("snapname", Kind::Str),
            opt("storage", Kind::Str),
            opt("format", Kind::Enum(&["raw", "qcow2", "vmdk"])),
            opt("full", Kind::Bool),
            opt("target", Kind::Node),
            opt("bwlimit", Kind::Int(0, i64::MAX)),
        ],
        |_| false,
    )?;
    let newid = p
        .int("newid")
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or_default();
    if let Some(name) = p.get("name")
        && !is_dns_name(name)
    {
        return Err(PveError::param("name", "value does not look like a valid DNS name").into());
    }
    if let Some(pool) = p.get("pool")
        && !w.pools.contains(pool)
    {
        return Err(PveError::forbidden(format!(
            "Permission check failed (pool '{pool}' does not exist)"
        ))
        .into());
    }
    let target = p.get("target").unwrap_or(node).to_string();
    if let Some(id) = p.get("storage") {
        let s = w
            .storages
            .get(id)
            .ok_or_else(|| PveError::internal(format!("storage '{id}' does not exist")))?;
        if !s.supports("images") {
            return Err(PveError::param(
                "storage",
                format!("storage '{id}' does not support vm images"),
            )
            .into());
        }
        if target != node && !s.shared {
            return Err(
                PveError::internal(format!("can't clone to non-shared storage '{id}'")).into(),
            );
        }
    }
    if !w.nodes.contains_key(&target) {
        return Err(PveError::param("target", format!("no such cluster node '{target}'")).into());
    }
    w.check_quorum()?;
    let src = w.vm_on(node, vmid)?;
    w.check_lock(vmid)?;
    if let Some(snap) = p.get("snapname") {
        return Err(PveError::internal(format!("snapshot '{snap}' does not exist")).into());
    }
    let full = p
        .get("full")
        .map(|f| f == "1")
        .unwrap_or(!src.is_template());
    if !full && (p.get("storage").is_some() || p.get("format").is_some()) {
        let which = if p.get("storage").is_some() {
            "storage"
        } else {
            "format"
        };
        return Err(PveError::internal(format!(
            "parameter '{which}' not allowed for linked clones"
        ))
        .into());
    }
    let disks = plan_disks(w, src, p.get("storage"), full, &target, node)?;
    let running = src.power != Power::Stopped;
    let source_config = src.clone();
    if let Some(existing) = w.vms.get(&newid) {
        if existing.node == node {
            return Err(PveError::internal(format!(
                "unable to create VM {newid}: config file already exists"
            ))
            .into());
        }
        // Another node owns the id: the worker fails when it writes the config.
        let other = existing.node.clone();
        let program = vec![Step::run(move |_, _| {
            Err(format!(
                "clone failed: unable to create VM {newid}: config file already exists on node '{other}'"
            ))
        })];
        return done(spawn_clone(w, node, vmid, newid, program, None));
    }
    let placeholder: BTreeMap<String, String> = [
        (
            "description".to_string(),
            "qmclone temporary file\n".to_string(),
        ),
        ("lock".to_string(), "clone".to_string()),
    ]
    .into();
    let vm = w.new_vm(newid, node, placeholder);
    w.vms.insert(newid, vm);
    let args = CloneArgs {
        source: vmid,
        newid,
        node: node.to_string(),
        target,
        full,
        pool: p.get("pool").map(str::to_string),
    };
    let program = clone_program(
        w,
        args,
        source_config,
        disks,
        running,
        p.get("name").map(str::to_string),
        p.get("description").map(str::to_string),
    );
    let cleanup: Effect = Box::new(move |w, ctx| {
        let placeholder = w
            .vms
            .get(&newid)
            .is_some_and(|vm| vm.config.get("lock").is_some_and(|l| l == "clone"));
        if placeholder {
            w.free_vm_volumes(newid);
            w.vms.remove(&newid);
            ctx.log(format!("removed partially created VM {newid}"));
        }
        Ok(())
    });
    done(spawn_clone(w, node, vmid, newid, program, Some(cleanup)))
}

/// Starts a `qmclone` worker (its id is the source VM; faults target the new one).
fn spawn_clone(
    w: &mut World,
    node: &str,
    vmid: u32,
    newid: u32,
    program: Vec<Step>,
    on_failure: Option<Effect>,
) -> String {
    w.spawn_task(
        TaskSpec {
            node: node.to_string(),
            task_type: "qmclone",
            id: vmid.to_string(),
            vmid: Some(newid),
            program,
            on_failure,
        },
        false,
    )
    .to_string()
}

/// Which disks to copy and where; refuses local disks when moving to another node.
fn plan_disks(
    w: &World,
    src: &Vm,
    storage: Option<&str>,
    full: bool,
    target: &str,
    node: &str,
) -> Result<Vec<DiskPlan>, PveError> {
    let mut plans = Vec::new();
    for (key, drive) in src.disks() {
        if key.starts_with("unused") {
            continue;
        }
        let Some((sid, volname)) = drive.storage_volume() else {
            continue;
        };
        let source_storage = w
            .storages
            .get(sid)
            .ok_or_else(|| PveError::internal(format!("storage '{sid}' does not exist")))?;
        // Where the source volumes live decides, whatever target storage is asked for
        // (qemu-server's `clone_vm` checks the source config's storages only).
        if target != node && !source_storage.shared {
            return Err(PveError::internal(format!(
                "can't clone VM to node '{target}' (VM uses local storage)"
            )));
        }
        if !full && !volname.contains("base-") {
            return Err(PveError::internal(format!(
                "Linked clone feature is not supported for '{}' ({key})",
                drive.volume
            )));
        }
        plans.push(DiskPlan {
            key,
            target_storage: storage.unwrap_or(sid).to_string(),
            size: drive.size_bytes().unwrap_or(0),
            source: drive,
        });
    }
    Ok(plans)
}

/// The config of the new VM (reference §4.6 step 3); warns about discarded pending keys.
fn new_config(
    w: &mut World,
    ctx: &mut TaskCtx,
    src: &Vm,
    name: Option<String>,
    description: Option<String>,
) -> BTreeMap<String, String> {
    for key in src.pending.keys().chain(src.pending_delete.iter()) {
        ctx.warn(format!(
            "found pending changes for '{key}', discarding for clone"
        ));
    }
    let mut config: BTreeMap<String, String> = src
        .config
        .iter()
        .filter(|(k, _)| !dropped_on_clone(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (key, value) in config.iter_mut() {
        if net_index(key).is_some()
            && let Some(mut nic) = NetDevice::parse(value)
        {
            nic.mac = Some(w.new_mac());
            *value = nic.to_canonical();
        }
    }
    if let Some(smbios) = config.get("smbios1").cloned() {
        let mut ps = PropertyString::parse(&smbios, Some("uuid"));
        ps.options.insert("uuid".into(), w.new_uuid());
        config.insert("smbios1".into(), ps.to_canonical());
    }
    if config.contains_key("vmgenid") {
        config.insert("vmgenid".into(), w.new_uuid());
    }
    config.insert(
        "name".into(),
        name.unwrap_or_else(|| format!("Copy-of-VM-{}", src.name())),
    );
    if let Some(d) = description {
        config.insert(
            "description".into(),
            format!("{}\n", d.trim_end_matches('\n')),
        );
    }
    config.insert(
        "meta".into(),
        format!("creation-qemu=9.2.0,ctime={}", w.unix_now()),
    );
    config.insert("lock".into(), "clone".into());
    config
}

fn clone_program(
    w: &mut World,
    args: CloneArgs,
    source: Vm,
    disks: Vec<DiskPlan>,
    running: bool,
    name: Option<String>,
    description: Option<String>,
) -> Vec<Step> {
    let CloneArgs {
        source: vmid,
        newid,
        node,
        target,
        full,
        pool,
    } = args;
    let total = w.duration(if full {
        Work::CloneFull
    } else {
        Work::CloneLinked
    });
    let mut program = vec![
        Step::Lock {
            key: LockKey::VmConfig(vmid),
            mode: if running {
                LockMode::Exclusive
            } else {
                LockMode::Shared
            },
            timeout: CLONE_LOCK_TIMEOUT,
            message: None,
        },
        Step::lock(LockKey::VmConfig(newid), CLONE_LOCK_TIMEOUT),
        Step::Sleep(total.mul_f64(0.1)),
        Step::run(move |w, ctx| {
            let config = new_config(w, ctx, &source, name, description);
            // Disks are filled in one by one as they are copied.
            let keep: BTreeMap<String, String> = config
                .into_iter()
                .filter(|(k, _)| !disks_contains(&source, k))
                .collect();
            let vm = w.vms.get_mut(&newid).ok_or("target VM vanished")?;
            vm.config = keep;
            Ok(())
        }),
    ];
    let per_disk = total.mul_f64(0.9 / disks.len().max(1) as f64);
    for disk in disks {
        program.extend(disk_steps(w, &node, newid, disk, full, per_disk));
    }
    program.push(Step::run(move |w, ctx| {
        let vm = w.vms.get_mut(&newid).ok_or("target VM vanished")?;
        vm.config.remove("lock");
        vm.node = target.clone();
        vm.pool = pool;
        if target != node {
            ctx.log(format!("moving VM {newid} to node '{target}'"));
        }
        Ok(())
    }));
    program
}

fn disks_contains(source: &Vm, key: &str) -> bool {
    source.disks().iter().any(|(k, _)| k == key)
}

fn disk_steps(
    w: &mut World,
    node: &str,
    newid: u32,
    disk: DiskPlan,
    full: bool,
    copy_time: Duration,
) -> Vec<Step> {
    let scope = w
        .storages
        .get(&disk.target_storage)
        .map(|s| s.scope(node))
        .unwrap_or_default();
    if !full {
        return vec![Step::run(move |w, ctx| {
            let (sid, base) = disk.source.storage_volume().ok_or("disk without volume")?;
            let (sid, base) = (sid.to_string(), base.to_string());
            let volname = w.linked_clone_volname(&sid, &scope, &base, newid);
            ctx.log(format!(
                "create linked clone of drive {} ({})",
                disk.key, disk.source.volume
            ));
            w.add_volume(&sid, &scope, &volname, disk.size, Some(newid), "images");
            set_disk(w, newid, &disk, &sid, &volname)
        })];
    }
    let key = LockKey::Storage {
        id: disk.target_storage.clone(),
        scope: scope.clone(),
    };
    let hold = w
        .faults
        .storage_lock_hold
        .get(&disk.target_storage)
        .copied()
        .unwrap_or(0.0);
    let lock_message = format!("clone failed: {}", key.timeout_message());
    let size = disk.size;
    vec![
        Step::Lock {
            key: key.clone(),
            mode: LockMode::Exclusive,
            timeout: STORAGE_LOCK_TIMEOUT,
            message: Some(lock_message),
        },
        Step::run(move |w, ctx| {
            let sid = disk.target_storage.clone();
            w.check_space(&sid, &scope, size)
                .map_err(|e| format!("clone failed: {e}"))?;
            let volname = w.next_disk_volname(&sid, &scope, newid);
            ctx.log(format!(
                "create full clone of drive {} ({})",
                disk.key, disk.source.volume
            ));
            w.add_volume(&sid, &scope, &volname, size, Some(newid), "images");
            set_disk(w, newid, &disk, &sid, &volname)
        }),
        Step::Sleep(seconds(hold)),
        // pve-storage locks only the allocation (`vdisk_alloc`); the copy runs unlocked, so
        // parallel full clones onto one storage overlap.
        Step::Unlock(key),
        Step::Sleep(copy_time),
        Step::run(move |_, ctx| {
            ctx.log(format!(
                "transferred {0} of {0} (100.00%)",
                format_size(size)
            ));
            Ok(())
        }),
    ]
}

fn set_disk(
    w: &mut World,
    newid: u32,
    disk: &DiskPlan,
    sid: &str,
    volname: &str,
) -> Result<(), String> {
    let mut drive = disk.source.clone();
    drive.volume = format!("{sid}:{volname}");
    let vm = w.vms.get_mut(&newid).ok_or("target VM vanished")?;
    vm.config.insert(disk.key.clone(), drive.to_canonical());
    Ok(())
}
