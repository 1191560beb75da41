//! JSON views computed from the state, with PVE's exact field types (reference §1.4):
//! `template` only on templates in VM lists, numeric 0/1 in `/cluster/status`, strings in
//! `loadavg`, `memory` as a string in configs.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::config::{digest, json_value};
use super::{Node, Power, Storage, Vm, World};
use crate::proxmox::propstring::PropertyString;

use crate::proxmox::sim::tasks::Task;

fn insert_some(map: &mut Map<String, Value>, key: &str, value: Option<impl Into<Value>>) {
    if let Some(v) = value {
        map.insert(key.to_string(), v.into());
    }
}

impl World {
    /// Whether API calls for `node` fail (fault knob).
    pub fn node_online(&self, node: &str) -> bool {
        !self.faults.offline_nodes.contains_key(node)
    }

    /// `GET /version`.
    pub fn version_view(&self) -> Value {
        let release = self
            .version
            .rsplit_once('.')
            .map(|(r, _)| r.to_string())
            .unwrap_or_else(|| self.version.clone());
        json!({"version": self.version, "release": release,
               "repoid": "5f7e2a1b9c3d4e6f", "console": "xtermjs"})
    }

    /// `GET /cluster/status`.
    pub fn cluster_status_view(&self) -> Value {
        let clustered = self.nodes.len() > 1;
        let mut out = Vec::new();
        if clustered {
            out.push(json!({"type": "cluster", "id": "cluster", "name": self.cluster_name,
                "nodes": self.nodes.len(), "version": 7, "quorate": u8::from(!self.faults.no_quorum)}));
        }
        for (i, node) in self.nodes.values().enumerate() {
            out.push(
                json!({"type": "node", "id": format!("node/{}", node.name), "name": node.name,
                "nodeid": if clustered { node.nodeid } else { 0 }, "ip": node.ip,
                "local": u8::from(i == 0), "online": u8::from(self.node_online(&node.name)),
                "level": ""}),
            );
        }
        Value::Array(out)
    }

    fn node_mem_used(&self, node: &Node) -> u64 {
        (node.mem_base + self.node_vm_memory(&node.name)).min(node.mem_total)
    }

    fn node_cpu(&self, node: &Node) -> f64 {
        let running = self
            .vms
            .values()
            .filter(|vm| vm.node == node.name && vm.power == Power::Running)
            .count() as f64;
        ((0.02 + running * 0.01) / f64::from(node.cpus) * 8.0).min(1.0)
    }

    fn node_uptime(&self) -> u64 {
        812_345 + self.now.as_secs()
    }

    /// Live statistics of a node row; offline members show only `status: offline`.
    fn add_node_stats(&self, node: &Node, row: &mut Value) {
        if !self.node_online(&node.name) {
            row["status"] = json!("offline");
            return;
        }
        row["status"] = json!("online");
        row["cpu"] = json!(self.node_cpu(node));
        row["maxcpu"] = json!(node.cpus);
        row["mem"] = json!(self.node_mem_used(node));
        row["maxmem"] = json!(node.mem_total);
        row["disk"] = json!(8_243_470_336u64);
        row["maxdisk"] = json!(100_861_726_720u64);
        row["uptime"] = json!(self.node_uptime());
    }

    /// `GET /nodes`.
    pub fn nodes_view(&self) -> Value {
        let rows = self.nodes.values().map(|node| {
            let mut row = json!({"node": node.name, "id": format!("node/{}", node.name),
                "type": "node", "level": "", "ssl_fingerprint": self.fingerprint});
            self.add_node_stats(node, &mut row);
            row
        });
        Value::Array(rows.collect())
    }

