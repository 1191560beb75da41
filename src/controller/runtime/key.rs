//! What the work queue holds: which object to reconcile, and the triggers other code sends.

use std::fmt;

use crate::api::Kind;

/// The kinds the controller reconciles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReconcileKind {
    ProxmoxCluster,
    ProxmoxMachine,
}

impl ReconcileKind {
    /// The API kind.
    pub fn kind(self) -> Kind {
        match self {
            Self::ProxmoxCluster => Kind::ProxmoxCluster,
            Self::ProxmoxMachine => Kind::ProxmoxMachine,
        }
    }

    /// The kind's name (metrics and logs).
    pub fn as_str(self) -> &'static str {
        self.kind().as_str()
    }
}

/// One object to reconcile: (kind, namespace, name).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub kind: ReconcileKind,
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    /// A ProxmoxMachine.
    pub fn machine(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            kind: ReconcileKind::ProxmoxMachine,
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// A ProxmoxCluster.
    pub fn cluster(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            kind: ReconcileKind::ProxmoxCluster,
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind.as_str(), self.namespace, self.name)
    }
}

/// A request from outside the controller (the management cluster's change streams) to
/// look at objects again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// This object (e.g. the ProxmoxMachine a CAPI Machine points at).
    Object(ObjectKey),
    /// Everything of a CAPI Cluster: the ProxmoxClusters it owns and the ProxmoxMachines
    /// labelled `cluster.x-k8s.io/cluster-name=<name>` (e.g. its infrastructure became
    /// provisioned, or it was paused).
    Cluster { namespace: String, name: String },
}
