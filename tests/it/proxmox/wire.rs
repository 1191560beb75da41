//! Exact request shapes (auth header, form encoding, JSON, multipart) and lenient
//! decoding, checked with wiremock; plus the client-wide concurrency limit.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use capmox_apiserver::proxmox::propstring::SizeChange;
use capmox_apiserver::proxmox::types::{CloneRequest, ConfigUpdate, DeleteOptions, ResourceType};
use capmox_apiserver::proxmox::{ApiToken, Client, ClientConfig, ErrorKind, TlsMode, Upid};
use serde_json::json;
use wiremock::matchers::{body_json, body_string, header, method, path, query_param};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

const UPID: &str = "UPID:pve2:0003A1B2:01C2D3E4:66F0A1B2:qmclone:9000:capmox@pve!capi:";
const AUTH: &str = "PVEAPIToken=capmox@pve!capi=5ecr3t";

fn client_for(server: &MockServer) -> Client {
    Client::new(ClientConfig::new(
        server.uri(),
        ApiToken::new("capmox@pve!capi", "5ecr3t"),
        TlsMode::System,
    ))
    .expect("client")
}

fn data(value: serde_json::Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({ "data": value }))
}

#[tokio::test]
async fn get_sends_the_token_header_and_query() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/api2/json/cluster/resources"))
        .and(query_param("type", "vm"))
        .and(header("authorization", AUTH))
        .respond_with(data(
            json!([{"id":"qemu/9000","type":"qemu","vmid":"9000","template":1,"tags":"A;b"}]),
        ))
        .expect(1)
        .mount(&server)
        .await;
    let resources = client_for(&server)
        .cluster_resources(Some(ResourceType::Vm))
        .await
        .expect("resources");
    assert_eq!(resources[0].vmid, Some(9000), "vmid given as a string");
    assert_eq!(resources[0].tag_list(), ["a", "b"]);
}

#[tokio::test]
async fn clone_and_config_are_form_encoded() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api2/json/nodes/pve1/qemu/9000/clone"))
        .and(header("content-type", "application/x-www-form-urlencoded"))
        .and(body_string("newid=101&name=cp-0&pool=capi&full=1"))
        .respond_with(data(json!(UPID)))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api2/json/nodes/pve1/qemu/101/config"))
        .and(body_string(
            "net0=virtio%2Cbridge%3Dvmbr0%2Ctag%3D100&tags=a%3Bb&delete=net1%2Cnet2&digest=abc",
        ))
        .respond_with(data(json!(UPID)))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path("/api2/json/nodes/pve1/qemu/101/resize"))
        .and(body_string("disk=scsi0&size=%2B2G"))
        .respond_with(data(json!(null)))
        .expect(1)
        .mount(&server)
        .await;
    let client = client_for(&server);
    let upid = client
        .clone_vm(
            "pve1",
            9000,
            &CloneRequest {
                newid: 101,
                name: Some("cp-0".into()),
                pool: Some("capi".into()),
                full: Some(true),
                ..CloneRequest::default()
            },
        )
        .await
        .expect("clone");
    assert_eq!(upid.node(), "pve2");
    client
        .update_vm_config(
            "pve1",
            101,
            &ConfigUpdate::new()
                .set("tags", "a;b")
                .set("net0", "virtio,bridge=vmbr0,tag=100")
                .delete("net1")
                .delete("net2")
                .digest("abc"),
        )
        .await
        .expect("config");
    // PVE 7 answered resize with null (done in-request).
    let resized = client
        .resize_disk("pve1", 101, "scsi0", SizeChange::Grow(2 << 30))
        .await
        .expect("resize");
    assert_eq!(resized, None);
}

#[tokio::test]
async fn delete_uses_the_query_and_no_body() {
    let server = MockServer::start().await;
    Mock::given(method("DELETE"))
        .and(path("/api2/json/nodes/pve1/qemu/101"))
        .and(query_param("purge", "1"))
        .and(query_param("destroy-unreferenced-disks", "1"))
        .respond_with(data(json!(UPID)))
        .expect(1)
        .mount(&server)
        .await;
    client_for(&server)
        .delete_vm(
            "pve1",
            101,
            DeleteOptions {
                purge: true,
                destroy_unreferenced_disks: true,
                skiplock: false,
            },
        )
        .await
        .expect("delete");
    let requests = server.received_requests().await.expect("recorded");
    assert!(requests[0].body.is_empty());
}

