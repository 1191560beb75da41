//! Every client call against the simulator.

use capmox_apiserver::proxmox::propstring::SizeChange;
use capmox_apiserver::proxmox::types::{
    CloneRequest, ConfigUpdate, DeleteOptions, PowerAction, PowerState, ResourceType, TaskOutcome,
};
use capmox_apiserver::proxmox::{Client, Error, ErrorKind};

use super::{assert_api_error, clone_9000, ok, start_default};

#[tokio::test]
async fn version_cluster_and_nodes() {
    let (_pve, client) = start_default().await;
    let version = client.version().await.expect("version");
    assert_eq!(version.version, "9.0.10");
    assert_eq!(version.release.as_deref(), Some("9.0"));

    let status = client.cluster_status().await.expect("cluster status");
    let cluster = status
        .iter()
        .find(|e| e.kind == "cluster")
        .expect("cluster entry");
    assert_eq!(cluster.nodes, Some(3));
    assert_eq!(cluster.quorate, Some(true));
    let nodes: Vec<_> = status.iter().filter(|e| e.kind == "node").collect();
    assert_eq!(nodes.len(), 3);
    assert!(nodes.iter().all(|n| n.online == Some(true)));

    let listed = client.nodes().await.expect("nodes");
    assert_eq!(listed.len(), 3);
    assert!(listed.iter().all(|n| n.ssl_fingerprint.is_some()));

    let pve1 = client.node_status("pve1").await.expect("node status");
    assert_eq!(pve1.cpuinfo.cpus, Some(16));
    assert_eq!(pve1.memory.total, Some(64 << 30));
    assert_eq!(pve1.loadavg.len(), 3);
    assert!(pve1.cpuinfo.mhz.is_some_and(|m| m > 1000.0));
}

#[tokio::test]
async fn resources_filter_by_type_and_find_tagged_templates() {
    let (_pve, client) = start_default().await;
    let vms = client
        .cluster_resources(Some(ResourceType::Vm))
        .await
        .expect("vm resources");
    assert!(vms.iter().all(|r| r.kind == "qemu"));
    let kube: Vec<_> = vms
        .iter()
        .filter(|r| r.template && r.tag_list().contains(&"kube-v1.31".to_string()))
        .collect();
    assert_eq!(kube.len(), 1);
    assert_eq!(kube[0].vmid, Some(9000));
    assert_eq!(kube[0].node.as_deref(), Some("pve1"));

    let storages = client
        .cluster_resources(Some(ResourceType::Storage))
        .await
        .expect("storage resources");
    assert!(
        storages
            .iter()
            .any(|s| s.storage.as_deref() == Some("ceph") && s.shared == Some(true))
    );
    let nodes = client
        .cluster_resources(Some(ResourceType::Node))
        .await
        .expect("node resources");
    assert_eq!(nodes.len(), 3);
    assert!(
        client
            .cluster_resources(Some(ResourceType::Sdn))
            .await
            .expect("sdn")
            .is_empty()
    );
    let all = client.cluster_resources(None).await.expect("all");
    assert!(all.iter().any(|r| r.kind == "pool"));
}

#[tokio::test]
async fn next_id_and_vmid_probe() {
    let (_pve, client) = start_default().await;
    assert_eq!(client.next_id().await.expect("nextid"), 100);
    assert!(client.is_vmid_free(100).await.expect("probe"));
    assert!(!client.is_vmid_free(9000).await.expect("probe"));
    let err = client.is_vmid_free(5).await.expect_err("below range");
    assert_eq!(err.kind(), ErrorKind::InvalidParameter);
    clone_9000(&client, 100).await;
    assert_eq!(client.next_id().await.expect("nextid"), 101);
}

