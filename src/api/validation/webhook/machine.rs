//! ProxmoxMachine and ProxmoxMachineTemplate webhook rules.

use serde_json::Value;

use super::network::validate_network;
use crate::api::field::{Error, Path};
use crate::api::v1alpha2::{ProxmoxMachine, ProxmoxMachineTemplate};
use crate::api::validation::Verdict;

fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}

/// Rules for creating a ProxmoxMachine: the network rules.
pub fn validate_machine_create(machine: &ProxmoxMachine) -> Verdict {
    let errors = machine
        .spec
        .network
        .as_ref()
        .map(|n| validate_network(n, &Path::new(&["spec", "network"])))
        .unwrap_or_default();
    Verdict::rejecting_with(errors, || {
        format!(
            "cannot create proxmox machine {}",
            name_of(&machine.metadata)
        )
    })
}

/// Rules for updating a ProxmoxMachine: tags cannot change, and the network
/// rules hold.
pub fn validate_machine_update(new: &ProxmoxMachine, old: &ProxmoxMachine) -> Verdict {
    let mut errors = Vec::new();
    if new.spec.tags != old.spec.tags {
        errors.push(Error::invalid(
            Path::new(&["spec", "tags"]),
            Value::from(new.spec.tags.clone()),
            "tags are immutable",
        ));
    }
    if let Some(network) = &new.spec.network {
        errors.extend(validate_network(network, &Path::new(&["spec", "network"])));
    }
    Verdict::rejecting_with(errors, || {
        format!("cannot update proxmox machine {}", name_of(&new.metadata))
    })
}

/// Rules for creating a ProxmoxMachineTemplate: no providerID, and the
/// network rules (which upstream does not apply to templates).
pub fn validate_machine_template_create(template: &ProxmoxMachineTemplate) -> Verdict {
    let spec = &template.spec.template.spec;
    let spec_path = Path::new(&["spec", "template", "spec"]);
    let mut errors = Vec::new();
    if !spec.provider_id.is_empty() {
        errors.push(Error::forbidden(
            spec_path.child("providerID"),
            "cannot be set in templates",
        ));
    }
    if let Some(network) = &spec.network {
        errors.extend(validate_network(network, &spec_path.child("network")));
    }
    Verdict {
        errors,
        warnings: Vec::new(),
    }
}

/// Rules for updating a ProxmoxMachineTemplate: its spec is immutable.
pub fn validate_machine_template_update(
    new: &ProxmoxMachineTemplate,
    old: &ProxmoxMachineTemplate,
) -> Verdict {
    let errors = if new.spec == old.spec {
        Vec::new()
    } else {
        vec![Error::forbidden(
            Path::new(&["spec"]),
            "ProxmoxMachineTemplate is immutable",
        )]
    };
    Verdict {
        errors,
        warnings: Vec::new(),
    }
}
