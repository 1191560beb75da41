//! The simulated guest: when its agent answers, what `cloud-init status` says, what
//! commands print, and which addresses its NICs carry — static ones from the
//! `network-config` of an attached NoCloud ISO, otherwise DHCP leases from the bridge's
//! range.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde_json::{Value, json};

use super::{Power, Vm, World};
use crate::proxmox::nocloud::NoCloud;
use crate::proxmox::propstring::{DriveSpec, is_drive_key};
use crate::proxmox::sim::clock::SimTime;
use crate::proxmox::sim::error::PveError;
use crate::proxmox::sim::faults::CloudInitResult;
use crate::proxmox::sim::profile::Work;

/// A command started through `agent/exec`.
#[derive(Clone, Debug)]
pub struct ExecJob {
    /// When it exits.
    pub exits_at: SimTime,
    /// Exit code.
    pub exitcode: i64,
    /// Standard output.
    pub out: String,
    /// Standard error.
    pub err: String,
}

/// When a boot's milestones happen.
#[derive(Clone, Copy, Debug)]
pub struct Boot {
    /// Power-on.
    pub at: SimTime,
    /// The agent answers from here on.
    pub agent_at: SimTime,
    /// cloud-init is done from here on.
    pub cloud_init_at: SimTime,
}

/// What `get-osinfo` reports (and `/etc/os-release` says).
pub fn os_info() -> Value {
    json!({"id": "ubuntu", "name": "Ubuntu", "pretty-name": "Ubuntu 24.04.1 LTS",
           "version": "24.04.1 LTS (Noble Numbat)", "version-id": "24.04",
           "kernel-release": "6.8.0-45-generic",
           "kernel-version": "#45-Ubuntu SMP PREEMPT_DYNAMIC Fri Aug 30 12:02:04 UTC 2024",
           "machine": "x86_64"})
}

/// `/etc/os-release` of the guest, consistent with [`os_info`].
fn os_release() -> String {
    let info = os_info();
    let field = |k: &str| info[k].as_str().unwrap_or_default().to_string();
    format!(
        "PRETTY_NAME=\"{}\"\nNAME=\"{}\"\nVERSION_ID=\"{}\"\nVERSION=\"{}\"\nID={}\n",
        field("pretty-name"),
        field("name"),
        field("version-id"),
        field("version"),
        field("id"),
    )
}

/// Where cloud-init stands (`cloud-init status`, `result.json`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CloudInitState {
    /// No datasource: ds-identify turned it off.
    Disabled,
    Running,
    Done,
    Error,
    /// Done with recoverable errors (exit code 2).
    Degraded,
}

/// One interface of a parsed `network-config`.
#[derive(Clone, Debug, Default, PartialEq)]
struct StaticIface {
    name: String,
    mac: Option<String>,
    addresses: Vec<(IpAddr, u8)>,
}

/// Reads netplan v2 (`network: {version: 2, ethernets: ...}`, wrapped or not) or v1
/// (`config: [{type: physical, mac_address, subnets}]`).
fn parse_network_config(text: &str) -> Vec<StaticIface> {
    let Ok(doc) = serde_saphyr::from_str::<Value>(text) else {
        return Vec::new();
    };
    let root = doc.get("network").unwrap_or(&doc);
    let mut out = Vec::new();
    if let Some(ethernets) = root.get("ethernets").and_then(Value::as_object) {
        for (name, eth) in ethernets {
            let mac = eth
                .pointer("/match/macaddress")
                .and_then(Value::as_str)
                .map(str::to_ascii_lowercase);
            let addresses = eth
                .get("addresses")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .filter_map(parse_cidr)
                        .collect()
                })
                .unwrap_or_default();
            let name = eth
                .get("set-name")
                .and_then(Value::as_str)
                .unwrap_or(name)
                .to_string();
            out.push(StaticIface {
                name,
                mac,
                addresses,
            });
        }
    }
    if let Some(config) = root.get("config").and_then(Value::as_array) {
        for item in config.iter().filter(|i| i["type"] == "physical") {
            let addresses = item
                .get("subnets")
                .and_then(Value::as_array)
                .map(|subnets| {
                    subnets
                        .iter()
                        .filter(|s| s["type"] == "static" || s["type"] == "static6")
                        .filter_map(|s| s.get("address").and_then(Value::as_str))
                        .filter_map(parse_cidr)
                        .collect()
                })
                .unwrap_or_default();
            out.push(StaticIface {
                name: item["name"].as_str().unwrap_or("eth0").to_string(),
                mac: item["mac_address"].as_str().map(str::to_ascii_lowercase),
                addresses,
            });
        }
    }
    out
}

