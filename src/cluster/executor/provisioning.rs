//! ProvisioningRequests: the conditions the engine decided written to each request's
//! `status` subresource, and the requests finished longer than the TTL ago deleted, as
//! upstream's `provreqclient` does (`UpdateProvisioningRequest`, `DeleteProvisioningRequest`).
//!
//! A write is safe to repeat: the request is read at its own version, its conditions merged
//! with the writes as `meta.SetStatusCondition` does (`lastTransitionTime` kept while the
//! status stays), and the list merge-patched at the resourceVersion read, so a request
//! changed meanwhile (409) is left to the next pass, which decides again. A request gone
//! (404) is fine.
//!
//! An atomic scale-up is `Provisioned=True` only once its scale-up was written: one that
//! failed is written `Provisioned=False` (`CapacityIsNotFound`), as upstream's
//! best-effort-atomic class does when its scale-up fails; one skipped (dry run, not the
//! leader, a plan overtaken) writes nothing, and the next pass decides again.

use kube::Api;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};

use super::failure::{Stop, entry_of};
use super::{Context, Executor};
use crate::cluster::error::Write;
use crate::cluster::outcome::{Action, Entry};
use crate::engine::plan::Plan;
use crate::engine::provisioning::conditions::{
    CAPACITY_IS_NOT_FOUND_REASON, ConditionWrite, NOT_FOUND_RETRY_MSG,
};
use crate::engine::provisioning::{Decision, RequestDecision};
use crate::model::ObjectKey;
use crate::model::provisioning::{ConditionStatus, PROVISIONED};

const KIND: &str = "ProvisioningRequest";
const PLURAL: &str = "provisioningrequests";

impl Executor {
    /// Writes the plan's request decisions; `entries` are this pass's, scale-ups among them.
    pub(super) async fn provisioning(&self, plan: &Plan, entries: &[Entry]) -> Vec<Entry> {
        let mut out = Vec::new();
        for d in &plan.provisioning_requests {
            if d.decision == Decision::Delete {
                out.push(self.delete_request(d).await);
                continue;
            }
            if d.conditions.is_empty() {
                continue;
            }
            let (conditions, held) = gated(d, entries);
            let action = Action::WriteRequestStatus {
                request: d.request.clone(),
                api_version: d.api_version.clone(),
                conditions,
            };
            let entry = match held {
                Some(reason) => Entry::skipped(action, reason),
                None => {
                    let result = self.write_request(&action).await;
                    entry_of(action, result)
                }
            };
            out.push(entry);
        }
        out
    }

    async fn write_request(&self, action: &Action) -> Result<String, Stop> {
        let Action::WriteRequestStatus {
            request,
            api_version,
            conditions,
        } = action
        else {
            return Err(Stop::Skip("not a request's status".into()));
        };
        self.may_act()?;
        let api = requests(&self.ctx, request, api_version);
        let name = &*request.name;
        let current = self
            .ctx
            .call(|| format!("get {KIND} {request}"), api.get_opt(name))
            .await?;
        // Gone: nothing to write, and no event on it.
        let Some(current) = current else {
            return Err(Stop::Skip(format!("{KIND} {request} is gone")));
        };
        let now = serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::now(),
        ))
        .unwrap_or(Value::Null);
        let existing = current
            .data
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let patch = json!({
            "metadata": {"resourceVersion": current.metadata.resource_version},
            "status": {"conditions": merged(existing, conditions, &now)},
        });
        self.ctx.may_write()?;
        let target = Write {
            method: "PATCH",
            kind: KIND,
            subresource: Some("status"),
            namespace: Some(&request.namespace),
            name,
        };
        let written = self
            .ctx
            .write(
                target,
                || format!("write the conditions of {KIND} {request}"),
                api.patch_status(name, &PatchParams::default(), &Patch::Merge(patch)),
            )
            .await;
        match written {
            Ok(_) => Ok(format!("{KIND} {request}: {}", summary(conditions))),
            Err(e) if e.is_not_found() => Err(Stop::Skip(format!("{KIND} {request} is gone"))),
            Err(e) if e.is_conflict() => Err(Stop::Skip(format!(
                "{KIND} {request} changed meanwhile: the next pass decides again"
            ))),
            Err(e) => Err(e.into()),
        }
    }

    async fn delete_request(&self, d: &RequestDecision) -> Entry {
        let action = Action::DeleteRequest {
            request: d.request.clone(),
            api_version: d.api_version.clone(),
        };
        let result = async {
            self.may_act()?;
            let api = requests(&self.ctx, &d.request, &d.api_version);
            let target = Write {
                method: "DELETE",
                kind: KIND,
                subresource: None,
                namespace: Some(&d.request.namespace),
                name: &d.request.name,
            };
            let deleted = self
                .ctx
                .write(
                    target,
                    || format!("delete {KIND} {}", d.request),
                    api.delete(&d.request.name, &DeleteParams::default()),
                )
                .await;
            match deleted {
                Ok(_) => Ok(format!("{KIND} {} deleted: {}", d.request, d.reason)),
                Err(e) if e.is_not_found() => Ok(format!("{KIND} {} already gone", d.request)),
                Err(e) => Err(Stop::from(e)),
            }
        };
        entry_of(action, result.await)
    }
}