#[tokio::test]
async fn vm_list_status_and_config() {
    let (_pve, client) = start_default().await;
    let vms = client.list_vms("pve1").await.expect("list");
    let tpl = vms
        .iter()
        .find(|v| v.vmid == 9000)
        .expect("template listed");
    assert!(tpl.template);
    assert_eq!(tpl.maxmem, Some(2048 << 20));
    assert_eq!(tpl.maxdisk, Some(10 << 30));

    let status = client.vm_status("pve1", 9000).await.expect("status");
    assert_eq!(status.power_state(), PowerState::Stopped);
    assert!(status.agent);

    let config = client.vm_config("pve1", 9000).await.expect("config");
    assert!(config.is_template());
    assert_eq!(config.memory_mib(), 2048);
    assert_eq!(config.tags(), vec!["capmox", "kube-v1.31", "ubuntu"]);
    assert!(
        config.nets()[&0]
            .mac
            .as_deref()
            .is_some_and(|m| m.starts_with("BC:24:11:"))
    );
    assert!(config.digest().is_some_and(|d| d.len() == 40));

    assert!(
        client
            .list_containers("pve1")
            .await
            .expect("lxc")
            .is_empty()
    );

    let wrong_node = client
        .vm_status("pve2", 9000)
        .await
        .expect_err("wrong node");
    assert_eq!(wrong_node.kind(), ErrorKind::NotFound);
}

#[tokio::test]
async fn config_set_async_sync_and_pending_on_running_vm() {
    let (_pve, client) = start_default().await;
    clone_9000(&client, 101).await;
    let before = client.vm_config("pve1", 101).await.expect("config");
    let upid = client
        .update_vm_config(
            "pve1",
            101,
            &ConfigUpdate::new()
                .set("cores", 4)
                .set("memory", 4096)
                .set("tags", "Capmox;b a")
                .set("net1", "virtio,bridge=vmbr0")
                .digest(before.digest().expect("digest")),
        )
        .await
        .expect("config POST");
    assert_eq!(upid.task_type(), "qmconfig");
    assert_eq!(upid.id(), "101");
    ok(&client, &upid).await;
    let after = client.vm_config("pve1", 101).await.expect("config");
    assert_eq!(after.cores(), 4);
    assert_eq!(after.memory_mib(), 4096);
    assert_eq!(after.get("tags").as_deref(), Some("a;b;capmox"));
    let mac1 = after.nets()[&1]
        .mac
        .clone()
        .expect("MAC generated for net1");
    assert!(mac1.starts_with("BC:24:11:"));

    // A stale digest is refused.
    let stale = client
        .update_vm_config_sync(
            "pve1",
            101,
            &ConfigUpdate::new()
                .set("cores", 2)
                .digest(before.digest().expect("digest")),
        )
        .await
        .expect_err("stale digest");
    assert!(stale.to_string().contains("checksum mismatch"));

    // PUT applies in-request.
    client
        .update_vm_config_sync(
            "pve1",
            101,
            &ConfigUpdate::new()
                .set("description", "hello")
                .delete("net1"),
        )
        .await
        .expect("config PUT");
    let after = client.vm_config("pve1", 101).await.expect("config");
    assert_eq!(after.description().as_deref(), Some("hello\n"));
    assert!(after.get("net1").is_none());

    // On a running VM, cores become pending; name applies at once.
    ok(&client, &client.start_vm("pve1", 101).await.expect("start")).await;
    ok(
        &client,
        &client
            .update_vm_config(
                "pve1",
                101,
                &ConfigUpdate::new().set("cores", 8).set("name", "renamed"),
            )
            .await
            .expect("config POST"),
    )
    .await;
    let current = client
        .vm_config_current("pve1", 101)
        .await
        .expect("current");
    let pending = client.vm_config("pve1", 101).await.expect("with pending");
    assert_eq!(current.cores(), 4);
    assert_eq!(pending.cores(), 8);
    assert_eq!(current.name().as_deref(), Some("renamed"));
    // Pending changes apply at the next start.
    ok(&client, &client.stop_vm("pve1", 101).await.expect("stop")).await;
    ok(&client, &client.start_vm("pve1", 101).await.expect("start")).await;
    assert_eq!(
        client
            .vm_config_current("pve1", 101)
            .await
            .expect("current")
            .cores(),
        8
    );
}

