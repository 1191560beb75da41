//! Content negotiation as kube-apiserver does it for custom resources: `Accept` with
//! parameters and q-values (`application/json;as=Table;v=v1;g=meta.k8s.io`,
//! `as=PartialObjectMetadata(List)`, `application/yaml`, `*/*`), request `Content-Type` for
//! bodies and patches. Protobuf is never produced or read; a protobuf clause is skipped so the
//! next acceptable one (clients always list JSON after it) is used.

use std::cmp::Ordering;

use crate::registry::meta::MetaVersion;

use super::error::ApiError;
use crate::registry::strategy::PatchSupport;

/// One clause of an `Accept` header.
#[derive(Debug, Clone, PartialEq)]
pub struct MediaRange {
    pub main_type: String,
    pub subtype: String,
    pub params: Vec<(String, String)>,
    pub q: f32,
}

impl MediaRange {
    fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Parses an `Accept` header (goautoneg semantics): malformed clauses are dropped, clauses
/// with `q=0` are not acceptable, and the rest are ordered by q-value, then by specificity,
/// keeping the client's order among equals.
pub fn parse_accept(header: &str) -> Vec<MediaRange> {
    let mut ranges: Vec<MediaRange> = header
        .split(',')
        .filter_map(|clause| {
            let mut parts = clause.split(';');
            let full_type = parts.next()?.trim();
            let (main_type, subtype) = match full_type.split_once('/') {
                Some((t, s)) if !s.contains('/') => (t.trim(), s.trim()),
                None if full_type == "*" => ("*", "*"),
                _ => return None,
            };
            if main_type.is_empty() || subtype.is_empty() {
                return None;
            }
            let mut q = 1.0f32;
            let mut params = Vec::new();
            for param in parts {
                let Some((k, v)) = param.split_once('=') else {
                    continue;
                };
                if v.contains('=') {
                    continue;
                }
                let (k, v) = (k.trim(), v.trim());
                if k == "q" {
                    q = v.parse().unwrap_or(0.0);
                } else {
                    params.push((k.to_owned(), v.to_owned()));
                }
            }
            Some(MediaRange {
                main_type: main_type.to_ascii_lowercase(),
                subtype: subtype.to_ascii_lowercase(),
                params,
                q,
            })
        })
        .filter(|r| r.q > 0.0)
        .collect();
    ranges.sort_by(|a, b| {
        b.q.partial_cmp(&a.q)
            .unwrap_or(Ordering::Equal)
            .then((a.main_type == "*").cmp(&(b.main_type == "*")))
            .then((a.subtype == "*").cmp(&(b.subtype == "*")))
    });
    ranges
}

/// The serialisations the server produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Json,
    Yaml,
}

impl Encoding {
    pub fn media_type(self) -> &'static str {
        match self {
            Self::Json => "application/json",
            Self::Yaml => "application/yaml",
        }
    }
}

/// Media types listed in 406 answers.
pub const OUTPUT_MEDIA_TYPES: &[&str] = &["application/json", "application/yaml"];
/// Media types listed in 406 answers for watch streams.
pub const STREAM_MEDIA_TYPES: &[&str] = &["application/json;stream=watch"];

/// A server-side conversion requested through `as=…;g=meta.k8s.io;v=…`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conversion {
    Table(MetaVersion),
    PartialObjectMetadata(MetaVersion),
    PartialObjectMetadataList(MetaVersion),
}

impl Conversion {
    fn kind(self) -> &'static str {
        match self {
            Self::Table(_) => "Table",
            Self::PartialObjectMetadata(_) => "PartialObjectMetadata",
            Self::PartialObjectMetadataList(_) => "PartialObjectMetadataList",
        }
    }

    fn meta_version(self) -> MetaVersion {
        match self {
            Self::Table(v)
            | Self::PartialObjectMetadata(v)
            | Self::PartialObjectMetadataList(v) => v,
        }
    }

    /// kube checks the pairing only when transforming: a list asked as
    /// `PartialObjectMetadata`, or an object as `PartialObjectMetadataList`, is a 406.
    pub fn check_target(self, is_list: bool) -> Result<(), ApiError> {
        match (self, is_list) {
            (Self::PartialObjectMetadata(_), true) => Err(ApiError::not_acceptable_message(
                "you requested PartialObjectMetadata, but the requested object is a list"
                    .to_owned(),
            )),
            (Self::PartialObjectMetadataList(_), false) => Err(ApiError::not_acceptable_message(
                "you requested PartialObjectMetadataList, but the requested object is not a list"
                    .to_owned(),
            )),
            _ => Ok(()),
        }
    }
}

