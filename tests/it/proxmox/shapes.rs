//! The simulator's raw answers against the PVE response shapes recorded in the
//! reference (§1.3, §1.4, §3–§7): JSON types, reason phrases, error bodies.

use capmox_apiserver::proxmox::nocloud::{NoCloud, write_iso};
use capmox_apiserver::proxmox::sim::{RunningSim, SimConfig};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{clone_9000, ok, start};

/// A raw HTTP view of the simulator.
struct Raw {
    http: reqwest::Client,
    base: String,
    auth: String,
}

/// One raw answer.
struct Answer {
    status: StatusCode,
    reason: String,
    connection: Option<String>,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("JSON body")
    }
    fn data(&self) -> Value {
        self.json()["data"].clone()
    }
}

impl Raw {
    fn new(pve: &RunningSim) -> Self {
        let http = reqwest::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(pve.ca_pem().as_bytes()).expect("pem")])
            .build()
            .expect("client");
        Self {
            http,
            base: format!("{}/api2/json", pve.url()),
            auth: pve.token().header_value(),
        }
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: &str,
    ) -> Answer {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("authorization", &self.auth);
        if let Some(ct) = content_type {
            req = req.header("content-type", ct).body(body.to_string());
        }
        let resp = req.send().await.expect("request");
        let reason = resp
            .extensions()
            .get::<hyper::ext::ReasonPhrase>()
            .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned())
            .or_else(|| resp.status().canonical_reason().map(str::to_string))
            .unwrap_or_default();
        Answer {
            status: resp.status(),
            reason,
            connection: resp
                .headers()
                .get("connection")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            body: resp.bytes().await.expect("body").to_vec(),
        }
    }

    async fn get(&self, path: &str) -> Answer {
        self.send(Method::GET, path, None, "").await
    }
}

fn assert_types(value: &Value, numbers: &[&str], strings: &[&str]) {
    for k in numbers {
        assert!(value[k].is_number(), "{k} should be a number in {value}");
    }
    for k in strings {
        assert!(value[k].is_string(), "{k} should be a string in {value}");
    }
}

#[tokio::test]
async fn read_endpoints_have_pve_json_types() {
    let (pve, client) = start(SimConfig::default()).await;
    let raw = Raw::new(&pve);
    clone_9000(&client, 170).await;

    let version = raw.get("/version").await;
    assert_eq!(version.status, 200);
    assert_types(&version.data(), &[], &["version", "release", "repoid"]);

    let status = raw.get("/cluster/status").await.data();
    let cluster = &status[0];
    assert_eq!(cluster["type"], "cluster");
    assert_types(cluster, &["nodes", "version", "quorate"], &["name", "id"]);
    assert_types(
        &status[1],
        &["nodeid", "online", "local"],
        &["name", "id", "ip", "level"],
    );

    assert_eq!(
        raw.get("/cluster/nextid").await.data(),
        json!("100"),
        "nextid is a string"
    );

    let node = raw.get("/nodes/pve1/status").await.data();
    assert!(
        node["loadavg"]
            .as_array()
            .expect("array")
            .iter()
            .all(Value::is_string)
    );
    assert_types(
        &node["cpuinfo"],
        &["cpus", "sockets", "cores"],
        &["mhz", "hvm", "model"],
    );
    assert_types(
        &node["memory"],
        &["total", "used", "free", "available"],
        &[],
    );
    let mem = &node["memory"];
    assert_eq!(
        mem["used"].as_u64().expect("used") + mem["available"].as_u64().expect("available"),
        mem["total"].as_u64().expect("total")
    );

    let list = raw.get("/nodes/pve1/qemu").await.data();
    let rows = list.as_array().expect("array");
    let tpl = rows.iter().find(|r| r["vmid"] == 9000).expect("template");
    let vm = rows.iter().find(|r| r["vmid"] == 170).expect("vm");
    assert_eq!(tpl["template"], 1);
    assert!(vm.get("template").is_none(), "never template:0 in VM lists");
    assert_types(
        vm,
        &["vmid", "maxmem", "maxdisk", "cpus", "uptime"],
        &["name", "status"],
    );

    let resources = raw.get("/cluster/resources?type=vm").await.data();
    let entry = resources
        .as_array()
        .expect("array")
        .iter()
        .find(|r| r["vmid"] == 170)
        .expect("entry");
    assert_eq!(entry["template"], 0, "numeric template in resources");
    assert_eq!(entry["id"], "qemu/170");

    let config = raw.get("/nodes/pve1/qemu/170/config").await.data();
    assert_types(
        &config,
        &["cores", "sockets"],
        &["memory", "digest", "agent", "net0", "scsi0", "tags"],
    );
    assert_eq!(config["digest"].as_str().map(str::len), Some(40));

    let current = raw.get("/nodes/pve1/qemu/170/status/current").await.data();
    assert_eq!(current["qmpstatus"], "stopped");
    assert_eq!(current["ha"], json!({"managed": 0}));
    assert_eq!(current["agent"], 1);

    let storage = raw.get("/nodes/pve1/storage").await.data();
    assert_types(
        &storage[0],
        &["enabled", "active", "shared", "total", "used", "avail"],
        &["storage", "type", "content"],
    );
}

