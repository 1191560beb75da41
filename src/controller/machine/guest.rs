//! After the seed is attached: power on, publish addresses, wait for cloud-init, and —
//! once the node joined — remove the seed.
//!
//! * Start is idempotent: a VM that already runs (`already running`) is fine; a paused
//!   one is resumed.
//! * Addresses: `Hostname`, then the default pools' static addresses, then what the
//!   guest agent reports for DHCP devices (upstream published static ones only).
//! * cloud-init: exit code 2 ("degraded": done with recoverable errors) is success with a
//!   note; only other non-zero codes fail. Ignition guests have no cloud-init to ask.
//! * The seed is detached (`ide0: none`) and deleted once the Machine has a node and is
//!   `Available`, as upstream does; then the phase is `Provisioned` and nothing touches
//!   Proxmox any more.

use std::net::IpAddr;
use std::time::Duration;

use super::bootstrap::attached_seed;
use super::phase::Phase;
use super::tasks::{TaskEnd, tolerated};
use super::{Failure, Flow, Pass, Step};
use crate::api::common::MachineAddress;
use crate::api::v1alpha2::IpAddressesSpec;
use crate::controller::action::Action;
use crate::controller::conditions::Status;
use crate::controller::names::{DHCP_ADDRESSES_KNOWN, dhcp_reason};
use crate::controller::render::Format;
use crate::controller::seams::{InfraStore, Management};
use crate::proxmox::ErrorKind;
use crate::proxmox::types::{ConfigUpdate, GuestInterface, PowerState};

/// Addresses a guest reports that are not worth publishing.
fn publishable(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => !v4.is_loopback() && !v4.is_link_local(),
        IpAddr::V6(v6) => !v6.is_loopback() && (v6.segments()[0] & 0xffc0) != 0xfe80,
    }
}

/// The addresses of the interface with `mac`, by family.
fn guest_addresses(interfaces: &[GuestInterface], mac: &str) -> (Vec<String>, Vec<String>) {
    let mut v4 = Vec::new();
    let mut v6 = Vec::new();
    let iface = interfaces.iter().find(|i| {
        i.hardware_address
            .as_deref()
            .is_some_and(|h| h.eq_ignore_ascii_case(mac))
    });
    for a in iface.iter().flat_map(|i| &i.ip_addresses) {
        let Ok(ip) = a.ip_address.parse::<IpAddr>() else {
            continue;
        };
        if !publishable(&ip) {
            continue;
        }
        if ip.is_ipv4() {
            v4.push(ip.to_string());
        } else {
            v6.push(ip.to_string());
        }
    }
    (v4, v6)
}