#[tokio::test]
async fn config_validation_errors() {
    let (_pve, client) = start_default().await;
    clone_9000(&client, 102).await;
    let cases = [
        (ConfigUpdate::new().set("memory", 8), "memory"),
        (ConfigUpdate::new().set("tags", "a:b"), "tags"),
        (ConfigUpdate::new().set("net0", "bogus"), "net0"),
        (ConfigUpdate::new().set("boot", "order=scsi0;ide0"), "boot"),
        (ConfigUpdate::new().set("bogus", "1"), "bogus"),
    ];
    for (update, param) in cases {
        let err = client
            .update_vm_config("pve1", 102, &update)
            .await
            .expect_err("invalid");
        assert_eq!(err.kind(), ErrorKind::InvalidParameter, "{param}: {err}");
        assert!(
            err.api().is_some_and(|a| a.errors.contains_key(param)),
            "{param}: {err}"
        );
    }
    let missing_iso = client
        .update_vm_config(
            "pve1",
            102,
            &ConfigUpdate::new().set("ide0", "local:iso/nope.iso,media=cdrom"),
        )
        .await
        .expect_err("missing ISO");
    assert!(missing_iso.to_string().contains("does not exist"));
}

/// Resizes `scsi0`, waits for the task and returns the new size.
async fn resize_scsi0(client: &Client, vmid: u32, change: SizeChange) -> Result<u64, Error> {
    let upid = client
        .resize_disk("pve1", vmid, "scsi0", change)
        .await?
        .expect("PVE 8+ returns a task");
    client.wait_task(&upid, super::quick()).await?;
    Ok(client
        .vm_config("pve1", vmid)
        .await?
        .drive_size("scsi0")
        .unwrap_or(0))
}

#[tokio::test]
async fn clone_placeholder_resize_and_delete() {
    let (_pve, client) = start_default().await;
    let upid = client
        .clone_vm(
            "pve1",
            9000,
            &CloneRequest {
                newid: 103,
                name: Some("worker-1".into()),
                pool: Some("capi".into()),
                full: Some(true),
                ..CloneRequest::default()
            },
        )
        .await
        .expect("clone");
    assert_eq!(upid.task_type(), "qmclone");
    assert_eq!(upid.id(), "9000", "qmclone's id is the source");
    assert_eq!(upid.user(), "capmox@pve!capi");
    let status = ok(&client, &upid).await;
    assert_eq!(status.tokenid.as_deref(), Some("capi"));
    let log = client.task_log(&upid, 0, 50).await.expect("log");
    assert!(
        log.lines
            .iter()
            .any(|l| l.t.starts_with("create full clone of drive scsi0"))
    );
    assert_eq!(log.lines.last().map(|l| l.t.as_str()), Some("TASK OK"));
    assert_eq!(log.total, log.lines.len() as u64);

    let config = client.vm_config("pve1", 103).await.expect("clone config");
    assert!(!config.is_template());
    assert_eq!(config.name().as_deref(), Some("worker-1"));
    assert_eq!(
        config.tags(),
        vec!["capmox", "kube-v1.31", "ubuntu"],
        "tags are copied"
    );
    let tpl = client.vm_config("pve1", 9000).await.expect("template");
    assert_ne!(config.nets()[&0].mac, tpl.nets()[&0].mac, "new MAC");
    assert_ne!(config.smbios_uuid(), tpl.smbios_uuid(), "new uuid");
    assert_eq!(
        config.drive("scsi0").map(|d| d.volume),
        Some("local-lvm:vm-103-disk-0".into())
    );
    let resources = client
        .cluster_resources(Some(ResourceType::Vm))
        .await
        .expect("resources");
    let entry = resources
        .iter()
        .find(|r| r.vmid == Some(103))
        .expect("listed");
    assert_eq!(entry.pool.as_deref(), Some("capi"));

    let size = |change| resize_scsi0(&client, 103, change);
    assert_eq!(
        size(SizeChange::parse("32G").expect("size"))
            .await
            .expect("set"),
        32 << 30
    );
    assert_eq!(
        size(SizeChange::Grow(1 << 30)).await.expect("grow"),
        33 << 30
    );
    let err = size(SizeChange::Absolute(1 << 30))
        .await
        .expect_err("shrink fails");
    assert!(err.to_string().contains("shrinking disks is not supported"));

    let upid = client
        .delete_vm("pve1", 103, DeleteOptions::default())
        .await
        .expect("delete");
    ok(&client, &upid).await;
    assert!(client.is_vmid_free(103).await.expect("probe"));
    let content = client
        .storage_content("pve1", "local-lvm", Some("images"))
        .await
        .expect("content");
    assert!(content.iter().all(|c| c.vmid != Some(103)), "disks freed");
}

