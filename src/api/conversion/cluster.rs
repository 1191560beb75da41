//! ProxmoxCluster and ProxmoxClusterTemplate.

use std::collections::BTreeMap;

use super::conditions;
use super::error::FieldPath;
use super::leaf::{FalseIsNone, Leaf, Result, fit, fit_opt, keep};
use super::object::{object_kind, template_kind};
use super::pairing::pair_keyed;
use super::prior::{Origin, Prior};
use crate::api::{v1alpha1 as v1, v1alpha2 as v2};

object_kind!(
    ProxmoxCluster,
    spec: up_spec, down_spec,
    status: up_status, down_status,
);

template_kind!(
    ProxmoxClusterTemplate,
    ProxmoxClusterTemplateSpec,
    ProxmoxClusterTemplateResource,
    up: up_spec,
    down: down_template_spec,
);

/// A templated cluster spec as v1alpha1 shows it: with the cloneSpec
/// placeholder.
fn down_template_spec(
    hub: &v2::ProxmoxClusterSpec,
    origin: Origin,
    path: &FieldPath,
) -> Result<v1::ProxmoxClusterSpec> {
    Ok(v1::ProxmoxClusterSpec {
        clone_spec: Some(clone_spec_placeholder()),
        ..down_spec(hub, origin, path)?
    })
}

/// The `cloneSpec` every ProxmoxClusterTemplate shows in v1alpha1.
///
/// cloneSpec has no function and no place in v1alpha2, but the v1alpha1
/// ClusterClasses upstream shipped (v0.4 to v0.7) patch the template with
/// JSON patch `replace` operations on `/spec/template/spec/cloneSpec/
/// sshAuthorizedKeys` and `.../virtualIPNetworkInterface`, and `replace`
/// fails on a path that does not exist. So the template shows these keys
/// (and the required `machineSpec`), empty. ProxmoxClusters themselves get
/// no placeholder: nothing patches them.
fn clone_spec_placeholder() -> v1::ProxmoxClusterCloneSpec {
    v1::ProxmoxClusterCloneSpec {
        machine_spec: BTreeMap::new(),
        ssh_authorized_keys: Some(Vec::new()),
        virtual_ip_network_interface: String::new(),
    }
}

fn up_spec(
    spoke: v1::ProxmoxClusterSpec,
    prior: Prior<'_, v2::ProxmoxClusterSpec>,
    path: &FieldPath,
) -> Result<v2::ProxmoxClusterSpec> {
    let v1::ProxmoxClusterSpec {
        control_plane_endpoint,
        external_managed_control_plane,
        allowed_nodes,
        scheduler_hints,
        ipv4_config,
        ipv6_config,
        dns_servers,
        // No function in either version; dropped (see clone_spec_placeholder).
        clone_spec: _,
        credentials_ref,
    } = spoke;
    Ok(v2::ProxmoxClusterSpec {
        control_plane_endpoint: Endpoint::up(control_plane_endpoint, path)?,
        control_plane_endpoint_ip_pool_ref: prior.hidden(|s| &s.control_plane_endpoint_ip_pool_ref),
        external_managed_control_plane: keep::<FalseIsNone>(
            external_managed_control_plane,
            prior.field(|s| &s.external_managed_control_plane),
            path,
        )?,
        allowed_nodes,
        scheduler_hints: scheduler_hints
            .map(|h| {
                up_scheduler_hints(
                    h,
                    prior.field(|s| &s.scheduler_hints).flatten(),
                    &path.field("schedulerHints"),
                )
            })
            .transpose()?,
        ipv4_config: ipv4_config
            .map(|c| up_ip_config(c, &path.field("ipv4Config")))
            .transpose()?,
        ipv6_config: ipv6_config
            .map(|c| up_ip_config(c, &path.field("ipv6Config")))
            .transpose()?,
        dns_servers,
        zone_config: prior.hidden(|s| &s.zone_config),
        failure_domains: prior.hidden(|s| &s.failure_domains),
        credentials_ref,
    })
}

