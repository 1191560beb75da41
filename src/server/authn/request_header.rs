//! The front-proxy (aggregator) authenticator: kube-apiserver proxies requests with a client
//! certificate from the request-header CA and names the user in `X-Remote-*` headers. The
//! headers are believed only from a peer whose chain verifies against that CA and whose common
//! name is an allowed name; from anyone else they are ignored.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::http::HeaderMap;
use futures::future::BoxFuture;

use super::trust::TrustStore;
use super::x509::CaBundle;
use super::{Authenticator, AuthnError, AuthnRequest, UserInfo};

/// The request-header part of `extension-apiserver-authentication`.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestHeaderConfig {
    /// Signs the front-proxy client certificate.
    pub ca: CaBundle,
    /// Common names a front-proxy certificate may have; empty allows any.
    pub allowed_names: Vec<String>,
    /// Headers naming the user; the first non-empty one wins.
    pub username_headers: Vec<String>,
    /// Headers naming the user's UID; the first non-empty one wins.
    pub uid_headers: Vec<String>,
    /// Headers naming groups; every value of every one counts.
    pub group_headers: Vec<String>,
    /// Prefixes of headers carrying extra attributes (`X-Remote-Extra-<key>`).
    pub extra_header_prefixes: Vec<String>,
}

impl RequestHeaderConfig {
    /// kube-apiserver's usual header names with `ca`, any common name.
    #[cfg(test)]
    pub fn for_tests(ca: CaBundle) -> Self {
        Self {
            ca,
            allowed_names: Vec::new(),
            username_headers: vec!["X-Remote-User".into()],
            uid_headers: vec!["X-Remote-Uid".into()],
            group_headers: vec!["X-Remote-Group".into()],
            extra_header_prefixes: vec!["X-Remote-Extra-".into()],
        }
    }