    /// `GET /nodes/{node}/status`.
    pub fn node_status_view(&self, node: &Node) -> Value {
        let used = self.node_mem_used(node);
        let available = node.mem_total - used;
        let load = |f: f64| format!("{:.2}", f * f64::from(node.cpus));
        let cpu = self.node_cpu(node);
        json!({
            "uptime": self.node_uptime(), "idle": 0,
            "loadavg": [load(cpu), load(cpu * 0.9), load(cpu * 0.8)],
            "cpu": cpu, "wait": 0.0004,
            "cpuinfo": {"model": "AMD EPYC 7302 16-Core Processor", "cpus": node.cpus, "sockets": 1,
                        "cores": node.cpus / 2, "mhz": "2999.998", "hvm": "1", "flags": "fpu vme de pse",
                        "user_hz": 100},
            "memory": {"total": node.mem_total, "used": used, "free": available, "available": available},
            "swap": {"total": 8_589_930_496u64, "used": 0, "free": 8_589_930_496u64},
            "ksm": {"shared": 0},
            "rootfs": {"total": 100_861_726_720u64, "avail": 87_462_113_280u64,
                       "used": 8_243_470_336u64, "free": 92_618_256_384u64},
            "kversion": "Linux 6.14.8-2-pve #1 SMP PREEMPT_DYNAMIC PMX 6.14.8-2 (2025-07-22T10:04Z) x86_64",
            "pveversion": format!("pve-manager/{}/0123456789abcdef", self.version),
            "current-kernel": {"sysname": "Linux", "release": "6.14.8-2-pve",
                               "version": "#1 SMP PREEMPT_DYNAMIC PMX 6.14.8-2", "machine": "x86_64"},
            "boot-info": {"mode": "efi", "secureboot": 0},
        })
    }

    /// Size of the boot disk: the first disk in `boot: order=`, else the first disk.
    fn boot_disk_size(&self, vm: &Vm) -> u64 {
        let disks = vm.disks();
        let order: Vec<String> = vm
            .config
            .get("boot")
            .and_then(|b| {
                PropertyString::parse(b, Some("legacy"))
                    .get("order")
                    .map(|o| o.split(';').map(str::to_string).collect())
            })
            .unwrap_or_default();
        order
            .iter()
            .find_map(|dev| disks.iter().find(|(k, _)| k == dev))
            .or_else(|| disks.first())
            .and_then(|(_, d)| d.size_bytes())
            .unwrap_or(0)
    }

    fn vm_row(&self, vm: &Vm) -> Map<String, Value> {
        let maxmem = vm.memory_mib() << 20;
        let typed = vm.typed();
        let running = vm.power != Power::Stopped;
        let mut row = Map::new();
        row.insert("vmid".into(), json!(vm.vmid));
        row.insert("name".into(), json!(vm.name()));
        row.insert(
            "status".into(),
            json!(if running { "running" } else { "stopped" }),
        );
        row.insert("cpus".into(), json!(typed.sockets() * typed.cores()));
        row.insert("maxmem".into(), json!(maxmem));
        row.insert("maxdisk".into(), json!(self.boot_disk_size(vm)));
        row.insert("disk".into(), json!(0));
        row.insert("mem".into(), json!(if running { maxmem / 2 } else { 0 }));
        row.insert("cpu".into(), json!(if running { 0.01 } else { 0.0 }));
        let uptime = vm
            .boot
            .filter(|_| running)
            .map(|b| self.now.saturating_sub(b.at).as_secs());
        row.insert("uptime".into(), json!(uptime.unwrap_or(0)));
        for k in ["netin", "netout", "diskread", "diskwrite"] {
            row.insert(k.into(), json!(0));
        }
        if running {
            row.insert("pid".into(), json!(vm.qemu_pid));
        }
        if vm.is_template() {
            row.insert("template".into(), json!(1));
        }
        insert_some(&mut row, "lock", self.vm_lock(vm.vmid));
        insert_some(&mut row, "tags", vm.config.get("tags").cloned());
        row
    }

    /// `GET /nodes/{node}/qemu`.
    pub fn vm_list_view(&self, node: &str) -> Value {
        Value::Array(
            self.vms
                .values()
                .filter(|vm| vm.node == node)
                .map(|vm| Value::Object(self.vm_row(vm)))
                .collect(),
        )
    }

