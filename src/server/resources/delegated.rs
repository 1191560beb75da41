//! Requests for co-tenant kinds kube-apiserver keeps (`registry::crd::delegated`): asked of
//! kube-apiserver in the version it keeps them in, as this server's service account once the
//! caller is authorized here, and answered in the request's version. kube-apiserver's CRD
//! handler does the rest as for any request of its own (admission, managedFields,
//! finalizers, resourceVersions, selectors, paging, watch bookmarks and expiry), so both paths
//! see one object. What differs from kube serving our version itself is in docs/api.md,
//! "Kinds kube-apiserver keeps".
//!
//! Bodies and answers are converted by the kind; `scale` is `autoscaling/v1` in every version
//! and passes as it is. A patch passes as it is when versions differ only in `apiVersion`;
//! with a conversion webhook, a JSON or merge patch is applied here to the object in the
//! request's version and written back with its resourceVersion (retried on a conflict unless
//! the patch names one), and an apply configuration is converted by the webhook.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde_json::Value;

use crate::api::decode::check_type_fields;
use crate::registry::crd::delegated::DelegatedKind;
use crate::registry::descriptor::GroupVersion;
use crate::registry::meta::ListMeta;
use crate::registry::patch::Patch;
use crate::registry::request_options::FieldValidation;
use crate::registry::rest::{Event, Subresource};
use crate::registry::strategy::PatchSupport;
use crate::registry::watch_event::{EventType, encode_event};

use super::super::body::{self, MAX_REQUEST_BODY_BYTES};
use super::super::error::{ApiError, Status};
use super::super::headers::warning_text;
use super::super::metrics::RequestLabels;
use super::super::negotiation::{self, BodyFormat, PatchType};
use super::super::watch as streaming;
use super::output::{Output, with_warnings};
use super::watch::{error_event, transformed};
use super::{Address, ApiState, Call};

/// Writes a webhook-converted patch retries after a conflict, as kube's patcher does.
const PATCH_CONFLICT_RETRIES: usize = 5;

/// How long a client waits before asking again while kube-apiserver does not serve the kind.
const NOT_SERVED_RETRY_SECONDS: i32 = 1;

/// One request for a kind kube-apiserver keeps.
struct Forward {
    kind: Arc<DelegatedKind>,
    client: kube::Client,
    version: GroupVersion,
    /// The request's path in kube's version, without the query.
    path: String,
    query: Option<String>,
    user_agent: Option<HeaderValue>,
}

/// What kube-apiserver answered: its status, warnings and body.
struct Answer {
    code: StatusCode,
    warnings: Vec<String>,
    body: Bytes,
}

/// Serves `call` for `kind`, which `address` locates.
pub(super) async fn serve(
    state: &ApiState,
    mut call: Call,
    kind: Arc<DelegatedKind>,
    address: Address,
    warnings: Vec<String>,
) -> Response {
    let Some(client) = state.server.kube.clone() else {
        return with_warnings(ApiError::route_not_found(), &warnings);
    };
    let stream = call.info.verb == "watch";
    let table = kind.table(address.version).cloned();
    let mut output = match call.output_in(address.version, table, stream, warnings) {
        Ok(output) => output,
        Err(response) => return *response,
    };
    let forward = Forward {
        kind: Arc::clone(&kind),
        client,
        version: address.version,
        path: kube_path(call.uri.path(), address.version, kind.kube_version()),
        query: call.uri.query().map(str::to_owned),
        user_agent: call.headers.get(header::USER_AGENT).cloned(),
    };
    if stream {
        let timeout = call
            .query_value("timeoutSeconds")
            .and_then(|t| t.parse().ok());
        let labels = RequestLabels::from_request(&call.info, &call.method, false, None);
        return forward.watch(state, labels, timeout, output).await;
    }
    let scale = address.subresource == Subresource::Scale;
    // As for kinds served here (`dispatch`): the cluster-wide path of a namespaced kind
    // serves lists and watches only.
    let in_namespace = address.namespace.is_some() || !kind.descriptor().namespaced;
    let verb = match call.info.verb.as_str() {
        "create" | "deletecollection" if !in_namespace => "",
        verb => verb,
    };
    let answer = match (verb, scale) {
        ("get" | "list", _) => forward.send(Method::GET, None, None).await,
        ("delete" | "deletecollection", _) | ("update" | "patch", true) => {
            forward.pass_body(&mut call).await
        }
        ("create", _) => forward.write(&mut call, Method::POST, &mut output).await,
        ("update", _) => forward.write(&mut call, Method::PUT, &mut output).await,
        ("patch", _) => forward.patch(&mut call, &mut output).await,
        _ => Err(ApiError::method_not_supported(
            &super::super::GroupResource::new(kind.descriptor().group, kind.descriptor().plural),
            &call.info.verb,
        )),
    };
    match answer {
        Ok(answer) => forward.answer(answer, output),
        Err(e) => output.error(e),
    }
}

