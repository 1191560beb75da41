//! Guest agent calls. Each fails with 500 `QEMU guest agent is not running` until the
//! guest has booted far enough ([`super::ErrorKind::AgentNotRunning`]).

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::{Body, Client, Error, vm_path};
use crate::proxmox::lenient::u64_req;
use crate::proxmox::types::{ExecStatus, GuestInterface, OsInfo};

/// Simple agent commands wrap the QGA answer in `result`.
#[derive(Deserialize)]
struct AgentResult<T> {
    result: T,
}

#[derive(Deserialize)]
struct ExecStarted {
    #[serde(deserialize_with = "u64_req")]
    pid: u64,
}

impl Client {
    async fn agent_get<T: DeserializeOwned>(
        &self,
        node: &str,
        vmid: u32,
        command: &str,
    ) -> Result<T, Error> {
        let r: AgentResult<T> = self
            .get(&vm_path(node, vmid, &["agent", command]), &[])
            .await?;
        Ok(r.result)
    }

    /// `POST .../agent/ping`.
    pub async fn agent_ping(&self, node: &str, vmid: u32) -> Result<(), Error> {
        let _: AgentResult<serde_json::Value> = self
            .post(&vm_path(node, vmid, &["agent", "ping"]), Vec::new())
            .await?;
        Ok(())
    }

    /// `GET .../agent/get-osinfo`.
    pub async fn agent_os_info(&self, node: &str, vmid: u32) -> Result<OsInfo, Error> {
        self.agent_get(node, vmid, "get-osinfo").await
    }

    /// `GET .../agent/network-get-interfaces`.
    pub async fn agent_network_interfaces(
        &self,
        node: &str,
        vmid: u32,
    ) -> Result<Vec<GuestInterface>, Error> {
        self.agent_get(node, vmid, "network-get-interfaces").await
    }

    /// `POST .../agent/exec`: starts `command` (program and arguments) in the guest and
    /// returns its pid. Sent as JSON because `command` must be a real array.
    pub async fn agent_exec(
        &self,
        node: &str,
        vmid: u32,
        command: &[&str],
        input: Option<&str>,
    ) -> Result<u64, Error> {
        let mut body = json!({ "command": command });
        if let Some(input) = input {
            body["input-data"] = json!(input);
        }
        let started: ExecStarted = self
            .call(
                reqwest::Method::POST,
                &vm_path(node, vmid, &["agent", "exec"]),
                &[],
                Body::Json(body),
            )
            .await?;
        Ok(started.pid)
    }

    /// `GET .../agent/exec-status?pid=P`.
    pub async fn agent_exec_status(
        &self,
        node: &str,
        vmid: u32,
        pid: u64,
    ) -> Result<ExecStatus, Error> {
        let query = [("pid".to_string(), pid.to_string())];
        self.get(&vm_path(node, vmid, &["agent", "exec-status"]), &query)
            .await
    }
}
