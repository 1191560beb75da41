//! The whole CAPMOX life cycle against the simulator, in the order the controller will
//! call it: template lookup, VMID probe, clone, configure, resize, NoCloud upload and
//! attach, power on, guest agent and cloud-init, addresses, ISO cleanup, delete.

use capmox_apiserver::proxmox::nocloud::{NoCloud, write_iso};
use capmox_apiserver::proxmox::propstring::SizeChange;
use capmox_apiserver::proxmox::sim::{CloudInitResult, SimConfig};
use capmox_apiserver::proxmox::types::{
    CloneRequest, ConfigUpdate, DeleteOptions, ExecStatus, PowerState, ResourceType,
};
use capmox_apiserver::proxmox::{Client, ErrorKind};

use super::{ok, start};

async fn cloud_init_status(client: &Client, vmid: u32) -> ExecStatus {
    let pid = client
        .agent_exec("pve1", vmid, &["cloud-init", "status"], Some(""))
        .await
        .expect("exec");
    client
        .agent_exec_status("pve1", vmid, pid)
        .await
        .expect("exec-status")
}

/// `GET /_sim/vms/<vmid>/seed`: the status, and each file decoded.
async fn seed_over_admin(
    pve: &capmox_apiserver::proxmox::sim::RunningSim,
    vmid: u32,
) -> (u16, std::collections::BTreeMap<String, Vec<u8>>) {
    use base64::Engine as _;
    let http = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(pve.ca_pem().as_bytes()).expect("pem")])
        .build()
        .expect("client");
    let response = http
        .get(format!("{}/_sim/vms/{vmid}/seed", pve.url()))
        .send()
        .await
        .expect("GET");
    let status = response.status().as_u16();
    let body: serde_json::Value = response.json().await.expect("json");
    let files = body["files"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, data)| {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data.as_str().expect("base64 text"))
                .expect("base64");
            (name.clone(), bytes)
        })
        .collect();
    (status, files)
}

fn network_config(mac: &str) -> String {
    format!(
        "network:\n  version: 2\n  renderer: networkd\n  ethernets:\n    eth0:\n      match:\n        macaddress: {mac}\n      dhcp4: false\n      dhcp6: false\n      addresses:\n        - '10.10.10.12/24'\n      routes:\n        - {{ \"to\": \"0.0.0.0/0\", \"via\": \"10.10.10.1\" }}\n"
    )
}

