//! The control-plane endpoint claimed from `spec.controlPlaneEndpointIPPoolRef` when
//! `spec.controlPlaneEndpoint` is not given: one `IPAddressClaim` named
//! `<proxmoxcluster>-vip`, controlled by the ProxmoxCluster, labelled with the cluster
//! name and with `spec.clusterName` set (the IPAM contract). Its address is published as
//! `spec.controlPlaneEndpoint` with port 6443 before the cluster reports provisioned, so
//! CAPI copies it to the Cluster. A user-set endpoint wins; a claim it no longer
//! matches is released.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::pools::owner_reference;
use crate::api::v1alpha2::ProxmoxCluster;
use crate::controller::seams::{Management, ManagementError};
use crate::management::types::{
    CLUSTER_NAME_LABEL, IPAM_GROUP, IpAddressClaim, IpAddressClaimSpec, PoolKind, PoolRef,
};

/// The port published when the endpoint is claimed.
pub const DEFAULT_PORT: i32 = 6443;

/// The endpoint claim's name.
pub fn claim_name(pc: &ProxmoxCluster) -> String {
    format!("{}-vip", pc.metadata.name.as_deref().unwrap_or_default())
}

/// Where the claim stands.
pub enum Vip {
    /// The claimed address.
    Address(String),
    /// IPAM has not answered yet.
    Pending,
    /// The claim cannot be used (message for the condition).
    Conflict(String),
}

fn controlled_by(claim: &IpAddressClaim, pc: &ProxmoxCluster) -> bool {
    claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && Some(&o.uid) == pc.metadata.uid.as_ref())
}

/// Gets or creates the claim and returns its address once allocated.
pub async fn claim<M: Management>(
    mgmt: &M,
    pc: &ProxmoxCluster,
    cluster: &str,
) -> Result<Vip, ManagementError> {
    let Some(pool) = pc.spec.control_plane_endpoint_ip_pool_ref.as_ref() else {
        return Ok(Vip::Conflict("no controlPlaneEndpointIPPoolRef".into()));
    };
    let Some(kind) = PoolKind::from_kind(&pool.kind) else {
        return Ok(Vip::Conflict(format!(
            "unsupported pool kind {:?}",
            pool.kind
        )));
    };
    let namespace = pc.metadata.namespace.clone().unwrap_or_default();
    let name = claim_name(pc);
    let Some(claim) = mgmt.claim(&namespace, &name).await? else {
        let claim = IpAddressClaim {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(namespace),
                labels: Some(BTreeMap::from([(
                    CLUSTER_NAME_LABEL.to_string(),
                    cluster.to_string(),
                )])),
                owner_references: Some(vec![owner_reference(pc)]),
                ..ObjectMeta::default()
            },
            spec: IpAddressClaimSpec {
                pool_ref: PoolRef {
                    api_group: IPAM_GROUP.to_string(),
                    kind: kind.as_str().to_string(),
                    name: pool.name.clone(),
                },
                cluster_name: Some(cluster.to_string()),
            },
            status: Default::default(),
        };
        match mgmt.create_claim(&claim).await {
            Ok(_) | Err(ManagementError::AlreadyExists(_)) => return Ok(Vip::Pending),
            Err(e) => return Err(e),
        }
    };
    if !controlled_by(&claim, pc) {
        return Ok(Vip::Conflict(format!(
            "IPAddressClaim {name} is controlled by another object"
        )));
    }
    if claim.spec.pool_ref.name != pool.name || claim.spec.pool_ref.kind != kind.as_str() {
        // Claims are immutable: switching pools means a new claim.
        mgmt.delete_claim(&namespace, &name).await?;
        return Ok(Vip::Pending);
    }
    let Some(address_ref) = claim.status.address_ref.filter(|a| !a.name.is_empty()) else {
        return Ok(Vip::Pending);
    };
    match mgmt.ip_address(&namespace, &address_ref.name).await? {
        Some(address) if !address.spec.address.is_empty() => Ok(Vip::Address(address.spec.address)),
        _ => Ok(Vip::Pending),
    }
}

/// Releases the claim if this cluster controls it.
pub async fn release<M: Management>(mgmt: &M, pc: &ProxmoxCluster) -> Result<(), ManagementError> {
    let namespace = pc.metadata.namespace.clone().unwrap_or_default();
    let name = claim_name(pc);
    if let Some(claim) = mgmt.claim(&namespace, &name).await?
        && controlled_by(&claim, pc)
    {
        mgmt.delete_claim(&namespace, &name).await?;
    }
    Ok(())
}

/// The address of the claim if it exists and is allocated (no creation).
pub async fn claimed_address<M: Management>(
    mgmt: &M,
    pc: &ProxmoxCluster,
) -> Result<Option<String>, ManagementError> {
    let namespace = pc.metadata.namespace.clone().unwrap_or_default();
    let Some(claim) = mgmt.claim(&namespace, &claim_name(pc)).await? else {
        return Ok(None);
    };
    if !controlled_by(&claim, pc) {
        return Ok(None);
    }
    let Some(address_ref) = claim.status.address_ref else {
        return Ok(None);
    };
    Ok(mgmt
        .ip_address(&namespace, &address_ref.name)
        .await?
        .map(|a| a.spec.address))
}
