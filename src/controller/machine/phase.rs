//! The provisioning phases of a ProxmoxMachine, persisted as the reason of its
//! `VirtualMachineProvisioned` condition (upstream's reason names, so tools written for
//! CAPMOX read them unchanged).

use crate::controller::conditions::Status;

/// Where a ProxmoxMachine is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// Nothing recorded yet.
    New,
    /// The Cluster's infrastructure is not provisioned yet.
    WaitingForClusterInfrastructure,
    /// The Machine has no bootstrap data secret yet.
    WaitingForBootstrapData,
    /// VMID recorded, VM being cloned, then configured (CPU, memory, NICs, tags).
    Cloning,
    /// Boot disk resize, then the data disks (`additionalVolumes`).
    ReconcilingDisks,
    /// IP address claims and their addresses.
    AllocatingAddresses,
    /// Rendering, uploading and attaching the NoCloud seed.
    InjectingBootstrapData,
    /// Starting the VM.
    PoweringOn,
    /// Registering the running VM as a Proxmox VE HA resource (`spec.haResource`).
    RegisteringHaResource,
    /// Publishing providerID and addresses.
    PublishingAddresses,
    /// Waiting for cloud-init to finish in the guest.
    WaitingForCloudInit,
    /// Provisioned; the seed ISO stays attached until the node joined.
    WaitingForBootstrapReady,
    /// Provisioned and the seed ISO removed; data disks the spec adds or grows later are
    /// still applied.
    Provisioned,
    /// A problem only a change of the spec can fix.
    Failed,
    /// Being deleted.
    Deleting,
}

impl Phase {
    /// Every phase, in order.
    pub const ALL: [Phase; 15] = [
        Phase::New,
        Phase::WaitingForClusterInfrastructure,
        Phase::WaitingForBootstrapData,
        Phase::Cloning,
        Phase::ReconcilingDisks,
        Phase::AllocatingAddresses,
        Phase::InjectingBootstrapData,
        Phase::PoweringOn,
        Phase::RegisteringHaResource,
        Phase::PublishingAddresses,
        Phase::WaitingForCloudInit,
        Phase::WaitingForBootstrapReady,
        Phase::Provisioned,
        Phase::Failed,
        Phase::Deleting,
    ];

    /// The condition reason the phase is persisted as.
    pub fn reason(self) -> &'static str {
        match self {
            Self::New => "Pending",
            Self::WaitingForClusterInfrastructure => "WaitingForClusterInfrastructureReady",
            Self::WaitingForBootstrapData => "WaitingForBootstrapData",
            Self::Cloning => "Cloning",
            Self::ReconcilingDisks => "WaitingForDiskReconciliation",
            Self::AllocatingAddresses => "WaitingForStaticIPAllocation",
            Self::InjectingBootstrapData => "WaitingForBootstrapDataReconciliation",
            Self::PoweringOn => "WaitingForVMPowerUp",
            Self::RegisteringHaResource => "WaitingForHAResource",
            Self::PublishingAddresses => "WaitingForClusterAPIMachineAddresses",
            Self::WaitingForCloudInit => "WaitingForCloudInit",
            Self::WaitingForBootstrapReady => "WaitingForBootstrapReady",
            Self::Provisioned => "Provisioned",
            Self::Failed => "VMProvisionFailed",
            Self::Deleting => "Deleting",
        }
    }

    /// Reads a persisted reason. Upstream's failure reasons map to the phase to resume:
    /// `CloningFailed`/`TaskFailed` replay from cloning (every step is idempotent),
    /// `PoweringOnFailed` retries the start, `DeletionFailed` keeps deleting.
    pub fn from_reason(reason: &str) -> Self {
        match reason {
            "CloningFailed" | "TaskFailed" => Self::Cloning,
            "PoweringOnFailed" => Self::PoweringOn,
            "DeletionFailed" => Self::Deleting,
            other => Self::ALL
                .into_iter()
                .find(|p| p.reason() == other)
                .unwrap_or(Self::New),
        }
    }

    /// The condition status: `True` once the VM is provisioned.
    pub fn status(self) -> Status {
        match self {
            Self::WaitingForBootstrapReady | Self::Provisioned => Status::True,
            _ => Status::False,
        }
    }

    /// Before any VM was created.
    pub fn before_creation(self) -> bool {
        self < Self::Cloning
    }

    /// The VM counts as provisioned (CAPI `initialization.provisioned`).
    pub fn provisioned(self) -> bool {
        matches!(self, Self::WaitingForBootstrapReady | Self::Provisioned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_round_trip_and_upstream_failures_resume() {
        for p in [
            Phase::Cloning,
            Phase::PublishingAddresses,
            Phase::Provisioned,
            Phase::Deleting,
        ] {
            assert_eq!(Phase::from_reason(p.reason()), p);
        }
        assert_eq!(Phase::from_reason("TaskFailed"), Phase::Cloning);
        assert_eq!(Phase::from_reason("PoweringOnFailed"), Phase::PoweringOn);
        assert_eq!(Phase::from_reason("whatever"), Phase::New);
        assert!(Phase::WaitingForBootstrapData.before_creation());
        assert!(!Phase::Cloning.before_creation());
        assert_eq!(Phase::WaitingForBootstrapReady.status(), Status::True);
    }
}
