//! Request bodies through the full pipeline over HTTP/2 and HTTP/1.1: the 3 MiB limit
//! answers a kube 413 Status, malformed JSON/YAML a 400 Status, unknown types a 415; a body left
//! unread by its answer costs the connection nothing.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::http::{HeaderMap, header};
use axum::routing::post;
use bytes::Bytes;
use capmox_apiserver::server::body::{self, MAX_REQUEST_BODY_BYTES};
use capmox_apiserver::server::{ApiError, Status, negotiation};
use rustls::pki_types::ServerName;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::Dev;

/// A route as the resource handlers will have them: negotiate, read with the limit, decode.
async fn echo(headers: HeaderMap, request_body: Body) -> Result<Json<Value>, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let format = negotiation::request_body_format(content_type)?;
    let bytes = body::read_body(request_body, MAX_REQUEST_BODY_BYTES).await?;
    let decoded = body::decode(format, &bytes)?;
    Ok(Json(
        json!({"value": decoded.value, "duplicates": decoded.duplicate_fields}),
    ))
}

async fn start() -> Dev {
    Dev::start(|router| router.merge(axum::Router::new().route("/echo", post(echo)))).await
}

async fn status_of(response: reqwest::Response) -> Status {
    let code = response.status();
    let status: Status = response.json().await.expect("Status body");
    assert_eq!(status.code, code.as_u16());
    assert_eq!(
        (
            status.kind.as_str(),
            status.api_version.as_str(),
            status.status.as_str()
        ),
        ("Status", "v1", "Failure")
    );
    status
}

#[tokio::test(flavor = "multi_thread")]
async fn h2_and_http1_both_negotiate() {
    let dev = start().await;
    for (http1, expected) in [
        (false, reqwest::Version::HTTP_2),
        (true, reqwest::Version::HTTP_11),
    ] {
        let response = dev
            .client(true, http1)
            .get(dev.url("/version"))
            .send()
            .await
            .expect("request");
        assert_eq!(response.version(), expected);
        assert_eq!(response.status(), 200);
        let response = dev
            .client(true, http1)
            .post(dev.url("/echo"))
            .header(header::CONTENT_TYPE, "application/yaml")
            .body("kind: Thing\nspec: {replicas: 3}\n")
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), 200);
        let echoed: Value = response.json().await.expect("json");
        assert_eq!(
            echoed["value"],
            json!({"kind": "Thing", "spec": {"replicas": 3}})
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn oversized_bodies_get_413() {
    let dev = start().await;
    let client = dev.client(true, false);
    let declared = client
        .post(dev.url("/echo"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(vec![b' '; MAX_REQUEST_BODY_BYTES + 1])
        .send()
        .await
        .expect("request");
    assert_eq!(declared.status(), 413);
    let status = status_of(declared).await;
    assert_eq!(
        (status.reason.as_str(), status.message.as_str()),
        (
            "RequestEntityTooLarge",
            "Request entity too large: limit is 3145728"
        )
    );

    // Without a Content-Length the limit applies while reading.
    let chunks = (0..4).map(|_| Ok::<_, std::io::Error>(vec![b' '; 1024 * 1024]));
    let streamed = client
        .post(dev.url("/echo"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
        .send()
        .await
        .expect("request");
    assert_eq!(streamed.status(), 413);
    assert_eq!(status_of(streamed).await.reason, "RequestEntityTooLarge");

    // Exactly at the limit is fine (and decodes: whitespace around a value).
    let mut at_limit = vec![b' '; MAX_REQUEST_BODY_BYTES];
    at_limit[0] = b'1';
    let ok = client
        .post(dev.url("/echo"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(at_limit)
        .send()
        .await
        .expect("request");
    assert_eq!(ok.status(), 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_bodies_get_400_and_unknown_types_415() {
    let dev = start().await;
    let client = dev.client(true, true);
    let cases = [
        ("application/json", "{\"kind\": ", "json parse error: "),
        ("application/json", "{\"a\": 1} {", "json parse error: "),
        (
            "application/yaml",
            "kind: [unclosed",
            "error converting YAML to JSON: ",
        ),
        (
            "application/yaml",
            "a: b: c",
            "error converting YAML to JSON: ",
        ),
    ];
    for (content_type, body, prefix) in cases {
        let response = client
            .post(dev.url("/echo"))
            .header(header::CONTENT_TYPE, content_type)
            .body(body)
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), 400, "{body}");
        let status = status_of(response).await;
        assert_eq!(status.reason, "BadRequest");
        assert!(status.message.starts_with(prefix), "{}", status.message);
    }
    let response = client
        .post(dev.url("/echo"))
        .header(header::CONTENT_TYPE, "application/vnd.kubernetes.protobuf")
        .body("x")
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 415);
    assert_eq!(
        status_of(response).await.message,
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml"
    );
    let duplicates = client
        .post(dev.url("/echo"))
        .body(r#"{"spec":{"a":1,"a":2}}"#)
        .send()
        .await
        .expect("request");
    let echoed: Value = duplicates.json().await.expect("json");
    assert_eq!(echoed["duplicates"], json!(["spec.a"]));
    assert_eq!(echoed["value"], json!({"spec": {"a": 2}}));
}

/// An answer given before the body was read (a 415: a type the server does not read) leaves the
/// body's stream open: the server reads the rest of it instead of resetting the stream. Over
/// HTTP/2 each such reset counts against h2's limit of locally reset streams on the connection
/// (1,024, then `GOAWAY`), and kube-apiserver proxies every request to us over one connection:
/// losing it fails every request in flight on it (docs/benchmarks.md).
#[tokio::test(flavor = "multi_thread")]
async fn an_answer_before_the_body_leaves_its_stream_open() {
    let dev = start().await;
    let mut config = crate::server::admin_tls_config(&dev.server.pki);
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = TcpStream::connect(dev.server.server.local_addr())
        .await
        .expect("connect");
    let name = ServerName::try_from("localhost").expect("name");
    let tls = TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .expect("handshake");
    let (client, mut connection) = h2::client::handshake(tls).await.expect("HTTP/2 handshake");
    let mut ping_pong = connection.ping_pong().expect("ping");
    let connection = tokio::spawn(connection);
    let mut client = client.ready().await.expect("ready");
    for _ in 0..3 {
        let request = axum::http::Request::post(dev.url("/echo"))
            .header(header::CONTENT_TYPE, "text/plain")
            .body(())
            .expect("request");
        let (response, mut body) = client.send_request(request, false).expect("request");
        body.send_data(Bytes::from_static(&[b'x'; 1024]), false)
            .expect("a first chunk");
        let response = response.await.expect("answer");
        assert_eq!(response.status(), 415);
        let mut answer = response.into_body();
        while let Some(chunk) = answer.data().await {
            let chunk = chunk.expect("answer's body");
            let _ = answer.flow_control().release_capacity(chunk.len());
        }
        // Whatever the server sent before its PONG has arrived once the PONG has.
        ping_pong.ping(h2::Ping::opaque()).await.expect("pong");
        let reset = futures::poll!(std::future::poll_fn(|cx| body.poll_reset(cx)));
        assert!(
            reset.is_pending(),
            "the server reset the body's stream: {reset:?}"
        );
        body.send_data(Bytes::from_static(&[b'x'; 16 * 1024]), true)
            .expect("the rest of the body");
    }
    assert!(
        !connection.is_finished(),
        "the server closed the connection"
    );
}
