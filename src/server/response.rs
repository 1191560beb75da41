//! Writing objects in the negotiated encoding.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::error::ApiError;
use super::negotiation::{Encoding, Negotiated};

/// Serialises `value` as JSON (compact, or indented when pretty output was asked for) or YAML,
/// with the negotiated `Content-Type`.
pub fn object(code: StatusCode, negotiated: &Negotiated, value: &impl Serialize) -> Response {
    sized_object(code, negotiated, value, 0)
}

/// As [`object`], with room for `size_hint` bytes of compact JSON made up front: a large object
/// is then written into one buffer instead of one that doubles (and is copied) as it grows.
pub fn sized_object(
    code: StatusCode,
    negotiated: &Negotiated,
    value: &impl Serialize,
    size_hint: usize,
) -> Response {
    let body = match negotiated.encoding {
        Encoding::Json if negotiated.pretty => {
            serde_json::to_vec_pretty(value).map_err(|e| e.to_string())
        }
        Encoding::Json => {
            // serde_json::to_vec's own starting capacity, for small answers.
            let mut body = Vec::with_capacity(size_hint.max(128));
            serde_json::to_writer(&mut body, value)
                .map(|()| body)
                .map_err(|e| e.to_string())
        }
        Encoding::Yaml => serde_saphyr::to_string(value)
            .map(String::into_bytes)
            .map_err(|e| e.to_string()),
    };
    let body = match body {
        Ok(body) => body,
        Err(e) => return ApiError::internal(format!("encoding response: {e}")).into_response(),
    };
    typed((code, body).into_response(), negotiated)
}

/// `response` with the negotiated `Content-Type`.
pub fn typed(mut response: Response, negotiated: &Negotiated) -> Response {
    if let Ok(ct) = HeaderValue::from_str(&negotiated.content_type()) {
        response.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    async fn body(response: Response) -> (String, String) {
        let ct = response.headers()[header::CONTENT_TYPE]
            .to_str()
            .expect("ct")
            .to_owned();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .expect("body");
        (ct, String::from_utf8(bytes.to_vec()).expect("utf8"))
    }

    #[tokio::test]
    async fn json_yaml_and_pretty() {
        let value = json!({"kind": "APIGroupList", "groups": []});
        let (ct, text) = body(object(StatusCode::OK, &Negotiated::JSON, &value)).await;
        assert_eq!(
            (ct.as_str(), text.as_str()),
            ("application/json", r#"{"groups":[],"kind":"APIGroupList"}"#)
        );
        let yaml = Negotiated {
            encoding: Encoding::Yaml,
            ..Negotiated::JSON
        };
        let (ct, text) = body(object(StatusCode::OK, &yaml, &value)).await;
        assert_eq!(ct, "application/yaml");
        let back: serde_json::Value = serde_saphyr::from_str(&text).expect("yaml");
        assert_eq!(back, value);
        let pretty = Negotiated {
            pretty: true,
            ..Negotiated::JSON
        };
        let (_, text) = body(object(StatusCode::OK, &pretty, &value)).await;
        assert!(text.contains("\n  \"groups\""), "{text}");
    }
}