/// `/apis/<group>/<version>/…` with kube's version in place of ours.
fn kube_path(path: &str, version: GroupVersion, kube_version: &str) -> String {
    let ours = format!("/apis/{}/{}", version.group, version.version);
    match path.strip_prefix(&ours) {
        Some(rest) => format!("/apis/{}/{kube_version}{rest}", version.group),
        None => path.to_owned(),
    }
}

impl Forward {
    fn unreachable(&self, e: impl std::fmt::Display) -> ApiError {
        let d = self.kind.descriptor();
        ApiError::service_unavailable_for(
            d.group,
            d.plural,
            format!(
                "kube-apiserver, which keeps the objects of {}, cannot be reached: {e}",
                d.kind
            ),
            NOT_SERVED_RETRY_SECONDS,
        )
    }

    fn request(
        &self,
        method: Method,
        query: Option<&str>,
        body: Option<(&str, Bytes)>,
    ) -> Result<axum::http::Request<kube::client::Body>, ApiError> {
        let uri = match query {
            Some(query) if !query.is_empty() => format!("{}?{query}", self.path),
            _ => self.path.clone(),
        };
        let mut builder = axum::http::Request::builder()
            .method(method)
            .uri(uri)
            .header(header::ACCEPT, "application/json");
        if let Some(agent) = &self.user_agent {
            // kube names a write's field manager after it when `fieldManager` is not given.
            builder = builder.header(header::USER_AGENT, agent);
        }
        let body = match body {
            Some((content_type, bytes)) => {
                builder = builder.header(header::CONTENT_TYPE, content_type);
                kube::client::Body::from(bytes)
            }
            None => kube::client::Body::empty(),
        };
        builder.body(body).map_err(ApiError::internal)
    }

    /// Sends a request with the request's own query and reads the whole answer.
    async fn send(
        &self,
        method: Method,
        query: Option<&str>,
        body: Option<(&str, Bytes)>,
    ) -> Result<Answer, ApiError> {
        let query = query.or(self.query.as_deref());
        let request = self.request(method, query, body)?;
        let response = self
            .client
            .send(request)
            .await
            .map_err(|e| self.unreachable(e))?;
        let code = response.status();
        let warnings = kube_warnings(response.headers());
        let body = whole(response.into_body())
            .await
            .map_err(|e| self.unreachable(e))?;
        Ok(Answer {
            code,
            warnings,
            body,
        })
    }

    /// Sends the request's body as it is (DeleteOptions, a scale).
    async fn pass_body(&self, call: &mut Call) -> Result<Answer, ApiError> {
        let method = call.method.clone();
        let content_type = call.content_type().unwrap_or("application/json").to_owned();
        let bytes = read_body(call).await?;
        let body = (!bytes.is_empty()).then_some((content_type.as_str(), bytes));
        self.send(method, None, body).await
    }

    /// A create or update: the object in kube's version.
    async fn write(
        &self,
        call: &mut Call,
        method: Method,
        output: &mut Output,
    ) -> Result<Answer, ApiError> {
        let format = negotiation::request_body_format(call.content_type())?;
        let decoded = body::decode(format, &read_body(call).await?)?;
        output
            .warnings
            .extend(duplicates(call, &decoded.duplicate_fields)?);
        let d = self.kind.descriptor();
        check_type_fields(&decoded.value, &self.version.api_version(), d.kind)
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        let object = self
            .kind
            .to_kube(self.version, decoded.value)
            .map_err(ApiError::internal)?;
        self.send(method, None, Some(("application/json", to_bytes(&object)?)))
            .await
    }

