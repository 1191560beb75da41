//! The Machine side of the CAPI emulation (see [`super`]). No kubelet runs anywhere here:
//! a Machine's node "joins" as soon as its ProxmoxMachine is provisioned.

use serde_json::{Value, json};

use super::cluster::machine_cluster;
use super::{Contract, DELETION_RECHECK, MACHINE_FINALIZER, delete_and_check_gone};
use crate::controller::conditions::Status;
use crate::emulation::driver::{Next, Reconcile};
use crate::emulation::error::EmulationError;
use crate::emulation::meta::{
    has_finalizer, is_deleting, meta_str, remove_finalizer, set_at, set_condition, str_at,
};
use crate::management::kube::changes::ObjectKey;
use crate::management::kube::kinds::Kind;
use crate::management::kube::objects::{Objects, key_of};

/// The message of the pretend `Available` condition.
pub const JOINED_MESSAGE: &str =
    "emulated: no kubelet runs here, the node counts as joined once the VM is provisioned";

const CONTRACT: Contract = Contract {
    capi: Kind::Machine,
    infra: Kind::ProxmoxMachine,
    finalizer: MACHINE_FINALIZER,
};

/// The emulated Machine controller.
pub struct Machines {
    objects: Objects,
}

impl Machines {
    pub fn new(objects: Objects) -> Self {
        Self { objects }
    }

    /// Deletion: the ProxmoxMachine first (and until it is gone), then the finalizer.
    async fn delete(
        &self,
        namespace: &str,
        mut machine: Value,
        infra: &str,
    ) -> Result<Next, EmulationError> {
        if !has_finalizer(&machine, MACHINE_FINALIZER) {
            return Ok(Next::Done);
        }
        if !delete_and_check_gone(&self.objects, Kind::ProxmoxMachine, namespace, infra).await? {
            return Ok(Next::After(DELETION_RECHECK));
        }
        remove_finalizer(&mut machine, MACHINE_FINALIZER);
        self.objects.replace(Kind::Machine, &machine).await?;
        Ok(Next::Done)
    }

    /// What CAPI copies from a provisioned ProxmoxMachine, and the pretend join.
    async fn publish(&self, mut machine: Value, infra: &Value) -> Result<(), EmulationError> {
        let provider_id = str_at(infra, "/spec/providerID");
        if let Some(id) = provider_id
            && set_at(&mut machine, &["spec", "providerID"], json!(id))
        {
            machine = self.objects.replace(Kind::Machine, &machine).await?;
        }
        let addresses = match &infra["status"]["addresses"] {
            Value::Array(list) => Value::Array(list.clone()),
            _ => json!([]),
        };
        let mut changed = set_at(
            &mut machine,
            &["status", "initialization", "infrastructureProvisioned"],
            Value::Bool(true),
        );
        changed |= set_at(&mut machine, &["status", "addresses"], addresses);
        // A real node registers with the provider ID; without one there is nothing to join.
        if provider_id.is_some() {
            let node = json!({"name": meta_str(infra, "name")});
            changed |= set_at(&mut machine, &["status", "nodeRef"], node);
            changed |= set_condition(
                &mut machine,
                "Available",
                Status::True,
                "Available",
                JOINED_MESSAGE,
            );
            changed |= set_at(&mut machine, &["status", "phase"], json!("Running"));
        }
        if changed {
            self.objects.replace_status(Kind::Machine, &machine).await?;
        }
        Ok(())
    }
}

impl Reconcile for Machines {
    fn name(&self) -> &'static str {
        "capi-machines"
    }

    async fn keys(&self) -> Result<Vec<ObjectKey>, EmulationError> {
        let machines = self.objects.list(Kind::Machine, None, "").await?;
        Ok(machines.iter().map(key_of).collect())
    }

    async fn reconcile(&self, (namespace, name): &ObjectKey) -> Result<Next, EmulationError> {
        let Some((mut machine, infra)) = CONTRACT.read(&self.objects, namespace, name).await?
        else {
            return Ok(Next::Done);
        };
        if is_deleting(&machine) {
            return self.delete(namespace, machine, &infra).await;
        }
        let cluster = machine_cluster(&machine).map(str::to_string);
        let Some(infra_machine) = CONTRACT
            .adopt(&self.objects, &mut machine, &infra, cluster.as_deref())
            .await?
        else {
            return Ok(Next::Done);
        };
        if infra_machine["status"]["initialization"]["provisioned"] == Value::Bool(true) {
            self.publish(machine, &infra_machine).await?;
        }
        Ok(Next::Done)
    }
}