impl<S: InfraStore, M: Management> Pass<'_, S, M> {
    fn vm_location(&self) -> Option<(u32, String)> {
        Some((self.vmid().ok()??, self.node()?))
    }

    pub(super) async fn located(&mut self) -> Result<(u32, String), Failure> {
        match self.vm_location() {
            Some(l) => Ok(l),
            None => {
                let (vmid, node, _) = self.vm_config().await?;
                Ok((vmid, node))
            }
        }
    }

    /// Phase `WaitingForVMPowerUp`.
    pub(super) async fn step_power(&mut self) -> Step {
        if self.finished.as_deref() == Some("qmstart") {
            return Ok(Flow::Next(Phase::RegisteringHaResource));
        }
        let (vmid, node) = self.located().await?;
        let client = self.client().await?;
        match client.start_vm(&node, vmid).await {
            Ok(upid) => match self.await_task(upid).await? {
                TaskEnd::Done => return Ok(Flow::Next(Phase::RegisteringHaResource)),
                TaskEnd::Pending(action) => return Ok(Flow::Wait(action)),
                TaskEnd::Failed(text) if !tolerated("qmstart", &text) => {
                    return Err(self.task_failed("start", &text));
                }
                TaskEnd::Failed(_) => {}
            },
            Err(e) if e.kind() == ErrorKind::VmRunning => {}
            Err(e) => return Err(e.into()),
        }
        // "Already running": it may be paused.
        let status = client.vm_status(&node, vmid).await?;
        match status.power_state() {
            PowerState::Running => Ok(Flow::Next(Phase::RegisteringHaResource)),
            PowerState::Paused => {
                let upid = client.resume_vm(&node, vmid).await?;
                Ok(self
                    .settle(upid, "resume", false)
                    .await?
                    .unwrap_or(Flow::Next(Phase::RegisteringHaResource)))
            }
            other => Err(Failure::Blocked(
                format!("VM {vmid} is {other:?} after start"),
                self.r.config.poll,
            )),
        }
    }

    /// Phase `WaitingForClusterAPIMachineAddresses`.
    pub(super) async fn step_publish(&mut self) -> Step {
        let spec = self.h.obj.spec.clone();
        let skip_agent = spec.checks.as_ref().and_then(|c| c.skip_qemu_guest_agent) == Some(true);
        let dhcp: Vec<_> = spec
            .network
            .iter()
            .flat_map(|n| &n.network_devices)
            .filter(|d| d.dhcp4 == Some(true) || d.dhcp6 == Some(true))
            .cloned()
            .collect();
        let mut leased: Vec<String> = Vec::new();
        if !dhcp.is_empty() && skip_agent {
            let devices: Vec<&str> = dhcp.iter().map(|d| d.name.as_str()).collect();
            self.h.set_condition(
                DHCP_ADDRESSES_KNOWN,
                Status::False,
                dhcp_reason::NO_GUEST_AGENT,
                &format!(
                    "{} take their addresses from DHCP, and with checks.skipQemuGuestAgent no \
                     guest agent reports the leases: the Machine lists only the static \
                     addresses (run the agent, or give these devices IPAM pools)",
                    devices.join(", ")
                ),
                self.now,
            );
        }
        if !dhcp.is_empty() && !skip_agent {
            let (vmid, node, config) = self.vm_config().await?;
            let client = self.client().await?;
            let interfaces = match client.agent_network_interfaces(&node, vmid).await {
                Ok(i) => i,
                Err(e) if e.kind() == ErrorKind::AgentNotRunning => {
                    self.h
                        .set_message("waiting for the QEMU guest agent", self.now);
                    return Ok(Flow::Wait(Action::Requeue(self.r.config.guest_poll)));
                }
                Err(e) => return Err(e.into()),
            };
            let nets = config.nets();
            for device in &dhcp {
                let n: u32 = device
                    .name
                    .strip_prefix("net")
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(u32::MAX);
                let mac = nets.get(&n).and_then(|d| d.mac.clone()).unwrap_or_default();
                let (v4, v6) = guest_addresses(&interfaces, &mac);
                let missing = (device.dhcp4 == Some(true) && v4.is_empty())
                    || (device.dhcp6 == Some(true) && v6.is_empty());
                if missing {
                    self.h.set_message(
                        &format!("waiting for DHCP addresses of {}", device.name),
                        self.now,
                    );
                    return Ok(Flow::Wait(Action::Requeue(self.r.config.guest_poll)));
                }
                let entry = match self
                    .h
                    .status
                    .ip_addresses
                    .iter_mut()
                    .find(|e| e.net == device.name)
                {
                    Some(e) => e,
                    None => {
                        self.h.status.ip_addresses.push(IpAddressesSpec {
                            net: device.name.clone(),
                            ..IpAddressesSpec::default()
                        });
                        let last = self.h.status.ip_addresses.len() - 1;
                        &mut self.h.status.ip_addresses[last]
                    }
                };
                for (list, found, wanted) in [
                    (&mut entry.ipv4, &v4, device.dhcp4 == Some(true)),
                    (&mut entry.ipv6, &v6, device.dhcp6 == Some(true)),
                ] {
                    for a in found.iter().filter(|_| wanted) {
                        if !list.contains(a) {
                            list.push(a.clone());
                        }
                        leased.push(a.clone());
                    }
                }
            }
            self.h.set_condition(
                DHCP_ADDRESSES_KNOWN,
                Status::True,
                dhcp_reason::REPORTED,
                "",
                self.now,
            );
        }
        let mut addresses = vec![MachineAddress {
            type_: "Hostname".into(),
            address: self.h.name().to_string(),
        }];
        let defaults = self
            .h
            .status
            .ip_addresses
            .iter()
            .find(|e| e.net == "default");
        let statics = defaults.map(|d| d.ipv4.iter().chain(&d.ipv6).cloned().collect::<Vec<_>>());
        for a in statics.unwrap_or_default().into_iter().chain(leased) {
            if !addresses.iter().any(|m| m.address == a) {
                addresses.push(MachineAddress {
                    type_: "InternalIP".into(),
                    address: a,
                });
            }
        }
        self.h.status.addresses = addresses;
        Ok(Flow::Next(Phase::WaitingForCloudInit))
    }

    /// Phase `WaitingForCloudInit`.
    pub(super) async fn step_cloud_init(&mut self) -> Step {
        let checks = self.h.obj.spec.checks.clone().unwrap_or_default();
        if checks.skip_qemu_guest_agent == Some(true) || checks.skip_cloud_init_status == Some(true)
        {
            return Ok(Flow::Next(Phase::WaitingForBootstrapReady));
        }
        if self.bootstrap_data().await?.0 == Format::Ignition {
            return Ok(Flow::Next(Phase::WaitingForBootstrapReady));
        }
        let (vmid, node) = self.located().await?;
        let client = self.client().await?;
        // A `cloud-init status` started by an earlier pass is asked again instead of
        // starting another one (a slow guest would otherwise never answer in time).
        let running = self.r.exec_of(self.h.uid(), vmid);
        let pid = match running {
            Some(pid) => pid,
            None => match client
                .agent_exec(&node, vmid, &["cloud-init", "status"], None)
                .await
            {
                Ok(pid) => pid,
                Err(e) if e.kind() == ErrorKind::AgentNotRunning => {
                    self.h
                        .set_message("waiting for the QEMU guest agent", self.now);
                    return Ok(Flow::Wait(Action::Requeue(self.r.config.guest_poll)));
                }
                Err(e) => return Err(e.into()),
            },
        };
        let mut pause = Duration::from_millis(50);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        let status = loop {
            let status = match client.agent_exec_status(&node, vmid, pid).await {
                Ok(status) => status,
                Err(e) => {
                    // The guest restarted (the pid is gone) or the agent went away.
                    self.r.remember_exec(self.h.uid(), None);
                    return Err(e.into());
                }
            };
            if status.exited || tokio::time::Instant::now() >= deadline {
                break status;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(500));
        };
        self.r
            .remember_exec(self.h.uid(), (!status.exited).then_some((vmid, pid)));
        let output = status.out_data.clone().unwrap_or_default();
        match (status.exited, status.exitcode) {
            (false, _) => {
                self.h
                    .set_message("waiting for cloud-init status", self.now);
                Ok(Flow::Wait(Action::Requeue(self.r.config.guest_poll)))
            }
            (true, Some(0) | None) if output.contains("running") => {
                self.h.set_message("cloud-init is running", self.now);
                Ok(Flow::Wait(Action::Requeue(self.r.config.guest_poll)))
            }
            (true, Some(0) | None) => Ok(Flow::Next(Phase::WaitingForBootstrapReady)),
            (true, Some(2)) => {
                self.note =
                    Some("cloud-init finished with recoverable errors (status degraded)".into());
                Ok(Flow::Next(Phase::WaitingForBootstrapReady))
            }
            (true, Some(code)) => {
                let detail = status
                    .err_data
                    .clone()
                    .filter(|e| !e.trim().is_empty())
                    .unwrap_or(output);
                Err(Failure::Terminal(format!(
                    "cloud-init failed execution (exit code {code}): {}",
                    detail.trim()
                )))
            }
        }
    }

    /// Phase `WaitingForBootstrapReady`: once the node joined, detach and delete the
    /// seed. A seed already detached by an interrupted pass is still deleted (by its
    /// deterministic name), so none is left behind.
    pub(super) async fn step_node_join(&mut self) -> Step {
        if !self.machine.as_ref().is_some_and(|m| m.node_joined()) {
            return Ok(Flow::Wait(Action::AwaitChange));
        }
        let (vmid, node, config) = self.vm_config().await?;
        let volid = match attached_seed(&config, vmid) {
            Some((drive, volid)) => {
                let client = self.client().await?;
                let update = ConfigUpdate::new().set(&drive, "none,media=cdrom");
                client.update_vm_config_sync(&node, vmid, &update).await?;
                self.applied(&update);
                Some(volid)
            }
            None if self.h.status.bootstrap_data_provided == Some(true) => {
                Some(self.expected_seed(&node, vmid).await?)
            }
            None => None,
        };
        if let Some(volid) = volid
            && let Some(flow) = self.delete_seed(&node, &volid).await?
        {
            return Ok(flow);
        }
        Ok(Flow::Next(Phase::Provisioned))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn guest_addresses_skip_link_local_and_match_by_mac() {
        let interfaces: Vec<GuestInterface> = serde_json::from_value(json!([
            {"name": "lo", "hardware-address": "00:00:00:00:00:00",
             "ip-addresses": [{"ip-address-type": "ipv4", "ip-address": "127.0.0.1", "prefix": 8}]},
            {"name": "eth0", "hardware-address": "bc:24:11:00:00:01",
             "ip-addresses": [
                {"ip-address-type": "ipv4", "ip-address": "10.0.0.100", "prefix": 24},
                {"ip-address-type": "ipv6", "ip-address": "fe80::be24:11ff:fe00:1", "prefix": 64},
                {"ip-address-type": "ipv6", "ip-address": "2001:db8::5", "prefix": 64}]}
        ]))
        .expect("interfaces");
        assert_eq!(
            guest_addresses(&interfaces, "BC:24:11:00:00:01"),
            (
                vec!["10.0.0.100".to_string()],
                vec!["2001:db8::5".to_string()]
            )
        );
        assert_eq!(
            guest_addresses(&interfaces, "aa:aa:aa:aa:aa:aa"),
            (vec![], vec![])
        );
    }
}