    /// A PATCH: JSON, merge or apply (strategic merge is a 415, as for any custom resource).
    async fn patch(&self, call: &mut Call, output: &mut Output) -> Result<Answer, ApiError> {
        let support = PatchSupport {
            apply: true,
            strategic_as_merge: false,
        };
        let patch_type = negotiation::patch_type(call.content_type(), support)?;
        let bytes = read_body(call).await?;
        match patch_type {
            PatchType::Apply => {
                let config = body::decode(BodyFormat::Yaml, &bytes)?;
                output
                    .warnings
                    .extend(duplicates(call, &config.duplicate_fields)?);
                let config = self
                    .kind
                    .configuration_to_kube(self.version, config.value)
                    .map_err(ApiError::internal)?;
                let content_type = "application/apply-patch+yaml";
                self.send(
                    Method::PATCH,
                    None,
                    Some((content_type, to_bytes(&config)?)),
                )
                .await
            }
            PatchType::Merge | PatchType::Json if !self.kind.converts_by_webhook() => {
                let content_type = call.content_type().unwrap_or_default().to_owned();
                let bytes = match patch_type {
                    PatchType::Merge => self.merge_patch_in_kube(&bytes)?,
                    _ => bytes,
                };
                self.send(Method::PATCH, None, Some((&content_type, bytes)))
                    .await
            }
            PatchType::Merge => {
                let decoded = body::decode_json(&bytes)?;
                output
                    .warnings
                    .extend(duplicates(call, &decoded.duplicate_fields)?);
                self.patch_here(&Patch::merge(decoded.value)?).await
            }
            PatchType::Json => self.patch_here(&Patch::json(&bytes)?).await,
        }
    }

    /// A merge patch that names our `apiVersion` names kube's instead.
    fn merge_patch_in_kube(&self, bytes: &Bytes) -> Result<Bytes, ApiError> {
        let mut patch = body::decode_json(bytes)?.value;
        let Some(api_version) = patch.get_mut("apiVersion") else {
            return Ok(bytes.clone());
        };
        if api_version.as_str() == Some(&self.version.api_version()) {
            *api_version = format!("{}/{}", self.version.group, self.kind.kube_version()).into();
        }
        to_bytes(&patch)
    }

    /// A JSON or merge patch applied here, in the request's version, to the object kube
    /// holds, and written back as an update on the resourceVersion read.
    async fn patch_here(&self, patch: &Patch) -> Result<Answer, ApiError> {
        let query = update_query(self.query.as_deref());
        let mut attempt = 0;
        loop {
            let current = self.send(Method::GET, Some(""), None).await?;
            if !current.code.is_success() {
                return Ok(current);
            }
            let current: Value =
                serde_json::from_slice(&current.body).map_err(ApiError::internal)?;
            let current = self
                .kind
                .from_kube(self.version, current)
                .map_err(ApiError::internal)?;
            let patched = patch.apply(&current)?;
            let names_version = patched.pointer("/metadata/resourceVersion")
                != current.pointer("/metadata/resourceVersion");
            let object = self
                .kind
                .to_kube(self.version, patched)
                .map_err(ApiError::internal)?;
            let answer = self
                .send(
                    Method::PUT,
                    Some(&query),
                    Some(("application/json", to_bytes(&object)?)),
                )
                .await?;
            attempt += 1;
            if answer.code != StatusCode::CONFLICT
                || names_version
                || attempt > PATCH_CONFLICT_RETRIES
            {
                return Ok(answer);
            }
        }
    }

    /// Answers what kube answered, in the request's version.
    fn answer(&self, answer: Answer, mut output: Output) -> Response {
        output.warnings.extend(answer.warnings);
        if !answer.code.is_success() {
            return output.error(self.kube_error(answer.code, &answer.body));
        }
        let value: Value = match serde_json::from_slice(&answer.body) {
            Ok(value) => value,
            Err(e) => return output.error(ApiError::internal(e)),
        };
        let kind = value
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let d = self.kind.descriptor();
        if kind == d.list_kind {
            let meta: ListMeta = value
                .get("metadata")
                .cloned()
                .and_then(|m| serde_json::from_value(m).ok())
                .unwrap_or_default();
            let items = value
                .get("items")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(|item| self.kind.from_kube(self.version, item))
                .collect::<Result<Vec<_>, _>>();
            return match items {
                Ok(items) => output.list(&items, &meta, d.list_kind),
                Err(e) => output.error(ApiError::internal(e)),
            };
        }
        if kind != d.kind {
            // A Status (a deletion done) or a Scale: the same in every version.
            return output.raw(answer.code, &value);
        }
        match self.kind.from_kube(self.version, value) {
            Ok(object) => output.object(answer.code, &object),
            Err(e) => output.error(ApiError::internal(e)),
        }
    }

