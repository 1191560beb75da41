//! GET of one object and LIST of a collection.

use axum::http::StatusCode;
use axum::response::Response;

use super::super::error::ApiError;
use super::{Call, Target};

/// GET `…/<name>` (and `…/<name>/status`, which returns the whole object).
pub(super) async fn get(call: Call, target: &Target, warnings: Vec<String>) -> Response {
    let output = match call.output(target, false, warnings) {
        Ok(output) => output,
        Err(response) => return *response,
    };
    let name = target.name.as_deref().unwrap_or_default();
    let namespace = target.namespace.as_deref().unwrap_or_default();
    let rv = call.query_value("resourceVersion").unwrap_or_default();
    if output.is_plain_json() {
        return match target
            .rest
            .get_json(target.version, namespace, name, rv)
            .await
        {
            Ok(object) => output.json_object(&object),
            Err(e) => output.error(e.into()),
        };
    }
    match target.rest.get(target.version, namespace, name, rv).await {
        Ok(object) => output.object(StatusCode::OK, &object),
        Err(e) => output.error(e.into()),
    }
}

/// GET on a collection: one page of the list.
pub(super) async fn list(call: Call, target: &Target, warnings: Vec<String>) -> Response {
    let output = match call.output(target, false, warnings) {
        Ok(output) => output,
        Err(response) => return *response,
    };
    let options = match target.list_options(call.pairs(), true) {
        Ok(options) => options,
        Err(e) => return output.error(ApiError::from(e)),
    };
    let (rest, version, namespace) = (&target.rest, target.version, target.namespace.as_deref());
    let list_kind = rest.descriptor().list_kind;
    if output.is_plain_json() {
        return match rest.list_json(version, namespace, &options).await {
            Ok(page) => output.json_list(page.items, &page.meta, list_kind),
            Err(e) => output.error(e.into()),
        };
    }
    match rest.list(version, namespace, &options).await {
        Ok(page) => output.list(&page.items, &page.meta, list_kind),
        Err(e) => output.error(e.into()),
    }
}
