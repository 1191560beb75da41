//! Raw HTTP/1.1 over TLS: framing a client library would never send, and headers at and
//! past Go's limits (the aggregator forwards a client's headers, so what kube-apiserver
//! accepts must not fail here).

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::{Fixture, target};

/// Sends `request` as bytes on a fresh TLS connection (admin certificate) and returns the
/// status code of the answer, `None` when the server closed without one.
async fn send_raw(fixture: &Fixture, request: &[u8]) -> Option<u16> {
    let config = crate::server::admin_tls_config(&fixture.api.dev.server.pki);
    let connector = TlsConnector::from(Arc::new(config));
    let addr = fixture.api.dev.server.server.local_addr();
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = ServerName::try_from("localhost").expect("name");
    let mut tls = connector.connect(name, tcp).await.expect("handshake");
    tls.write_all(request).await.ok()?;
    tls.flush().await.ok()?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 8192];
    let read = async {
        loop {
            match tls.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    answer.extend_from_slice(&buf[..n]);
                    if answer.windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(20), read).await;
    let text = String::from_utf8_lossy(&answer);
    text.strip_prefix("HTTP/1.1 ")
        .or_else(|| text.strip_prefix("HTTP/1.0 "))
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
}

fn get(path: &str, extra: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{extra}Connection: close\r\n\r\n")
        .into_bytes()
}

#[tokio::test(flavor = "multi_thread")]
async fn framing_and_headers() {
    let fixture = Fixture::start().await;
    let path = target("v1alpha2");
    let many_headers: String = (0..1_000)
        .map(|i| format!("X-Extra-{i}: value\r\n"))
        .collect();
    let big_header = format!("X-Big: {}\r\n", "v".repeat(900 * 1024));
    let huge_header = format!("X-Huge: {}\r\n", "v".repeat(2560 * 1024));
    let cases: Vec<(&str, Vec<u8>, Option<u16>)> = vec![
        ("a request line of garbage", b"GARBAGE\r\n\r\n".to_vec(), Some(400)),
        ("no HTTP version", format!("GET {path}\r\n\r\n").into_bytes(), Some(400)),
        // Go answers 505; hyper's parser refuses the version as a bad request.
        ("HTTP/9.9", format!("GET {path} HTTP/9.9\r\nHost: x\r\n\r\n").into_bytes(), Some(400)),
        ("a header without a colon", get(&path, "NoColon\r\n"), Some(400)),
        ("a NUL in a header value", get(&path, "X-A: a\0b\r\n"), Some(400)),
        ("a space before the colon", get(&path, "X-A : b\r\n"), Some(400)),
        ("1,000 headers (Go accepts them)", get(&path, &many_headers), Some(200)),
        ("a 900 KiB header (under Go's 1 MiB)", get(&path, &big_header), Some(200)),
        ("a 2.5 MiB header (over Go's 1 MiB, past the read buffer)", get(&path, &huge_header), Some(431)),
        ("HTTP/1.0 without Host", format!("GET {path} HTTP/1.0\r\n\r\n").into_bytes(), Some(200)),
        (
            "a declared body over 3 MiB",
            format!("POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4000000\r\n\r\n{{").into_bytes(),
            Some(413),
        ),
        (
            // Chunked wins over the length (RFC 9112 6.3, as in Go), then a POST to an
            // object is no verb.
            "Content-Length and Transfer-Encoding together",
            format!("POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n").into_bytes(),
            Some(405),
        ),
        (
            "two different Content-Lengths",
            format!("POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{{}}").into_bytes(),
            Some(400),
        ),
        (
            "a chunk size that is no number",
            format!("PUT {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\n{{}}\r\n0\r\n\r\n").into_bytes(),
            Some(400),
        ),
        (
            "a body shorter than declared, then silence",
            format!("PUT {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"a\":").into_bytes(),
            None,
        ),
        (
            "an absolute URI of another host",
            format!("GET https://elsewhere.example{path} HTTP/1.1\r\nHost: elsewhere.example\r\nConnection: close\r\n\r\n").into_bytes(),
            Some(200),
        ),
        ("a path with a NUL", b"GET /apis/\0 HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), Some(400)),
        ("a request target of '*'", b"OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec(), Some(404)),
    ];
    let count = cases.len();
    for (what, request, expected) in cases {
        let answer = send_raw(&fixture, &request).await;
        match expected {
            // The server may also just close: what matters is that it never answers 5xx.
            None => assert!(answer.is_none_or(|c| c < 500), "{what}: {answer:?}"),
            Some(code) => assert_eq!(answer, Some(code), "{what}"),
        }
        assert!(fixture.ready().await, "not ready after {what}");
    }
    println!("hostile raw HTTP: {count} requests, 0 5xx, server ready");
}
