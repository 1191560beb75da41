//! Every fault knob, seen through the client (and the admin endpoint).

use std::time::Duration;

use capmox_apiserver::proxmox::client::WaitOptions;
use capmox_apiserver::proxmox::sim::{
    CloudInitResult, FaultPlan, HttpFault, OfflineMode, ResponseDelay, SimConfig, SimToken,
    TaskFault,
};
use capmox_apiserver::proxmox::types::{CloneRequest, ConfigUpdate, ResourceType};
use capmox_apiserver::proxmox::{ApiToken, Client, ClientConfig, Error, ErrorKind, TlsMode};

use super::{assert_api_error, clone_9000, ok, quick, start, start_clone, start_default};

fn http_fault(path: &str, status: u16, message: &str) -> HttpFault {
    HttpFault {
        method: None,
        path: path.to_string(),
        status,
        message: message.to_string(),
        probability: 1.0,
        count: None,
    }
}

#[tokio::test]
async fn injected_http_errors_carry_reason_and_message() {
    let (pve, client) = start_default().await;
    pve.control().set_faults(FaultPlan {
        http_errors: vec![
            HttpFault {
                count: Some(2),
                ..http_fault("/nodes/*/status", 500, "got lock request timeout")
            },
            http_fault("/cluster/resources", 503, "Service Unavailable"),
        ],
        ..FaultPlan::default()
    });
    for _ in 0..2 {
        let err = client.node_status("pve1").await.expect_err("injected");
        let api = err.api().expect("API error");
        assert_eq!(api.status, 500);
        assert_eq!(api.reason, "got lock request timeout");
        assert_eq!(api.message.as_deref(), Some("got lock request timeout"));
        assert_eq!(err.kind(), ErrorKind::LockTimeout);
        assert!(err.is_transient());
    }
    client.node_status("pve1").await.expect("count exhausted");
    let err = client.cluster_resources(None).await.expect_err("503");
    assert_eq!(err.kind(), ErrorKind::Transient);
}

#[tokio::test]
async fn error_rate_per_endpoint_is_probabilistic_and_seeded() {
    let (pve, client) = start_default().await;
    pve.control().update_faults(|f| {
        f.http_errors.push(HttpFault {
            probability: 0.5,
            ..http_fault("/version", 500, "flaky")
        })
    });
    let mut failures = 0;
    for _ in 0..60 {
        if client.version().await.is_err() {
            failures += 1;
        }
        client
            .cluster_status()
            .await
            .expect("other endpoints unaffected");
    }
    assert!((10..=50).contains(&failures), "about half fail: {failures}");
}

#[tokio::test]
async fn response_delay_trips_the_client_timeout() {
    let (pve, _) = start_default().await;
    pve.control().update_faults(|f| {
        f.response_delays.push(ResponseDelay {
            method: Some("GET".into()),
            path: "/version".into(),
            millis: 2_000,
        })
    });
    let mut config = pve.client_config();
    config.request_timeout = Duration::from_millis(200);
    let client = Client::new(config).expect("client");
    let err = client.version().await.expect_err("times out");
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert!(err.is_transient());
    client.cluster_status().await.expect("other paths are fast");
}

#[tokio::test]
async fn task_failures_and_cleanup_of_the_placeholder() {
    let mut config = SimConfig::default();
    config.faults.task_failures.push(TaskFault {
        task_type: "qmclone".into(),
        vmid: Some(130),
        message: "clone failed: injected".into(),
        count: Some(1),
    });
    let (_pve, client) = start(config).await;
    let upid = start_clone(&client, 130).await.expect("clone starts");
    let err = client.wait_task(&upid, quick()).await.expect_err("fails");
    match &err {
        Error::TaskFailed { exitstatus, .. } => assert_eq!(exitstatus, "clone failed: injected"),
        other => panic!("unexpected {other}"),
    }
    assert_eq!(err.kind(), ErrorKind::TaskFailed);
    let log = client.task_log(&upid, 0, 100).await.expect("log");
    assert_eq!(
        log.lines.last().map(|l| l.t.as_str()),
        Some("TASK ERROR: clone failed: injected")
    );
    assert!(
        client.is_vmid_free(130).await.expect("probe"),
        "placeholder removed"
    );
    // count: 1 — the next clone works.
    ok(&client, &start_clone(&client, 130).await.expect("clone")).await;
}

