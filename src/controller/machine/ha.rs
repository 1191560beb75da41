//! Phase `WaitingForHAResource`: the running VM registered as a Proxmox VE HA resource as
//! `spec.haResource` says, created or brought to its settings. Idempotent: the resource is
//! looked up by its id (`vm:<vmid>`) before anything is written, so a pass killed after the
//! write finds it next time. Registered once the VM runs, so that the HA manager never
//! races the controller's own start. Deletion needs nothing here: the VM is destroyed with
//! `purge`, which removes the resource with it.

use super::phase::Phase;
use super::{Flow, Pass, Step};
use crate::api::v1alpha2::HaResource;
use crate::controller::seams::{InfraStore, Management};
use crate::proxmox::types::{HaSettings, ha_sid};

/// What the spec asks for, with PVE's defaults filled in.
fn settings(spec: &HaResource) -> HaSettings {
    let count = |n: Option<i32>| n.and_then(|n| u64::try_from(n).ok()).unwrap_or(1);
    HaSettings {
        state: spec.state.clone().unwrap_or_else(|| "started".to_string()),
        group: spec.group.clone(),
        max_restart: count(spec.max_restart),
        max_relocate: count(spec.max_relocate),
    }
}

impl<S: InfraStore, M: Management> Pass<'_, S, M> {
    /// Phase `WaitingForHAResource`.
    pub(super) async fn step_ha_resource(&mut self) -> Step {
        let Some(wanted) = self.h.obj.spec.ha_resource.as_ref().map(settings) else {
            return Ok(Flow::Next(Phase::PublishingAddresses));
        };
        let (vmid, _) = self.located().await?;
        let client = self.client().await?;
        let sid = ha_sid(vmid);
        let existing = client
            .ha_resources()
            .await?
            .into_iter()
            .find(|r| r.sid == sid);
        match existing {
            Some(r) if r.matches(&wanted) => {}
            Some(_) => client.update_ha_resource(&sid, &wanted).await?,
            None => client.create_ha_resource(&sid, &wanted).await?,
        }
        Ok(Flow::Next(Phase::PublishingAddresses))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_settings_are_pves_defaults() {
        assert_eq!(
            settings(&HaResource::default()),
            HaSettings {
                state: "started".into(),
                group: None,
                max_restart: 1,
                max_relocate: 1
            }
        );
        let spec = HaResource {
            group: Some("capmox".into()),
            state: Some("stopped".into()),
            max_restart: Some(3),
            max_relocate: Some(0),
        };
        assert_eq!(
            settings(&spec).form(),
            [
                ("state".to_string(), "stopped".to_string()),
                ("max_restart".to_string(), "3".to_string()),
                ("max_relocate".to_string(), "0".to_string()),
                ("group".to_string(), "capmox".to_string()),
            ]
        );
    }
}