#[tokio::test]
async fn agent_exec_is_json_with_a_real_array() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api2/json/nodes/pve1/qemu/101/agent/exec"))
        .and(header("content-type", "application/json"))
        .and(body_json(
            json!({"command": ["cloud-init", "status"], "input-data": ""}),
        ))
        .respond_with(data(json!({"pid": "4242"})))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/api2/json/nodes/pve1/qemu/101/agent/exec-status"))
        .and(query_param("pid", "4242"))
        .respond_with(data(
            json!({"exited": 1, "exitcode": 0, "out-data": "status: done\n"}),
        ))
        .mount(&server)
        .await;
    let client = client_for(&server);
    let pid = client
        .agent_exec("pve1", 101, &["cloud-init", "status"], Some(""))
        .await
        .expect("exec");
    assert_eq!(pid, 4242);
    let status = client
        .agent_exec_status("pve1", 101, pid)
        .await
        .expect("status");
    assert!(status.exited);
    assert_eq!(status.out_data.as_deref(), Some("status: done\n"));
}

#[tokio::test]
async fn upload_is_multipart_with_content_before_the_file_and_a_length() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api2/json/nodes/pve1/storage/local/upload"))
        .respond_with(data(json!(
            "UPID:pve1:00000001:00000001:66F0A1B2:imgcopy::capmox@pve!capi:"
        )))
        .expect(1)
        .mount(&server)
        .await;
    let upid = client_for(&server)
        .upload(
            "pve1",
            "local",
            "iso",
            "user-data-101.iso",
            b"ISO\x00BYTES".to_vec(),
        )
        .await
        .expect("upload");
    assert_eq!(upid.id(), "");
    let requests = server.received_requests().await.expect("recorded");
    let request: &Request = &requests[0];
    let content_type = request.headers["content-type"].to_str().expect("ascii");
    let boundary = content_type
        .strip_prefix("multipart/form-data; boundary=")
        .expect("multipart");
    let length: usize = request.headers["content-length"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("number");
    assert_eq!(length, request.body.len());
    let body = String::from_utf8_lossy(&request.body);
    let content_at = body.find("name=\"content\"").expect("content field");
    let file_at = body
        .find("name=\"filename\"; filename=\"user-data-101.iso\"")
        .expect("file part");
    assert!(content_at < file_at, "fields come before the file");
    assert!(body.contains("\r\n\r\niso\r\n"));
    assert!(body.contains("ISO\u{0}BYTES"));
    assert!(body.trim_end().ends_with(&format!("--{boundary}--")));
}

#[tokio::test]
async fn task_and_volume_paths_keep_raw_characters() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("/api2/json/nodes/pve2/tasks/{UPID}/status")))
        .respond_with(data(
            json!({"upid": UPID, "node": "pve2", "pid": 237986, "pstart": 29545444,
            "starttime": 1727045042, "type": "qmclone", "id": "9000", "user": "capmox@pve",
            "tokenid": "capi", "status": "stopped", "exitstatus": "WARNINGS: 2"}),
        ))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/api2/json/nodes/pve1/storage/local/content/local:iso/user-data-101.iso"))
        .respond_with(data(json!({"path": "/var/lib/vz/template/iso/user-data-101.iso", "size": "376832", "format": "iso"})))
        .mount(&server)
        .await;
    let client = client_for(&server);
    let upid: Upid = UPID.parse().expect("upid");
    // Polled on the UPID's node, and WARNINGS is a success.
    let status = client
        .wait_task(&upid, super::quick())
        .await
        .expect("warnings are success");
    assert_eq!(status.tokenid.as_deref(), Some("capi"));
    let info = client
        .volume_info("pve1", "local", "local:iso/user-data-101.iso")
        .await
        .expect("volume");
    assert_eq!(info.size, Some(376_832));
}

