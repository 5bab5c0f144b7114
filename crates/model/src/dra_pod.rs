//! The pod's side of DRA: `spec.resourceClaims` and `status.resourceClaimStatuses`.

use std::sync::Arc;

use k8s_openapi::api::core::v1 as corev1;

use super::{MAX_REQUESTS, too_many};
use crate::meta::{FieldError, Projector};

/// A pod's `spec.resourceClaims[]` entry: where its claim comes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PodClaimSource {
    /// `resourceClaimName`: a claim shared by name.
    Claim(Arc<str>),
    /// `resourceClaimTemplateName`: a claim made for the pod from the template; its name
    /// is in the pod's `status.resourceClaimStatuses` once made.
    Template(Arc<str>),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodClaim {
    pub name: Arc<str>,
    pub source: PodClaimSource,
}

/// The pod's `spec.resourceClaims`.
pub fn pod_claims(spec: &corev1::PodSpec, p: &mut Projector) -> Result<Vec<PodClaim>, FieldError> {
    let claims = spec.resource_claims.as_deref().unwrap_or_default();
    too_many("spec.resourceClaims", claims.len(), MAX_REQUESTS)?;
    let mut out = Vec::new();
    for (i, c) in claims.iter().enumerate() {
        let source = match (&c.resource_claim_name, &c.resource_claim_template_name) {
            (Some(n), None) => PodClaimSource::Claim(p.str(n)),
            (None, Some(t)) => PodClaimSource::Template(p.str(t)),
            _ => {
                return Err(FieldError::new(
                    format!("spec.resourceClaims[{i}]"),
                    "exactly one of resourceClaimName and resourceClaimTemplateName",
                ));
            }
        };
        out.push(PodClaim {
            name: p.str(&c.name),
            source,
        });
    }
    Ok(out)
}

/// The pod's `status.resourceClaimStatuses`: (the pod's claim name, the generated claim's).
pub fn claim_statuses(
    status: Option<&corev1::PodStatus>,
    p: &mut Projector,
) -> Vec<(Arc<str>, Arc<str>)> {
    status
        .and_then(|s| s.resource_claim_statuses.as_ref())
        .into_iter()
        .flatten()
        .take(MAX_REQUESTS)
        .filter_map(|s| Some((p.str(&s.name), p.str(s.resource_claim_name.as_ref()?))))
        .collect()
}
