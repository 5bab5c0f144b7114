//! The two reviews against the management cluster's API server, as kube-rbac-proxy makes
//! them: a TokenReview of the bearer token (who is this?) and a SubjectAccessReview of the
//! request as a non-resource URL (may they `get` this path?). Each call has a deadline.

use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

use super::{ReviewError, Reviews, User};
use crate::config::HubConfig;
use crate::hub::management::{self, ClientError};

#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error("the management cluster's client: {0}")]
    Client(#[from] ClientError),
}

/// Reviews by the management cluster: `hub.serving.context` in `hub.kubeconfigs`, or the
/// in-cluster service account.
pub(in crate::server) struct KubeReviews {
    client: kube::Client,
    timeout: Duration,
}

impl KubeReviews {
    pub(in crate::server) async fn connect(hub: &HubConfig) -> Result<KubeReviews, AccessError> {
        let timeout = hub.request_timeout;
        let context = hub.serving.context.as_deref();
        let client =
            management::client(&hub.kubeconfigs, context, timeout, "hub.serving.context").await?;
        Ok(KubeReviews { client, timeout })
    }

    async fn create<K>(&self, what: &'static str, object: &K) -> Result<K, ReviewError>
    where
        K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>
            + Clone
            + serde::Serialize
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        let api: Api<K> = Api::all(self.client.clone());
        let params = PostParams::default();
        match tokio::time::timeout(self.timeout, api.create(&params, object)).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => Err(ReviewError(format!("{what}: {e}"))),
            Err(_) => Err(ReviewError(format!(
                "{what}: no answer within {}s",
                self.timeout.as_secs()
            ))),
        }
    }
}

impl Reviews for KubeReviews {
    async fn token(&self, token: &str) -> Result<Option<User>, ReviewError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let answer = self.create("TokenReview", &review).await?;
        let Some(status) = answer.status else {
            return Err(ReviewError("TokenReview: an answer without status".into()));
        };
        if status.authenticated != Some(true) {
            if let Some(e) = status.error {
                tracing::debug!("TokenReview refused a token: {e}");
            }
            return Ok(None);
        }
        let info = status.user.unwrap_or_default();
        let name = info.username.unwrap_or_default();
        if name.is_empty() {
            return Err(ReviewError(
                "TokenReview: authenticated, but without a user name".into(),
            ));
        }
        Ok(Some(User {
            name,
            uid: info.uid.unwrap_or_default(),
            groups: info.groups.unwrap_or_default(),
            extra: info.extra.unwrap_or_default(),
        }))
    }

    async fn access(&self, user: &User, verb: &str, path: &str) -> Result<bool, ReviewError> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
                groups: Some(user.groups.clone()),
                extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_string()),
                    verb: Some(verb.to_string()),
                }),
                resource_attributes: None,
            },
            ..SubjectAccessReview::default()
        };
        let answer = self.create("SubjectAccessReview", &review).await?;
        let Some(status) = answer.status else {
            return Err(ReviewError(
                "SubjectAccessReview: an answer without status".into(),
            ));
        };
        if let Some(e) = status.evaluation_error.filter(|e| !e.is_empty()) {
            tracing::debug!("SubjectAccessReview for {:?}: {e}", user.name);
        }
        Ok(status.allowed && status.denied != Some(true))
    }
}
