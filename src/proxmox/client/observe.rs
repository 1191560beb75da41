//! What the client reports about each request, without depending on the server:
//! `run::controller` implements [`CallObserver`] onto the server's metrics, which count
//! Proxmox API calls by operation and result, with their latency.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;

/// Receives one finished request.
pub trait CallObserver: Send + Sync {
    /// `endpoint` is the API's base URL (one per Proxmox VE cluster, so a bounded set),
    /// `operation` the method and path template (`GET /nodes/{node}/qemu/{vmid}/config`),
    /// `result` the HTTP status code of the answer or, without one, `timeout`, `stalled`
    /// or `transport`; `elapsed` is the round trip, without waiting for the rate limit.
    fn call(&self, endpoint: &str, operation: &str, result: &str, elapsed: Duration);
}

/// A shared [`CallObserver`], cheap to clone, for client configurations.
#[derive(Clone)]
pub struct ApiObserver(Arc<dyn CallObserver>);

impl ApiObserver {
    pub fn new(observer: Arc<dyn CallObserver>) -> Self {
        Self(observer)
    }

    pub(super) fn call(
        &self,
        endpoint: &str,
        method: &Method,
        path: &str,
        result: &str,
        elapsed: Duration,
    ) {
        self.0
            .call(endpoint, &operation(method, path), result, elapsed);
    }
}

impl fmt::Debug for ApiObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiObserver")
    }
}

/// The collections whose next path segment is a name or id chosen at run time, and the
/// placeholder that stands for it, so that the operation label has a bounded set of
/// values (the paths the client builds, not the nodes, VMs and tasks it meets).
const PARAMETERS: [(&str, &str); 7] = [
    ("nodes", "{node}"),
    ("resources", "{sid}"),
    ("qemu", "{vmid}"),
    ("lxc", "{vmid}"),
    ("tasks", "{upid}"),
    ("storage", "{storage}"),
    ("content", "{volume}"),
];

/// `GET /nodes/{node}/qemu/{vmid}/status/current` for
/// `GET /nodes/pve1/qemu/101/status/current`.
fn operation(method: &Method, path: &str) -> String {
    let mut template = format!("{method} ");
    let mut previous = "";
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        template.push('/');
        match PARAMETERS
            .iter()
            .find(|(collection, _)| *collection == previous)
        {
            Some((_, placeholder)) => template.push_str(placeholder),
            None => template.push_str(segment),
        }
        previous = segment;
    }
    template
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_name_the_path_template() {
        for (method, path, expected) in [
            (
                Method::GET,
                "/nodes/pve1/qemu/101/status/current",
                "GET /nodes/{node}/qemu/{vmid}/status/current",
            ),
            (
                Method::POST,
                "/nodes/pve1/qemu/9000/clone",
                "POST /nodes/{node}/qemu/{vmid}/clone",
            ),
            (
                Method::GET,
                "/nodes/pve2/tasks/UPID%3Apve2%3A0000/status",
                "GET /nodes/{node}/tasks/{upid}/status",
            ),
            (
                Method::DELETE,
                "/nodes/pve1/storage/local/content/local%3Aiso%2Fseed.iso",
                "DELETE /nodes/{node}/storage/{storage}/content/{volume}",
            ),
            (Method::GET, "/nodes/pve1/qemu", "GET /nodes/{node}/qemu"),
            (Method::GET, "/cluster/nextid", "GET /cluster/nextid"),
            (Method::GET, "/version", "GET /version"),
        ] {
            assert_eq!(operation(&method, path), expected, "{path}");
        }
    }
}