#[tokio::test]
async fn linked_clone_of_template_and_cross_node_clone_on_shared_storage() {
    let (_pve, client) = start_default().await;
    let linked = client
        .clone_vm(
            "pve1",
            9000,
            &CloneRequest {
                newid: 104,
                ..CloneRequest::default()
            },
        )
        .await
        .expect("linked clone");
    ok(&client, &linked).await;
    let disk = client
        .vm_config("pve1", 104)
        .await
        .expect("config")
        .drive("scsi0")
        .expect("disk");
    // LVM-thin names the thin snapshot plainly; only ZFS and RBD prefix the base.
    assert_eq!(disk.volume, "local-lvm:vm-104-disk-0");

    // 9001 lives on shared ceph: it may be cloned to another node.
    let moved = client
        .clone_vm(
            "pve2",
            9001,
            &CloneRequest {
                newid: 105,
                full: Some(true),
                target: Some("pve3".into()),
                ..CloneRequest::default()
            },
        )
        .await
        .expect("clone to pve3");
    ok(&client, &moved).await;
    assert!(client.vm_status("pve3", 105).await.is_ok());
    let linked = client
        .clone_vm(
            "pve2",
            9001,
            &CloneRequest {
                newid: 107,
                ..CloneRequest::default()
            },
        )
        .await
        .expect("linked clone on RBD");
    ok(&client, &linked).await;
    let disk = client
        .vm_config("pve2", 107)
        .await
        .expect("config")
        .drive("scsi0");
    assert_eq!(
        disk.expect("disk").volume,
        "ceph:base-9001-disk-0/vm-107-disk-0"
    );
    // 9000 has a local disk: refused.
    let err = client
        .clone_vm(
            "pve1",
            9000,
            &CloneRequest {
                newid: 106,
                target: Some("pve2".into()),
                full: Some(true),
                ..CloneRequest::default()
            },
        )
        .await
        .expect_err("local disk");
    assert!(err.to_string().contains("VM uses local storage"));
    assert_eq!(err.kind(), ErrorKind::Rejected);
    // ... even onto a shared target storage: the source volumes decide.
    let err = client
        .clone_vm(
            "pve1",
            9000,
            &CloneRequest {
                newid: 106,
                target: Some("pve2".into()),
                full: Some(true),
                storage: Some("ceph".into()),
                ..CloneRequest::default()
            },
        )
        .await
        .expect_err("local disk, shared target storage");
    assert!(
        err.to_string()
            .contains("can't clone VM to node 'pve2' (VM uses local storage)")
    );
}

