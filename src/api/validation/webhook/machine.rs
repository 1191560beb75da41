//! ProxmoxMachine and ProxmoxMachineTemplate webhook rules.

use serde_json::Value;

use super::network::{shared_pool_warnings, validate_network};
use super::volumes::{volume_errors, volume_update_errors};
use crate::api::defaults::webhook::default_network;
use crate::api::field::{Error, Path};
use crate::api::v1alpha2::{
    CloudInitDrive, ProxmoxMachine, ProxmoxMachineSpec, ProxmoxMachineTemplate,
};
use crate::api::validation::Verdict;

fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}

/// The rules of a machine's spec (a machine's or a template's) at `spec_path`, and the
/// warnings about the network it has once defaulted (the defaulting webhook has run on a
/// machine already; a template's machines will be defaulted so).
fn spec_verdict(spec: &ProxmoxMachineSpec, spec_path: &Path) -> (Vec<Error>, Vec<String>) {
    let path = spec_path.child("network");
    let mut errors = spec
        .network
        .as_ref()
        .map(|n| validate_network(n, &path))
        .unwrap_or_default();
    errors.extend(seed_drive_errors(spec, spec_path));
    errors.extend(volume_errors(spec, spec_path));
    let warnings = spec
        .network
        .clone()
        .map(|mut network| {
            default_network(&mut network);
            shared_pool_warnings(&network, &path)
        })
        .unwrap_or_default();
    (errors, warnings)
}

/// The seed's CD-ROM cannot take the boot volume's place.
fn seed_drive_errors(spec: &ProxmoxMachineSpec, spec_path: &Path) -> Vec<Error> {
    let boot = spec
        .disks
        .as_ref()
        .and_then(|d| d.boot_volume.as_ref())
        .map(|b| b.disk.as_str());
    let drive = spec
        .cloud_init_drive
        .as_ref()
        .map(|d| CloudInitDrive::key(Some(d)));
    match (drive, boot) {
        (Some(drive), Some(boot)) if drive == boot => vec![Error::invalid(
            spec_path.child("cloudInitDrive"),
            drive.as_str(),
            format!("the boot volume is {boot}"),
        )],
        _ => Vec::new(),
    }
}

/// Rules for creating a ProxmoxMachine: the network rules.
pub fn validate_machine_create(machine: &ProxmoxMachine) -> Verdict {
    let (errors, warnings) = spec_verdict(&machine.spec, &Path::new(&["spec"]));
    let mut verdict = Verdict::rejecting_with(errors, || {
        format!(
            "cannot create proxmox machine {}",
            name_of(&machine.metadata)
        )
    });
    verdict.warnings.extend(warnings);
    verdict
}

/// Rules for updating a ProxmoxMachine: tags cannot change, volumes of an existing VM
/// only grow, and the network rules hold.
pub fn validate_machine_update(new: &ProxmoxMachine, old: &ProxmoxMachine) -> Verdict {
    let mut errors = Vec::new();
    if new.spec.tags != old.spec.tags {
        errors.push(Error::invalid(
            Path::new(&["spec", "tags"]),
            Value::from(new.spec.tags.clone()),
            "tags are immutable",
        ));
    }
    let spec_path = Path::new(&["spec"]);
    errors.extend(volume_update_errors(&new.spec, &old.spec, &spec_path));
    let (spec_errors, warnings) = spec_verdict(&new.spec, &spec_path);
    errors.extend(spec_errors);
    let mut verdict = Verdict::rejecting_with(errors, || {
        format!("cannot update proxmox machine {}", name_of(&new.metadata))
    });
    verdict.warnings.extend(warnings);
    verdict
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
    let (spec_errors, warnings) = spec_verdict(spec, &spec_path);
    errors.extend(spec_errors);
    Verdict { errors, warnings }
}

/// Marks the desired template Cluster API's topology controller server-side-applies with
/// `dryRun=All` to learn whether it must rotate the template.
pub const TOPOLOGY_DRY_RUN: &str = "topology.cluster.x-k8s.io/dry-run";

/// A dry-run update of a ProxmoxMachineTemplate: the topology controller's probe (a dry run
/// carrying [`TOPOLOGY_DRY_RUN`]) passes, as upstream's webhook lets it (CAPI's
/// `topology.IsDryRunRequest`); refused, a changed ClusterClass variable would stall the
/// topology reconcile (upstream #735). Any other dry run is refused as the update would be.
pub fn validate_machine_template_dry_run(
    new: &ProxmoxMachineTemplate,
    old: &ProxmoxMachineTemplate,
) -> Verdict {
    let probe = new
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(TOPOLOGY_DRY_RUN));
    if probe {
        Verdict::default()
    } else {
        validate_machine_template_update(new, old)
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
