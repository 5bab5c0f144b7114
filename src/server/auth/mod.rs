//! Who may read the main port, with `hub.serving.authentication = "kubernetes"`: the
//! convention of Kubernetes controllers (kube-rbac-proxy, controller-runtime's secure
//! metrics). The request's bearer token is reviewed by the management cluster (TokenReview),
//! then whether that user may `get` the request's path, a non-resource URL, is asked of it
//! too (SubjectAccessReview), so RBAC decides: `nonResourceURLs: ["/metrics"]` for a
//! Prometheus, `["/fleetscaler/*"]` for a person (`rbac_path`: every path but `/metrics` is
//! asked under `/fleetscaler`). HEAD is checked as `get`.
//!
//! No token or a refused one: 401. Not allowed: 403. A review that fails or times out: 503
//! for that request, logged; the next request asks again. Answers are cached briefly
//! (`cache`), failures never.

mod cache;
mod review;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use http_body_util::Full;
use tokio::sync::Semaphore;

use self::cache::TtlCache;
pub use self::review::AccessError;
use self::review::KubeReviews;
use super::api::text;
use super::throttle::{Throttle, more};
use crate::config::HubConfig;
use crate::config::hub::Authentication;

/// How long an accepted token is trusted without asking again (the API server's own webhook
/// token cache keeps them 2 minutes).
const ACCEPTED_TTL: Duration = Duration::from_secs(60);
/// A refused token, kept so that a scraper with a bad token costs one review per period.
const REFUSED_TTL: Duration = Duration::from_secs(10);
const ALLOWED_TTL: Duration = Duration::from_secs(60);
const DENIED_TTL: Duration = Duration::from_secs(10);
const CACHED_ANSWERS: usize = 1024;
/// Reviews in flight at once; more wait (within the request's deadline).
const CONCURRENT_REVIEWS: usize = 16;

/// A user as TokenReview names them, and as SubjectAccessReview is asked about.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct User {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(super) struct ReviewError(pub String);

/// The two questions, asked of the management cluster (`review::KubeReviews`) or, in tests,
/// of a table.
pub(super) trait Reviews: Send + Sync + 'static {
    /// The token's user, or `None` when the token is not accepted.
    fn token(&self, token: &str) -> impl Future<Output = Result<Option<User>, ReviewError>> + Send;
    /// Whether `user` may `verb` the non-resource URL `path`.
    fn access(
        &self,
        user: &User,
        verb: &str,
        path: &str,
    ) -> impl Future<Output = Result<bool, ReviewError>> + Send;
}

pub(super) enum Access {
    Open,
    Kubernetes(Arc<Gate<KubeReviews>>),
}

impl Access {
    pub(super) async fn new(hub: &HubConfig) -> Result<Access, AccessError> {
        Ok(match hub.serving.authentication {
            Authentication::None => Access::Open,
            Authentication::Kubernetes => {
                Access::Kubernetes(Arc::new(Gate::new(KubeReviews::connect(hub).await?)))
            }
        })
    }

    /// `Err` with the answer when the request may not go on.
    pub(super) async fn check(&self, parts: &Parts) -> Result<(), Response<Full<Bytes>>> {
        match self {
            Access::Open => Ok(()),
            Access::Kubernetes(gate) => gate.check(parts).await,
        }
    }
}

type TokenKey = Box<[u8]>;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Question {
    user: Arc<User>,
    path: String,
}

pub(super) struct Gate<R> {
    reviews: R,
    tokens: TtlCache<TokenKey, Option<Arc<User>>>,
    answers: TtlCache<Question, bool>,
    in_flight: Semaphore,
    failures: Throttle,
}

impl<R: Reviews> Gate<R> {
    pub(super) fn new(reviews: R) -> Gate<R> {
        Gate {
            reviews,
            tokens: TtlCache::new(CACHED_ANSWERS),
            answers: TtlCache::new(CACHED_ANSWERS),
            in_flight: Semaphore::new(CONCURRENT_REVIEWS),
            failures: Throttle::new(Duration::from_secs(10)),
        }
    }