#[tokio::test]
async fn every_power_action() {
    let (_pve, client) = start_default().await;
    clone_9000(&client, 107).await;
    let state = |client: &capmox_apiserver::proxmox::Client| {
        let client = client.clone();
        async move {
            client
                .vm_status("pve1", 107)
                .await
                .expect("status")
                .power_state()
        }
    };
    // Stopped VMs refuse reboot/reset/resume synchronously.
    for action in [PowerAction::Reboot, PowerAction::Reset, PowerAction::Resume] {
        let err = client
            .vm_power("pve1", 107, action)
            .await
            .expect_err("not running");
        assert_eq!(err.kind(), ErrorKind::VmNotRunning, "{action:?}");
    }
    ok(
        &client,
        &client
            .vm_power("pve1", 107, PowerAction::Start)
            .await
            .expect("start"),
    )
    .await;
    assert_eq!(state(&client).await, PowerState::Running);
    let again = client.start_vm("pve1", 107).await.expect("start task");
    let err = client
        .wait_task(&again, super::quick())
        .await
        .expect_err("already running");
    assert_eq!(err.kind(), ErrorKind::TaskFailed);
    assert!(err.to_string().contains("already running"));
    ok(
        &client,
        &client
            .vm_power("pve1", 107, PowerAction::Suspend)
            .await
            .expect("suspend"),
    )
    .await;
    assert_eq!(state(&client).await, PowerState::Paused);
    let err = client.shutdown_vm("pve1", 107).await.expect_err("paused");
    assert!(err.to_string().contains("VM is paused - cannot shutdown"));
    ok(
        &client,
        &client.resume_vm("pve1", 107).await.expect("resume"),
    )
    .await;
    assert_eq!(state(&client).await, PowerState::Running);
    ok(
        &client,
        &client
            .vm_power("pve1", 107, PowerAction::Reboot)
            .await
            .expect("reboot"),
    )
    .await;
    ok(
        &client,
        &client
            .vm_power("pve1", 107, PowerAction::Reset)
            .await
            .expect("reset"),
    )
    .await;
    assert_eq!(state(&client).await, PowerState::Running);
    ok(
        &client,
        &client.shutdown_vm("pve1", 107).await.expect("shutdown"),
    )
    .await;
    assert_eq!(state(&client).await, PowerState::Stopped);
    // Stop of a stopped VM is a successful no-op.
    ok(&client, &client.stop_vm("pve1", 107).await.expect("stop")).await;
    // Templates cannot start.
    let tpl = client.start_vm("pve1", 9000).await.expect("task");
    let err = client
        .wait_task(&tpl, super::quick())
        .await
        .expect_err("template");
    assert!(
        err.to_string()
            .contains("you can't start a vm if it's a template")
    );
}

#[tokio::test]
async fn running_vm_cannot_be_destroyed() {
    let (_pve, client) = start_default().await;
    clone_9000(&client, 108).await;
    ok(&client, &client.start_vm("pve1", 108).await.expect("start")).await;
    let err = client
        .delete_vm("pve1", 108, DeleteOptions::default())
        .await
        .expect_err("running");
    assert_api_error(
        &err,
        ErrorKind::VmRunning,
        "VM 108 is running - destroy failed",
    );
    ok(&client, &client.stop_vm("pve1", 108).await.expect("stop")).await;
    ok(
        &client,
        &client
            .delete_vm(
                "pve1",
                108,
                DeleteOptions {
                    purge: true,
                    ..DeleteOptions::default()
                },
            )
            .await
            .expect("delete"),
    )
    .await;
    let err = client.vm_config("pve1", 108).await.expect_err("gone");
    assert_eq!(err.kind(), ErrorKind::NotFound);
}

#[tokio::test]
async fn tasks_status_log_and_errors() {
    let (_pve, client) = start_default().await;
    clone_9000(&client, 109).await;
    let upid = client.start_vm("pve1", 109).await.expect("start");
    let status = ok(&client, &upid).await;
    assert_eq!(status.outcome(), Some(TaskOutcome::Ok));
    assert_eq!(status.node, "pve1");
    assert_eq!(status.task_type, "qmstart");
    let page = client.task_log(&upid, 0, 1).await.expect("log page");
    assert_eq!(page.lines.len(), 1);
    assert!(page.total >= 1);
    let bogus: capmox_apiserver::proxmox::Upid =
        "UPID:pve1:00000001:00000001:00000001:qmstart:109:root@pam:"
            .parse()
            .expect("upid");
    let err = client.task_status(&bogus).await.expect_err("no such task");
    assert_eq!(err.kind(), ErrorKind::NotFound);
}