/// What the endpoint can serve besides the plain object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Table conversion is available (resource endpoints with a table convertor).
    pub table: bool,
    /// PartialObjectMetadata(List) conversion is available (resource endpoints).
    pub partial_metadata: bool,
    /// The response is a watch stream (JSON only).
    pub stream: bool,
}

impl Capabilities {
    /// Non-resource endpoints (discovery, version): plain JSON or YAML.
    pub const PLAIN: Self = Self {
        table: false,
        partial_metadata: false,
        stream: false,
    };
    /// Resource endpoints (get, list, create, …).
    pub const RESOURCE: Self = Self {
        table: true,
        partial_metadata: true,
        stream: false,
    };
    /// Watch streams of resources.
    pub const WATCH: Self = Self {
        table: true,
        partial_metadata: true,
        stream: true,
    };
}

/// The outcome of output negotiation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    pub encoding: Encoding,
    pub conversion: Option<Conversion>,
    pub pretty: bool,
}

impl Negotiated {
    pub const JSON: Self = Self {
        encoding: Encoding::Json,
        conversion: None,
        pretty: false,
    };

    /// Also pretty-prints when the query says `pretty=<true>` (Go `ParseBool`), as kube does.
    pub fn with_query(mut self, query: &[(String, String)]) -> Self {
        if let Some((_, v)) = query.iter().find(|(k, _)| k == "pretty") {
            self.pretty = matches!(v.as_str(), "1" | "t" | "T" | "true" | "TRUE" | "True");
        }
        self
    }

    /// The response `Content-Type`, e.g. `application/json;as=Table;v=v1;g=meta.k8s.io`.
    pub fn content_type(&self) -> String {
        match self.conversion {
            None => self.encoding.media_type().to_owned(),
            Some(c) => format!(
                "{};as={};v={};g=meta.k8s.io",
                self.encoding.media_type(),
                c.kind(),
                c.meta_version().version()
            ),
        }
    }
}

fn conversion_for(range: &MediaRange, caps: Capabilities) -> Result<Option<Conversion>, ()> {
    let (kind, group, version) = (range.param("as"), range.param("g"), range.param("v"));
    if kind.is_none() && group.is_none() && version.is_none() {
        return Ok(None);
    }
    if group != Some("meta.k8s.io") {
        return Err(());
    }
    let version = version.and_then(MetaVersion::from_version).ok_or(())?;
    match kind {
        Some("Table") if caps.table => Ok(Some(Conversion::Table(version))),
        Some("PartialObjectMetadata") if caps.partial_metadata => {
            Ok(Some(Conversion::PartialObjectMetadata(version)))
        }
        Some("PartialObjectMetadataList") if caps.partial_metadata => {
            Ok(Some(Conversion::PartialObjectMetadataList(version)))
        }
        _ => Err(()),
    }
}

/// Chooses the response format from an `Accept` header; `None`/empty means JSON.
pub fn negotiate_output(accept: Option<&str>, caps: Capabilities) -> Result<Negotiated, ApiError> {
    let accept = accept.map(str::trim).unwrap_or("");
    if accept.is_empty() {
        return Ok(Negotiated::JSON);
    }
    for range in parse_accept(accept) {
        let encodings: &[Encoding] = match (range.main_type.as_str(), range.subtype.as_str()) {
            ("application", "json") => &[Encoding::Json],
            ("application", "yaml") => &[Encoding::Yaml],
            ("application", "*") | ("*", "*") => &[Encoding::Json],
            _ => &[],
        };
        for &encoding in encodings {
            if caps.stream && encoding != Encoding::Json {
                continue;
            }
            if let Some(stream) = range.param("stream")
                && (!stream.is_empty() && (stream != "watch" || !caps.stream))
            {
                continue;
            }
            let Ok(conversion) = conversion_for(&range, caps) else {
                continue;
            };
            return Ok(Negotiated {
                encoding,
                conversion,
                pretty: range.param("pretty") == Some("1"),
            });
        }
    }
    Err(ApiError::not_acceptable(if caps.stream {
        STREAM_MEDIA_TYPES
    } else {
        OUTPUT_MEDIA_TYPES
    }))
}

