//! Query parameters and verbs: label and field selectors, resourceVersion / limit /
//! continue, watch parameters, delete options, and HTTP methods on every kind of path.

use reqwest::Method;
use serde_json::json;

use super::{Case, Fixture, machines, target};
use crate::rest::GROUP;

fn list(query: &str) -> String {
    format!("{}?{query}", machines("v1alpha2"))
}

/// A list of the machines with `param` (a selector) set to `selector`.
fn selecting(param: &str, selector: &str) -> Case {
    Case::new(
        format!("{param} {selector:?}"),
        Method::GET,
        list(&format!("{param}={}", encode(selector))),
    )
}

/// Percent-encodes everything but unreserved characters.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn selectors_and_list_parameters() {
    let fixture = Fixture::start().await;
    let mut cases = Vec::new();
    for selector in [
        "a in (",
        "a in (b",
        "a notin b",
        "a=(b)",
        "!",
        "a,,b",
        "-a=b",
        "a=-b",
        "a=b=c",
        "a==b==c",
        "a>b",
        "a<",
        "a in (b,,c",
        "!a=b",
        "a=b,",
        "a!!=b",
        "x/y/z=1",
        &format!("a={}", "v".repeat(64)),
        &format!("{}=v", "k".repeat(64)),
        "a b",
    ] {
        cases.push(selecting("labelSelector", selector).status(400, "BadRequest"));
    }
    // Odd but valid, as kube parses them (`in ()` is the set of the empty value).
    for selector in [
        "a in ()",
        "a in (,b)",
        "!a",
        "a!=b,!c",
        "a>1,a<5",
        "  a  =  b  ",
        "",
    ] {
        cases.push(selecting("labelSelector", selector).accepted(200));
    }
    for selector in [
        "spec.numCores=1",
        "status.ready=true",
        "metadata.labels=a",
        "metadata.name",
        "metadata.name~a",
        "=a",
        "metadata.uid=x",
    ] {
        cases.push(selecting("fieldSelector", selector).status(400, "BadRequest"));
    }
    for selector in [
        "metadata.name=target",
        "metadata.namespace!=x",
        "metadata.name==a,metadata.name!=b",
    ] {
        cases.push(selecting("fieldSelector", selector).accepted(200));
    }
    for (query, code, reason) in [
        ("resourceVersion=abc", 400, "BadRequest"),
        ("resourceVersion=-1", 400, "BadRequest"),
        (
            "resourceVersion=1&resourceVersionMatch=Bogus",
            422,
            "Invalid",
        ),
        ("resourceVersionMatch=Exact", 422, "Invalid"),
        ("resourceVersionMatch=NotOlderThan", 422, "Invalid"),
        (
            "resourceVersion=0&resourceVersionMatch=Exact",
            422,
            "Invalid",
        ),
        // An exact read of a revision that does not exist yet: kube's "Too large resource
        // version", a 504 that clients retry, not a server fault.
        (
            "resourceVersion=99999999&resourceVersionMatch=Exact",
            504,
            "Timeout",
        ),
        ("limit=abc", 400, "BadRequest"),
        ("limit=1.5", 400, "BadRequest"),
        ("continue=garbage", 400, "BadRequest"),
        (
            "continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiIifQ",
            400,
            "BadRequest",
        ),
        ("continue=e30", 400, "BadRequest"),
        ("limit=1&continue=%00", 400, "BadRequest"),
        ("resourceVersion=1&continue=garbage", 400, "BadRequest"),
        (
            "continue=garbage&resourceVersionMatch=NotOlderThan&resourceVersion=1",
            422,
            "Invalid",
        ),
        ("sendInitialEvents=true", 422, "Invalid"),
        ("timeoutSeconds=abc", 400, "BadRequest"),
    ] {
        cases.push(
            Case::new(format!("list {query}"), Method::GET, list(query)).status(code, reason),
        );
    }
    // Like kube's query conversion, any boolean but "0" and "false" is true.
    for query in [
        "limit=-1",
        "limit=0",
        "limit=100000000",
        "resourceVersion=0",
        "resourceVersion=",
        "continue=",
        "allowWatchBookmarks=maybe",
    ] {
        cases.push(Case::new(format!("list {query}"), Method::GET, list(query)).accepted(200));
    }
    assert!(fixture.run("selectors and list parameters", cases).await >= 60);
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_parameters() {
    let fixture = Fixture::start().await;
    let mut cases = Vec::new();
    for (query, code, reason) in [
        ("watch=1&resourceVersion=abc", 400, "BadRequest"),
        ("watch=1&resourceVersionMatch=Exact", 422, "Invalid"),
        ("watch=1&resourceVersionMatch=NotOlderThan", 422, "Invalid"),
        ("watch=1&sendInitialEvents=true", 422, "Invalid"),
        ("watch=1&sendInitialEvents=maybe", 422, "Invalid"),
        ("watch=1&timeoutSeconds=abc", 400, "BadRequest"),
        ("watch=1&labelSelector=a%20in%20(", 400, "BadRequest"),
        ("watch=1&fieldSelector=spec.x%3D1", 400, "BadRequest"),
    ] {
        // A bounded watch, should one be accepted by mistake.
        let query = format!("{query}&timeoutSeconds=1");
        cases.push(
            Case::new(format!("watch {query}"), Method::GET, list(&query)).status(code, reason),
        );
    }
    // A watch that carries `continue` ignores it (nothing defaulted into an error).
    for query in [
        "watch=1&timeoutSeconds=1&continue=garbage",
        "watch=1&timeoutSeconds=1&limit=5",
        "watch=maybe&timeoutSeconds=1",
        "watch=1&timeoutSeconds=1&allowWatchBookmarks=maybe",
    ] {
        cases.push(Case::new(format!("watch {query}"), Method::GET, list(query)).accepted(200));
    }
    let watch_path = format!(
        "/apis/{GROUP}/v1alpha2/watch/namespaces/default/proxmoxmachines?resourceVersion=abc&timeoutSeconds=1"
    );
    cases.push(
        Case::new(
            "legacy /watch/ path, bad resourceVersion",
            Method::GET,
            watch_path,
        )
        .status(400, "BadRequest"),
    );
    assert!(fixture.run("watch parameters", cases).await >= 13);
}

