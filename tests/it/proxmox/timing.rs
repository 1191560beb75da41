//! Intermediate states, observed deterministically with a manual clock: tasks that are
//! still running, lock queues, the clone placeholder, the agent's boot delay, the lag of
//! `/cluster/resources` — and lock contention timing out as on real clusters.

use std::time::Duration;

use capmox_apiserver::proxmox::sim::{ClockMode, Profile, SimConfig, SimControl};
use capmox_apiserver::proxmox::types::{
    ConfigUpdate, DeleteOptions, ResourceType, TaskOutcome, TaskState,
};
use capmox_apiserver::proxmox::{Client, ErrorKind, Upid};

use super::{start, start_clone};

fn manual(profile: Profile) -> SimConfig {
    SimConfig {
        profile,
        clock: ClockMode::Manual,
        ..SimConfig::default()
    }
}

fn advance(control: &SimControl, seconds: f64) {
    control.advance(Duration::from_secs_f64(seconds));
}

async fn outcome(client: &Client, upid: &Upid) -> Option<TaskOutcome> {
    client
        .task_status(upid)
        .await
        .expect("task status")
        .outcome()
}

async fn full_clone(client: &Client, newid: u32) -> Upid {
    start_clone(client, newid).await.expect("clone starts")
}

#[tokio::test]
async fn clone_goes_through_placeholder_locked_config_and_unlock() {
    let (pve, client) = start(manual(Profile::Realistic)).await;
    let upid = full_clone(&client, 150).await;
    let status = client.task_status(&upid).await.expect("status");
    assert_eq!(status.status, TaskState::Running);
    assert_eq!(status.exitstatus, None);

    let placeholder = client
        .vm_config("pve1", 150)
        .await
        .expect("placeholder config");
    assert_eq!(
        placeholder.description().as_deref(),
        Some("qmclone temporary file\n")
    );
    assert_eq!(placeholder.lock().as_deref(), Some("clone"));
    assert!(placeholder.name().is_none());
    let vm = client.vm_status("pve1", 150).await.expect("status");
    assert_eq!(vm.name.as_deref(), Some("VM 150"));
    assert_eq!(vm.lock.as_deref(), Some("clone"));
    assert!(
        !client.is_vmid_free(150).await.expect("probe"),
        "the id is taken at once"
    );

    advance(pve.control(), 5.0);
    let copying = client.vm_config("pve1", 150).await.expect("config");
    assert_eq!(copying.name().as_deref(), Some("vm-150"));
    assert_eq!(
        copying.lock().as_deref(),
        Some("clone"),
        "still locked while copying"
    );
    let err = client
        .update_vm_config("pve1", 150, &ConfigUpdate::new().set("cores", 2))
        .await
        .expect_err("locked");
    assert_eq!(err.kind(), ErrorKind::Locked);

    advance(pve.control(), 60.0);
    assert_eq!(outcome(&client, &upid).await, Some(TaskOutcome::Ok));
    assert_eq!(
        client.vm_config("pve1", 150).await.expect("config").lock(),
        None
    );
}

#[tokio::test]
async fn config_tasks_queue_on_the_vm_lock() {
    let (pve, client) = start(manual(Profile::Realistic)).await;
    let clone = full_clone(&client, 151).await;
    advance(pve.control(), 60.0);
    assert_eq!(outcome(&client, &clone).await, Some(TaskOutcome::Ok));

    // Realistic config tasks take 40–60 ms each (a real `qmconfig` writes one file); the
    // second waits for the first's lock.
    let first = client
        .update_vm_config("pve1", 151, &ConfigUpdate::new().set("cores", 2))
        .await
        .expect("first");
    let second = client
        .update_vm_config("pve1", 151, &ConfigUpdate::new().set("cores", 3))
        .await
        .expect("second");
    advance(pve.control(), 0.065);
    assert_eq!(outcome(&client, &first).await, Some(TaskOutcome::Ok));
    assert_eq!(
        outcome(&client, &second).await,
        None,
        "queued behind the first"
    );
    assert_eq!(
        client.vm_config("pve1", 151).await.expect("config").cores(),
        2
    );
    // Both done well within go-proxmox's first poll (1 s), which upstream's cloud-init
    // injection (a tag, then ide0, back to back) relies on.
    advance(pve.control(), 0.1);
    assert_eq!(outcome(&client, &second).await, Some(TaskOutcome::Ok));
    assert_eq!(
        client.vm_config("pve1", 151).await.expect("config").cores(),
        3
    );
}