#[tokio::test]
async fn capmox_life_cycle_with_static_addresses_from_the_seed() {
    let mut config = SimConfig::default();
    config.faults.cloud_init.insert(120, CloudInitResult::Done);
    let (pve, client) = start(config).await;
    client.version().await.expect("init check");

    // Template by tags.
    let templates: Vec<_> = client
        .cluster_resources(Some(ResourceType::Vm))
        .await
        .expect("resources")
        .into_iter()
        .filter(|r| r.template && r.tag_list().iter().any(|t| t == "kube-v1.31"))
        .collect();
    assert_eq!(templates.len(), 1);
    let (tpl, node) = (
        templates[0].vmid.expect("vmid"),
        templates[0].node.clone().expect("node"),
    );

    // VMID from a range.
    let mut vmid = 0;
    for candidate in 120..130 {
        if client.is_vmid_free(candidate).await.expect("probe") {
            vmid = candidate;
            break;
        }
    }
    assert_eq!(vmid, 120);

    let clone = client
        .clone_vm(
            &node,
            tpl,
            &CloneRequest {
                newid: vmid,
                name: Some("cp-0".into()),
                full: Some(true),
                ..CloneRequest::default()
            },
        )
        .await
        .expect("clone");
    ok(&client, &clone).await;

    let upid = client
        .update_vm_config(
            &node,
            vmid,
            &ConfigUpdate::new()
                .set("cores", 4)
                .set("memory", 8192)
                .set("net0", "virtio,bridge=vmbr0,tag=100"),
        )
        .await
        .expect("configure");
    ok(&client, &upid).await;
    let resize = client
        .resize_disk(
            &node,
            vmid,
            "scsi0",
            SizeChange::parse("50G").expect("size"),
        )
        .await
        .expect("resize")
        .expect("task");
    ok(&client, &resize).await;

    // Bootstrap data: the MAC must be known before rendering network-config.
    let config = client.vm_config(&node, vmid).await.expect("config");
    let mac = config.nets()[&0].mac.clone().expect("MAC");
    let uuid = config.smbios_uuid().expect("uuid");
    let seed = NoCloud::new(
        "#cloud-config\nruncmd: [kubeadm init]\n",
        format!("instance-id: {uuid}\nlocal-hostname: cp-0\nhostname: cp-0\n"),
    )
    .with_network_config(network_config(&mac.to_ascii_lowercase()));
    let iso = write_iso(&seed).expect("iso");
    let storage = client
        .storages(&node, Some("iso"))
        .await
        .expect("storages")
        .into_iter()
        .find(|s| s.enabled && s.supports("iso"))
        .expect("an ISO storage");
    let file = format!("user-data-{vmid}.iso");
    let upload = client
        .upload(&node, &storage.storage, "iso", &file, iso)
        .await
        .expect("upload");
    let status = ok(&client, &upload).await;
    assert_eq!(
        status.exitstatus.as_deref(),
        Some("OK"),
        "a real seed imports cleanly"
    );

    let volid = format!("{}:iso/{file}", storage.storage);
    let boot = config.boot().expect("boot");
    let attach = client
        .update_vm_config(
            &node,
            vmid,
            &ConfigUpdate::new()
                .set(
                    "tags",
                    format!("{};go-proxmox+cloud-init", config.tags().join(";")),
                )
                .set("ide0", format!("{volid},media=cdrom"))
                .set("boot", format!("{boot};ide0")),
        )
        .await
        .expect("attach");
    ok(&client, &attach).await;
    // What the guest reads from its CD-ROM, byte for byte.
    let (status, files) = seed_over_admin(&pve, vmid).await;
    assert_eq!(status, 200);
    assert_eq!(files["user-data"], seed.user_data);
    assert_eq!(files["meta-data"], seed.meta_data);
    assert_eq!(Some(&files["network-config"]), seed.network_config.as_ref());
    assert!(!files.contains_key("vendor-data"));
    let attached = client.vm_config(&node, vmid).await.expect("config");
    let ide0 = attached.drive("ide0").expect("ide0");
    assert!(ide0.is_cdrom());
    assert!(
        ide0.options.contains_key("size"),
        "PVE appends the ISO size"
    );

    let start_task = client.start_vm(&node, vmid).await.expect("start");
    ok(&client, &start_task).await;
    assert_eq!(
        client
            .vm_status(&node, vmid)
            .await
            .expect("status")
            .power_state(),
        PowerState::Running
    );
    client.agent_os_info(&node, vmid).await.expect("agent up");
    let status = cloud_init_status(&client, vmid).await;
    assert_eq!(status.exitcode, Some(0));
    assert_eq!(status.out_data.as_deref(), Some("status: done\n"));

    // The guest configured the static address from network-config.
    let ifaces = client
        .agent_network_interfaces(&node, vmid)
        .await
        .expect("interfaces");
    let eth0 = ifaces
        .iter()
        .find(|i| i.hardware_address.as_deref() == Some(mac.to_ascii_lowercase().as_str()))
        .expect("NIC by MAC");
    assert!(
        eth0.ip_addresses
            .iter()
            .any(|a| a.ip_address == "10.10.10.12" && a.prefix == Some(24))
    );
    let pid = client
        .agent_exec(&node, vmid, &["hostname"], None)
        .await
        .expect("exec");
    assert_eq!(
        client
            .agent_exec_status(&node, vmid, pid)
            .await
            .expect("status")
            .out_data
            .as_deref(),
        Some("cp-0\n")
    );

    // Unmount and delete the ISO, drop the tag.
    ok(
        &client,
        &client
            .update_vm_config(
                &node,
                vmid,
                &ConfigUpdate::new().set("ide0", "none,media=cdrom"),
            )
            .await
            .expect("unmount"),
    )
    .await;
    assert_eq!(seed_over_admin(&pve, vmid).await.0, 404, "no seed attached");
    client
        .volume_info(&node, &storage.storage, &volid)
        .await
        .expect("ISO still there");
    ok(
        &client,
        &client
            .delete_volume(&node, &storage.storage, &volid)
            .await
            .expect("delete ISO"),
    )
    .await;
    let tags: Vec<String> = client
        .vm_config(&node, vmid)
        .await
        .expect("config")
        .tags()
        .into_iter()
        .filter(|t| t != "go-proxmox+cloud-init")
        .collect();
    ok(
        &client,
        &client
            .update_vm_config(
                &node,
                vmid,
                &ConfigUpdate::new().set("tags", tags.join(";")),
            )
            .await
            .expect("untag"),
    )
    .await;

    // Stop (and wait: a running VM cannot be destroyed), then delete.
    let err = client
        .delete_vm(&node, vmid, DeleteOptions::default())
        .await
        .expect_err("still running");
    assert_eq!(err.kind(), ErrorKind::VmRunning);
    ok(&client, &client.stop_vm(&node, vmid).await.expect("stop")).await;
    let destroy = client
        .delete_vm(&node, vmid, DeleteOptions::default())
        .await
        .expect("delete");
    ok(&client, &destroy).await;
    assert!(client.is_vmid_free(vmid).await.expect("probe"));
    pve.stop().await;
}