#[tokio::test]
async fn tasks_and_agent_have_pve_shapes() {
    let (pve, client) = start(SimConfig::default()).await;
    let raw = Raw::new(&pve);
    clone_9000(&client, 171).await;
    let upid = client.start_vm("pve1", 171).await.expect("start");
    ok(&client, &upid).await;

    let status = raw
        .get(&format!("/nodes/pve1/tasks/{upid}/status"))
        .await
        .data();
    assert_types(
        &status,
        &["pid", "pstart", "starttime"],
        &[
            "upid",
            "node",
            "type",
            "id",
            "user",
            "tokenid",
            "status",
            "exitstatus",
        ],
    );
    assert_eq!(status["user"], "capmox@pve");
    assert_eq!(status["tokenid"], "capi");
    let encoded = upid
        .as_str()
        .replace(':', "%3A")
        .replace('!', "%21")
        .replace('@', "%40");
    assert_eq!(
        raw.get(&format!("/nodes/pve1/tasks/{encoded}/status"))
            .await
            .status,
        200,
        "percent-encoded UPIDs work"
    );

    let log = raw
        .get(&format!("/nodes/pve1/tasks/{upid}/log?start=0&limit=10"))
        .await
        .json();
    assert!(log["total"].is_number());
    assert_eq!(log["data"][0]["n"], 1);
    assert!(log["data"][0]["t"].is_string());

    let exec = raw
        .send(
            Method::POST,
            "/nodes/pve1/qemu/171/agent/exec",
            Some("application/json"),
            r#"{"command":["cloud-init","status"]}"#,
        )
        .await
        .data();
    assert!(exec["pid"].is_number());
    assert!(exec.get("result").is_none(), "exec has no result wrapper");
    let st = raw
        .get(&format!(
            "/nodes/pve1/qemu/171/agent/exec-status?pid={}",
            exec["pid"]
        ))
        .await
        .data();
    assert_eq!(st["exited"], 1, "booleans are 0/1 integers");
    assert!(st.get("signal").is_none());
    let ifaces = raw
        .get("/nodes/pve1/qemu/171/agent/network-get-interfaces")
        .await
        .data();
    let mac = ifaces["result"][1]["hardware-address"]
        .as_str()
        .expect("mac");
    assert_eq!(mac, mac.to_lowercase(), "MACs are lower-case");
    let os = raw
        .get("/nodes/pve1/qemu/171/agent/get-osinfo")
        .await
        .data();
    assert!(os["result"]["pretty-name"].is_string());
    let host = raw
        .get("/nodes/pve1/qemu/171/agent/get-host-name")
        .await
        .data();
    assert_eq!(host["result"]["host-name"], "vm-171");
    // file-read answers `content` without a `result` wrapper (PVE decodes qemu-ga's base64).
    let hostname = raw
        .get("/nodes/pve1/qemu/171/agent/file-read?file=/etc/hostname")
        .await
        .data();
    assert_eq!(hostname, json!({"content": "vm-171\n"}));
    let release = raw
        .get("/nodes/pve1/qemu/171/agent/file-read?file=/etc/os-release")
        .await
        .data();
    assert!(
        release["content"]
            .as_str()
            .is_some_and(|c| c.contains("PRETTY_NAME=\"Ubuntu 24.04.1 LTS\""))
    );
    // No seed attached: cloud-init is disabled and never writes its result.
    let missing = raw
        .get("/nodes/pve1/qemu/171/agent/file-read?file=/run/cloud-init/result.json")
        .await;
    assert_eq!(missing.status, 500);
    assert!(
        missing.reason.contains("guest-file-open") && missing.reason.contains("No such file"),
        "{}",
        missing.reason
    );
}