#[tokio::test(flavor = "multi_thread")]
async fn delete_options_never_delete_by_mistake() {
    let fixture = Fixture::start().await;
    let mut cases = Vec::new();
    for (what, body, code, reason) in [
        ("malformed body", "{".to_owned(), 400, "BadRequest"),
        (
            "body of another kind",
            json!({"kind": "Pod", "apiVersion": "v1"}).to_string(),
            400,
            "BadRequest",
        ),
        (
            "unknown propagationPolicy",
            json!({"propagationPolicy": "Sideways"}).to_string(),
            422,
            "Invalid",
        ),
        (
            "orphanDependents with a propagationPolicy",
            json!({"orphanDependents": true, "propagationPolicy": "Background"}).to_string(),
            422,
            "Invalid",
        ),
        (
            "uid precondition of another object",
            json!({"preconditions": {"uid": "2c8f1a4e-0d7b-4c55-9c1c-8e1f3e3a7a10"}}).to_string(),
            409,
            "Conflict",
        ),
        (
            "resourceVersion precondition in the past",
            json!({"preconditions": {"resourceVersion": "1"}}).to_string(),
            409,
            "Conflict",
        ),
        (
            "unknown dryRun",
            json!({"dryRun": ["Bogus"]}).to_string(),
            422,
            "Invalid",
        ),
        (
            "gracePeriodSeconds as a string",
            json!({"gracePeriodSeconds": "soon"}).to_string(),
            400,
            "BadRequest",
        ),
        (
            "preconditions as a list",
            json!({"preconditions": []}).to_string(),
            400,
            "BadRequest",
        ),
    ] {
        cases.push(
            Case::new(format!("DELETE {what}"), Method::DELETE, target("v1alpha2"))
                .body("application/json", body)
                .status(code, reason),
        );
    }
    for (query, code, reason) in [
        ("propagationPolicy=Sideways", 422, "Invalid"),
        ("gracePeriodSeconds=soon", 400, "BadRequest"),
        ("dryRun=Bogus", 422, "Invalid"),
    ] {
        cases.push(
            Case::new(
                format!("DELETE ?{query}"),
                Method::DELETE,
                format!("{}?{query}", target("v1alpha2")),
            )
            .status(code, reason),
        );
    }
    cases.push(
        Case::new(
            "deletecollection with a bad labelSelector",
            Method::DELETE,
            list("labelSelector=a%20in%20("),
        )
        .status(400, "BadRequest"),
    );
    cases.push(
        Case::new(
            "deletecollection as a dry run",
            Method::DELETE,
            list("dryRun=All"),
        )
        .accepted(200),
    );
    cases.push(
        Case::new(
            "DELETE of an object that does not exist",
            Method::DELETE,
            target("v1alpha2").replace("target", "absent"),
        )
        .status(404, "NotFound"),
    );
    assert!(fixture.run("delete options", cases).await >= 15);
}

