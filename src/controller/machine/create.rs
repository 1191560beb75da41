//! Creating the VM: template, target node, VMID, then the clone — with the VMID written
//! to `spec.virtualMachineID` *before* the clone is requested. After a crash anywhere in
//! between, the next pass finds either nothing under that id (the clone never happened
//! or failed and was cleaned up: clone again), a clone in progress (wait), our VM (adopt
//! it), or someone else's VM (forget the id, choose another). A second VM is never made.
//!
//! Everything the choice needs comes from one `GET /cluster/resources` (templates by tag,
//! used VMIDs, node memory and VM sizes) instead of upstream's per-node and per-VMID
//! calls; it is only read when the spec needs it.

use std::collections::{BTreeMap, BTreeSet};

use super::phase::Phase;
use super::tasks::TaskEnd;
use super::vm::Located;
use super::{Failure, Flow, Pass, Step};
use crate::api::common::LocalObjectReference;
use crate::api::v1alpha2::{
    ClonedTemplate, NodeLocation, NodeLocations, ProxmoxCluster, ProxmoxMachine, ProxmoxMachineSpec,
};
use crate::controller::action::Action;
use crate::controller::devices;
use crate::controller::failure_domains;
use crate::controller::names::DEFAULT_ZONE;
use crate::controller::placements::{Group, Hold};
use crate::controller::scheduler::{self, NodeCapacity, NodeCpus};
use crate::controller::seams::{InfraStore, Management, StoreError};
use crate::controller::template::{SourceError, TemplateRef, TemplateSource};
use crate::management::types::CLUSTER_NAME_LABEL;
use crate::proxmox::ErrorKind;
use crate::proxmox::types::{CloneRequest, ClusterResource};

/// Where and from what the VM is cloned.
struct ClonePlan {
    template: TemplateRef,
    target: String,
    /// The release that named the template: its name and version.
    release: Option<(String, String)>,
}

const MIB: u64 = 1 << 20;