fn parse_cidr(s: &str) -> Option<(IpAddr, u8)> {
    let (ip, prefix) = s.split_once('/')?;
    let ip: IpAddr = ip.trim().parse().ok()?;
    let prefix: u8 = prefix.trim().parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (prefix <= max).then_some((ip, prefix))
}

/// fe80::/64 address from a MAC (modified EUI-64), as the guest kernel would assign.
fn link_local(mac: &str) -> Option<Ipv6Addr> {
    let b: Vec<u8> = mac
        .split(':')
        .map(|p| u8::from_str_radix(p, 16).ok())
        .collect::<Option<_>>()?;
    let [a, b1, c, d, e, f] = <[u8; 6]>::try_from(b).ok()?;
    let words = [
        0xfe80,
        0,
        0,
        0,
        u16::from_be_bytes([a ^ 0x02, b1]),
        u16::from_be_bytes([c, 0xff]),
        u16::from_be_bytes([0xfe, d]),
        u16::from_be_bytes([e, f]),
    ];
    Some(Ipv6Addr::new(
        words[0], words[1], words[2], words[3], words[4], words[5], words[6], words[7],
    ))
}

fn address_json(ip: IpAddr, prefix: u8) -> Value {
    json!({
        "ip-address-type": if ip.is_ipv4() { "ipv4" } else { "ipv6" },
        "ip-address": ip.to_string(),
        "prefix": prefix,
    })
}

fn statistics() -> Value {
    json!({"rx-bytes":0,"rx-packets":0,"rx-errs":0,"rx-dropped":0,
           "tx-bytes":0,"tx-packets":0,"tx-errs":0,"tx-dropped":0})
}

impl World {
    /// Milestones of a boot starting now.
    pub fn plan_boot(&mut self) -> Boot {
        let agent_at = self.now + self.duration(Work::AgentBoot);
        let cloud_init_at = agent_at + self.duration(Work::CloudInit);
        Boot {
            at: self.now,
            agent_at,
            cloud_init_at,
        }
    }

    /// The NoCloud seed on a CD-ROM of the VM, if any.
    pub fn attached_seed(&self, vm: &Vm) -> Option<NoCloud> {
        vm.config
            .iter()
            .filter(|(k, _)| is_drive_key(k))
            .filter_map(|(_, v)| DriveSpec::parse(v))
            .filter(|d| d.is_cdrom())
            .find_map(|d| self.volume(&vm.node, &d.volume)?.seed.clone())
    }

    /// The checks every agent call makes, in PVE's order.
    pub fn agent_vm(&self, node: &str, vmid: u32) -> Result<&Vm, PveError> {
        let vm = self.vm_on(node, vmid)?;
        if !vm.typed().agent_enabled() {
            return Err(PveError::internal("No QEMU guest agent configured"));
        }
        if vm.power == Power::Stopped {
            return Err(PveError::internal(format!("VM {vmid} is not running")));
        }
        let ready = vm.power == Power::Running
            && vm.boot.is_some_and(|b| self.now >= b.agent_at)
            && !self.faults.agent_never_ready.contains(&vmid);
        if !ready {
            return Err(PveError::internal("QEMU guest agent is not running"));
        }
        Ok(vm)
    }

    /// Where cloud-init stands in the guest.
    fn cloud_init_state(&self, vm: &Vm) -> CloudInitState {
        let result = self
            .faults
            .cloud_init
            .get(&vm.vmid)
            .copied()
            .unwrap_or_default();
        if self.attached_seed(vm).is_none() && result == CloudInitResult::Done {
            // No datasource: ds-identify disables cloud-init.
            return CloudInitState::Disabled;
        }
        let done = vm.boot.is_some_and(|b| self.now >= b.cloud_init_at);
        match result {
            _ if !done => CloudInitState::Running,
            CloudInitResult::Running => CloudInitState::Running,
            CloudInitResult::Done => CloudInitState::Done,
            CloudInitResult::Error => CloudInitState::Error,
            CloudInitResult::Degraded => CloudInitState::Degraded,
        }
    }

