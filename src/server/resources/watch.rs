//! WATCH: the registry's events in the negotiated representation (one-row Tables, the
//! first with column definitions; PartialObjectMetadata; or the objects), framed one JSON
//! document per line, until `timeoutSeconds`, shutdown, or an error event.

use axum::response::Response;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde_json::Value;

use crate::registry::field_selector::NAME_FIELD;
use crate::registry::rest::Event;
use crate::registry::watch_event::{EventType, encode_event};

use super::super::error::ApiError;
use super::super::metrics::RequestLabels;
use super::super::watch as streaming;
use super::output::Output;
use super::{ApiState, Call, Target};

/// GET `…?watch=true` (or the legacy `/watch/…` path; a name there watches one object).
pub(super) async fn watch(
    state: &ApiState,
    call: Call,
    target: &Target,
    warnings: Vec<String>,
) -> Response {
    let output = match call.output(target, true, warnings) {
        Ok(output) => output,
        Err(response) => return *response,
    };
    let mut pairs = call.pairs();
    pairs.push(("watch", "true"));
    let name_selector;
    if let Some(name) = &target.name {
        name_selector = format!("{NAME_FIELD}={name}");
        pairs.retain(|(k, _)| *k != "fieldSelector");
        pairs.push(("fieldSelector", &name_selector));
    }
    let options = match target.list_options(pairs, true) {
        Ok(options) => options,
        Err(e) => return output.error(ApiError::from(e)),
    };
    let (rest, version, namespace) = (&target.rest, target.version, target.namespace.as_deref());
    let content_type = output.negotiated.content_type();
    let framed = if output.is_plain_json() {
        // Each object as serialized once for every watcher of its version.
        match rest.watch_json(version, namespace, &options).await {
            Ok(events) => events
                .map(|event| match event {
                    Ok(event) => encode_event(event.event_type, &*event.object),
                    Err(e) => error_event(ApiError::from(e)),
                })
                .boxed(),
            Err(e) => return output.error(e.into()),
        }
    } else {
        match rest.watch(version, namespace, &options).await {
            Ok(events) => transformed(events, output).boxed(),
            Err(e) => return output.error(e.into()),
        }
    };
    let guard = state
        .server
        .metrics
        .long_running(RequestLabels::from_request(
            &call.info,
            &call.method,
            false,
            None,
        ));
    streaming::response(
        framed,
        &content_type,
        streaming::watch_timeout(options.timeout_seconds),
        state.server.shutdown.clone(),
        Some(guard),
    )
}

/// Events transformed as negotiated (Tables, the first with column definitions;
/// PartialObjectMetadata) and framed.
pub(super) fn transformed<E: Into<ApiError>>(
    events: impl Stream<Item = Result<Event, E>> + Send + 'static,
    output: Output,
) -> impl Stream<Item = Bytes> + Send + 'static {
    let mut first = true;
    events.map(move |event| match event {
        Ok(event) => {
            let object = match event.event_type {
                EventType::Bookmark => output.transform_bookmark(&event.object),
                _ => {
                    let object = output.transform_object(&event.object, !first);
                    first = false;
                    object
                }
            };
            encode_event(event.event_type, &object)
        }
        Err(e) => error_event(e.into()),
    })
}

/// The ERROR event that ends a watch: the Status of the error.
pub(super) fn error_event(error: ApiError) -> Bytes {
    let status = serde_json::to_value(error.status()).unwrap_or(Value::Null);
    encode_event(EventType::Error, &status)
}