#[tokio::test]
async fn parallel_full_clones_overlap_outside_the_storage_lock() {
    let (pve, client) = start(manual(Profile::Realistic)).await;
    // pve-storage locks only the allocation; the ~18 s copies run side by side, so three
    // full clones of one template all finish in about one clone's time.
    let clones = [
        full_clone(&client, 152).await,
        full_clone(&client, 153).await,
        full_clone(&client, 158).await,
    ];
    advance(pve.control(), 1.0);
    for upid in &clones {
        assert_eq!(outcome(&client, upid).await, None, "copying");
    }
    advance(pve.control(), 25.0);
    for upid in &clones {
        assert_eq!(outcome(&client, upid).await, Some(TaskOutcome::Ok));
    }
    let disks: Vec<String> = futures::future::join_all([152, 153, 158].map(|id| {
        let client = &client;
        async move {
            let config = client.vm_config("pve1", id).await.expect("config");
            config.drive("scsi0").expect("disk").volume
        }
    }))
    .await;
    assert_eq!(
        disks,
        [
            "local-lvm:vm-152-disk-0",
            "local-lvm:vm-153-disk-0",
            "local-lvm:vm-158-disk-0"
        ]
    );
}

#[tokio::test]
async fn lock_contention_knob_and_admin_lock_holder() {
    let mut config = manual(Profile::Instant);
    config
        .faults
        .storage_lock_hold
        .insert("local-lvm".into(), 15.0);
    let (pve, client) = start(config).await;
    let first = full_clone(&client, 154).await;
    let second = full_clone(&client, 155).await;
    advance(pve.control(), 30.0);
    assert_eq!(outcome(&client, &first).await, Some(TaskOutcome::Ok));
    assert!(
        matches!(outcome(&client, &second).await, Some(TaskOutcome::Failed(m)) if m.contains("got timeout"))
    );

    pve.control().update_faults(|f| f.storage_lock_hold.clear());
    pve.control()
        .hold_storage_lock("local-lvm", Some("pve1"), Duration::from_secs(5))
        .expect("hold");
    let waits = full_clone(&client, 156).await;
    advance(pve.control(), 4.0);
    assert_eq!(
        outcome(&client, &waits).await,
        None,
        "queued behind the holder"
    );
    advance(pve.control(), 2.0);
    assert_eq!(outcome(&client, &waits).await, Some(TaskOutcome::Ok));
    // Another node's local-lvm has its own lock.
    pve.control()
        .hold_storage_lock("local-lvm", Some("pve2"), Duration::from_secs(60))
        .expect("hold");
    let free = full_clone(&client, 157).await;
    advance(pve.control(), 0.1);
    assert_eq!(outcome(&client, &free).await, Some(TaskOutcome::Ok));
}

#[tokio::test]
async fn agent_answers_after_boot_delay_and_cloud_init_finishes_later() {
    let (pve, client) = start(manual(Profile::Realistic)).await;
    let clone = full_clone(&client, 158).await;
    advance(pve.control(), 60.0);
    assert_eq!(outcome(&client, &clone).await, Some(TaskOutcome::Ok));
    let start_task = client.start_vm("pve1", 158).await.expect("start");
    let err = client
        .agent_ping("pve1", 158)
        .await
        .expect_err("not started yet");
    assert_eq!(err.kind(), ErrorKind::VmNotRunning);
    advance(pve.control(), 3.0);
    assert_eq!(outcome(&client, &start_task).await, Some(TaskOutcome::Ok));
    let err = client
        .agent_ping("pve1", 158)
        .await
        .expect_err("still booting");
    assert_eq!(err.kind(), ErrorKind::AgentNotRunning);
    advance(pve.control(), 40.0);
    client.agent_ping("pve1", 158).await.expect("agent up");
    let running = client
        .agent_exec("pve1", 158, &["true"], None)
        .await
        .expect("exec");
    let status = client
        .agent_exec_status("pve1", 158, running)
        .await
        .expect("status");
    assert!(!status.exited, "commands take a moment");
    advance(pve.control(), 1.0);
    let status = client
        .agent_exec_status("pve1", 158, running)
        .await
        .expect("status");
    assert!(status.exited);
    assert_eq!(status.exitcode, Some(0));
}