#[tokio::test]
async fn storage_list_content_upload_info_delete() {
    let (_pve, client) = start_default().await;
    let all = client.storages("pve1", None).await.expect("storages");
    assert_eq!(all.len(), 4);
    let iso = client
        .storages("pve1", Some("iso"))
        .await
        .expect("iso storages");
    let names: Vec<_> = iso.iter().map(|s| s.storage.as_str()).collect();
    assert_eq!(names, ["local", "nfs-iso"]);
    assert!(
        iso.iter()
            .all(|s| s.supports("iso") && s.enabled && s.active)
    );

    let upid = client
        .upload(
            "pve2",
            "local",
            "iso",
            "hello world.iso",
            b"not an iso".to_vec(),
        )
        .await
        .expect("upload");
    assert_eq!(upid.node(), "pve2");
    assert_eq!(upid.task_type(), "imgcopy");
    assert_eq!(upid.id(), "");
    // Not a NoCloud seed, but any ISO is a fine upload: `TASK OK`, as on PVE.
    let status = ok(&client, &upid).await;
    assert_eq!(status.outcome(), Some(TaskOutcome::Ok));
    let content = client
        .storage_content("pve2", "local", Some("iso"))
        .await
        .expect("content");
    assert_eq!(content.len(), 1);
    assert_eq!(content[0].volid, "local:iso/hello_world.iso");
    assert_eq!(content[0].size, Some(10));
    // Local storage: pve1 does not see pve2's file.
    assert!(
        client
            .storage_content("pve1", "local", None)
            .await
            .expect("content")
            .is_empty()
    );
    let info = client
        .volume_info("pve2", "local", "local:iso/hello_world.iso")
        .await
        .expect("info");
    assert_eq!(info.size, Some(10));
    assert_eq!(
        info.path.as_deref(),
        Some("/var/lib/vz/template/iso/hello_world.iso")
    );

    let wrong = client
        .upload("pve1", "local-lvm", "iso", "a.iso", vec![1])
        .await
        .expect_err("block storage");
    assert!(
        wrong
            .to_string()
            .contains("can't upload to storage type 'lvmthin'")
    );
    let ext = client
        .upload("pve1", "local", "iso", "a.txt", vec![1])
        .await
        .expect_err("extension");
    assert!(ext.to_string().contains("wrong file extension"));

    let del = client
        .delete_volume("pve2", "local", "local:iso/hello_world.iso")
        .await
        .expect("delete");
    assert_eq!(del.task_type(), "imgdel");
    ok(&client, &del).await;
    let err = client
        .volume_info("pve2", "local", "local:iso/hello_world.iso")
        .await
        .expect_err("gone");
    assert_eq!(err.kind(), ErrorKind::NotFound);
}