#[tokio::test]
async fn lenient_decoding_of_pve_quirks() {
    let server = MockServer::start().await;
    for (route, body) in [
        ("/api2/json/cluster/nextid", json!("105")),
        (
            "/api2/json/nodes/pve1/status",
            json!({"loadavg": ["0.42", "0.51", "0.60"],
            "cpuinfo": {"cpus": 32, "mhz": "2999.998", "hvm": "1"},
            "memory": {"total": 270358843392u64, "used": "61340565504"}}),
        ),
        (
            "/api2/json/nodes/pve1/qemu",
            json!([{"vmid": "101", "status": "running", "template": ""},
            {"vmid": 9000, "status": "stopped", "template": 1, "maxmem": 2147483648u64}]),
        ),
        (
            "/api2/json/nodes/pve1/lxc",
            json!([{"vmid": "200", "status": "running", "maxmem": "536870912"}]),
        ),
        (
            "/api2/json/nodes/pve1/qemu/101/config",
            json!({"memory": 4096, "cores": "4",
            "agent": "1", "onboot": 1, "digest": "x"}),
        ),
    ] {
        Mock::given(method("GET"))
            .and(path(route))
            .respond_with(data(body))
            .mount(&server)
            .await;
    }
    let client = client_for(&server);
    assert_eq!(client.next_id().await.expect("nextid"), 105);
    let node = client.node_status("pve1").await.expect("status");
    assert_eq!(node.loadavg, vec![0.42, 0.51, 0.60]);
    assert_eq!(node.cpuinfo.mhz, Some(2999.998));
    assert_eq!(node.memory.used, Some(61_340_565_504));
    let vms = client.list_vms("pve1").await.expect("list");
    assert_eq!((vms[0].vmid, vms[0].template), (101, false));
    assert_eq!((vms[1].vmid, vms[1].template), (9000, true));
    let containers = client.list_containers("pve1").await.expect("lxc");
    assert_eq!(
        (containers[0].vmid, containers[0].maxmem),
        (200, Some(512 << 20))
    );
    let config = client.vm_config("pve1", 101).await.expect("config");
    assert_eq!((config.memory_mib(), config.cores()), (4096, 4));
    assert!(config.agent_enabled());
}

#[tokio::test]
async fn errors_are_classified_from_the_body_message_too() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api2/json/nodes/pve1/qemu/101/config"))
        .respond_with(
            ResponseTemplate::new(500)
                .set_body_json(json!({"data": null, "message": "VM is locked (clone)\n"})),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/api2/json/cluster/nextid"))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({"data": null,
            "message": "Parameter verification failed.\n", "errors": {"vmid": "VM 101 already exists\n"}})))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/api2/json/version"))
        .respond_with(ResponseTemplate::new(200).set_body_string("<html>not json</html>"))
        .mount(&server)
        .await;
    let client = client_for(&server);
    let err = client
        .update_vm_config("pve1", 101, &ConfigUpdate::new().set("cores", 1))
        .await
        .expect_err("locked");
    assert_eq!(err.kind(), ErrorKind::Locked);
    assert_eq!(
        err.api().and_then(|a| a.message.as_deref()),
        Some("VM is locked (clone)")
    );
    assert!(
        !client
            .is_vmid_free(101)
            .await
            .expect("taken is not an error")
    );
    assert_eq!(
        client.version().await.expect_err("decode").kind(),
        ErrorKind::Decode
    );
}

#[tokio::test]
async fn the_concurrency_limit_holds_client_wide() {
    use axum::Router;
    use axum::routing::get;

    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (i, p) = (in_flight.clone(), peak.clone());
    let app = Router::new().route(
        "/api2/json/version",
        get(move || {
            let (i, p) = (i.clone(), p.clone());
            async move {
                let now = i.fetch_add(1, Ordering::SeqCst) + 1;
                p.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(150)).await;
                i.fetch_sub(1, Ordering::SeqCst);
                axum::Json(json!({"data": {"version": "9.0.10"}}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let mut config = ClientConfig::new(
        format!("http://{addr}"),
        ApiToken::new("a@pve!t", "s"),
        TlsMode::System,
    );
    config.max_in_flight = 2;
    let client = Client::new(config).expect("client");
    let calls: Vec<_> = (0..6)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.version().await })
        })
        .collect();
    for call in calls {
        call.await.expect("joined").expect("version");
    }
    assert_eq!(peak.load(Ordering::SeqCst), 2, "two at a time, never more");
    server.abort();
}