    pub(super) async fn check(&self, parts: &Parts) -> Result<(), Response<Full<Bytes>>> {
        let Some(token) = bearer(&parts.headers) else {
            return Err(unauthorized(
                "no bearer token: send Authorization: Bearer <token>\n",
            ));
        };
        let Some(user) = self.user(token).await? else {
            return Err(unauthorized(
                "the bearer token was not accepted by the management cluster (TokenReview)\n",
            ));
        };
        let path = rbac_path(parts.uri.path());
        if self.allowed(user.clone(), &path).await? {
            return Ok(());
        }
        Err(text(
            StatusCode::FORBIDDEN,
            &format!(
                "forbidden: {:?} may not get {} (RBAC: get on the non-resource URL {path}, \
                 e.g. through the fleetscaler-viewer ClusterRole; docs/hub.md, \"Serving\")\n",
                user.name,
                parts.uri.path()
            ),
        ))
    }

    async fn user(&self, token: &str) -> Result<Option<Arc<User>>, Response<Full<Bytes>>> {
        let key = token_key(token);
        if let Some(known) = self.tokens.get(&key, Instant::now()) {
            return Ok(known);
        }
        let _turn = self.in_flight.acquire().await.map_err(|_| unavailable())?;
        let user = self
            .reviews
            .token(token)
            .await
            .map_err(|e| self.failed(e))?
            .map(Arc::new);
        let ttl = if user.is_some() {
            ACCEPTED_TTL
        } else {
            REFUSED_TTL
        };
        self.tokens.insert(key, user.clone(), ttl, Instant::now());
        Ok(user)
    }

    async fn allowed(&self, user: Arc<User>, path: &str) -> Result<bool, Response<Full<Bytes>>> {
        let question = Question {
            user,
            path: path.to_string(),
        };
        if let Some(known) = self.answers.get(&question, Instant::now()) {
            return Ok(known);
        }
        let _turn = self.in_flight.acquire().await.map_err(|_| unavailable())?;
        let allowed = self
            .reviews
            .access(&question.user, "get", path)
            .await
            .map_err(|e| self.failed(e))?;
        let ttl = if allowed { ALLOWED_TTL } else { DENIED_TTL };
        self.answers.insert(question, allowed, ttl, Instant::now());
        Ok(allowed)
    }

    fn failed(&self, e: ReviewError) -> Response<Full<Bytes>> {
        if let Some(skipped) = self.failures.admit() {
            tracing::warn!(
                "answering 503: the management cluster could not review a request's \
                 credentials: {e}{}",
                more(skipped)
            );
        }
        unavailable()
    }
}

/// The token of `Authorization: Bearer <token>`, if any.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Where the hub's paths live for RBAC.
const RBAC_PREFIX: &str = "/fleetscaler";

/// The non-resource URL SubjectAccessReview is asked about for `path`. `/metrics` is itself,
/// as every controller's is, so a Prometheus's usual role works. Every other path is asked
/// under `/fleetscaler`: the API's own paths (`/api/...`) are Kubernetes' discovery URLs,
/// which every authenticated user may `get` (the built-in `system:discovery` ClusterRole),
/// and would let any service account of the cluster read the fleet. The dashboard's page
/// and assets are all `/fleetscaler/`.
fn rbac_path(path: &str) -> Cow<'_, str> {
    if path == "/metrics" {
        Cow::Borrowed(path)
    } else if super::dashboard::is_dashboard(path) {
        Cow::Owned(format!("{RBAC_PREFIX}/"))
    } else {
        Cow::Owned(format!("{RBAC_PREFIX}{path}"))
    }
}

/// The cache keeps a digest of each token, not the token.
fn token_key(token: &str) -> TokenKey {
    let sha256 = rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256.tls13();
    match sha256 {
        Some(suite) => suite
            .common
            .hash_provider
            .hash(token.as_bytes())
            .as_ref()
            .into(),
        None => token.as_bytes().into(),
    }
}

fn unauthorized(message: &str) -> Response<Full<Bytes>> {
    let mut r = text(StatusCode::UNAUTHORIZED, message);
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"fleetscaler\""),
    );
    r
}

fn unavailable() -> Response<Full<Bytes>> {
    text(
        StatusCode::SERVICE_UNAVAILABLE,
        "the management cluster could not review this request's credentials; try again\n",
    )
}

#[cfg(test)]
mod tests;
