//! ProvisioningRequests and the PodTemplates their pod sets name, kept in the snapshot's
//! `provisioning` as the storage kinds are kept in `storage`: projected as they arrive,
//! indexed by key.
//!
//! `provisioning.listed` says whether the engine decides about requests at all: only once
//! both kinds have listed (a template not listed yet must never be judged missing, which
//! fails its request). A cluster that does not serve the request kind has the feature off;
//! PodTemplates are then not watched either (they can be many, and nothing else reads them).

use kube::api::DynamicObject;

use super::table::Table;
use super::{Cache, Kind, Object};
use crate::model::provisioning::{PodTemplate, ProvisioningRequest, ProvisioningRequests};
use crate::model::{FieldError, ObjectKey};

/// One table per kind, over the vectors of `snapshot.provisioning`.
#[derive(Debug, Default)]
pub(super) struct ProvisioningTables {
    requests: Table<ObjectKey>,
    templates: Table<ObjectKey>,
}

impl ProvisioningTables {
    pub(super) fn begin_relist(&mut self, kind: Kind) {
        match kind {
            Kind::ProvisioningRequest => self.requests.begin_relist(),
            Kind::PodTemplate => self.templates.begin_relist(),
            _ => {}
        }
    }

    /// The relist of `kind` is complete: what it did not hold is gone. How many went.
    pub(super) fn end_relist(&mut self, kind: Kind, s: &mut ProvisioningRequests) -> usize {
        match kind {
            Kind::ProvisioningRequest => self.requests.end_relist(&mut s.requests),
            Kind::PodTemplate => self.templates.end_relist(&mut s.pod_templates),
            _ => 0,
        }
    }

    pub(super) fn remove(
        &mut self,
        kind: Kind,
        s: &mut ProvisioningRequests,
        key: &ObjectKey,
    ) -> bool {
        match kind {
            Kind::ProvisioningRequest => self.requests.remove(&mut s.requests, key).is_some(),
            Kind::PodTemplate => self.templates.remove(&mut s.pod_templates, key).is_some(),
            _ => false,
        }
    }
}

impl Cache {
    /// Projects and stores one request or template. A request new or changed wakes the
    /// runner (it wants a decision); a template never does (its request is what changes).
    /// One that cannot be read is kept with its problem (the engine leaves it alone, or
    /// does not simulate the requests naming the template), and the problem is reported.
    pub(super) fn store_provisioning(
        &mut self,
        kind: Kind,
        object: Object,
    ) -> Result<bool, FieldError> {
        let p = &mut self.projector;
        let s = &mut self.snapshot.provisioning;
        let t = &mut self.provisioning;
        match (kind, object) {
            (Kind::ProvisioningRequest, Object::Dynamic(o)) => {
                let (request, problem) = read_request(&o, p)?;
                let old = t
                    .requests
                    .upsert(&mut s.requests, request.key.clone(), request.clone());
                self.unchanged = old.as_ref() == Some(&request);
                let wake = old.is_none_or(|o| o != request);
                problem.map_or(Ok(wake), Err)
            }
            (Kind::PodTemplate, Object::PodTemplate(o)) => {
                let (template, problem) = PodTemplate::from_k8s(&o, p);
                let old = t.templates.upsert(
                    &mut s.pod_templates,
                    template.key.clone(),
                    template.clone(),
                );
                self.unchanged = old.as_ref() == Some(&template);
                problem.map_or(Ok(false), Err)
            }
            _ => {
                let what = format!("the watch of {} delivered another kind", kind.describe());
                Err(FieldError::new("kind", what))
            }
        }
    }

    /// Requests are decided only while both kinds are watched and listed.
    pub(super) fn refresh_provisioning_listed(&mut self) {
        self.snapshot.provisioning.listed = [Kind::ProvisioningRequest, Kind::PodTemplate]
            .iter()
            .all(|k| self.kinds.get(k).is_some_and(|s| s.synced));
    }

    /// How many requests and templates are cached, for the status.
    pub(super) fn provisioning_objects(&self) -> usize {
        let s = &self.snapshot.provisioning;
        s.requests.len() + s.pod_templates.len()
    }
}

/// A request as the engine reads it; one whose fields cannot be read is kept by name with
/// why (the plan names it, nothing is simulated for it), the error returned beside it.
fn read_request(
    o: &DynamicObject,
    p: &mut crate::model::Projector,
) -> Result<(ProvisioningRequest, Option<FieldError>), FieldError> {
    let value = serde_json::to_value(o).map_err(|e| FieldError::new("", e.to_string()))?;
    Ok(match ProvisioningRequest::from_json(&value, p) {
        Ok(r) => (r, None),
        Err(e) => (
            ProvisioningRequest::unreadable(&value, &e.to_string(), p),
            Some(e),
        ),
    })
}

#[cfg(test)]
#[path = "provisioning_tests.rs"]
mod tests;