fn down_spec(
    hub: &v2::ProxmoxClusterSpec,
    _: Origin,
    path: &FieldPath,
) -> Result<v1::ProxmoxClusterSpec> {
    let v2::ProxmoxClusterSpec {
        control_plane_endpoint,
        control_plane_endpoint_ip_pool_ref: _,
        failure_domains: _,
        external_managed_control_plane,
        allowed_nodes,
        scheduler_hints,
        ipv4_config,
        ipv6_config,
        dns_servers,
        zone_config: _,
        credentials_ref,
    } = hub;
    Ok(v1::ProxmoxClusterSpec {
        control_plane_endpoint: Endpoint::down(control_plane_endpoint, path)?,
        external_managed_control_plane: FalseIsNone::down(external_managed_control_plane, path)?,
        allowed_nodes: allowed_nodes.clone(),
        scheduler_hints: scheduler_hints
            .as_ref()
            .map(|h| down_scheduler_hints(h, &path.field("schedulerHints")))
            .transpose()?,
        ipv4_config: ipv4_config
            .as_ref()
            .map(|c| down_ip_config(c, &path.field("ipv4Config")))
            .transpose()?,
        ipv6_config: ipv6_config
            .as_ref()
            .map(|c| down_ip_config(c, &path.field("ipv6Config")))
            .transpose()?,
        dns_servers: dns_servers.clone(),
        clone_spec: None,
        credentials_ref: credentials_ref.clone(),
    })
}

/// v1alpha1's optional endpoint ⇄ the hub's value (absent = empty).
struct Endpoint;

impl Leaf for Endpoint {
    type Spoke = Option<v1::ApiEndpoint>;
    type Hub = v2::ApiEndpoint;

    fn up(spoke: Self::Spoke, _: &FieldPath) -> Result<Self::Hub> {
        Ok(spoke.map_or_else(v2::ApiEndpoint::default, |e| {
            let v1::ApiEndpoint { host, port } = e;
            v2::ApiEndpoint { host, port }
        }))
    }

    fn down(hub: &Self::Hub, _: &FieldPath) -> Result<Self::Spoke> {
        let v2::ApiEndpoint { host, port } = hub;
        Ok(
            (*hub != v2::ApiEndpoint::default()).then(|| v1::ApiEndpoint {
                host: host.clone(),
                port: *port,
            }),
        )
    }
}

/// The hints, with the hub-only `cpuAdjustment` kept from the prior value (a v1alpha1 write
/// that drops `schedulerHints` altogether removes it, as it reads).
fn up_scheduler_hints(
    spoke: v1::SchedulerHints,
    prior: Prior<'_, v2::SchedulerHints>,
    path: &FieldPath,
) -> Result<v2::SchedulerHints> {
    let v1::SchedulerHints { memory_adjustment } = spoke;
    Ok(v2::SchedulerHints {
        memory_adjustment: fit_opt(memory_adjustment, &path.field("memoryAdjustment"))?,
        cpu_adjustment: prior.hidden(|h| &h.cpu_adjustment),
    })
}

fn down_scheduler_hints(hub: &v2::SchedulerHints, path: &FieldPath) -> Result<v1::SchedulerHints> {
    let v2::SchedulerHints {
        memory_adjustment,
        cpu_adjustment: _,
    } = hub;
    Ok(v1::SchedulerHints {
        memory_adjustment: fit_opt(*memory_adjustment, &path.field("memoryAdjustment"))?,
    })
}

fn up_ip_config(spoke: v1::IpConfigSpec, path: &FieldPath) -> Result<v2::IpConfigSpec> {
    let v1::IpConfigSpec {
        addresses,
        prefix,
        gateway,
        metric,
    } = spoke;
    Ok(v2::IpConfigSpec {
        addresses,
        prefix: fit(prefix, &path.field("prefix"))?,
        gateway,
        metric: fit_opt(metric, &path.field("metric"))?,
    })
}

fn down_ip_config(hub: &v2::IpConfigSpec, path: &FieldPath) -> Result<v1::IpConfigSpec> {
    let v2::IpConfigSpec {
        addresses,
        prefix,
        gateway,
        metric,
    } = hub;
    Ok(v1::IpConfigSpec {
        addresses: addresses.clone(),
        prefix: fit(*prefix, &path.field("prefix"))?,
        gateway: gateway.clone(),
        metric: fit_opt(*metric, &path.field("metric"))?,
    })
}