#[tokio::test]
async fn hung_and_delayed_tasks_time_out_the_wait() {
    let mut config = SimConfig::default();
    config.faults.hang_tasks.insert("qmstart".into());
    config
        .faults
        .task_delays
        .insert("qmstop".into(), f64::INFINITY);
    let (_pve, client) = start(config).await;
    clone_9000(&client, 131).await;
    let short = WaitOptions {
        timeout: Duration::from_millis(300),
        ..quick()
    };
    let upid = client.start_vm("pve1", 131).await.expect("start");
    let err = client.wait_task(&upid, short).await.expect_err("hangs");
    assert!(matches!(err, Error::TaskTimeout { .. }));
    assert_eq!(err.kind(), ErrorKind::Timeout);
    let status = client.task_status(&upid).await.expect("status");
    assert!(status.outcome().is_none(), "still running");
    let stop = client.stop_vm("pve1", 131).await.expect("stop");
    assert!(matches!(
        client.wait_task(&stop, short).await,
        Err(Error::TaskTimeout { .. })
    ));
}

#[tokio::test]
async fn offline_nodes_answer_595_and_596() {
    let (pve, client) = start_default().await;
    clone_9000(&client, 132).await;
    pve.control().update_faults(|f| {
        f.offline_nodes
            .insert("pve1".into(), OfflineMode::Unreachable);
        f.offline_nodes.insert("pve2".into(), OfflineMode::Refused);
        f.offline_nodes.insert("pve3".into(), OfflineMode::Timeout);
    });
    for (node, status, reason) in [
        ("pve1", 595, "No route to host"),
        ("pve2", 595, "Connection refused"),
        ("pve3", 596, "Connection timed out"),
    ] {
        let err = client.node_status(node).await.expect_err("offline");
        let api = err.api().expect("API error");
        assert_eq!((api.status, api.reason.as_str()), (status, reason));
        assert_eq!(api.message, None, "proxy errors have empty bodies");
        assert_eq!(err.kind(), ErrorKind::Transient);
    }
    let status = client
        .cluster_status()
        .await
        .expect("cluster status still answers");
    assert!(
        status
            .iter()
            .filter(|e| e.kind == "node")
            .all(|n| n.online == Some(false))
    );
    let vms = client
        .cluster_resources(Some(ResourceType::Vm))
        .await
        .expect("resources");
    let vm = vms.iter().find(|r| r.vmid == Some(132)).expect("listed");
    assert_eq!(vm.status.as_deref(), Some("unknown"));
    // Polling a task on an unreachable node keeps retrying until the wait gives up.
    pve.control().update_faults(|f| {
        f.offline_nodes.remove("pve1");
    });
    let upid = client.start_vm("pve1", 132).await.expect("start");
    pve.control().update_faults(|f| {
        f.offline_nodes
            .insert("pve1".into(), OfflineMode::Unreachable);
    });
    let short = WaitOptions {
        timeout: Duration::from_millis(200),
        ..quick()
    };
    match client.wait_task(&upid, short).await {
        Err(Error::TaskTimeout {
            last_error: Some(e),
            ..
        }) => {
            assert!(e.contains("No route to host"), "{e}")
        }
        other => panic!("expected a timeout naming the poll error, got {other:?}"),
    }
    pve.control().update_faults(|f| f.offline_nodes.clear());
    ok(&client, &upid).await;
}