/// Formats accepted for request bodies of create and update.
pub const BODY_MEDIA_TYPES: &[&str] = &["application/json", "application/yaml"];
/// Patch formats accepted; strategic merge patch is deliberately absent (CRD parity, 415).
pub const PATCH_MEDIA_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
];

/// The media type of a `Content-Type` value, lower-cased, without parameters, when the value
/// is well-formed as Go's `mime.ParseMediaType` reads it (kube's input negotiation refuses
/// anything else with a 415): `type/subtype` of tokens, then `; key=value` parameters (a
/// token or a quoted string each), a trailing `;` allowed.
fn essence(content_type: &str) -> Option<String> {
    let (base, mut params) = content_type.split_once(';').unwrap_or((content_type, ""));
    let media_type = base.trim().to_ascii_lowercase();
    let (kind, subtype) = media_type.split_once('/')?;
    if !is_token(kind) || !is_token(subtype) {
        return None;
    }
    loop {
        params = params.trim_start();
        if params.is_empty() {
            return Some(media_type);
        }
        let (key, rest) = params.split_once('=')?;
        if !is_token(key.trim_end()) {
            return None;
        }
        let rest = rest.trim_start();
        let (value_ok, rest) = match rest.strip_prefix('"') {
            Some(quoted) => {
                let end = quoted_string_end(quoted)?;
                (true, &quoted[end + 1..])
            }
            None => {
                let end = rest.find(';').unwrap_or(rest.len());
                (is_token(rest[..end].trim_end()), &rest[end..])
            }
        };
        if !value_ok {
            return None;
        }
        let rest = rest.trim_start();
        params = match rest.strip_prefix(';') {
            Some(next) => next,
            None if rest.is_empty() => rest,
            None => return None,
        };
    }
}

/// RFC 2045 token: printable ASCII without spaces and `()<>@,;:\"/[]?=`.
fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_graphic() && !br#"()<>@,;:\"/[]?="#.contains(&b))
}

/// The index of the closing quote of a quoted string (after its opening quote).
fn quoted_string_end(text: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return Some(i),
            _ => {}
        }
    }
    None
}

/// A request body encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFormat {
    Json,
    Yaml,
}

/// The body format of a create/update; no `Content-Type` means JSON, like kube.
pub fn request_body_format(content_type: Option<&str>) -> Result<BodyFormat, ApiError> {
    let Some(content_type) = content_type.filter(|c| !c.is_empty()) else {
        return Ok(BodyFormat::Json);
    };
    match essence(content_type).as_deref() {
        Some("application/json") => Ok(BodyFormat::Json),
        Some("application/yaml") => Ok(BodyFormat::Yaml),
        _ => Err(ApiError::unsupported_media_type(BODY_MEDIA_TYPES)),
    }
}

/// Whether a `Content-Type` is Kubernetes protobuf.
pub fn is_protobuf(content_type: Option<&str>) -> bool {
    content_type.and_then(essence).as_deref() == Some("application/vnd.kubernetes.protobuf")
}

/// A PATCH flavour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// RFC 6902.
    Json,
    /// RFC 7386.
    Merge,
    /// Server-side apply; the body may be YAML or JSON.
    Apply,
}

impl PatchType {
    pub fn media_type(self) -> &'static str {
        match self {
            Self::Json => "application/json-patch+json",
            Self::Merge => "application/merge-patch+json",
            Self::Apply => "application/apply-patch+yaml",
        }
    }
}

/// The media types of a kind without server-side apply that takes strategic merge patches
/// (as merge patches): dev's Secret stand-in.
pub const SCHEMALESS_PATCH_MEDIA_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
];

/// The media types of a kind with neither server-side apply nor strategic merge patch.
pub const PLAIN_PATCH_MEDIA_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
];

