//! The address of a machine, as Cluster API defines it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// MachineAddress is one address of a machine (Cluster API type; the same in v1beta1 and v1beta2).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct MachineAddress {
    /// type is the kind of address: Hostname, ExternalIP, InternalIP,
    /// ExternalDNS or InternalDNS.
    #[serde(rename = "type")]
    #[schemars(
        extend("x-capmox-required" = true),
        extend("enum" = ["Hostname", "ExternalIP", "InternalIP", "ExternalDNS", "InternalDNS"])
    )]
    pub type_: String,

    /// address is the address value.
    #[schemars(extend("x-capmox-required" = true), length(min = 1, max = 256))]
    pub address: String,
}