#[tokio::test]
async fn errors_have_reason_phrases_and_pve_bodies() {
    let (pve, _client) = start(SimConfig::default()).await;
    let raw = Raw::new(&pve);

    let missing = raw.get("/nodes/pve1/qemu/117/config").await;
    assert_eq!(missing.status, 500);
    assert_eq!(
        missing.reason,
        "Configuration file 'nodes/pve1/qemu-server/117.conf' does not exist"
    );
    assert_eq!(
        missing.json(),
        json!({"data": null, "message": "Configuration file 'nodes/pve1/qemu-server/117.conf' does not exist\n"})
    );
    assert_eq!(
        missing.connection.as_deref(),
        Some("close"),
        "no keep-alive after errors"
    );

    let taken = raw.get("/cluster/nextid?vmid=9000").await;
    assert_eq!(
        (taken.status.as_u16(), taken.reason.as_str()),
        (400, "Parameter verification failed.")
    );
    assert_eq!(
        taken.json()["errors"],
        json!({"vmid": "VM 9000 already exists"})
    );

    let unknown = raw.get("/cluster/nextid?bogus=1").await;
    assert_eq!(unknown.status, 400);
    assert!(
        unknown.json()["errors"]["bogus"]
            .as_str()
            .is_some_and(|e| e.contains("not defined in schema"))
    );

    let no_task = raw.get("/nodes/pve1/tasks/UPID:nope/status").await;
    assert_eq!(
        no_task.json()["errors"]["upid"],
        "unable to parse worker upid"
    );

    let unauth = raw
        .http
        .get(format!("{}/version", raw.base))
        .send()
        .await
        .expect("request");
    assert_eq!(unauth.status(), 401);
    assert!(
        unauth.bytes().await.expect("body").is_empty(),
        "401 has an empty body"
    );
    let bad = raw
        .http
        .get(format!("{}/version", raw.base))
        .header("authorization", "PVEAPIToken=capmox@pve!capi=wrong")
        .send()
        .await
        .expect("request");
    assert_eq!(
        bad.extensions()
            .get::<hyper::ext::ReasonPhrase>()
            .map(|r| r.as_bytes().to_vec()),
        Some(b"Authentication failed!".to_vec())
    );

    let no_method = raw
        .send(Method::PUT, "/version", Some("application/json"), "{}")
        .await;
    assert_eq!(
        (no_method.status.as_u16(), no_method.reason.as_str()),
        (501, "Method 'PUT /version' not implemented")
    );
    let content_on_get = raw
        .http
        .get(format!("{}/version", raw.base))
        .header("authorization", &raw.auth)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .expect("request");
    assert_eq!(content_on_get.status(), 501);
    let odd_type = raw
        .send(
            Method::POST,
            "/nodes/pve1/qemu/9000/config",
            Some("text/plain"),
            "x",
        )
        .await;
    assert_eq!(odd_type.status.as_u16(), 506);

    let unknown_node = raw.get("/nodes/pve9/status").await;
    assert!(
        unknown_node
            .reason
            .starts_with("hostname lookup 'pve9' failed")
    );
    let big = "x".repeat(600 * 1024);
    let too_big = raw
        .send(
            Method::POST,
            "/nodes/pve1/qemu/9000/config",
            Some("application/x-www-form-urlencoded"),
            &format!("description={big}"),
        )
        .await;
    assert_eq!(too_big.status.as_u16(), 501);
}

#[tokio::test]
async fn tolerated_inputs_from_go_clients() {
    let (pve, client) = start(SimConfig::default()).await;
    let raw = Raw::new(&pve);
    clone_9000(&client, 172).await;
    // JSON bodies with numbers for integer and string parameters.
    let post = raw
        .send(
            Method::POST,
            "/nodes/pve1/qemu/172/config",
            Some("application/json"),
            r#"{"cores":4,"memory":4096,"tags":";capmox;extra","onboot":true}"#,
        )
        .await;
    assert_eq!(post.status, 200);
    let upid: capmox_apiserver::proxmox::Upid =
        serde_json::from_value(post.data()).expect("UPID, never null");
    ok(&client, &upid).await;
    let config = client.vm_config("pve1", 172).await.expect("config");
    assert_eq!(config.get("tags").as_deref(), Some("capmox;extra"));
    assert_eq!(config.get("onboot").as_deref(), Some("1"));
    // DELETE with an empty query string.
    let del = raw
        .send(Method::DELETE, "/nodes/pve1/qemu/172?", None, "")
        .await;
    assert_eq!(del.status, 200);
    // A Go-style multipart upload (fields first, file part named `filename`).
    let iso = write_iso(&NoCloud::new("#cloud-config\n", "instance-id: x\n")).expect("iso");
    let form = reqwest::multipart::Form::new().text("content", "iso").part(
        "filename",
        reqwest::multipart::Part::bytes(iso).file_name("user-data-172.iso"),
    );
    let upload = raw
        .http
        .post(format!("{}/nodes/pve1/storage/local/upload", raw.base))
        .header("authorization", &raw.auth)
        .multipart(form)
        .send()
        .await
        .expect("upload");
    assert_eq!(upload.status(), 200);
    let upid: String = serde_json::from_slice::<Value>(&upload.bytes().await.expect("body"))
        .expect("json")["data"]
        .as_str()
        .expect("UPID")
        .to_string();
    assert!(upid.contains(":imgcopy::"), "empty id for imgcopy: {upid}");
    // A file part before the content field: pveproxy has not seen `content` yet.
    let late = reqwest::multipart::Form::new()
        .part(
            "filename",
            reqwest::multipart::Part::bytes(vec![1, 2]).file_name("x.iso"),
        )
        .text("content", "iso");
    let refused = raw
        .http
        .post(format!("{}/nodes/pve1/storage/local/upload", raw.base))
        .header("authorization", &raw.auth)
        .multipart(late)
        .send()
        .await
        .expect("upload");
    assert_eq!(refused.status(), 400);
}