#[tokio::test(flavor = "multi_thread")]
async fn methods_on_every_kind_of_path() {
    let fixture = Fixture::start().await;
    let all_namespaces = format!("/apis/{GROUP}/v1alpha2/proxmoxmachines");
    let status = format!("{}/status", target("v1alpha2"));
    let body = json!({"apiVersion": format!("{GROUP}/v1alpha2"), "kind": "ProxmoxMachine", "metadata": {"name": "x"}}).to_string();
    let mut cases = Vec::new();
    for (method, path, code, reason) in [
        (
            Method::POST,
            all_namespaces.clone(),
            405,
            "MethodNotAllowed",
        ),
        (
            Method::DELETE,
            all_namespaces.clone(),
            405,
            "MethodNotAllowed",
        ),
        (Method::PUT, all_namespaces.clone(), 405, "MethodNotAllowed"),
        (
            Method::PATCH,
            all_namespaces.clone(),
            405,
            "MethodNotAllowed",
        ),
        (Method::POST, target("v1alpha2"), 405, "MethodNotAllowed"),
        (Method::PUT, machines("v1alpha2"), 405, "MethodNotAllowed"),
        (Method::PATCH, machines("v1alpha2"), 405, "MethodNotAllowed"),
        (Method::POST, status.clone(), 405, "MethodNotAllowed"),
        (Method::DELETE, status.clone(), 405, "MethodNotAllowed"),
        (Method::OPTIONS, target("v1alpha2"), 405, "MethodNotAllowed"),
        (Method::TRACE, target("v1alpha2"), 405, "MethodNotAllowed"),
        (
            Method::from_bytes(b"BREW").expect("method"),
            target("v1alpha2"),
            405,
            "MethodNotAllowed",
        ),
        (
            Method::GET,
            format!("{}/scale", target("v1alpha2")),
            404,
            "NotFound",
        ),
        (
            Method::GET,
            format!("{}/status/extra", target("v1alpha2")),
            404,
            "NotFound",
        ),
        (
            Method::GET,
            format!("/apis/{GROUP}/v1alpha2/namespaces/default/proxmoxmachines/target/x/y"),
            404,
            "NotFound",
        ),
        (
            Method::GET,
            format!("/apis/{GROUP}/v9/namespaces/default/proxmoxmachines"),
            404,
            "NotFound",
        ),
        (
            Method::GET,
            format!("/apis/{GROUP}/v1alpha2/namespaces/default/widgets"),
            404,
            "NotFound",
        ),
        (
            Method::GET,
            format!("/apis/{GROUP}/v1alpha2/proxmoxmachines/target"),
            404,
            "NotFound",
        ),
        (
            Method::GET,
            format!(
                "/apis/{GROUP}/v1alpha2/namespaces/default/proxmoxmachines/{}",
                "n".repeat(4096)
            ),
            404,
            "NotFound",
        ),
        (
            Method::POST,
            format!("/apis/{GROUP}/v1alpha2/namespaces/default"),
            404,
            "NotFound",
        ),
    ] {
        cases.push(
            Case::new(
                format!("{method} {}", path.chars().take(120).collect::<String>()),
                method,
                path,
            )
            .body("application/json", body.clone())
            .status(code, reason),
        );
    }
    assert!(fixture.run("methods", cases).await >= 20);
}
