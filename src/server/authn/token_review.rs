//! Bearer tokens, checked by the management cluster's kube-apiserver through a TokenReview.
//! Answers are cached by token digest for a short time, positive and negative alike (kube's
//! delegating authenticator caches both for 10 s); failures to ask are not cached.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, header};
use futures::future::BoxFuture;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};

use super::{Authenticator, AuthnError, AuthnRequest, UserInfo};
use crate::server::ttl_cache::TtlCache;

/// kube's default for positive and negative answers.
pub const DEFAULT_CACHE_TTL: Duration = Duration::from_secs(10);
/// How long one TokenReview may take.
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
const CACHE_CAPACITY: usize = 4096;

/// The token of an `Authorization: Bearer <token>` header (kube's `bearertoken` rules: the
/// scheme is case-insensitive, the token is the second space-separated word).
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let mut parts = value.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

type Digest = [u8; 32];

fn digest(token: &str) -> Digest {
    let mut out = [0; 32];
    out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, token.as_bytes()).as_ref());
    out
}

/// Authenticates bearer tokens with TokenReviews.
pub struct TokenReviewAuthenticator {
    reviews: Api<TokenReview>,
    cache: TtlCache<Digest, Option<UserInfo>>,
    ttl: Duration,
}

impl TokenReviewAuthenticator {
    pub fn new(client: kube::Client, ttl: Duration) -> Arc<Self> {
        Arc::new(Self {
            reviews: Api::all(client),
            cache: TtlCache::new(CACHE_CAPACITY),
            ttl,
        })
    }

    /// The user a token belongs to, `None` if the cluster says it is not valid.
    async fn review(&self, token: &str) -> Result<Option<UserInfo>, AuthnError> {
        let key = digest(token);
        if let Some(answer) = self.cache.get(&key) {
            return Ok(answer);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let created = tokio::time::timeout(
            REVIEW_TIMEOUT,
            self.reviews.create(&PostParams::default(), &review),
        )
        .await
        .map_err(|_| AuthnError::TokenReview(format!("no answer within {REVIEW_TIMEOUT:?}")))?
        .map_err(|e| AuthnError::TokenReview(e.to_string()))?;
        let status = created.status.unwrap_or_default();
        let answer = match (status.authenticated, status.user) {
            (Some(true), Some(user)) => Some(UserInfo {
                name: user.username.unwrap_or_default(),
                uid: user.uid.unwrap_or_default(),
                groups: user.groups.unwrap_or_default(),
                extra: user.extra.unwrap_or_default(),
            })
            .filter(|u| !u.name.is_empty()),
            _ => {
                if let Some(error) = status.error.filter(|e| !e.is_empty()) {
                    tracing::debug!(%error, "token review rejected a token");
                }
                None
            }
        };
        self.cache.insert(key, answer.clone(), self.ttl);
        Ok(answer)
    }
}

impl Authenticator for TokenReviewAuthenticator {
    fn authenticate<'a>(
        &'a self,
        request: AuthnRequest<'a>,
    ) -> BoxFuture<'a, Result<Option<UserInfo>, AuthnError>> {
        Box::pin(async move {
            let Some(token) = bearer_token(request.headers) else {
                return Ok(None);
            };
            match self.review(token).await? {
                Some(user) => Ok(Some(user)),
                None => Err(AuthnError::InvalidToken),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn with_authorization(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(value).expect("value"),
        );
        headers
    }

    #[test]
    fn bearer_tokens_are_recognised_like_kube() {
        assert_eq!(bearer_token(&with_authorization("Bearer abc")), Some("abc"));
        assert_eq!(bearer_token(&with_authorization("bearer abc")), Some("abc"));
        assert_eq!(
            bearer_token(&with_authorization("  BEARER abc extra  ")),
            Some("abc")
        );
        assert_eq!(bearer_token(&with_authorization("Basic abc")), None);
        assert_eq!(bearer_token(&with_authorization("Bearer")), None);
        assert_eq!(bearer_token(&with_authorization("Bearer  abc")), None);
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }

    #[test]
    fn digests_differ_per_token() {
        assert_ne!(digest("a"), digest("b"));
        assert_eq!(digest("a"), digest("a"));
    }
}