#[tokio::test]
async fn agent_calls_follow_the_vm_life_cycle() {
    let (_pve, client) = start_default().await;
    clone_9000(&client, 110).await;
    let err = client.agent_ping("pve1", 110).await.expect_err("stopped");
    assert_eq!(err.kind(), ErrorKind::VmNotRunning);
    ok(&client, &client.start_vm("pve1", 110).await.expect("start")).await;
    client.agent_ping("pve1", 110).await.expect("ping");
    let os = client.agent_os_info("pve1", 110).await.expect("osinfo");
    assert_eq!(os.id.as_deref(), Some("ubuntu"));
    let ifaces = client
        .agent_network_interfaces("pve1", 110)
        .await
        .expect("interfaces");
    assert_eq!(ifaces[0].name, "lo");
    let eth0 = &ifaces[1];
    assert_eq!(eth0.name, "eth0");
    let v4: Vec<_> = eth0
        .ip_addresses
        .iter()
        .filter(|a| a.ip_address_type == "ipv4")
        .collect();
    assert_eq!(v4.len(), 1);
    assert!(
        v4[0].ip_address.starts_with("10.0.0."),
        "DHCP lease from vmbr0's range"
    );
    assert!(
        eth0.ip_addresses
            .iter()
            .any(|a| a.ip_address.starts_with("fe80::"))
    );

    let pid = client
        .agent_exec("pve1", 110, &["cloud-init", "status"], None)
        .await
        .expect("exec");
    let status = client
        .agent_exec_status("pve1", 110, pid)
        .await
        .expect("exec-status");
    assert!(status.exited);
    assert_eq!(status.exitcode, Some(0));
    assert_eq!(
        status.out_data.as_deref(),
        Some("status: disabled\n"),
        "no NoCloud seed attached"
    );
    let pid = client
        .agent_exec("pve1", 110, &["cat"], Some("piped"))
        .await
        .expect("exec");
    let status = client
        .agent_exec_status("pve1", 110, pid)
        .await
        .expect("exec-status");
    assert_eq!(status.out_data.as_deref(), Some("piped"));
    let pid = client
        .agent_exec("pve1", 110, &["nope"], None)
        .await
        .expect("exec");
    assert_eq!(
        client
            .agent_exec_status("pve1", 110, pid)
            .await
            .expect("status")
            .exitcode,
        Some(127)
    );

    // Without the agent configured the call is refused for good.
    ok(&client, &client.stop_vm("pve1", 110).await.expect("stop")).await;
    client
        .update_vm_config_sync("pve1", 110, &ConfigUpdate::new().delete("agent"))
        .await
        .expect("drop agent");
    ok(&client, &client.start_vm("pve1", 110).await.expect("start")).await;
    let err = client
        .agent_ping("pve1", 110)
        .await
        .expect_err("not configured");
    assert_eq!(err.kind(), ErrorKind::Rejected);
}

#[tokio::test]
async fn ha_resources_and_the_purge_they_need() {
    use capmox_apiserver::proxmox::types::{HaSettings, ha_sid};
    let (_pve, client) = start_default().await;
    clone_9000(&client, 120).await;
    let sid = ha_sid(120);
    let settings = super::register_ha(&client, 120).await;
    let listed = client.ha_resources().await.expect("list");
    assert_eq!(listed.len(), 1);
    assert!(
        listed[0].sid == "vm:120" && listed[0].matches(&settings),
        "{listed:?}"
    );
    let again = client
        .create_ha_resource(&sid, &settings)
        .await
        .expect_err("defined");
    assert!(
        again
            .to_string()
            .contains("resource ID 'vm:120' already defined"),
        "{again}"
    );
    let no_group = HaSettings {
        group: Some("nope".into()),
        ..settings.clone()
    };
    let err = client
        .update_ha_resource(&sid, &no_group)
        .await
        .expect_err("no such group");
    assert!(
        err.to_string().contains("group 'nope' does not exist"),
        "{err}"
    );
    let moved = HaSettings {
        max_restart: 4,
        ..settings.clone()
    };
    client
        .update_ha_resource(&sid, &moved)
        .await
        .expect("updated");
    assert!(client.ha_resources().await.expect("list")[0].matches(&moved));

    // Destroying the VM needs purge while it is an HA resource; purge removes both.
    let err = client
        .delete_vm("pve1", 120, DeleteOptions::default())
        .await
        .expect_err("in HA");
    assert!(
        err.to_string().contains(
            "unable to remove VM 120 - used in HA resources and purge parameter not set."
        ),
        "{err}"
    );
    let purge = DeleteOptions {
        purge: true,
        ..DeleteOptions::default()
    };
    ok(
        &client,
        &client.delete_vm("pve1", 120, purge).await.expect("delete"),
    )
    .await;
    assert!(client.ha_resources().await.expect("list").is_empty());
}