impl<S: InfraStore, M: Management> Pass<'_, S, M> {
    /// Phase `Cloning`: make sure the VM exists and is configured.
    pub(super) async fn step_cloning(&mut self) -> Step {
        let Some(vmid) = self.vmid()? else {
            return self.create_vm().await;
        };
        match self.locate(vmid).await? {
            Located::Ours { node, config } => {
                self.h.status.proxmox_node = Some(node.clone());
                self.vm = Some(config.clone());
                // CAPI matches the Node by this id; set as soon as the VM exists.
                if let Some(uuid) = super::bootstrap::smbios_uuid(&config) {
                    let id = format!("proxmox://{uuid}");
                    self.h
                        .write_spec(&self.r.store, |o| o.spec.provider_id = id)
                        .await?;
                }
                self.configure(node, vmid, config).await
            }
            Located::Cloning => Ok(Flow::Wait(Action::Requeue(self.r.config.poll))),
            Located::Foreign => {
                tracing::info!(machine = %self.h.name(), vmid, "VMID taken by another VM; choosing another");
                self.forget_vmid().await?;
                Ok(Flow::Next(Phase::Cloning))
            }
            Located::Absent => {
                let mut resources = None;
                let plan = self.plan_clone(&mut resources).await?;
                self.clone_vm(vmid, plan).await
            }
        }
    }

    /// Chooses everything, records the VMID, then clones.
    async fn create_vm(&mut self) -> Step {
        let mut resources = None;
        let plan = self.plan_clone(&mut resources).await?;
        let vmid = self.choose_vmid(&mut resources).await?;
        // Claims do not depend on the VM: creating them now lets IPAM work meanwhile.
        self.ensure_claims().await?;
        let recorded = self
            .h
            .write_spec(&self.r.store, |o| {
                o.spec.virtual_machine_id = Some(i64::from(vmid))
            })
            .await?;
        if !recorded {
            return Ok(Flow::Wait(Action::AwaitChange));
        }
        self.clone_vm(vmid, plan).await
    }

    /// Issues the clone of `plan` onto `vmid` and waits for it briefly.
    async fn clone_vm(&mut self, vmid: u32, plan: ClonePlan) -> Step {
        let spec = &self.h.obj.spec;
        let request = CloneRequest {
            newid: vmid,
            name: Some(self.h.name().to_string()),
            description: spec.description.clone(),
            pool: spec.pool.clone(),
            snapname: spec.snap_name.clone(),
            storage: spec.storage.clone(),
            format: spec.format.clone(),
            // Left out for linked clones, as upstream: PVE then links a template and
            // copies anything else.
            full: (spec.full != Some(false)).then_some(true),
            target: (plan.target != plan.template.node).then(|| plan.target.clone()),
            bwlimit: None,
        };
        let client = self.client().await?;
        let upid = match client
            .clone_vm(&plan.template.node, plan.template.vmid, &request)
            .await
        {
            Ok(upid) => upid,
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                // Someone cloned onto this id first: maybe this machine itself (an earlier
                // pass whose answer was lost, or a replica that led a moment ago). Ours is
                // adopted; only someone else's VM makes us choose another id.
                if matches!(self.locate(vmid).await?, Located::Foreign | Located::Absent) {
                    self.forget_vmid().await?;
                }
                return Ok(Flow::Next(Phase::Cloning));
            }
            Err(e) => return Err(e.into()),
        };
        self.h.status.proxmox_node = Some(plan.target.clone());
        let (kubernetes_release, kubernetes_version) = plan.release.unzip();
        self.h.status.template = Some(ClonedTemplate {
            source_node: plan.template.node.clone(),
            template_id: i64::from(plan.template.vmid),
            kubernetes_release,
            kubernetes_version,
        });
        self.record_location(Some(plan.target)).await?;
        match self.await_task(upid).await? {
            // Loop into Cloning again: locate the new VM and configure it.
            TaskEnd::Done => Ok(Flow::Next(Phase::Cloning)),
            TaskEnd::Pending(action) => Ok(Flow::Wait(action)),
            TaskEnd::Failed(text) => Err(self.task_failed("clone", &text)),
        }
    }

    /// Drops a VMID that turned out to belong to someone else.
    async fn forget_vmid(&mut self) -> Result<(), Failure> {
        self.r.reserve_vmid(self.h.uid(), None);
        self.h.status.proxmox_node = None;
        self.vm = None;
        self.h
            .write_spec(&self.r.store, |o| o.spec.virtual_machine_id = None)
            .await?;
        Ok(())
    }

    pub(super) async fn resources<'r>(
        &mut self,
        cache: &'r mut Option<Vec<ClusterResource>>,
    ) -> Result<&'r [ClusterResource], Failure> {
        if cache.is_none() {
            let client = self.client().await?;
            *cache = Some(client.cluster_resources(None).await?);
        }
        Ok(cache.as_deref().unwrap_or_default())
    }

    /// The template and the target node.
    async fn plan_clone(
        &mut self,
        cache: &mut Option<Vec<ClusterResource>>,
    ) -> Result<ClonePlan, Failure> {
        let spec = self.h.obj.spec.clone();
        let mut release = None;
        let copies = if let Some(reference) = &spec.kubernetes_release {
            let found = self.release_templates(reference, cache).await?;
            release = Some((found.name, found.version));
            found.copies
        } else {
            self.spec_templates(&spec, cache).await?
        };
        let allowed = if spec.allowed_nodes.is_empty() {
            self.pc.spec.allowed_nodes.clone()
        } else {
            spec.allowed_nodes.clone()
        };
        let mut allowed = failure_domains::confine(
            self.failure_domain(),
            &self.pc.spec.failure_domains,
            allowed,
            self.pc.metadata.name.as_deref().unwrap_or_default(),
        )
        .map_err(|message| Failure::Blocked(message, self.r.config.blocked_retry))?;
        if let [template] = copies.as_slice() {
            // One template: cloned onto the node the scheduler picks (shared storage), or
            // on its own node when no nodes are allowed.
            let target = if allowed.is_empty() {
                self.with_devices(vec![template.node.clone()], cache)
                    .await?;
                template.node.clone()
            } else {
                let allowed = self.with_devices(allowed, cache).await?;
                self.schedule(&allowed, template.vmid, cache).await?
            };
            return Ok(ClonePlan {
                template: template.clone(),
                target,
                release,
            });
        }
        // Copies per node: clone from the copy on the node the scheduler chose, never
        // across nodes (a local-storage template cannot be cloned elsewhere).
        if allowed.is_empty() {
            allowed = copies.iter().map(|t| t.node.clone()).collect();
        }
        let allowed = self.with_devices(allowed, cache).await?;
        let copy_on = |node: &str| copies.iter().find(|t| t.node == node).cloned();
        let first = copies.first().map_or(0, |t| t.vmid);
        let chosen = self.schedule(&allowed, first, cache).await?;
        if let Some(template) = copy_on(&chosen) {
            return Ok(ClonePlan {
                template,
                target: chosen,
                release,
            });
        }
        let with_copy: Vec<String> = allowed
            .iter()
            .filter(|n| copy_on(n).is_some())
            .cloned()
            .collect();
        let holders: Vec<&str> = copies.iter().map(|t| t.node.as_str()).collect();
        if with_copy.is_empty() {
            return Err(Failure::Blocked(
                format!(
                    "no allowed node ({}) has a copy of the template; copies are on {}",
                    allowed.join(", "),
                    holders.join(", ")
                ),
                self.r.config.blocked_retry,
            ));
        }
        let target = self.schedule(&with_copy, first, cache).await?;
        // Shown while the clone runs.
        let message = format!(
            "{chosen} has no copy of the template (copies on {}); cloned on {target}",
            holders.join(", ")
        );
        self.h.set_message(&message, self.now);
        let template = copy_on(&target).expect("scheduled among the nodes with a copy");
        Ok(ClonePlan {
            template,
            target,
            release,
        })
    }

    /// The template the spec names: by tags, or by VMID on its node.
    async fn spec_templates(
        &mut self,
        spec: &ProxmoxMachineSpec,
        cache: &mut Option<Vec<ClusterResource>>,
    ) -> Result<Vec<TemplateRef>, Failure> {
        let source = TemplateSource::of(
            spec.template_selector.as_ref(),
            spec.template_id,
            spec.source_node.as_deref(),
        )
        .ok_or_else(|| {
            Failure::Terminal(
                "must define either a SourceNode with a TemplateID, a TemplateSelector or a \
                 kubernetesRelease"
                    .into(),
            )
        })?;
        let resources = if source.needs_listing() {
            self.resources(cache).await?
        } else {
            &[]
        };
        source.templates(resources).map_err(|e| match e {
            SourceError::Invalid(message) => Failure::Terminal(message),
            SourceError::NotFound(e) => {
                Failure::Blocked(e.to_string(), self.r.config.blocked_retry)
            }
        })
    }

    /// The `candidates` that can give the machine the PCI devices it wants ([`devices`]):
    /// free devices of its mappings, and its raw addresses present and free; all of them
    /// when it wants none; blocked, naming the mapping or address and what each node has,
    /// when there is none.
    async fn with_devices(
        &mut self,
        candidates: Vec<String>,
        cache: &mut Option<Vec<ClusterResource>>,
    ) -> Result<Vec<String>, Failure> {
        let spec_devices = &self.h.obj.spec.pci_devices;
        let (wanted, addresses) = (
            devices::wanted(spec_devices),
            devices::wanted_addresses(spec_devices),
        );
        if wanted.is_empty() && addresses.is_empty() {
            return Ok(candidates);
        }
        let blocked = |message| Failure::Blocked(message, self.r.config.blocked_retry);
        let client = self.client().await?;
        let (visible, configs) = self.hostpci_options(&candidates, cache).await?;
        let mut candidates = candidates;
        if !wanted.is_empty() {
            let provided = devices::provided(&client.pci_mappings().await?);
            let mut taken = self
                .placements()
                .devices(self.h.uid(), self.r.clock.now(), &visible);
            for (node, options) in &configs {
                for mapping in devices::mappings_in(options.iter().map(String::as_str)) {
                    *taken.entry((node.clone(), mapping)).or_insert(0) += 1;
                }
            }
            candidates = devices::nodes_with_devices(&candidates, &wanted, &provided, &taken)
                .map_err(blocked)?;
        }
        if !addresses.is_empty() {
            let mut present = BTreeMap::new();
            for node in &candidates {
                let found = client.node_pci_devices(node).await?;
                present.insert(node.clone(), found.into_iter().map(|d| d.id).collect());
            }
            let mut held = self
                .placements()
                .addresses(self.h.uid(), self.r.clock.now(), &visible);
            held.extend(configs.iter().flat_map(|(node, options)| {
                devices::addresses_in(options.iter().map(String::as_str))
                    .into_iter()
                    .map(|address| (node.clone(), address))
            }));
            candidates = devices::nodes_with_addresses(&candidates, &addresses, &present, &held)
                .map_err(blocked)?;
        }
        Ok(candidates)
    }

    /// The `hostpciN` options of every VM on the `nodes`, by node, and the (node, name) of
    /// every VM Proxmox shows (whose devices count by its config, not by its placement).
    async fn hostpci_options(
        &mut self,
        nodes: &[String],
        cache: &mut Option<Vec<ClusterResource>>,
    ) -> Result<(BTreeSet<(String, String)>, Vec<(String, Vec<String>)>), Failure> {
        let client = self.client().await?;
        let resources = self.resources(cache).await?;
        let vms = resources.iter().filter(|r| r.kind == "qemu" && !r.template);
        let visible = vms
            .clone()
            .filter_map(|r| Some((r.node.clone()?, r.name.clone()?)))
            .collect();
        let on_nodes: Vec<(String, u32)> = vms
            .filter_map(|r| Some((r.node.clone()?, r.vmid?)))
            .filter(|(node, _)| nodes.contains(node))
            .collect();
        let mut configs = Vec::new();
        for (node, vmid) in on_nodes {
            let config = match client.vm_config(&node, vmid).await {
                Ok(config) => config,
                // Gone since the listing: it holds nothing.
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(e.into()),
            };
            let options = config
                .0
                .iter()
                .filter(|(k, _)| k.starts_with("hostpci"))
                .filter_map(|(_, v)| v.as_str().map(str::to_owned))
                .collect();
            configs.push((node, options));
        }
        Ok((visible, configs))
    }

    /// The `allowed` nodes with the VM's CPUs left, when `cpuAdjustment` counts CPUs
    /// ([`scheduler::with_cpus`]), and the CPUs the VM takes (0 when they do not count): the
    /// spec's sockets × cores, the template's when the spec sets neither.
    async fn with_cpus(
        &mut self,
        allowed: &[String],
        template: u32,
        cache: &mut Option<Vec<ClusterResource>>,
    ) -> Result<(Vec<String>, u64), Failure> {
        let adjustment = self
            .pc
            .spec
            .scheduler_hints
            .as_ref()
            .and_then(|h| h.cpu_adjustment)
            .map_or(0, |a| u64::try_from(a).unwrap_or(0));
        if adjustment == 0 {
            return Ok((allowed.to_vec(), 0));
        }
        let resources = self.resources(cache).await?;
        let cpus_of = |r: &ClusterResource| r.maxcpu.map_or(0, |c| c.max(0.0).round() as u64);
        let positive = |v: Option<i32>| v.and_then(|v| u64::try_from(v).ok()).filter(|v| *v > 0);
        let spec = &self.h.obj.spec;
        let requested = match (positive(spec.num_sockets), positive(spec.num_cores)) {
            (None, None) => resources
                .iter()
                .find(|r| r.vmid == Some(template))
                .map_or(1, cpus_of)
                .max(1),
            (sockets, cores) => sockets.unwrap_or(1) * cores.unwrap_or(1),
        };
        // A VM Proxmox shows with its CPUs counts by them, not by its recent placement too.
        let visible: BTreeSet<(String, String)> = resources
            .iter()
            .filter(|r| r.kind == "qemu" && r.maxcpu.is_some())
            .filter_map(|r| Some((r.node.clone()?, r.name.clone()?)))
            .collect();
        let reserved = self
            .placements()
            .cpus(self.h.uid(), self.r.clock.now(), &visible);
        let nodes: Vec<NodeCpus> = allowed
            .iter()
            .map(|node| {
                let on_node = |r: &&ClusterResource| r.node.as_deref() == Some(node.as_str());
                let total = resources
                    .iter()
                    .filter(|r| r.kind == "node")
                    .find(on_node)
                    .map_or(0, cpus_of);
                let used: u64 = resources
                    .iter()
                    .filter(|r| (r.kind == "qemu" && !r.template) || r.kind == "lxc")
                    .filter(on_node)
                    .map(cpus_of)
                    .sum::<u64>()
                    + reserved.get(node).copied().unwrap_or(0);
                NodeCpus {
                    node: node.clone(),
                    available: scheduler::reservable(total, adjustment, used),
                }
            })
            .collect();
        scheduler::with_cpus(&nodes, requested)
            .map(|fitting| (fitting, requested))
            .map_err(|e| Failure::Blocked(e.to_string(), self.r.config.blocked_retry))
    }

    /// The machine's placement group: its cluster's control plane, or its workers.
    fn group(&self) -> Group {
        Group {
            namespace: self.ns(),
            cluster: self.cluster_name.clone(),
            control_plane: self.machine.as_ref().is_some_and(|m| m.is_control_plane()),
        }
    }

    /// CPU- and memory-aware placement over the allowed nodes (see [`scheduler`]); `template`
    /// is the VMID of the template cloned (its CPUs when the spec sets none).
    async fn schedule(
        &mut self,
        allowed: &[String],
        template: u32,
        cache: &mut Option<Vec<ClusterResource>>,
    ) -> Result<String, Failure> {
        let (allowed, cpus) = self.with_cpus(allowed, template, cache).await?;
        let allowed = allowed.as_slice();
        let adjustment = self
            .pc
            .spec
            .scheduler_hints
            .as_ref()
            .and_then(|h| h.memory_adjustment)
            .map(|a| u64::try_from(a).unwrap_or(0))
            .unwrap_or(scheduler::DEFAULT_ADJUSTMENT);
        let nodes: Vec<NodeCapacity> = if adjustment == 0 {
            allowed
                .iter()
                .map(|n| NodeCapacity {
                    node: n.clone(),
                    available: None,
                })
                .collect()
        } else {
            let resources = self.resources(cache).await?;
            allowed
                .iter()
                .map(|node| {
                    let total = resources
                        .iter()
                        .find(|r| r.kind == "node" && r.node.as_deref() == Some(node))
                        .and_then(|r| r.maxmem)
                        .unwrap_or(0);
                    let used: u64 = resources
                        .iter()
                        .filter(|r| (r.kind == "qemu" && !r.template) || r.kind == "lxc")
                        .filter(|r| r.node.as_deref() == Some(node))
                        .filter_map(|r| r.maxmem)
                        .sum();
                    NodeCapacity {
                        node: node.clone(),
                        available: Some(scheduler::reservable(total, adjustment, used)),
                    }
                })
                .collect()
        };
        let requested = self
            .h
            .obj
            .spec
            .memory_mib
            .and_then(|m| u64::try_from(m).ok())
            .unwrap_or(0)
            * MIB;
        let group = self.group();
        let recorded: Vec<(String, String)> = self
            .pc
            .status
            .node_locations
            .as_ref()
            .map(|recorded| {
                let list = if group.control_plane {
                    &recorded.control_plane
                } else {
                    &recorded.workers
                };
                list.iter()
                    .map(|l| (l.machine.name.clone(), l.node.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let hold = Hold {
            bytes: requested,
            cpus,
            mappings: devices::wanted(&self.h.obj.spec.pci_devices)
                .into_iter()
                .flat_map(|(mapping, n)| std::iter::repeat_n(mapping, n))
                .collect(),
            addresses: devices::wanted_addresses(&self.h.obj.spec.pci_devices),
        };
        let name = self.h.name();
        let blocked_retry = self.r.config.blocked_retry;
        let now = self.r.clock.now();
        self.placements()
            .place(self.h.uid(), name, group, hold, now, |reserved| {
                let nodes: Vec<NodeCapacity> = nodes
                    .into_iter()
                    .map(|n| NodeCapacity {
                        available: n.available.map(|a| {
                            a.saturating_sub(reserved.bytes.get(&n.node).copied().unwrap_or(0))
                        }),
                        node: n.node,
                    })
                    .collect();
                // Node per machine of the group: placements not yet in the cluster's record,
                // and the record.
                let mut locations = reserved.machines;
                locations.extend(recorded);
                let mut placed = BTreeMap::new();
                for (_, node) in locations.iter().filter(|(m, _)| m.as_str() != name) {
                    *placed.entry(node.clone()).or_insert(0) += 1;
                }
                scheduler::pick_node(&nodes, requested, &placed)
                    .map_err(|e| Failure::Blocked(e.to_string(), blocked_retry))
            })
    }

    /// A VMID: the first free one of `vmIDRange`, else Proxmox's next free id. Ids that
    /// other machines recorded or that concurrent passes of this process hold are
    /// skipped (an id past Proxmox's suggestion is checked to be free), so parallel
    /// creations do not race for the same id.
    async fn choose_vmid(
        &mut self,
        cache: &mut Option<Vec<ClusterResource>>,
    ) -> Result<u32, Failure> {
        let labels = BTreeMap::from([(CLUSTER_NAME_LABEL.to_string(), self.cluster_name.clone())]);
        let machines: Vec<ProxmoxMachine> = self.r.store.list(&self.ns(), &labels).await?;
        let recorded: BTreeSet<u32> = machines
            .iter()
            .filter(|m| m.metadata.uid != self.h.obj.metadata.uid)
            .filter_map(|m| m.spec.virtual_machine_id)
            .filter_map(|id| u32::try_from(id).ok())
            .collect();
        let uid = self.h.uid().to_string();
        // A failure domain's range wins: VMIDs are per Proxmox VE cluster.
        let domain_range = self.failure_domain().and_then(|name| {
            let domains = &self.pc.spec.failure_domains;
            domains.iter().find(|d| d.name == name)?.vm_id_range.clone()
        });
        if let Some(range) = domain_range.or_else(|| self.h.obj.spec.vm_id_range.clone()) {
            let resources = self.resources(cache).await?;
            let used: BTreeSet<u32> = resources.iter().filter_map(|r| r.vmid).collect();
            let (start, end) = (range.start.max(100), range.end.min(999_999_999));
            let candidates = (start..=end).filter_map(|id| u32::try_from(id).ok());
            return self
                .r
                .reserve_first(
                    &uid,
                    candidates.filter(|id| !used.contains(id) && !recorded.contains(id)),
                )
                .ok_or_else(|| {
                    Failure::Blocked(
                        "No free vmid found in vmIDRange".into(),
                        self.r.config.blocked_retry,
                    )
                });
        }
        let client = self.client().await?;
        let first = client.next_id().await?;
        let mut from = first;
        loop {
            // Reserving is atomic within the process, so concurrent passes never pick
            // the same id; an id past Proxmox's suggestion must still be checked.
            let id = self
                .r
                .reserve_first(
                    &uid,
                    (from..=999_999_999).filter(|id| !recorded.contains(id)),
                )
                .ok_or_else(|| {
                    Failure::Blocked("no free VMID".into(), self.r.config.blocked_retry)
                })?;
            if id == first || client.is_vmid_free(id).await? {
                return Ok(id);
            }
            from = id + 1;
        }
    }

    /// Records (or with `None` removes) this machine's node in the ProxmoxCluster's
    /// `status.nodeLocations`, retrying on write conflicts.
    pub(super) async fn record_location(&mut self, node: Option<String>) -> Result<(), Failure> {
        let control_plane = self.machine.as_ref().is_some_and(|m| m.is_control_plane());
        let name = self.name();
        let zone = self.zone();
        for _ in 0..5 {
            let mut pc = self.pc.clone();
            let changed = set_location(&mut pc, &name, node.as_deref(), control_plane, &zone);
            if !changed {
                return Ok(());
            }
            match self.r.store.update_status(&pc).await {
                Ok(stored) => {
                    self.pc = stored;
                    return Ok(());
                }
                Err(StoreError::Conflict(_)) => {
                    let ns = self.ns();
                    let pc_name = self.pc.metadata.name.clone().unwrap_or_default();
                    match self.r.store.get::<ProxmoxCluster>(&ns, &pc_name).await? {
                        Some(fresh) => self.pc = fresh,
                        None => return Ok(()),
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(Failure::Error(
            StoreError::Conflict("ProxmoxCluster node locations".into()).into(),
        ))
    }
}

/// Puts the machine into (or removes it from) the node locations; true if changed.
fn set_location(
    pc: &mut ProxmoxCluster,
    machine: &str,
    node: Option<&str>,
    control_plane: bool,
    zone: &str,
) -> bool {
    let locations = pc
        .status
        .node_locations
        .get_or_insert_with(NodeLocations::default);
    let before = locations.clone();
    for list in [&mut locations.control_plane, &mut locations.workers] {
        list.retain(|l| l.machine.name != machine);
    }
    if let Some(node) = node {
        let list = if control_plane {
            &mut locations.control_plane
        } else {
            &mut locations.workers
        };
        list.push(NodeLocation {
            machine: LocalObjectReference {
                name: machine.to_string(),
            },
            node: node.to_string(),
            zone: (zone != DEFAULT_ZONE).then(|| zone.to_string()),
        });
    }
    let changed = *locations != before;
    if *locations == NodeLocations::default() {
        pc.status.node_locations = None;
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_locations_move_and_disappear() {
        let mut pc = ProxmoxCluster::default();
        assert!(set_location(&mut pc, "m1", Some("pve1"), false, "default"));
        assert!(!set_location(&mut pc, "m1", Some("pve1"), false, "default"));
        assert!(set_location(&mut pc, "m2", Some("pve2"), true, "zone-a"));
        let l = pc.status.node_locations.clone().expect("locations");
        assert_eq!(l.workers[0].node, "pve1");
        assert_eq!(l.control_plane[0].zone.as_deref(), Some("zone-a"));
        assert!(set_location(&mut pc, "m1", None, false, "default"));
        assert!(set_location(&mut pc, "m2", None, true, "default"));
        assert_eq!(pc.status.node_locations, None);
    }
}