fn up_status(
    spoke: v1::ProxmoxClusterStatus,
    prior: Prior<'_, v2::ProxmoxClusterStatus>,
    path: &FieldPath,
) -> Result<v2::ProxmoxClusterStatus> {
    let v1::ProxmoxClusterStatus {
        ready,
        in_cluster_ip_pool_ref,
        node_locations,
        // Cluster API v1beta2 dropped the terminal failure fields.
        failure_reason: _,
        failure_message: _,
        conditions,
    } = spoke;
    Ok(v2::ProxmoxClusterStatus {
        conditions: conditions::up(conditions, prior.field(|s| &s.conditions)),
        initialization: v2::ProxmoxClusterInitializationStatus {
            provisioned: keep::<FalseIsNone>(
                ready,
                prior.field(|s| &s.initialization.provisioned),
                path,
            )?,
        },
        in_cluster_ip_pool_ref,
        in_cluster_zone_ref: prior.hidden(|s| &s.in_cluster_zone_ref),
        failure_domains: prior.hidden(|s| &s.failure_domains),
        pve_clusters: prior.hidden(|s| &s.pve_clusters),
        node_locations: node_locations
            .map(|n| up_node_locations(n, prior.and_then(|s| s.node_locations.as_ref()))),
    })
}

fn down_status(
    hub: &v2::ProxmoxClusterStatus,
    origin: Origin,
    path: &FieldPath,
) -> Result<v1::ProxmoxClusterStatus> {
    let v2::ProxmoxClusterStatus {
        conditions,
        initialization: v2::ProxmoxClusterInitializationStatus { provisioned },
        in_cluster_ip_pool_ref,
        in_cluster_zone_ref: _,
        failure_domains: _,
        pve_clusters: _,
        node_locations,
    } = hub;
    Ok(v1::ProxmoxClusterStatus {
        ready: FalseIsNone::down(provisioned, path)?,
        in_cluster_ip_pool_ref: in_cluster_ip_pool_ref.clone(),
        node_locations: node_locations.as_ref().map(down_node_locations),
        failure_reason: None,
        failure_message: None,
        conditions: conditions::down(conditions, origin),
    })
}

fn up_node_locations(
    spoke: v1::NodeLocations,
    prior: Prior<'_, v2::NodeLocations>,
) -> v2::NodeLocations {
    let v1::NodeLocations {
        control_plane,
        workers,
    } = spoke;
    v2::NodeLocations {
        control_plane: up_locations(control_plane, prior.field(|n| &n.control_plane)),
        workers: up_locations(workers, prior.field(|n| &n.workers)),
    }
}

/// A location keeps its hub-only zone while it is about the same machine.
fn up_locations(
    spoke: Vec<v1::NodeLocation>,
    prior: Prior<'_, Vec<v2::NodeLocation>>,
) -> Vec<v2::NodeLocation> {
    let prior_list = prior.get().map_or(&[][..], Vec::as_slice);
    let pairs = pair_keyed(
        &spoke,
        prior_list,
        |s, h| s.machine == h.machine,
        |s, h| s.node == h.node,
    );
    spoke
        .into_iter()
        .zip(pairs)
        .map(|(location, pair)| {
            let v1::NodeLocation { machine, node } = location;
            v2::NodeLocation {
                machine,
                node,
                zone: pair.and_then(|i| prior_list[i].zone.clone()),
            }
        })
        .collect()
}

fn down_node_locations(hub: &v2::NodeLocations) -> v1::NodeLocations {
    let v2::NodeLocations {
        control_plane,
        workers,
    } = hub;
    let down = |locations: &[v2::NodeLocation]| {
        locations
            .iter()
            .map(|location| {
                let v2::NodeLocation {
                    machine,
                    node,
                    zone: _,
                } = location;
                v1::NodeLocation {
                    machine: machine.clone(),
                    node: node.clone(),
                }
            })
            .collect()
    };
    v1::NodeLocations {
        control_plane: down(control_plane),
        workers: down(workers),
    }
}