/// A new disk (`<storage>:<GiB>`) gets a fresh volume; a second creation on the drive
/// replaces it and PVE keeps the first as `unused0`. With the digest of the config it was
/// planned on, a repeated creation queued behind the first is refused inside its task and
/// nothing is allocated twice: what the controller's data disks rely on.
#[tokio::test]
async fn new_disks_and_the_digest_that_keeps_them_single() {
    use capmox_apiserver::proxmox::sim::{Profile, SimConfig};
    let (pve, client) = super::start(SimConfig {
        profile: Profile::Fast,
        ..SimConfig::default()
    })
    .await;
    clone_9000(&client, 130).await;
    let before = client.vm_config("pve1", 130).await.expect("config");
    let digest = before.digest().expect("digest");
    let create = ConfigUpdate::new()
        .set("scsi1", "local-lvm:4,discard=on")
        .digest(digest);
    let first = client
        .update_vm_config("pve1", 130, &create)
        .await
        .expect("first");
    let second = client
        .update_vm_config("pve1", 130, &create)
        .await
        .expect("queued behind the first");
    ok(&client, &first).await;
    let refused = client
        .wait_task(&second, super::quick())
        .await
        .expect_err("the config changed under it");
    assert!(
        refused.to_string().contains("checksum mismatch"),
        "{refused}"
    );
    let config = client.vm_config("pve1", 130).await.expect("config");
    assert_eq!(
        config.get("scsi1").as_deref(),
        Some("local-lvm:vm-130-disk-1,discard=on,size=4G")
    );
    assert_eq!(config.get("unused0"), None);

    // Without a digest the second creation goes through and the first disk is detached.
    let unguarded = ConfigUpdate::new().set("scsi1", "local-lvm:4");
    let upid = client
        .update_vm_config("pve1", 130, &unguarded)
        .await
        .expect("unguarded");
    ok(&client, &upid).await;
    let config = client.vm_config("pve1", 130).await.expect("config");
    assert_eq!(
        config.get("scsi1").as_deref(),
        Some("local-lvm:vm-130-disk-2,size=4G")
    );
    assert_eq!(
        config.get("unused0").as_deref(),
        Some("local-lvm:vm-130-disk-1")
    );
    // Block storages hold raw volumes only; a full storage fails the task.
    let qcow = ConfigUpdate::new().set("scsi2", "local-lvm:1,format=qcow2");
    let upid = client
        .update_vm_config("pve1", 130, &qcow)
        .await
        .expect("sent");
    let err = client
        .wait_task(&upid, super::quick())
        .await
        .expect_err("qcow2 on lvm-thin");
    assert!(
        err.to_string().contains("unsupported format 'qcow2'"),
        "{err}"
    );
    let huge = ConfigUpdate::new().set("scsi2", "local-lvm:100000");
    let upid = client
        .update_vm_config("pve1", 130, &huge)
        .await
        .expect("sent");
    let err = client
        .wait_task(&upid, super::quick())
        .await
        .expect_err("does not fit");
    assert!(err.to_string().contains("insufficient free space"), "{err}");
    assert_eq!(
        client
            .vm_config("pve1", 130)
            .await
            .expect("config")
            .get("scsi2"),
        None
    );
    drop(pve);
}

/// A fenced client (the controller's, checked against its lease) sends reads, and refuses
/// writes the fence refuses without sending them: the simulator sees nothing and no VM
/// appears; once the fence allows, the same write goes through.
#[tokio::test]
async fn a_fenced_client_sends_no_write_the_fence_refuses() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use capmox_apiserver::proxmox::client::WriteFence;

    let (pve, client) = start_default().await;
    let leading = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&leading);
    let fenced = client.fenced(WriteFence::new(move || {
        if flag.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err("not the leader".into())
        }
    }));
    fenced.version().await.expect("reads pass the fence");
    let sent = fenced.requests_sent();
    let refused = super::start_clone(&fenced, 140).await.expect_err("refused");
    assert!(matches!(refused, Error::Fenced { .. }), "{refused:?}");
    assert_eq!(refused.kind(), ErrorKind::Transient);
    assert!(
        refused.to_string().contains("not sent: not the leader"),
        "{refused}"
    );
    assert_eq!(
        fenced.requests_sent(),
        sent + 1,
        "admitted by the limiter, then held"
    );
    let vms = pve.control().with_world(|w| w.vms.contains_key(&140));
    assert!(!vms, "no VM from a refused write");

    leading.store(true, Ordering::SeqCst);
    clone_9000(&fenced, 140).await;
    assert!(pve.control().with_world(|w| w.vms.contains_key(&140)));
}
