//! A request's body is read to its end, even when its answer did not need it.
//!
//! A handler that answers without reading the body (401, 403, 415, a route not found) drops it.
//! Over HTTP/2 that resets the stream, and h2 counts every such reset against its limit of
//! locally reset streams (1,024 a connection, its guard against reset floods): past it, it sends
//! `GOAWAY` and closes the connection. kube-apiserver proxies every request to us over one
//! connection, so every request in flight on it then fails with a 503 (`http2: client
//! connection force closed`; measured, docs/benchmarks.md). So the body outlives the handler: the
//! answer holds it, and once the answer is sent, a task reads what is left of it and throws that
//! away, as a client expects of a server that answered early. The stream then ends without a
//! reset. Reading stops, and the stream is reset after all, past the request body limit or
//! [`DRAIN_TIMEOUT`]: a body we would never accept is not worth more than that.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use bytes::Bytes;
use http_body::{Body as _, Frame, SizeHint};

use super::body::MAX_REQUEST_BODY_BYTES;

/// How long what is left of a body is read after its answer.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The request's own body, shared by the handler's view of it and the answer that holds it.
type Shared = Arc<Mutex<Body>>;

/// The body of a request, kept until the answer given to [`Held::until_sent`] has been sent,
/// then read to its end.
pub struct Held(Option<Shared>);

/// Gives the handler a view of the request's body and keeps the body itself. A request
/// without a body is passed as it is.
pub fn hold(request: Request) -> (Request, Held) {
    if request.body().is_end_stream() {
        return (request, Held(None));
    }
    let (parts, body) = request.into_parts();
    let shared = Arc::new(Mutex::new(body));
    let view = Body::new(SharedBody(shared.clone()));
    (Request::from_parts(parts, view), Held(Some(shared)))
}

impl Held {
    /// `response`, holding the request's body until the server is done sending it, then reading
    /// what is left of it.
    pub fn until_sent(self, response: Response) -> Response {
        let Some(request_body) = self.0 else {
            return response;
        };
        response.map(|body| Body::new(Holding { body, request_body }))
    }
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Body> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The handler's view of a held body: reads go to the body in [`Held`].
struct SharedBody(Shared);

impl http_body::Body for SharedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut *lock(&self.0)).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        lock(&self.0).is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        lock(&self.0).size_hint()
    }
}

/// An answer's body that holds the request's body. The server drops it once the answer's end
/// is sent (not when its last frame is yielded: the end of stream goes out after that); the
/// request's body is then read to its end.
struct Holding {
    body: Body,
    request_body: Shared,
}

impl Drop for Holding {
    fn drop(&mut self) {
        if lock(&self.request_body).is_end_stream() {
            return;
        }
        // The server drops answers on its own runtime; elsewhere (a test dropping an answer)
        // the body is simply dropped.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(drain(self.request_body.clone()));
        }
    }
}

/// Reads `body` to its end and drops what it reads, for at most [`MAX_REQUEST_BODY_BYTES`] and
/// [`DRAIN_TIMEOUT`].
async fn drain(body: Shared) {
    let mut left = MAX_REQUEST_BODY_BYTES;
    let read_to_end = std::future::poll_fn(|cx| {
        loop {
            match Pin::new(&mut *lock(&body)).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    let len = frame.data_ref().map_or(0, Bytes::len);
                    let Some(rest) = left.checked_sub(len) else {
                        return Poll::Ready(());
                    };
                    left = rest;
                }
                Poll::Ready(None | Some(Err(_))) => return Poll::Ready(()),
                Poll::Pending => return Poll::Pending,
            }
        }
    });
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, read_to_end).await;
}

impl http_body::Body for Holding {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