#[tokio::test]
async fn lost_quorum_blocks_changes() {
    let (pve, client) = start_default().await;
    clone_9000(&client, 133).await;
    pve.control().update_faults(|f| f.no_quorum = true);
    let err = start_clone(&client, 134).await.expect_err("no quorum");
    assert_api_error(&err, ErrorKind::Transient, "cluster not ready - no quorum?");
    assert!(client.start_vm("pve1", 133).await.is_err());
    assert!(
        client
            .update_vm_config("pve1", 133, &ConfigUpdate::new().set("cores", 2))
            .await
            .is_err()
    );
    let status = client.cluster_status().await.expect("reads work");
    assert_eq!(
        status
            .iter()
            .find(|e| e.kind == "cluster")
            .and_then(|c| c.quorate),
        Some(false)
    );
}

#[tokio::test]
async fn full_storage_fails_clones_and_uploads() {
    let (pve, client) = start_default().await;
    pve.control().update_faults(|f| {
        f.full_storages.insert("local-lvm".into());
        f.full_storages.insert("local".into());
    });
    let upid = start_clone(&client, 135).await.expect("clone starts");
    let err = client
        .wait_task(&upid, quick())
        .await
        .expect_err("no space");
    assert!(err.to_string().contains("clone failed: lvcreate"), "{err}");
    assert!(err.to_string().contains("insufficient free space"), "{err}");
    assert!(client.is_vmid_free(135).await.expect("probe"));
    let upload = client
        .upload("pve1", "local", "iso", "a.iso", vec![0; 10])
        .await
        .expect("upload starts");
    let err = client
        .wait_task(&upload, quick())
        .await
        .expect_err("no space");
    assert!(err.to_string().contains("No space left on device"), "{err}");
}

#[tokio::test]
async fn forced_vm_locks_are_sync_errors_for_config_and_task_errors_for_start() {
    let (pve, client) = start_default().await;
    clone_9000(&client, 136).await;
    pve.control().update_faults(|f| {
        f.locked_vms.insert(136, "backup".into());
    });
    let err = client
        .update_vm_config("pve1", 136, &ConfigUpdate::new().set("cores", 2))
        .await
        .expect_err("locked");
    assert_api_error(&err, ErrorKind::Locked, "VM is locked (backup)");
    assert_eq!(
        client
            .vm_status("pve1", 136)
            .await
            .expect("status")
            .lock
            .as_deref(),
        Some("backup")
    );
    let start = client.start_vm("pve1", 136).await.expect("start task");
    let err = client.wait_task(&start, quick()).await.expect_err("locked");
    assert_eq!(err.kind(), ErrorKind::Locked);
    assert!(
        start_clone(&client, 137).await.is_ok(),
        "the template is not locked"
    );
    pve.control().update_faults(|f| f.locked_vms.clear());
    ok(&client, &client.start_vm("pve1", 136).await.expect("start")).await;
}

#[tokio::test]
async fn agent_never_ready_and_cloud_init_outcomes() {
    let mut config = SimConfig::default();
    config.faults.agent_never_ready.insert(138);
    for (vmid, result) in [
        (139, CloudInitResult::Error),
        (140, CloudInitResult::Degraded),
        (141, CloudInitResult::Running),
    ] {
        config.faults.cloud_init.insert(vmid, result);
    }
    let (_pve, client) = start(config).await;
    for vmid in 138..=141 {
        clone_9000(&client, vmid).await;
        ok(
            &client,
            &client.start_vm("pve1", vmid).await.expect("start"),
        )
        .await;
    }
    let err = client
        .agent_os_info("pve1", 138)
        .await
        .expect_err("never ready");
    assert_api_error(
        &err,
        ErrorKind::AgentNotRunning,
        "QEMU guest agent is not running",
    );
    assert!(err.is_transient());
    for (vmid, code, out) in [
        (139, 1, "status: error\n"),
        (140, 2, "status: done\n"),
        (141, 0, "status: running\n"),
    ] {
        let pid = client
            .agent_exec("pve1", vmid, &["cloud-init", "status"], None)
            .await
            .expect("exec");
        let status = client
            .agent_exec_status("pve1", vmid, pid)
            .await
            .expect("status");
        assert_eq!(
            (status.exitcode, status.out_data.as_deref()),
            (Some(code), Some(out)),
            "VM {vmid}"
        );
    }
}