    /// `GET .../status/current`.
    pub fn vm_status_view(&self, vm: &Vm) -> Value {
        let mut row = self.vm_row(vm);
        let qmp = match vm.power {
            Power::Running => "running",
            Power::Paused => "paused",
            Power::Stopped => "stopped",
        };
        row.insert("qmpstatus".into(), json!(qmp));
        row.insert("ha".into(), json!({"managed": 0}));
        if vm.typed().agent_enabled() {
            row.insert("agent".into(), json!(1));
        }
        if vm.power != Power::Stopped {
            row.insert("running-qemu".into(), json!("9.2.0"));
            row.insert("running-machine".into(), json!("pc-i440fx-9.2+pve1"));
        }
        Value::Object(row)
    }

    /// `GET .../config` (pending applied unless `current`).
    pub fn vm_config_view(&self, vm: &Vm, current: bool) -> Value {
        let config = if current {
            vm.config.clone()
        } else {
            vm.effective_config()
        };
        let mut out: Map<String, Value> = config
            .iter()
            .map(|(k, v)| {
                let v = if k == "cipassword" { "**********" } else { v };
                (k.clone(), json_value(k, v))
            })
            .collect();
        insert_some(
            &mut out,
            "lock",
            self.faults.locked_vms.get(&vm.vmid).cloned(),
        );
        out.insert("digest".into(), json!(digest(vm)));
        Value::Object(out)
    }

    /// `GET .../pending`.
    pub fn vm_pending_view(&self, vm: &Vm) -> Value {
        let keys: BTreeSet<&String> = vm
            .config
            .keys()
            .chain(vm.pending.keys())
            .chain(vm.pending_delete.iter())
            .collect();
        Value::Array(
            keys.into_iter()
                .map(|k| {
                    let mut row = Map::new();
                    row.insert("key".into(), json!(k));
                    insert_some(
                        &mut row,
                        "value",
                        vm.config.get(k).map(|v| json_value(k, v)),
                    );
                    insert_some(
                        &mut row,
                        "pending",
                        vm.pending.get(k).map(|v| json_value(k, v)),
                    );
                    if vm.pending_delete.contains(k) {
                        row.insert("delete".into(), json!(1));
                    }
                    Value::Object(row)
                })
                .collect(),
        )
    }

    /// `GET /cluster/resources[?type=]`.
    pub fn resources_view(&self, kind: Option<&str>) -> Value {
        let mut out = Vec::new();
        if kind.is_none_or(|k| k == "vm") {
            for vm in self.vms.values() {
                let fresh = self.now < vm.listed_at;
                let mut row = Map::new();
                row.insert("id".into(), json!(format!("qemu/{}", vm.vmid)));
                row.insert("type".into(), json!("qemu"));
                row.insert("vmid".into(), json!(vm.vmid));
                row.insert("node".into(), json!(vm.node));
                if fresh || !self.node_online(&vm.node) {
                    row.insert("status".into(), json!("unknown"));
                } else {
                    let full = self.vm_row(vm);
                    for k in [
                        "name",
                        "status",
                        "maxmem",
                        "mem",
                        "maxdisk",
                        "disk",
                        "cpu",
                        "uptime",
                        "netin",
                        "netout",
                        "diskread",
                        "diskwrite",
                    ] {
                        insert_some(&mut row, k, full.get(k).cloned());
                    }
                    row.insert(
                        "maxcpu".into(),
                        full.get("cpus").cloned().unwrap_or(json!(1)),
                    );
                    row.insert("template".into(), json!(u8::from(vm.is_template())));
                }
                insert_some(&mut row, "tags", vm.config.get("tags").cloned());
                insert_some(&mut row, "lock", self.vm_lock(vm.vmid));
                insert_some(&mut row, "pool", vm.pool.clone());
                out.push(Value::Object(row));
            }
        }
        if kind.is_none_or(|k| k == "node") {
            for node in self.nodes.values() {
                let mut row = json!({"id": format!("node/{}", node.name), "type": "node",
                    "node": node.name, "level": "", "cgroup-mode": 2});
                self.add_node_stats(node, &mut row);
                out.push(row);
            }
        }
        if kind.is_none_or(|k| k == "storage") {
            for node in self.nodes.keys() {
                for s in self.storages.values().filter(|s| s.on_node(node)) {
                    let scope = s.scope(node);
                    out.push(
                        json!({"id": format!("storage/{node}/{}", s.id), "type": "storage",
                        "storage": s.id, "node": node, "plugintype": s.kind,
                        "status": if self.node_online(node) { "available" } else { "unknown" },
                        "shared": u8::from(s.shared), "content": content_list(s),
                        "disk": s.used(&scope), "maxdisk": s.total}),
                    );
                }
            }
        }
        if kind.is_none() {
            for pool in &self.pools {
                out.push(json!({"id": format!("/pool/{pool}"), "type": "pool", "pool": pool}));
            }
        }
        Value::Array(out)
    }