    /// kube's error, as it answered it; a 404 that names no object means kube does not
    /// serve the kind (yet, or any more), which is a 503 here, never a 404 (a 404 tells
    /// clients the objects are gone).
    fn kube_error(&self, code: StatusCode, body: &[u8]) -> ApiError {
        let status: Option<Status> = serde_json::from_slice(body).ok();
        match status {
            Some(status)
                if code == StatusCode::NOT_FOUND
                    && status.details.as_ref().is_none_or(|d| d.name.is_empty()) =>
            {
                let d = self.kind.descriptor();
                ApiError::service_unavailable_for(
                    d.group,
                    d.plural,
                    format!(
                        "kube-apiserver keeps the objects of {} and does not serve its version \
                         {} now",
                        d.kind,
                        self.kind.kube_version()
                    ),
                    NOT_SERVED_RETRY_SECONDS,
                )
            }
            Some(status) if status.kind == "Status" => ApiError::from_status(status),
            _ => ApiError::internal(format!(
                "kube-apiserver answered {code}: {}",
                String::from_utf8_lossy(body)
            )),
        }
    }

    /// A watch, its events converted as they come.
    async fn watch(
        &self,
        state: &ApiState,
        labels: RequestLabels,
        timeout: Option<i64>,
        output: Output,
    ) -> Response {
        let request = match self.request(Method::GET, self.query.as_deref(), None) {
            Ok(request) => request,
            Err(e) => return output.error(e),
        };
        let response = match self.client.send(request).await {
            Ok(response) => response,
            Err(e) => return output.error(self.unreachable(e)),
        };
        let code = response.status();
        if !code.is_success() {
            let warnings = kube_warnings(response.headers());
            let body = whole(response.into_body()).await.unwrap_or_default();
            return self.answer(
                Answer {
                    code,
                    warnings,
                    body,
                },
                output,
            );
        }
        let version = self.version;
        let kind = Arc::clone(&self.kind);
        let events = lines(Body::new(response.into_body()).into_data_stream())
            .map(move |line| event(&kind, version, &line))
            // An ERROR event is the last.
            .scan(false, |ended, event| {
                let last = *ended;
                *ended = event.is_err();
                futures::future::ready((!last).then_some(event))
            });
        let content_type = output.negotiated.content_type();
        let framed = if output.is_plain_json() {
            events
                .map(|event| match event {
                    Ok(event) => encode_event(event.event_type, &event.object),
                    Err(e) => error_event(e),
                })
                .boxed()
        } else {
            transformed(events, output).boxed()
        };
        let guard = state.server.metrics.long_running(labels);
        streaming::response(
            framed,
            &content_type,
            streaming::watch_timeout(timeout),
            state.server.shutdown.clone(),
            Some(guard),
        )
    }
}

/// One line of kube's watch stream as an event in `version`.
fn event(kind: &DelegatedKind, version: GroupVersion, line: &[u8]) -> Result<Event, ApiError> {
    #[derive(serde::Deserialize)]
    struct Line {
        #[serde(rename = "type")]
        event_type: String,
        object: Value,
    }
    let Line { event_type, object } = serde_json::from_slice(line).map_err(ApiError::internal)?;
    let event_type = match event_type.as_str() {
        "ADDED" => EventType::Added,
        "MODIFIED" => EventType::Modified,
        "DELETED" => EventType::Deleted,
        "BOOKMARK" => EventType::Bookmark,
        _ => {
            let status: Status = serde_json::from_value(object).map_err(ApiError::internal)?;
            return Err(ApiError::from_status(status));
        }
    };
    let object = match event_type {
        // A bookmark's object is only its kind and resourceVersion.
        EventType::Bookmark => {
            let mut object = object;
            object["apiVersion"] = version.api_version().into();
            object
        }
        _ => kind
            .from_kube(version, object)
            .map_err(ApiError::internal)?,
    };
    Ok(Event { event_type, object })
}