/// The patch type of a PATCH for a kind that accepts `support`; anything else (strategic
/// merge patch for custom resources) is a 415 listing what is accepted.
pub fn patch_type(
    content_type: Option<&str>,
    support: PatchSupport,
) -> Result<PatchType, ApiError> {
    let accepted = match (support.apply, support.strategic_as_merge) {
        (true, _) => PATCH_MEDIA_TYPES,
        (false, true) => SCHEMALESS_PATCH_MEDIA_TYPES,
        (false, false) => PLAIN_PATCH_MEDIA_TYPES,
    };
    // kube's patch handler only cuts the value at a `;` that is not its first character.
    let media_type = content_type.map(|c| match c.find(';') {
        Some(at) if at > 0 => &c[..at],
        _ => c,
    });
    match media_type {
        Some("application/json-patch+json") => Ok(PatchType::Json),
        Some("application/merge-patch+json") => Ok(PatchType::Merge),
        Some("application/strategic-merge-patch+json") if support.strategic_as_merge => {
            Ok(PatchType::Merge)
        }
        Some("application/apply-patch+yaml") if support.apply => Ok(PatchType::Apply),
        Some("application/apply-patch+yaml") => Err(ApiError::apply_not_supported(accepted)),
        _ => Err(ApiError::unsupported_media_type(accepted)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECTL_TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    const METADATA_CLIENT: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";

    fn ok(accept: &str, caps: Capabilities) -> Negotiated {
        negotiate_output(Some(accept), caps).unwrap_or_else(|e| panic!("{accept}: {e}"))
    }

    #[test]
    fn accept_parsing_orders_by_q_then_specificity() {
        let ranges = parse_accept(
            "*/*;q=0.5, application/yaml;q=0.9, application/json, text/*, bogus, a/b/c, application/x;q=0",
        );
        let order: Vec<String> = ranges
            .iter()
            .map(|r| format!("{}/{}", r.main_type, r.subtype))
            .collect();
        assert_eq!(
            order,
            ["application/json", "text/*", "application/yaml", "*/*"]
        );
        let table = parse_accept("application/json; as=Table ;v=v1;g=meta.k8s.io");
        assert_eq!(table[0].param("as"), Some("Table"));
        assert_eq!(parse_accept("*")[0].subtype, "*");
    }

    #[test]
    fn kubectl_and_client_accept_headers() {
        let table = ok(KUBECTL_TABLE, Capabilities::RESOURCE);
        assert_eq!(table.conversion, Some(Conversion::Table(MetaVersion::V1)));
        assert_eq!(
            table.content_type(),
            "application/json;as=Table;v=v1;g=meta.k8s.io"
        );
        // Without table support the plain JSON fallback is chosen.
        assert_eq!(ok(KUBECTL_TABLE, Capabilities::PLAIN), Negotiated::JSON);
        let meta = ok(METADATA_CLIENT, Capabilities::RESOURCE);
        assert_eq!(
            meta.conversion,
            Some(Conversion::PartialObjectMetadataList(MetaVersion::V1))
        );
        assert_eq!(
            meta.content_type(),
            "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
        );
        assert_eq!(
            ok(
                "application/vnd.kubernetes.protobuf,application/json",
                Capabilities::RESOURCE
            ),
            Negotiated::JSON
        );
        assert_eq!(
            ok("application/json, */*", Capabilities::PLAIN),
            Negotiated::JSON
        );
        assert_eq!(ok("*/*", Capabilities::PLAIN), Negotiated::JSON);
        assert_eq!(ok("application/*", Capabilities::PLAIN), Negotiated::JSON);
        assert_eq!(
            ok("application/yaml", Capabilities::RESOURCE).encoding,
            Encoding::Yaml
        );
        assert!(ok("application/json;pretty=1", Capabilities::PLAIN).pretty);
        let pretty = |v: &str| {
            Negotiated::JSON
                .with_query(&[("pretty".to_owned(), v.to_owned())])
                .pretty
        };
        assert!(pretty("true") && pretty("1") && !pretty("false") && !pretty("yes"));
        let beta = ok(
            "application/json;as=Table;v=v1beta1;g=meta.k8s.io",
            Capabilities::RESOURCE,
        );
        assert_eq!(
            beta.conversion,
            Some(Conversion::Table(MetaVersion::V1Beta1))
        );
    }

    #[test]
    fn unacceptable_requests() {
        let cases = [
            (
                "application/vnd.kubernetes.protobuf",
                Capabilities::RESOURCE,
            ),
            ("text/html", Capabilities::PLAIN),
            ("application/json;as=Table", Capabilities::RESOURCE),
            (
                "application/json;as=Table;v=v2;g=meta.k8s.io",
                Capabilities::RESOURCE,
            ),
            (
                "application/json;as=Foo;v=v1;g=meta.k8s.io",
                Capabilities::RESOURCE,
            ),
            (
                "application/json;as=Table;v=v1;g=meta.k8s.io",
                Capabilities::PLAIN,
            ),
            ("application/json;stream=watch", Capabilities::RESOURCE),
        ];
        for (accept, caps) in cases {
            let err = negotiate_output(Some(accept), caps).expect_err(accept);
            assert_eq!(err.code().as_u16(), 406, "{accept}");
            assert_eq!(
                err.to_string(),
                "only the following media types are accepted: application/json, application/yaml"
            );
        }
        let err = negotiate_output(Some("application/yaml"), Capabilities::WATCH)
            .expect_err("yaml watch");
        assert_eq!(
            err.to_string(),
            "only the following media types are accepted: application/json;stream=watch"
        );
        assert_eq!(
            ok(
                "application/yaml, application/json;stream=watch",
                Capabilities::WATCH
            ),
            Negotiated::JSON
        );
    }

    #[test]
    fn conversion_pairing() {
        let list = Conversion::PartialObjectMetadataList(MetaVersion::V1);
        assert!(list.check_target(true).is_ok());
        assert_eq!(
            list.check_target(false)
                .expect_err("object")
                .code()
                .as_u16(),
            406
        );
        assert!(
            Conversion::PartialObjectMetadata(MetaVersion::V1)
                .check_target(true)
                .is_err()
        );
        assert!(
            Conversion::Table(MetaVersion::V1)
                .check_target(true)
                .is_ok()
        );
    }

    #[test]
    fn request_content_types() {
        assert_eq!(request_body_format(None), Ok(BodyFormat::Json));
        assert_eq!(
            request_body_format(Some("application/json; charset=utf-8")),
            Ok(BodyFormat::Json)
        );
        assert_eq!(
            request_body_format(Some("Application/YAML")),
            Ok(BodyFormat::Yaml)
        );
        assert_eq!(
            request_body_format(Some("application/vnd.kubernetes.protobuf"))
                .expect_err("pb")
                .to_string(),
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml"
        );
        let crd = PatchSupport {
            apply: true,
            strategic_as_merge: false,
        };
        let patch_type = |content_type| patch_type(content_type, crd);
        assert_eq!(
            patch_type(Some("application/merge-patch+json")),
            Ok(PatchType::Merge)
        );
        assert_eq!(
            patch_type(Some("application/json-patch+json; charset=utf-8")),
            Ok(PatchType::Json)
        );
        assert_eq!(
            patch_type(Some("application/apply-patch+yaml")),
            Ok(PatchType::Apply)
        );
        for malformed in [
            ";;;",
            "application/json; charset",
            "application",
            "application/json/x",
            "a b/c",
        ] {
            assert_eq!(
                request_body_format(Some(malformed)).map_err(|e| e.code().as_u16()),
                Err(415),
                "{malformed}"
            );
        }
        assert_eq!(
            request_body_format(Some("application/json;charset=\"utf-8\";")),
            Ok(BodyFormat::Json)
        );
        for unsupported in [
            Some("application/strategic-merge-patch+json"),
            Some("application/json"),
            Some(";;;"),
            Some("application/merge-patch+json "),
            None,
        ] {
            let err = patch_type(unsupported).expect_err("415");
            assert_eq!(err.code().as_u16(), 415);
            assert_eq!(
                err.to_string(),
                "the body of the request was in an unknown format - accepted media types include: \
                 application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
            );
        }
    }

    #[test]
    fn schemaless_patch_types() {
        let secret = PatchSupport {
            apply: false,
            strategic_as_merge: true,
        };
        assert_eq!(
            patch_type(Some("application/strategic-merge-patch+json"), secret),
            Ok(PatchType::Merge)
        );
        let err = patch_type(Some("application/apply-patch+yaml"), secret).expect_err("415");
        assert_eq!(err.code().as_u16(), 415);
        assert!(
            err.to_string()
                .contains("server-side apply is not supported")
        );
        let plain = PatchSupport {
            apply: false,
            strategic_as_merge: false,
        };
        let err =
            patch_type(Some("application/strategic-merge-patch+json"), plain).expect_err("415");
        assert!(
            err.to_string()
                .ends_with("application/json-patch+json, application/merge-patch+json")
        );
    }
}