/// The request's API at the version it was read at (`autoscaling.x-k8s.io/v1`).
fn requests(ctx: &Context, request: &ObjectKey, api_version: &str) -> Api<DynamicObject> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, KIND);
    let ar = ApiResource::from_gvk_with_plural(&gvk, PLURAL);
    Api::namespaced_with(ctx.client.clone(), &request.namespace, &ar)
}

/// The writes of a request whose scale-up this pass did, as its scale-up went: written as
/// decided once done; `Provisioned=False` (`CapacityIsNotFound`, upstream's words) once
/// failed; held (with why) when skipped or absent. Other requests' writes go as decided.
pub(super) fn gated(
    d: &RequestDecision,
    entries: &[Entry],
) -> (Vec<ConditionWrite>, Option<String>) {
    let group = match (&d.node_group, d.decision) {
        (Some(group), Decision::ScaledUp) => group,
        _ => return (d.conditions.clone(), None),
    };
    let scale_up = entries
        .iter()
        .find(|e| matches!(&e.action, Action::ScaleUp { group: g, .. } if g == group));
    match scale_up.map(|e| &e.outcome) {
        Some(crate::cluster::outcome::Outcome::Done { .. }) => (d.conditions.clone(), None),
        Some(crate::cluster::outcome::Outcome::Failed { .. }) => {
            let conditions = d
                .conditions
                .iter()
                .map(|c| match c.type_ {
                    PROVISIONED => ConditionWrite {
                        status: ConditionStatus::False,
                        reason: CAPACITY_IS_NOT_FOUND_REASON,
                        message: NOT_FOUND_RETRY_MSG.into(),
                        ..c.clone()
                    },
                    _ => c.clone(),
                })
                .collect();
            (conditions, None)
        }
        Some(crate::cluster::outcome::Outcome::Skipped { reason }) => (
            d.conditions.clone(),
            Some(format!(
                "the scale-up of {group} was not written ({reason})"
            )),
        ),
        None => (
            d.conditions.clone(),
            Some(format!("no scale-up of {group} in this pass")),
        ),
    }
}

/// The request's conditions with the writes applied as `meta.SetStatusCondition` applies
/// them: a condition of a new type appended, one of a type present updated in place, its
/// `lastTransitionTime` moved to `now` only when its status changes.
pub(super) fn merged(
    mut existing: Vec<Value>,
    writes: &[ConditionWrite],
    now: &Value,
) -> Vec<Value> {
    for w in writes {
        let status = w.status.as_str();
        let found = existing
            .iter_mut()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(w.type_));
        match found {
            Some(Value::Object(c)) => {
                let moved = c.get("status").and_then(Value::as_str) != Some(status);
                if moved || !c.contains_key("lastTransitionTime") {
                    c.insert("lastTransitionTime".into(), now.clone());
                }
                c.insert("status".into(), status.into());
                c.insert("reason".into(), w.reason.into());
                c.insert("message".into(), json!(&*w.message));
                c.insert("observedGeneration".into(), w.observed_generation.into());
            }
            _ => existing.push(json!({
                "type": w.type_,
                "status": status,
                "reason": w.reason,
                "message": &*w.message,
                "observedGeneration": w.observed_generation,
                "lastTransitionTime": now,
            })),
        }
    }
    existing
}

/// `Provisioned=True (CapacityIsFound)`, for the entry's detail.
fn summary(conditions: &[ConditionWrite]) -> String {
    conditions
        .iter()
        .map(|c| format!("{}={} ({})", c.type_, c.status.as_str(), c.reason))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
#[path = "provisioning_tests.rs"]
mod tests;