#[tokio::test]
async fn bodies_without_message_still_classify_by_reason_phrase() {
    let (pve, client) = start_default().await;
    pve.control().update_faults(|f| f.drop_message_field = true);
    let err = client.vm_config("pve1", 999).await.expect_err("missing");
    let api = err.api().expect("API error");
    assert_eq!(api.message, None);
    assert_eq!(
        api.reason,
        "Configuration file 'nodes/pve1/qemu-server/999.conf' does not exist"
    );
    assert_eq!(err.kind(), ErrorKind::NotFound);
}

#[tokio::test]
async fn revoked_and_read_only_tokens() {
    let mut config = SimConfig::default();
    config.extra_tokens.push(SimToken {
        id: "audit@pve!ro".into(),
        secret: "ro-secret".into(),
        read_only: true,
    });
    let (pve, client) = start(config).await;
    let reader = Client::new(ClientConfig::new(
        pve.url(),
        ApiToken::new("audit@pve!ro", "ro-secret"),
        TlsMode::CustomCa(pve.ca_pem().to_string()),
    ))
    .expect("client");
    reader.version().await.expect("reads are allowed");
    let err = reader
        .start_vm("pve1", 9000)
        .await
        .expect_err("no privilege");
    assert_api_error(
        &err,
        ErrorKind::Permission,
        "Permission check failed (/vms/9000, VM.PowerMgmt)",
    );

    let wrong = Client::new(ClientConfig::new(
        pve.url(),
        ApiToken::new("capmox@pve!capi", "wrong"),
        TlsMode::CustomCa(pve.ca_pem().to_string()),
    ))
    .expect("client");
    assert_eq!(
        wrong.version().await.expect_err("bad secret").kind(),
        ErrorKind::Auth
    );
    pve.control().update_faults(|f| {
        f.revoked_tokens.insert("capmox@pve!capi".into());
    });
    let err = client.version().await.expect_err("revoked");
    assert_eq!(err.kind(), ErrorKind::Auth);
    assert_eq!(err.status(), Some(401));
}

#[tokio::test]
async fn vmid_taken_on_another_node_fails_the_clone_task() {
    let (_pve, client) = start_default().await;
    // 9001 lives on pve2; cloning onto id 9001 from pve1 races with it.
    let upid = start_clone(&client, 9001).await.expect("accepted");
    let err = client
        .wait_task(&upid, quick())
        .await
        .expect_err("collides");
    assert!(
        err.to_string().contains("already exists on node 'pve2'"),
        "{err}"
    );
    let err = client
        .clone_vm(
            "pve1",
            9000,
            &CloneRequest {
                newid: 9002,
                ..CloneRequest::default()
            },
        )
        .await
        .expect_err("same node");
    assert_eq!(err.kind(), ErrorKind::AlreadyExists);
}

#[tokio::test]
async fn admin_endpoint_reads_and_replaces_the_plan() {
    let (pve, client) = start_default().await;
    let http = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(pve.ca_pem().as_bytes()).expect("pem")])
        .build()
        .expect("client");
    let plan = serde_json::json!({"http_errors": [{"path": "/version", "status": 500, "message": "admin says no"}]});
    let put = http
        .put(format!("{}/_sim/faults", pve.url()))
        .json(&plan)
        .send()
        .await
        .expect("PUT");
    assert_eq!(put.status(), 200);
    let err = client.version().await.expect_err("injected");
    assert_eq!(err.api().map(|a| a.reason.as_str()), Some("admin says no"));
    let get = |path: &'static str| {
        let request = http.get(format!("{}/_sim/{path}", pve.url()));
        async move {
            let response = request.send().await.expect("GET");
            response.json::<serde_json::Value>().await.expect("json")
        }
    };
    let got = get("faults").await;
    assert_eq!(got["http_errors"][0]["message"], "admin says no");
    let bad = http
        .put(format!("{}/_sim/faults", pve.url()))
        .body(r#"{"nonsense": true}"#)
        .send()
        .await
        .expect("PUT");
    assert_eq!(bad.status(), 400);
    let state = get("state").await;
    assert_eq!(state["vms"].as_array().map(Vec::len), Some(3));
}