    /// What `cloud-init status` prints and returns.
    fn cloud_init_status(&self, vm: &Vm) -> (String, i64) {
        let (status, code) = match self.cloud_init_state(vm) {
            CloudInitState::Disabled => ("disabled", 0),
            CloudInitState::Running => ("running", 0),
            CloudInitState::Done => ("done", 0),
            CloudInitState::Error => ("error", 1),
            CloudInitState::Degraded => ("done", 2),
        };
        (format!("status: {status}\n"), code)
    }

    /// The guest's host name: the seed's `local-hostname`, else the VM's name.
    pub fn hostname(&self, vm: &Vm) -> String {
        self.attached_seed(vm)
            .and_then(|seed| {
                let meta: Value =
                    serde_saphyr::from_str(&String::from_utf8_lossy(&seed.meta_data)).ok()?;
                meta.get("local-hostname")
                    .or_else(|| meta.get("hostname"))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or_else(|| vm.name())
    }

    /// The files `agent/file-read` can read: the host name, the OS release and, once
    /// cloud-init has finished, its `result.json` (errors listed when it failed).
    pub fn guest_file(&self, vm: &Vm, path: &str) -> Option<String> {
        match path {
            "/etc/hostname" => Some(format!("{}\n", self.hostname(vm))),
            "/etc/os-release" => Some(os_release()),
            "/run/cloud-init/result.json" => {
                let errors: Vec<&str> = match self.cloud_init_state(vm) {
                    CloudInitState::Disabled | CloudInitState::Running => return None,
                    CloudInitState::Error => vec!["cloud-init: modules-final failed"],
                    CloudInitState::Done | CloudInitState::Degraded => Vec::new(),
                };
                let result = json!({"v1": {
                    "datasource": "DataSourceNoCloud [seed=/dev/sr0][dsmode=net]",
                    "errors": errors,
                }});
                Some(format!("{result:#}\n"))
            }
            _ => None,
        }
    }

    /// Starts a guest command; returns its pid.
    pub fn start_exec(&mut self, vmid: u32, command: &[String], input: Option<&str>) -> u64 {
        let Some(vm) = self.vms.get(&vmid) else {
            return 0;
        };
        let args: Vec<&str> = command.iter().map(String::as_str).collect();
        let (out, exitcode, err) = match args.as_slice() {
            ["cloud-init", "status", ..] => {
                let (out, code) = self.cloud_init_status(vm);
                (out, code, String::new())
            }
            ["hostname"] | ["cat", "/etc/hostname"] => {
                (format!("{}\n", self.hostname(vm)), 0, String::new())
            }
            ["cat"] => (input.unwrap_or("").to_string(), 0, String::new()),
            ["true"] => (String::new(), 0, String::new()),
            ["false"] => (String::new(), 1, String::new()),
            ["echo", rest @ ..] => (format!("{}\n", rest.join(" ")), 0, String::new()),
            [program, ..] => (
                String::new(),
                127,
                format!("{program}: command not found\n"),
            ),
            [] => (String::new(), 127, "no command\n".to_string()),
        };
        let pid = 1000 + vm.exec.len() as u64;
        let exits_at = self.now + self.duration(Work::Exec);
        if let Some(vm) = self.vms.get_mut(&vmid) {
            vm.exec.insert(
                pid,
                ExecJob {
                    exits_at,
                    exitcode,
                    out,
                    err,
                },
            );
        }
        pid
    }

    /// `exec-status` of a pid.
    pub fn exec_status(&self, vm: &Vm, pid: u64) -> Result<Value, PveError> {
        let job = vm.exec.get(&pid).ok_or_else(|| {
            PveError::internal(format!(
                "Agent error: Invalid parameter 'pid': PID {pid} does not exist"
            ))
        })?;
        if self.now < job.exits_at {
            return Ok(json!({"exited": 0}));
        }
        let mut status = json!({"exited": 1, "exitcode": job.exitcode});
        if !job.out.is_empty() {
            status["out-data"] = json!(job.out);
        }
        if !job.err.is_empty() {
            status["err-data"] = json!(job.err);
        }
        Ok(status)
    }

    /// A DHCP lease for `mac` on `bridge` (stable per MAC).
    fn lease(&mut self, mac: &str, bridge: &str) -> Option<(IpAddr, u8)> {
        let pool = self.dhcp.iter().find(|p| p.bridge == bridge)?.clone();
        let prefix = pool.net.prefix_len();
        if let Some(ip) = self.leases.get(mac) {
            return Some((IpAddr::V4(*ip), prefix));
        }
        let (start, end) = (u32::from(pool.start), u32::from(pool.end));
        let free = (start..=end)
            .map(Ipv4Addr::from)
            .find(|ip| !self.leases.values().any(|l| l == ip))?;
        self.leases.insert(mac.to_string(), free);
        Some((IpAddr::V4(free), prefix))
    }

    /// `network-get-interfaces`: `lo` plus one interface per `netN`.
    pub fn guest_interfaces(&mut self, vmid: u32) -> Value {
        let Some(vm) = self.vms.get(&vmid) else {
            return json!([]);
        };
        let statics = self
            .attached_seed(vm)
            .and_then(|s| s.network_config)
            .map(|n| parse_network_config(&String::from_utf8_lossy(&n)))
            .unwrap_or_default();
        let nics: Vec<(u32, String, Option<String>)> = vm
            .typed()
            .nets()
            .into_iter()
            .filter_map(|(i, nic)| {
                let mac = nic.mac.clone()?.to_ascii_lowercase();
                Some((i, mac, nic.bridge().map(str::to_string)))
            })
            .collect();
        let mut interfaces = vec![json!({
            "name": "lo",
            "hardware-address": "00:00:00:00:00:00",
            "ip-addresses": [address_json(IpAddr::V4(Ipv4Addr::LOCALHOST), 8),
                             address_json(IpAddr::V6(Ipv6Addr::LOCALHOST), 128)],
            "statistics": statistics(),
        })];
        for (index, mac, bridge) in nics {
            let matched = statics
                .iter()
                .find(|s| s.mac.as_deref() == Some(mac.as_str()))
                .or_else(|| {
                    statics
                        .iter()
                        .find(|s| s.mac.is_none() && s.name == format!("eth{index}"))
                });
            let name = matched
                .map(|s| s.name.clone())
                .unwrap_or_else(|| format!("eth{index}"));
            let mut addresses: Vec<(IpAddr, u8)> = match matched {
                Some(s) if !s.addresses.is_empty() => s.addresses.clone(),
                _ => bridge
                    .and_then(|b| self.lease(&mac, &b))
                    .into_iter()
                    .collect(),
            };
            addresses.extend(link_local(&mac).map(|ll| (IpAddr::V6(ll), 64)));
            interfaces.push(json!({
                "name": name,
                "hardware-address": mac,
                "ip-addresses": addresses.into_iter().map(|(ip, p)| address_json(ip, p)).collect::<Vec<_>>(),
                "statistics": statistics(),
            }));
        }
        Value::Array(interfaces)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_netplan_v2_and_v1() {
        let v2 = "network:\n  version: 2\n  renderer: networkd\n  ethernets:\n    eth0:\n      match:\n        macaddress: BC:24:11:00:00:01\n      dhcp4: false\n      addresses:\n        - '10.10.10.12/24'\n        - 'fd00::12/64'\n";
        let parsed = parse_network_config(v2);
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].mac.as_deref(), Some("bc:24:11:00:00:01"));
        assert_eq!(parsed[0].addresses.len(), 2);
        let v1 = "version: 1\nconfig:\n  - type: physical\n    name: ens18\n    mac_address: bc:24:11:00:00:02\n    subnets:\n      - type: static\n        address: 192.168.1.5/24\n";
        let parsed = parse_network_config(v1);
        assert_eq!(parsed[0].name, "ens18");
        assert_eq!(parsed[0].addresses[0].0.to_string(), "192.168.1.5");
        assert!(parse_network_config("version: 1\nconfig: []\n").is_empty());
        assert!(parse_network_config(": : :").is_empty());
    }

    #[test]
    fn link_local_follows_eui64() {
        assert_eq!(
            link_local("bc:24:11:3a:5f:01")
                .map(|a| a.to_string())
                .as_deref(),
            Some("fe80::be24:11ff:fe3a:5f01")
        );
        assert_eq!(link_local("zz"), None);
    }
}