#[tokio::test]
async fn delete_right_after_an_unawaited_stop_fails_then_succeeds() {
    let (pve, client) = start(manual(Profile::Realistic)).await;
    let clone = full_clone(&client, 159).await;
    advance(pve.control(), 60.0);
    assert_eq!(outcome(&client, &clone).await, Some(TaskOutcome::Ok));
    client.start_vm("pve1", 159).await.expect("start");
    advance(pve.control(), 3.0);
    let stop = client.stop_vm("pve1", 159).await.expect("stop");
    let err = client
        .delete_vm("pve1", 159, DeleteOptions::default())
        .await
        .expect_err("racing the stop");
    assert_eq!(err.kind(), ErrorKind::VmRunning);
    advance(pve.control(), 2.0);
    assert_eq!(outcome(&client, &stop).await, Some(TaskOutcome::Ok));
    let delete = client
        .delete_vm("pve1", 159, DeleteOptions::default())
        .await
        .expect("delete");
    advance(pve.control(), 5.0);
    assert_eq!(outcome(&client, &delete).await, Some(TaskOutcome::Ok));
}

#[tokio::test]
async fn new_vms_lag_in_cluster_resources() {
    let (pve, client) = start(manual(Profile::Realistic)).await;
    // The seed's templates were there before the simulator started: listed in full at
    // once, so a lookup of templates by name or tag finds them from the first request.
    let at_start = client
        .cluster_resources(Some(ResourceType::Vm))
        .await
        .expect("resources");
    let template = at_start
        .iter()
        .find(|r| r.vmid == Some(9000))
        .expect("template listed");
    assert_eq!(template.status.as_deref(), Some("stopped"));
    assert!(template.name.is_some());
    assert!(template.template);
    full_clone(&client, 160).await;
    let fresh = client
        .cluster_resources(Some(ResourceType::Vm))
        .await
        .expect("resources");
    let entry = fresh
        .iter()
        .find(|r| r.vmid == Some(160))
        .expect("listed at once");
    assert_eq!(entry.status.as_deref(), Some("unknown"));
    assert_eq!(entry.name, None);
    assert_eq!(
        entry.lock.as_deref(),
        Some("clone"),
        "lock is read from the config"
    );
    advance(pve.control(), 60.0);
    let later = client
        .cluster_resources(Some(ResourceType::Vm))
        .await
        .expect("resources");
    let entry = later.iter().find(|r| r.vmid == Some(160)).expect("listed");
    assert_eq!(entry.name.as_deref(), Some("vm-160"));
    assert_eq!(entry.status.as_deref(), Some("stopped"));
}

/// Starts a `qmconfig` task (cores = `first`), then a PUT (cores = `second`) in the
/// background; the PUT needs the lock the task holds.
async fn post_then_put(
    client: &Client,
    vmid: u32,
    first: u32,
    second: u32,
) -> tokio::task::JoinHandle<Result<(), capmox_apiserver::proxmox::Error>> {
    client
        .update_vm_config("pve1", vmid, &ConfigUpdate::new().set("cores", first))
        .await
        .expect("POST");
    let client = client.clone();
    tokio::spawn(async move {
        client
            .update_vm_config_sync("pve1", vmid, &ConfigUpdate::new().set("cores", second))
            .await
    })
}

#[tokio::test]
async fn sync_config_waits_for_the_vm_lock_and_times_out_behind_a_stuck_task() {
    let (pve, client) = start(manual(Profile::Realistic)).await;
    let clone = full_clone(&client, 161).await;
    advance(pve.control(), 60.0);
    assert_eq!(outcome(&client, &clone).await, Some(TaskOutcome::Ok));

    // PUT waits for the running qmconfig task, then applies.
    let put = post_then_put(&client, 161, 2, 3).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!put.is_finished(), "PUT queues behind the task's lock");
    advance(pve.control(), 1.0);
    put.await
        .expect("joined")
        .expect("PUT applied after the lock");
    assert_eq!(
        client.vm_config("pve1", 161).await.expect("config").cores(),
        3
    );

    // Behind a worker that never ends, PVE gives up after 10 s.
    pve.control().update_faults(|f| {
        f.hang_tasks.insert("qmconfig".into());
    });
    let put = post_then_put(&client, 161, 4, 5).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    advance(pve.control(), 11.0);
    let err = put.await.expect("joined").expect_err("lock timeout");
    assert_eq!(err.kind(), ErrorKind::LockTimeout);
    assert!(
        err.to_string().contains("lock-161.conf' - got timeout"),
        "{err}"
    );
}