    /// Checks that `chain` is a front-proxy certificate: it chains to the CA and its common
    /// name is allowed.
    pub fn verify_proxy(
        &self,
        chain: &[rustls_pki_types::CertificateDer<'static>],
    ) -> Result<(), String> {
        let subject = self.ca.verify(chain)?;
        let cn = &subject.common_name;
        if self.allowed_names.is_empty() || self.allowed_names.contains(cn) {
            Ok(())
        } else {
            Err(format!(
                "client certificate common name {cn:?} is not one of the allowed names {:?}",
                self.allowed_names
            ))
        }
    }

    /// The user the headers name, or `None` without a user name.
    pub fn user_from_headers(&self, headers: &HeaderMap) -> Option<UserInfo> {
        let name = first_value(headers, &self.username_headers)?;
        Some(UserInfo {
            name,
            uid: first_value(headers, &self.uid_headers).unwrap_or_default(),
            groups: all_values(headers, &self.group_headers),
            extra: extra(headers, &self.extra_header_prefixes),
        })
    }
}

fn text(value: &axum::http::HeaderValue) -> Option<&str> {
    std::str::from_utf8(value.as_bytes()).ok()
}

/// The first non-empty value of the first header that has one (Go's `Header.Get` per name).
fn first_value(headers: &HeaderMap, names: &[String]) -> Option<String> {
    names
        .iter()
        .filter_map(|name| headers.get(name.as_str()).and_then(text))
        .find(|v| !v.is_empty())
        .map(str::to_owned)
}

/// Every non-empty value of every listed header, in order; one header line is one value.
fn all_values(headers: &HeaderMap, names: &[String]) -> Vec<String> {
    names
        .iter()
        .flat_map(|name| headers.get_all(name.as_str()).iter())
        .filter_map(text)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Extra attributes: for each prefix, each header starting with it (case-insensitively); the
/// key is the rest of the name, lower-cased then %-unescaped (kube escapes bytes that header
/// names cannot hold, e.g. `/` as `%2F`).
fn extra(headers: &HeaderMap, prefixes: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for prefix in prefixes {
        let prefix = prefix.to_ascii_lowercase();
        // Header names are stored lower-case, so every value of a name is one `get_all`.
        for name in headers.keys() {
            let Some(suffix) = name.as_str().strip_prefix(prefix.as_str()) else {
                continue;
            };
            let key = path_unescape(suffix).unwrap_or_else(|| suffix.to_owned());
            let values = headers
                .get_all(name)
                .iter()
                .filter_map(text)
                .map(str::to_owned);
            extra.entry(key).or_default().extend(values);
        }
    }
    extra
}

/// Go's `url.PathUnescape`: `%XX` sequences decoded; `None` for a malformed escape or a result
/// that is not UTF-8.
pub fn path_unescape(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Authenticates requests proxied by the aggregator.
#[derive(Debug, Clone)]
pub struct RequestHeaderAuthenticator {
    trust: Arc<TrustStore>,
}

impl RequestHeaderAuthenticator {
    pub fn new(trust: Arc<TrustStore>) -> Self {
        Self { trust }
    }
}

impl Authenticator for RequestHeaderAuthenticator {
    fn authenticate<'a>(
        &'a self,
        request: AuthnRequest<'a>,
    ) -> BoxFuture<'a, Result<Option<UserInfo>, AuthnError>> {
        let trust = self.trust.current();
        let result = match (trust.request_header(), request.peer_chain()) {
            (Some(config), Some(chain)) => config
                .verify_proxy(chain)
                .map(|()| config.user_from_headers(request.headers))
                .map_err(AuthnError::FrontProxy),
            _ => Ok(None),
        };
        Box::pin(std::future::ready(result))
    }

    fn is_front_proxy(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::authn::ConnectionInfo;
    use crate::server::authn::test_support::{authority, bundle, client_der};
    use crate::server::authn::trust::Trust;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                axum::http::HeaderName::from_bytes(name.as_bytes()).expect("name"),
                HeaderValue::from_str(value).expect("value"),
            );
        }
        map
    }

    #[test]
    fn identity_from_headers() {
        let config = RequestHeaderConfig::for_tests(bundle(&authority("proxy")));
        let user = config
            .user_from_headers(&headers(&[
                ("X-Remote-User", "alice"),
                ("X-Remote-Uid", "u-1"),
                ("X-Remote-Group", "devs"),
                ("X-Remote-Group", ""),
                ("X-Remote-Group", "system:authenticated"),
                ("X-Remote-Extra-Scopes", "view"),
                ("x-remote-extra-scopes", "edit"),
                (
                    "X-Remote-Extra-Authentication.kubernetes.io%2fcredential-id",
                    "JTI=abc",
                ),
                ("X-Remote-Extra-Bad%zzKey", "kept"),
                ("X-Other", "ignored"),
            ]))
            .expect("user");
        assert_eq!(user.name, "alice");
        assert_eq!(user.uid, "u-1");
        assert_eq!(user.groups, ["devs", "system:authenticated"]);
        let extra: Vec<(&str, Vec<&str>)> = user
            .extra
            .iter()
            .map(|(k, v)| (k.as_str(), v.iter().map(String::as_str).collect()))
            .collect();
        assert_eq!(
            extra,
            [
                (
                    "authentication.kubernetes.io/credential-id",
                    vec!["JTI=abc"]
                ),
                ("bad%zzkey", vec!["kept"]),
                ("scopes", vec!["view", "edit"]),
            ]
        );
        assert_eq!(
            config.user_from_headers(&headers(&[("X-Remote-User", "")])),
            None
        );
        assert_eq!(
            config.user_from_headers(&headers(&[("X-Remote-Group", "g")])),
            None
        );
    }

    #[test]
    fn configured_header_names_are_used() {
        let config = RequestHeaderConfig {
            username_headers: vec!["X-User".into(), "X-Fallback-User".into()],
            group_headers: vec!["X-Groups-A".into(), "X-Groups-B".into()],
            extra_header_prefixes: vec!["X-Extra-".into(), "X-More-".into()],
            uid_headers: vec![],
            ..RequestHeaderConfig::for_tests(bundle(&authority("proxy")))
        };
        let user = config
            .user_from_headers(&headers(&[
                ("X-Remote-User", "not-this-one"),
                ("X-Fallback-User", "bob"),
                ("X-Groups-B", "b"),
                ("X-Groups-A", "a"),
                ("X-Extra-K", "1"),
                ("X-More-K", "2"),
                ("X-Remote-Uid", "ignored"),
            ]))
            .expect("bob");
        assert_eq!(user.name, "bob");
        assert_eq!(user.uid, "");
        assert_eq!(user.groups, ["a", "b"]);
        assert_eq!(user.extra["k"], ["1", "2"]);
    }

    #[test]
    fn unescaping_follows_go() {
        assert_eq!(path_unescape("a%2Fb%2fc").as_deref(), Some("a/b/c"));
        assert_eq!(path_unescape("plain").as_deref(), Some("plain"));
        assert_eq!(path_unescape("%"), None);
        assert_eq!(path_unescape("%4"), None);
        assert_eq!(path_unescape("%g0"), None);
        assert_eq!(path_unescape("%ff"), None, "not UTF-8");
        assert_eq!(path_unescape("%C3%A9").as_deref(), Some("é"));
    }

    async fn authenticate(
        store: &Arc<TrustStore>,
        chain: Option<rustls_pki_types::CertificateDer<'static>>,
        request_headers: &HeaderMap,
    ) -> Result<Option<UserInfo>, AuthnError> {
        let connection = ConnectionInfo {
            remote_addr: None,
            peer_certificates: chain.map(|c| Arc::new(vec![c])),
        };
        RequestHeaderAuthenticator::new(Arc::clone(store))
            .authenticate(AuthnRequest {
                headers: request_headers,
                connection: Some(&connection),
            })
            .await
    }

    #[tokio::test]
    async fn headers_count_only_from_an_allowed_proxy_certificate() {
        let proxy_ca = authority("front-proxy-ca");
        let client_ca = authority("client-ca");
        let config = RequestHeaderConfig {
            allowed_names: vec!["front-proxy-client".into()],
            ..RequestHeaderConfig::for_tests(bundle(&proxy_ca))
        };
        let store = TrustStore::new(Trust::new(Some(bundle(&client_ca)), Some(config.clone())));
        let forged = headers(&[
            ("X-Remote-User", "admin"),
            ("X-Remote-Group", "system:masters"),
        ]);

        let proxied = authenticate(
            &store,
            Some(client_der(&proxy_ca, "front-proxy-client", &[])),
            &forged,
        )
        .await
        .expect("verified")
        .expect("user");
        assert_eq!(proxied.name, "admin");

        // No certificate, or an ordinary client certificate: the headers are not looked at.
        assert_eq!(authenticate(&store, None, &forged).await, Ok(None));
        assert!(matches!(
            authenticate(&store, Some(client_der(&client_ca, "bob", &[])), &forged).await,
            Err(AuthnError::FrontProxy(_))
        ));
        // Right CA, wrong common name.
        let err = authenticate(
            &store,
            Some(client_der(&proxy_ca, "intruder", &[])),
            &forged,
        )
        .await
        .expect_err("not allowed");
        assert!(
            err.to_string()
                .contains("\"intruder\" is not one of the allowed names"),
            "{err}"
        );
        // The proxy without a user header: not this authenticator's request.
        assert_eq!(
            authenticate(
                &store,
                Some(client_der(&proxy_ca, "front-proxy-client", &[])),
                &HeaderMap::new()
            )
            .await,
            Ok(None)
        );
        // Empty allowed names accept any common name from the CA.
        store.replace(Trust::new(
            None,
            Some(RequestHeaderConfig {
                allowed_names: vec![],
                ..config
            }),
        ));
        assert!(
            authenticate(
                &store,
                Some(client_der(&proxy_ca, "intruder", &[])),
                &forged
            )
            .await
            .expect("any name")
            .is_some()
        );
    }
}