/// The lines of a newline-delimited stream.
fn lines<E: Send + 'static>(
    chunks: impl Stream<Item = Result<Bytes, E>> + Send + 'static,
) -> impl Stream<Item = Vec<u8>> + Send + 'static {
    let mut pending = Vec::new();
    chunks
        .take_while(|chunk| futures::future::ready(chunk.is_ok()))
        .filter_map(|chunk| futures::future::ready(chunk.ok()))
        .flat_map(move |chunk| {
            pending.extend_from_slice(&chunk);
            let mut complete = Vec::new();
            while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                if line.iter().any(|b| !b.is_ascii_whitespace()) {
                    complete.push(line);
                }
            }
            futures::stream::iter(complete)
        })
}

/// The query of an update made from a patch: the patch's options an update takes, as the
/// caller encoded them.
fn update_query(query: Option<&str>) -> String {
    let kept = ["dryRun", "fieldManager", "fieldValidation", "pretty"];
    query
        .unwrap_or_default()
        .split('&')
        .filter(|pair| kept.contains(&pair.split('=').next().unwrap_or_default()))
        .collect::<Vec<_>>()
        .join("&")
}

/// A whole answer of kube-apiserver's (which bounds what it sends).
async fn whole(body: kube::client::Body) -> Result<Bytes, axum::Error> {
    axum::body::to_bytes(Body::new(body), usize::MAX).await
}

/// Warnings (Warn) or a strict decoding error (Strict) for duplicate fields of a body, as
/// kube's decoder reports them: kube cannot see them once the body is converted.
fn duplicates(call: &Call, fields: &[String]) -> Result<Vec<String>, ApiError> {
    let mode = FieldValidation::parse(call.query_value("fieldValidation").unwrap_or_default())
        .unwrap_or_default();
    let quoted: Vec<String> = fields
        .iter()
        .map(|p| format!("duplicate field {}", crate::registry::gofmt::quote(p)))
        .collect();
    match mode {
        FieldValidation::Strict if !quoted.is_empty() => Err(ApiError::bad_request(format!(
            "strict decoding error: {}",
            quoted.join(", ")
        ))),
        FieldValidation::Warn => Ok(quoted),
        _ => Ok(Vec::new()),
    }
}

async fn read_body(call: &mut Call) -> Result<Bytes, ApiError> {
    let body = std::mem::replace(&mut call.body, Body::empty());
    body::read_body(body, MAX_REQUEST_BODY_BYTES).await
}

fn to_bytes(value: &Value) -> Result<Bytes, ApiError> {
    serde_json::to_vec(value)
        .map(Bytes::from)
        .map_err(ApiError::internal)
}

/// The texts of kube's `Warning` headers.
fn kube_warnings(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all("warning")
        .iter()
        .filter_map(|v| warning_text(&String::from_utf8_lossy(v.as_bytes())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_kube_s_version() {
        let ours = GroupVersion::new("infrastructure.cluster.x-k8s.io", "v1alpha1");
        assert_eq!(
            kube_path(
                "/apis/infrastructure.cluster.x-k8s.io/v1alpha1/namespaces/a/things/b/status",
                ours,
                "v1beta1"
            ),
            "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/a/things/b/status"
        );
        assert_eq!(
            kube_path(
                "/apis/infrastructure.cluster.x-k8s.io/v1alpha1/watch/things",
                ours,
                "v1beta1"
            ),
            "/apis/infrastructure.cluster.x-k8s.io/v1beta1/watch/things"
        );
    }

    #[test]
    fn an_update_made_of_a_patch_keeps_the_options_an_update_takes() {
        assert_eq!(
            update_query(Some(
                "fieldManager=a%20b&force=true&dryRun=All&fieldValidation=Strict"
            )),
            "fieldManager=a%20b&dryRun=All&fieldValidation=Strict"
        );
        assert_eq!(update_query(None), "");
    }

    #[tokio::test]
    async fn a_watch_stream_is_cut_into_lines_wherever_its_chunks_end() {
        let chunks = ["{\"a\":1}\n{\"b\"", ":2}\n\n", "{\"c\":3}\n"]
            .map(|c| Ok::<_, std::io::Error>(Bytes::from(c)));
        let lines: Vec<Vec<u8>> = lines(futures::stream::iter(chunks)).collect().await;
        let lines: Vec<&str> = lines
            .iter()
            .map(|l| std::str::from_utf8(l).expect("UTF-8").trim_end())
            .collect();
        assert_eq!(lines, ["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"]);
    }
}