    /// `GET /nodes/{node}/storage` entries.
    pub fn storage_row(&self, s: &Storage, node: &str) -> Value {
        let scope = s.scope(node);
        let used = s.used(&scope);
        json!({"storage": s.id, "type": s.kind, "content": content_list(s),
            "enabled": 1, "active": 1, "shared": u8::from(s.shared),
            "total": s.total, "used": used, "avail": s.total.saturating_sub(used),
            "used_fraction": if s.total == 0 { 0.0 } else { used as f64 / s.total as f64 }})
    }

    /// `GET .../storage/{storage}/content` entries.
    pub fn content_view(
        &self,
        s: &Storage,
        node: &str,
        content: Option<&str>,
        vmid: Option<u32>,
    ) -> Value {
        let rows = s
            .volumes
            .get(&s.scope(node))
            .into_iter()
            .flatten()
            .filter(|(_, v)| content.is_none_or(|c| v.content == c))
            .filter(|(_, v)| vmid.is_none() || v.vmid == vmid)
            .map(|(name, v)| {
                let mut row = json!({"volid": format!("{}:{name}", s.id), "content": v.content,
                    "format": v.format, "size": v.size, "ctime": v.ctime});
                if let Some(id) = v.vmid {
                    row["vmid"] = json!(id);
                    row["used"] = json!(v.size);
                }
                row
            });
        Value::Array(rows.collect())
    }

    /// `GET /nodes/{node}/tasks/{upid}/status`.
    pub fn task_status_view(&self, task: &Task) -> Value {
        let upid = &task.upid;
        let (user, tokenid) = match upid.user().split_once('!') {
            Some((user, token)) => (user.to_string(), Some(token.to_string())),
            None => (upid.user().to_string(), None),
        };
        let mut row = json!({"upid": upid.as_str(), "node": upid.node(), "pid": upid.pid(),
            "pstart": upid.pstart(), "starttime": task.starttime, "type": upid.task_type(),
            "id": upid.id(), "user": user,
            "status": if task.exitstatus.is_some() { "stopped" } else { "running" }});
        if let Some(token) = tokenid {
            row["tokenid"] = json!(token);
        }
        if let Some(exit) = &task.exitstatus {
            row["exitstatus"] = json!(exit);
        }
        row
    }

    /// `GET /nodes/{node}/tasks` rows.
    pub fn task_list_view(&self, node: &str, vmid: Option<u32>, limit: usize) -> Value {
        let rows = self
            .tasks
            .list()
            .filter(|t| t.upid.node() == node)
            .filter(|t| vmid.is_none_or(|id| t.upid.id() == id.to_string()))
            .collect::<Vec<_>>();
        Value::Array(
            rows.into_iter()
                .rev()
                .take(limit)
                .map(|t| {
                    let mut row = self.task_status_view(t);
                    if let (Some(exit), Some(end)) = (&t.exitstatus, t.endtime) {
                        row["status"] = json!(exit);
                        row["endtime"] = json!(end);
                    } else {
                        row["status"] = json!("RUNNING");
                    }
                    row
                })
                .collect(),
        )
    }
}

fn content_list(s: &Storage) -> String {
    s.content.iter().cloned().collect::<Vec<_>>().join(",")
}
